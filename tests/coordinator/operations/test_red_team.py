"""Attacks on a `cluster up` farm that still break it, each as its holder of one Redis password would make it."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from coordinator.operations.processes import process_alive as alive
from coordinator.running.ledger import connect
from tests.farm_support import wait_for
from workers.app import make_monitor_app

pytestmark = [pytest.mark.server]


def _cluster_up(tmp_path, *args) -> dict:
    state_dir = tmp_path / "state"
    result = CliRunner().invoke(main, ["cluster", "up", "--state-dir", str(state_dir), "--cache-dir",
                                       str(tmp_path / "cache"), *args])
    assert result.exit_code == 0, result.output
    return json.loads((state_dir / "cluster.json").read_text())


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
