"""The test tiers hold: a test is marked by the resources its fixtures bring, and a test that starts a resource
it did not declare fails, so the fast tier (`make check`) cannot quietly take in a slow test."""

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PROBE = textwrap.dedent('''
    import subprocess
    import pytest

    @pytest.fixture()
    def redis_server():  # stands in for the real fixture: its name is what declares the resource
        return "redis://127.0.0.1:1/0"

    def _start_a_redis_server():
        subprocess.run(["redis-server", "--version"], capture_output=True, check=True)

    def test_undeclared():
        _start_a_redis_server()

    def test_declared(redis_server):
        _start_a_redis_server()

    def test_plain():
        pass
''')


def _pytest(tmp_path, *args):
    (tmp_path / "test_probe.py").write_text(PROBE)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py"), *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})


def test_a_resource_used_without_its_fixture_fails_the_test(tmp_path):
    run = _pytest(tmp_path)
    assert "1 failed, 2 passed" in run.stdout, run.stdout + run.stderr
    assert "test_undeclared used server without declaring it" in run.stdout


def test_the_fast_tier_leaves_out_what_a_fixture_declares(tmp_path):
    run = _pytest(tmp_path, "--fast", "-k", "test_declared or test_plain")
    assert "test_probe.py::test_plain" in run.stdout, run.stdout + run.stderr
    assert "test_declared" not in run.stdout and "1 passed, 2 deselected" in run.stdout, run.stdout
