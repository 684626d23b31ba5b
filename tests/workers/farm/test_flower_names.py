"""What Flower lists of a farm task: a real worker names each task by its run and item (Celery's `shadow`), and
drops a message whose name says another item, never running it."""

import json
import re

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from coordinator.running.farm_run import watch
from coordinator.running.run_ledger import RunLedger, connect
from tests.farm_support import wait_for
from tests.helpers import write_dataset
from workers.farm.app import QUEUE, TASK_NAME, make_app

pytestmark = [pytest.mark.slow]


def test_a_worker_names_each_task_by_run_and_item_and_drops_a_forged_name(redis_server, workers, tmp_path,
                                                                          monkeypatch):
    from workers.farm.task_message import send_options, shadow_name
    from workers.farm.transport import DROPPED_KEY

    monkeypatch.setenv("MEMFARM_TASK_TIME_LIMIT", "60")
    dataset = write_dataset(tmp_path / "data.json", questions=2, seed=4, scale=0.04)
    worker = workers(redis_server.url, "w1").wait_ready()
    submitted = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(dataset)],
                                   env={"MEMFARM_BROKER": redis_server.url})
    assert submitted.exit_code == 0, submitted.output
    run_id = submitted.output.strip().splitlines()[-1]
    ledger = RunLedger(connect(redis_server.url))
    assert watch(ledger, make_app(redis_server.url), run_id, timeout=240)["done"] == 2
    items = sorted(ledger.states(run_id))
    log = worker.log.read_text()
    for item in items:  # the name the worker logs is the one its events carry, and Flower lists
        assert f"Task {shadow_name(run_id, item)}[" in log, log[-2000:]
    assert "Task memfarm.evaluate_item[" not in log

    # a genuine message for the first item, its name changed to say the second: dropped by name, never run
    raw = connect(redis_server.url)
    make_app(redis_server.url).send_task(TASK_NAME, args=[run_id, items[0]], **{
        **send_options(run_id, items[0]), "shadow": shadow_name(run_id, items[1])})
    wait_for(lambda: raw.hget(DROPPED_KEY, "headers.shadow") == b"1" and not raw.llen(QUEUE),
             what="the forged name to be dropped")
    after = worker.log.read_text()
    for item in items:  # each received once: the forged message never reached Celery
        assert len(re.findall(rf"Task {re.escape(shadow_name(run_id, item))}\[[0-9a-f-]+\] received", after)) == 1
    assert json.loads(json.dumps(ledger.states(run_id))) == {item: "done" for item in items}
