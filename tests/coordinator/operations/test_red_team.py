"""Attacks on a `cluster up` farm that still break it, each as its holder of one Redis password would make it."""

import json
import os
import subprocess
import sys
import uuid

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from coordinator.operations.processes import process_alive as alive
from coordinator.running.run_ledger import connect
from tests.farm_support import REPO, wait_for
from tests.poisoned_messages import POISONS
from workers.farm.app import make_monitor_app

from tests.farm_support import cluster_up

pytestmark = [pytest.mark.server, pytest.mark.usefixtures("cluster")]  # each test starts a cluster


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
        # worker1 subscribes to the channel in its event loop, just after it says it is ready
        wait_for(lambda: connect(monitor_url).publish("/0.celery.pidbox", poison) == 1, 30,
                 what="worker1 to listen on the control channel")
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


@pytest.mark.slow
def test_a_queued_message_poisoned_in_any_field_is_dropped_counted_and_the_worker_serves_on(tmp_path, workers,
                                                                                            monkeypatch):
    """With a worker's password: copy a queued task message, change one field, give it a new delivery tag and
    push it where it is read next. The worker lives through all of them, each is gone for good (not in the
    queue, not among the unacknowledged), counted by its field, and the run queued behind them completes."""
    from coordinator.running.farm_run import enqueue, watch
    from coordinator.running.run_ledger import RunLedger
    from tests.helpers import write_dataset
    from workers.farm.app import make_app
    from workers.farm.transport import DROPPED_KEY

    for key, value in {"MEMFARM_TASK_TIME_LIMIT": "60", "MEMFARM_VISIBILITY_TIMEOUT": "65"}.items():
        monkeypatch.setenv(key, value)
    state = _cluster_up(tmp_path, "--workers", "0", "--no-flower")
    run_id = _submit(monkeypatch, state["broker"], write_dataset(tmp_path / "d.json", questions=2, seed=3, scale=0.04))
    attacker = connect(state["brokers"]["worker"])
    queued = attacker.lrange("memfarm", 0, 0)[0]
    for damage, _ in POISONS.values():
        message = json.loads(queued)
        damage(message)
        message["properties"]["delivery_tag"] = str(uuid.uuid4())
        attacker.rpush("memfarm", json.dumps(message))  # the end kombu pops from: read before the run's own
    try:
        worker = workers(state["brokers"]["worker"], "w1", **state.get("tls", {})).wait_ready(180)
        coordinator = RunLedger(connect(state["broker"]))
        done = watch(coordinator, make_app(state["broker"]), run_id, timeout=240)
        assert done["done"] == 2, done
        assert worker.proc.poll() is None, worker.proc.output()[-3000:]
        log = worker.proc.output()
        assert "Unrecoverable error" not in log and "Traceback" not in log, log[-3000:]
        # a task is acknowledged once it returned, a moment after its outcome reached the ledger
        wait_for(lambda: attacker.llen("memfarm") == 0 and attacker.hlen("unacked") == 0, 30,
                 what="no message left in the queue or unacknowledged")
        counts = {k.decode(): int(v) for k, v in coordinator.r.hgetall(DROPPED_KEY).items()}
        expected = {}
        for _, field in POISONS.values():
            expected[field] = expected.get(field, 0) + 1
        assert counts == {**expected, "total": len(POISONS)}, counts
        assert log.count("no farm task message") == len(POISONS), log[-3000:]
        stats = make_app(state["broker"]).control.inspect(timeout=5).stats() or {}
        answer = next(a for name, a in stats.items() if name.startswith("w1@"))
        assert sum(answer["memfarm_dropped_messages"].values()) == len(POISONS), answer

        # the queue's key made a string: every BRPOP on it failed, and the worker with it; now the key is dropped
        attacker.set("memfarm", "not a list")
        wait_for(lambda: attacker.type("memfarm") == b"none", 60, what=f"the worker to drop the planted key ({log})")
        # kombu's unacknowledged hash made a string: taking a message failed, and the worker with it
        attacker.set("unacked", "not a hash")
        enqueue(coordinator, make_app(state["broker"]), run_id, coordinator.order(run_id)[:1])
        wait_for(lambda: attacker.type("unacked") in (b"none", b"hash"), 60, what=f"the worker to drop 'unacked' ({log})")
        enqueue(coordinator, make_app(state["broker"]), run_id, coordinator.order(run_id)[:1])
        wait_for(lambda: attacker.llen("memfarm") == 0 and attacker.hlen("unacked") == 0, 60,
                 what="the worker to take a message after the planted keys")
        assert worker.proc.poll() is None, worker.proc.output()[-3000:]
        assert int(coordinator.r.hget(DROPPED_KEY, "key of another type")) == 2

        # kombu's binding tables made strings: the task queue's, the control channel's and the events'. A worker
        # declares each as it starts (SADD), which failed: every worker started after the plant stopped before it
        # was ready; now the tables are made again. The deadlines of expiring bindings (the control channel's
        # queue expires) are a sorted set kombu writes in the same declare: planted too
        for table in ("_kombu.binding.memfarm", "_kombu.binding.celery.pidbox", "_kombu.binding.celeryev",
                      "_kombu.binding_deadlines"):
            attacker.set(table, "not a set")
        worker.stop()
        fresh = workers(state["brokers"]["worker"], "w2", **state.get("tls", {})).wait_ready(180)
        app = make_app(state["broker"])

        def taken() -> int:  # task messages w2 was handed so far (its own count, not the queue's)
            stats = app.control.inspect(timeout=5).stats() or {}
            answer = next((a for name, a in stats.items() if name.startswith("w2@")), {"total": {}})
            # counted under the name Flower shows, `evaluate_item RUN/ITEM` (the message's shadow name)
            return sum(n for name, n in answer["total"].items() if "evaluate_item" in name)

        enqueue(coordinator, app, run_id, coordinator.order(run_id)[:1])
        wait_for(lambda: taken() == 1, 90, what=f"w2 to be handed a message past the planted tables ({fresh.log})")
        assert all(attacker.type(t) == b"set" for t in ("_kombu.binding.memfarm", "_kombu.binding.celery.pidbox"))
        assert attacker.type("_kombu.binding_deadlines") == b"zset"
        assert fresh.proc.poll() is None, fresh.proc.output()[-3000:]
        # each deleted table counted: the task queue's in Redis (two before), the rest by the worker that met them
        assert int(coordinator.r.hget(DROPPED_KEY, "key of another type")) == 3
        mine = next(a for name, a in (app.control.inspect(timeout=5).stats() or {}).items() if name.startswith("w2@"))
        assert mine["memfarm_dropped_messages"].get("other key of another type", 0) >= 2, mine
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
