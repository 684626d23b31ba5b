"""`tools/system-packages`, the one script `make test` and `.ci/run` share for what Python cannot install."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "system-packages"


def _path_with(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only links to `tools` (redis-server, chromium, node, npm and strace are left out on purpose)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        if found and not (folder / tool).exists():
            (folder / tool).symlink_to(found)
    return str(folder)


def _run(tmp_path, *args, tools=("git",)):
    env = {**os.environ, "PATH": _path_with(tmp_path, *tools), "PYTHON": sys.executable}
    return subprocess.run([shutil.which("bash"), str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_report_mode_names_every_missing_package_and_the_command(tmp_path):
    result = _run(tmp_path, "--check")
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first == "missing system packages: redis-server chromium nodejs npm strace"
    assert "install them with" in result.stderr and "redis-server" in result.stderr.splitlines()[1]
    assert result.stdout == ""


def test_nothing_missing_is_silent_and_succeeds(tmp_path):
    if not (shutil.which("redis-server") and (shutil.which("chromium") or shutil.which("chromium-browser"))
            and shutil.which("node") and shutil.which("npm")):
        pytest.skip("this machine lacks redis-server, chromium, node or npm itself")
    result = _run(tmp_path, "--check", tools=("git", "redis-server", "chromium", "chromium-browser", "node", "npm", "strace"))
    assert result.returncode == 0 and result.stderr == ""


def test_one_need_is_checked_alone_and_an_unknown_one_is_refused(tmp_path):
    assert _run(tmp_path, "--check", "git").returncode == 0
    only_redis = _run(tmp_path, "--check", "redis")
    assert only_redis.returncode == 1 and "missing system packages: redis-server\n" in only_redis.stderr
    only_node = _run(tmp_path, "--check", "node", tools=("git", "node"))
    assert only_node.returncode == 1 and "missing system packages: npm\n" in only_node.stderr
    unknown = _run(tmp_path, "--check", "nginx")
    assert unknown.returncode == 2 and "unknown need 'nginx'" in unknown.stderr


def test_make_test_and_ci_share_the_script():
    root = SCRIPT.parent.parent
    assert "tools/system-packages" in (root / "Makefile").read_text()
    assert "make test" in (root / ".ci" / "run").read_text()
