"""Real servers for farm tests: a redis-server on a free port and `memfarm worker` processes, each in the
test's own folder, started and stopped by `coordinator.operations.processes` as the cluster does."""

import os
import time
from pathlib import Path

from adapters.errors import MemfarmError
from coordinator.operations.processes import free_port, start_redis, start_worker

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "s3cret-test-pass"


class RedisServer:
    """A real redis-server on a free port, append-only file on, its data in `tmp/redis`, its log `tmp/redis.log`."""

    def __init__(self, tmp: Path, password: str | None = PASSWORD):
        self.port = free_port()
        self.password = password
        self.tmp = tmp
        auth = f":{password}@" if password else ""
        self.url = f"redis://{auth}127.0.0.1:{self.port}/0"
        self._start()

    def _start(self):
        self.proc = start_redis(self.tmp / "redis", self.port, self.password, self.tmp / "redis.log")

    def stop(self):
        """SIGKILL, as a crash would: nothing a test wrote needs saving."""
        self.proc.kill_group()

    def restart(self, down_seconds: float = 1.0):
        """SIGKILL it, stay down `down_seconds`, start it again on the same port and data folder (it replays
        its AOF); returns once it takes commands again."""
        self.stop()
        time.sleep(down_seconds)  # the outage itself, not a wait for something to happen
        self._start()


class Worker:
    """A real `memfarm worker` in its own process group, caching in `tmp/cache_NAME`, its log `tmp/NAME.log`."""

    def __init__(self, broker: str, tmp: Path, name: str, *extra: str, **env):
        self.name = name
        self.log = tmp / f"{name}.log"
        full_env = {**os.environ, "PYTHONPATH": str(REPO), **{k: str(v) for k, v in env.items()}}
        self.proc = start_worker(broker, name, tmp / f"cache_{name}", self.log, full_env,
                                 extra=("--loglevel", "INFO", *extra), cwd=REPO)

    def wait_ready(self, timeout=60):
        try:
            self.proc.wait_ready(timeout)
        except MemfarmError as error:
            raise MemfarmError(f"{error}\n{self.proc.output()[-3000:]}") from None
        return self

    def children(self) -> list[int]:
        return self.proc.children()

    def kill_all(self):
        self.proc.kill_group()

    def stop(self):
        self.proc.stop(grace_seconds=15)


def wait_for(predicate, timeout=120, interval=0.2, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out waiting for {what}")


def cluster_up(state_dir: Path, *args: str) -> dict:
    """`memfarm cluster up` in `state_dir` with `args`; its `cluster.json`, once the command succeeded."""
    import json

    from click.testing import CliRunner

    from coordinator.cli import main

    result = CliRunner().invoke(main, ["cluster", "up", "--state-dir", str(state_dir), *args])
    assert result.exit_code == 0, result.output
    state = json.loads((Path(state_dir) / "cluster.json").read_text())
    passwords = {url.split("@")[0].rsplit(":", 1)[-1] for url in state["brokers"].values() if "@" in url}
    assert passwords and not any(p in result.output for p in passwords), "cluster up printed a password"
    return state
