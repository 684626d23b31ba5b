"""`requeue --failed` does not hand an item back to workers that refused it for what they are: it says so, with
the way on, and `requeue --refused` sends those items back once the workers were changed."""

import time

from click.testing import CliRunner

from coordinator.cli import main
from coordinator.running.run_ledger import RunLedger, connect
from workers.farm.ledger import refused_by

REFUSAL = ("system 'my_memory.py:MyMemory' is not allowed on this worker (built in: memoria; start the worker with "
           "--allow-system to allow another)")


def _failed_run(url, run="r1"):
    ledger = RunLedger(connect(url))
    ledger.create_run(run, {"created": time.time(), "max_attempts": 1, "task_time_limit": 60,
                             "staging_done": False, "item_count": 3})
    for item_id in ("crashed", "refused-a", "refused-b"):
        ledger.stage(run, {"item_id": item_id, "turns": [], "questions": []})
    ledger.update_meta(run, staging_done=True)
    for item_id in ("crashed", "refused-a", "refused-b"):
        assert ledger.begin(run, item_id, "w1", stale_after=60, max_attempts=1) == ("begun", 1)
    ledger.fail(run, "crashed", 1, "RuntimeError: the disk is full", final=True)
    for item_id in ("refused-a", "refused-b"):
        ledger.fail(run, item_id, 1, refused_by("w1@host", REFUSAL), final=True)
    return ledger


def test_failed_items_go_back_but_refused_ones_wait_for_workers_that_take_them(redis_server):
    ledger = _failed_run(redis_server.url)
    env = {"MEMFARM_BROKER": redis_server.url}
    said = CliRunner().invoke(main, ["requeue", "r1", "--failed"], env=env)
    assert said.exit_code == 1, said.output
    assert "requeued 1 items: crashed" in said.output
    assert "left out 2 items a worker refused" in said.output and f"2 x {REFUSAL}" in said.output
    assert "memfarm requeue r1 --refused" in said.output
    states = ledger.states("r1")
    assert states["crashed"] == "queued" and states["refused-a"] == states["refused-b"] == "failed_final"

    again = CliRunner().invoke(main, ["requeue", "r1", "--refused"], env=env)
    assert again.exit_code == 0 and "requeued 2 items" in again.output and "left out" not in again.output
    assert set(ledger.states("r1").values()) == {"queued"}


def test_failed_and_refused_together_send_every_failed_item_back(redis_server):
    ledger = _failed_run(redis_server.url, run="both")
    said = CliRunner().invoke(main, ["requeue", "both", "--failed", "--refused"],
                              env={"MEMFARM_BROKER": redis_server.url})
    assert said.exit_code == 0 and "requeued 3 items" in said.output and "left out" not in said.output
    assert set(ledger.states("both").values()) == {"queued"}
