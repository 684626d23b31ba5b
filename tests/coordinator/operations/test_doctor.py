"""`memfarm doctor` and the worker's pre-start checks, against a real redis-server and a really full disk."""

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from coordinator.operations import doctor
from coordinator.cli import main
from coordinator.operations.processes import free_port
from tests.farm_support import REPO
from tests.helpers import skip_outside_ci

pytestmark = pytest.mark.server


@contextmanager
def full_disk(folder: Path):
    """A 1 MiB tmpfs at `folder`, filled to the last byte (root only; skips elsewhere, fails in CI)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        skip_outside_ci("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        skip_outside_ci(f"mount -t tmpfs at {folder} failed: {mounted.stderr.strip()}")
    try:
        with open(folder / "filler", "wb") as filler:
            try:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
            except OSError:
                pass
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _lines(output: str) -> dict[str, str]:
    """{check name: status} from the doctor's output."""
    found = {}
    for line in output.splitlines():
        parts = line.split(None, 1)
        if parts and parts[0] in ("OK", "WARN", "FAIL"):
            found[line[6:21].strip()] = parts[0]
    return found


def test_a_healthy_machine_passes(redis_server, tmp_path, monkeypatch):
    monkeypatch.setattr(doctor.os, "getloadavg", lambda: (0.1, 0.1, 0.1))  # an idle machine: the suite's own load
    result = CliRunner().invoke(main, ["doctor", "--cache-dir", str(tmp_path / "cache")], env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 0, result.output
    status = _lines(result.output)
    for name in ("python", "packages", "torch", "model", "redis", "persistence", "queue", "cache disk"):
        assert status[name] == "OK", (name, result.output)
    assert "loaded offline: 384-d" in result.output and "appendonly yes" in result.output
    assert redis_server.password not in result.output


@pytest.mark.parametrize("broken, message", [
    ("password", "refused the credentials"),
    ("port", "cannot reach redis"),
])
def test_a_wrong_password_or_port_is_a_fail_with_its_fix(redis_server, tmp_path, broken, message):
    url = redis_server.url.replace(redis_server.password, "wrong") if broken == "password" else \
        f"redis://:x@127.0.0.1:{free_port()}/0"
    result = CliRunner().invoke(main, ["doctor", "--quick", "--cache-dir", str(tmp_path)], env={"MEMFARM_BROKER": url})
    assert result.exit_code == 1
    assert _lines(result.output)["redis"] == "FAIL" and message in result.output
    assert "fix:" in result.output and "1 FAIL" in result.output


def test_a_full_cache_disk_is_a_fail(redis_server, tmp_path, monkeypatch):
    with full_disk(tmp_path / "tiny") as disk:
        result = CliRunner().invoke(main, ["doctor", "--quick", "--cache-dir", str(disk)], env={"MEMFARM_BROKER": redis_server.url})
        assert result.exit_code == 1 and _lines(result.output)["cache disk"] == "FAIL"
        assert "0.0 GiB free" in result.output
        # below the free-space threshold or not, a disk that takes no write is refused for that reason
        monkeypatch.setattr(doctor, "CACHE_FAIL_BYTES", 0)
        check = doctor.disk_check(disk / "cache")
        assert check.status == "FAIL" and "No space left on device" in check.detail


@pytest.mark.usefixtures("workers")  # it starts a worker itself, to see it refuse
def test_a_worker_refuses_to_start_on_a_failed_check(redis_server, tmp_path):
    with full_disk(tmp_path / "tiny") as disk:
        worker = subprocess.run([sys.executable, "-m", "coordinator.cli", "worker", "--cache-dir", str(disk)], cwd=REPO,
                                env=dict(os.environ, MEMFARM_BROKER=redis_server.url), capture_output=True, text=True,
                                timeout=120)
    assert worker.returncode == 2
    assert "FAIL  cache disk" in worker.stderr and "worker not started: 1 check(s) failed" in worker.stderr


def test_a_cuda_build_is_a_warning_and_old_python_a_failure(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.13.0+cu121")
    check = doctor.torch_check(load=False)
    assert check.status == "WARN" and "CUDA" in check.detail and "whl/cpu" in check.fix
    monkeypatch.setattr(sys, "version_info", (3, 10, 0))
    assert doctor.python_check().status == "FAIL"


def test_a_dataset_is_checked_against_the_published_file(tmp_path, monkeypatch):
    fake = tmp_path / "longmemeval_s_cleaned.json"
    fake.write_text("[]")
    check = doctor.dataset_check(fake)
    assert check.status == "WARN" and "not the published LongMemEval-S (cleaned) file" in check.detail
    assert "2 bytes" in check.detail
    import hashlib

    digest = hashlib.sha256(b"[]").hexdigest()
    monkeypatch.setattr(doctor, "KNOWN_DATASETS", (("Test set", "other.json", 2, digest),))
    assert doctor.dataset_check(fake).status == "OK" and "the published Test set file" in doctor.dataset_check(fake).detail
    assert doctor.dataset_check(tmp_path / "missing.json").status == "FAIL"


def test_the_published_s_and_m_files_are_known_by_size_and_full_sha256():
    known = {name: (size, digest) for _, name, size, digest in doctor.KNOWN_DATASETS}
    assert known["longmemeval_m_cleaned.json"] == (
        2_737_100_077, "9d79e5524794a2e6900a3aa9cb7d9152c5a3e8319c9a87c25494ba1eacee495f")
    assert known["longmemeval_s_cleaned.json"] == (
        277_383_467, "d6f21ea9d60a0d56f34a05b609c79c88a451d2ae03597821ea3d5a9678c3a442")


def test_a_file_of_the_m_size_is_hashed_and_one_of_another_size_is_not(tmp_path, monkeypatch):
    import hashlib

    import adapters.files

    body = b'[{"question_id": "q"}]'
    monkeypatch.setattr(doctor, "KNOWN_DATASETS", (
        ("LongMemEval-M (cleaned)", "longmemeval_m_cleaned.json", len(body), hashlib.sha256(body).hexdigest()),))
    renamed = tmp_path / "m_copy.json"
    renamed.write_bytes(body)
    assert "the published LongMemEval-M (cleaned) file" in doctor.dataset_check(renamed).detail
    renamed.write_bytes(body.replace(b"q", b"x"))  # same size, other bytes
    same_size = doctor.dataset_check(renamed)
    assert same_size.status == "OK" and "the size of a published file, not its content" in same_size.detail
    hashed = []
    monkeypatch.setattr(adapters.files, "file_sha256", lambda path: hashed.append(path) or "0" * 64)
    renamed.write_bytes(body + b"\n")
    other = doctor.dataset_check(renamed)
    assert other.status == "OK" and "not hashed" in other.detail and hashed == []
