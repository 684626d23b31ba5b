"""A fresh `cluster up`, as a person sees it: Flower lists every worker that comes up, whenever it does, and the
workers start without a warning, each Redis user reading what it must and nothing more."""

import base64
import json
import urllib.error
import urllib.request

import pytest
import redis
from click.testing import CliRunner

from coordinator.cli import main
from coordinator.operations.doctor import OK, WARN, redis_checks
from coordinator.operations.processes import free_port
from coordinator.running.run_ledger import connect
from tests.farm_support import cluster_up, wait_for
from workers.farm.transport import DROPPED_KEY

pytestmark = [pytest.mark.server, pytest.mark.slow, pytest.mark.usefixtures("cluster")]  # each test starts a cluster


def _listed(port: int, auth: str) -> dict:
    """Flower's worker list as its API gives it, without asking it to refresh."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/workers")
    request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return {}


def _answered(listed: dict, prefix: str) -> bool:
    return any(name.startswith(prefix) and "registered" in info for name, info in listed.items())


def test_flower_lists_workers_that_come_up_after_it_and_no_worker_warns(tmp_path, workers, monkeypatch):
    monkeypatch.setenv("MEMFARM_FLOWER_USER", "watcher")
    monkeypatch.setenv("MEMFARM_FLOWER_PASSWORD", "flower-pw-2")
    port = free_port()
    state_dir = tmp_path / "state"
    state = cluster_up(state_dir, "--workers", "1", "--flower-port", str(port), "--cache-dir", str(tmp_path / "cache"))
    logs = state_dir / "logs"
    auth = "watcher:flower-pw-2"
    try:
        # Flower starts while worker1 still loads; it must list worker1 once it is up, unasked
        wait_for(lambda: _answered(_listed(port, auth), "worker1@"), 180, 0.5,
                 what=f"Flower to list worker1 ({logs / 'flower.log'}, {logs / 'worker1.log'})")
        # and a worker that joins later with a machine's credentials
        late = workers(state["brokers"]["worker"], "late").wait_ready(180)
        wait_for(lambda: _answered(_listed(port, auth), "late@"), 60, 0.5,
                 what=f"Flower to list the late worker ({logs / 'flower.log'})")

        worker_log = (logs / "worker1.log").read_text(errors="replace") + late.proc.output()
        assert "ready." in worker_log
        for line in worker_log.splitlines():
            assert not line.startswith(("WARN", "FAIL")), line
        assert "cannot read" not in worker_log and "persistence" not in worker_log, worker_log[-3000:]

        hub = {c.name: c for c in redis_checks(state["broker"])}
        assert (hub["persistence"].status, hub["persistence"].detail) == (OK, "appendonly yes")
        at_start = {c.name: c for c in redis_checks(state["brokers"]["worker"], worker=True)}
        assert at_start["persistence"].status == OK and "coordinator" in at_start["persistence"].detail
        by_hand = {c.name: c for c in redis_checks(state["brokers"]["worker"])}
        assert by_hand["persistence"].status == WARN and "coordinator's broker URL" in by_hand["persistence"].fix

        worker = connect(state["brokers"]["worker"])
        coordinator = connect(state["broker"])
        for client, command in [(worker, ("CONFIG", "GET", "appendonly")), (worker, ("INFO", "persistence")),
                                (coordinator, ("CONFIG", "GET", "appendonly")),
                                (coordinator, ("CONFIG", "SET", "appendonly", "no"))]:
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.execute_command(*command)
        assert coordinator.info("persistence")["aof_enabled"] == 1
        worker.hincrby(DROPPED_KEY, "total", 1)  # a worker counts a message it dropped; the hub hears of it
        assert worker.llen("memfarm") == 0
        dropped = {c.name: c for c in redis_checks(state["broker"])}["messages"]
        assert dropped.status == WARN and "dropped 1 task messages" in dropped.detail
    finally:
        CliRunner().invoke(main, ["cluster", "down", "--state-dir", str(state_dir)])
