"""Real servers for farm tests: a redis-server on a free port and `memfarm worker` processes."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from coordinator.operations.cluster import free_port, start_redis

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "s3cret-test-pass"


class RedisServer:
    """A real redis-server on a free port, append-only file on, in the test's own folder."""

    def __init__(self, tmp: Path, password: str | None = PASSWORD):
        self.port = free_port()
        self.password = password
        self.tmp = tmp
        self.proc = start_redis(tmp / "redis", self.port, password, tmp / "redis.log")
        auth = f":{password}@" if password else ""
        self.url = f"redis://{auth}127.0.0.1:{self.port}/0"

    def stop(self):
        self.proc.kill()
        self.proc.wait(timeout=10)

    def restart(self, down_seconds: float = 1.0):
        """SIGKILL it, wait, start it again on the same port and data folder (it replays its AOF)."""
        self.stop()
        time.sleep(down_seconds)
        self.proc = start_redis(self.tmp / "redis", self.port, self.password, self.tmp / "redis.log")


class Worker:
    """A real `memfarm worker` in its own process group."""

    def __init__(self, broker: str, tmp: Path, name: str, *extra: str, **env):
        self.log = tmp / f"{name}.log"
        full_env = dict(os.environ, PYTHONPATH=str(REPO), MEMFARM_BROKER=broker, **{k: str(v) for k, v in env.items()})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "coordinator.cli", "worker", "--cache-dir", str(tmp / f"cache_{name}"),
             "--name", f"{name}@%h", "--loglevel", "INFO", *extra],
            cwd=REPO, env=full_env, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.name = name

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if "ready." in self.log.read_text(errors="replace"):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)
        raise TimeoutError(f"worker {self.name} not ready:\n{self.log.read_text()[-3000:]}")

    def children(self) -> list[int]:
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(p) for p in path.read_text().split()] if path.exists() else []

    def kill_all(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                self.kill_all()


def wait_for(predicate, timeout=120, interval=0.2, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out waiting for {what}")
