"""Attacks on a `cluster up` farm that still break it, each as its holder of one Redis password would make it."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from coordinator.operations.processes import process_alive as alive
from coordinator.running.ledger import connect
from tests.farm_support import REPO, wait_for
from workers.app import make_monitor_app

from tests.farm_support import cluster_up

pytestmark = [pytest.mark.server]


def _cluster_up(tmp_path, *args) -> dict:
    return cluster_up(tmp_path / "state", "--cache-dir", str(tmp_path / "cache"), *args)


@pytest.mark.parametrize("poison", ["[]", "{}", '{"body": 1}', '"x"'])
def test_a_malformed_control_message_from_the_monitor_user_stops_no_worker(tmp_path, poison):
    """The monitor user (Flower's) may publish on the control channel; whatever it publishes there, every
    worker lives on and still answers Flower."""
    state = _cluster_up(tmp_path, "--workers", "1", "--no-flower")
    log = tmp_path / "state" / "logs" / "worker1.log"
    try:
        wait_for(lambda: "ready." in log.read_text(errors="replace"), 120, what="worker1")
        monitor_url = state["brokers"]["monitor"]
        assert connect(monitor_url).publish("/0.celery.pidbox", poison) == 1, "worker1 listens on the channel"
        control = make_monitor_app(monitor_url).control
        # a ping sent after the poison is read after it: an answer means the worker read both and lives
        wait_for(lambda: any(name.startswith("worker1@") for name in control.inspect(timeout=2).ping() or {}),
                 30, what=f"worker1 to answer a ping after {poison!r} ({log})")
        assert alive(state["pids"]["worker1"]), log.read_text(errors="replace")[-3000:]
        assert "Connection to broker lost" not in log.read_text(errors="replace")
    finally:
        CliRunner().invoke(main, ["cluster", "down", "--state-dir", str(tmp_path / "state")])



@pytest.mark.parametrize("poison", ["not json", "[]"])
def test_a_malformed_task_message_from_a_worker_password_stops_no_worker(tmp_path, poison):
    """A worker's password may push onto the task queue. One machine's leaked password must not stop every
    other worker: a message that is not a task is refused (and logged), and the worker takes the next one."""
    state = _cluster_up(tmp_path, "--workers", "1", "--no-flower")
    log = tmp_path / "state" / "logs" / "worker1.log"
    try:
        wait_for(lambda: "ready." in log.read_text(errors="replace"), 120, what="worker1")
        worker = connect(state["brokers"]["worker"])
        worker.lpush("memfarm", poison)
        wait_for(lambda: worker.llen("memfarm") == 0, 30, what="worker1 to take the message")
        control = make_monitor_app(state["brokers"]["monitor"]).control
        wait_for(lambda: any(name.startswith("worker1@") for name in control.inspect(timeout=2).ping() or {}),
                 30, what=f"worker1 to answer a ping after taking {poison!r} ({log})")
        assert alive(state["pids"]["worker1"]), log.read_text(errors="replace")[-3000:]
    finally:
        CliRunner().invoke(main, ["cluster", "down", "--state-dir", str(tmp_path / "state")])


def _submit(monkeypatch, broker, dataset) -> str:
    monkeypatch.setenv("MEMFARM_BROKER", broker)
    result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(dataset)])
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()[-1]


HUGE = 4 * 1024 * 1024


def test_a_huge_item_id_planted_in_the_order_list_is_not_echoed_whole(redis_server, tmp_path, monkeypatch):
    """A worker's password may push any entry onto a run's order list; the coordinator names a bad one in a
    bounded line (as it quotes every other value from Redis), it does not print megabytes of it."""
    from tests.helpers import write_dataset

    run_id = _submit(monkeypatch, redis_server.url, write_dataset(tmp_path / "d.json", questions=2, seed=5, scale=0.04))
    connect(redis_server.url).rpush(f"memfarm:{run_id}:order", "A" * HUGE)
    result = CliRunner().invoke(main, ["reduce", run_id, "--output", str(tmp_path / "r.json")])
    assert result.exit_code != 0
    assert len(result.output) < 10_000, f"{len(result.output)} characters: {result.output[:300]}"
    assert run_id in result.output, result.output[:300]


def test_a_huge_run_id_planted_in_the_runs_index_is_not_echoed_whole(redis_server, tmp_path, monkeypatch):
    """`memfarm runs` leaves a bad member of memfarm:runs out with a warning of bounded length (the warning is a
    log line: the command runs as a process, so its stderr is the terminal's)."""
    connect(redis_server.url).zadd("memfarm:runs", {"R" * HUGE: 1})
    env = dict(os.environ, MEMFARM_BROKER=redis_server.url, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-m", "coordinator.cli", "runs"], capture_output=True, text=True,
                            env=env, cwd=REPO, timeout=120)
    output = result.stdout + result.stderr
    assert "left out" in output, output[-300:]
    assert len(output) < 10_000, f"{len(output)} characters: {output[:300]}"
