"""A refused or failed attempt is a failed task to Celery (so Flower counts it), once the ledger has recorded it:
the ledger stays the source of truth, and the item is not handed out again."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.helpers import write_dataset


@pytest.mark.server
def test_a_refused_item_fails_its_task_and_stays_failed_in_the_ledger(redis_server, tmp_path, monkeypatch):
    from workers.farm import tasks
    from workers.farm.connection import connect
    from coordinator.running.run_ledger import RunLedger
    from workers.farm.ledger import Ledger

    for name, value in (("_LEDGER", None), ("_SYSTEMS", {})):
        monkeypatch.setattr(tasks, name, value)
    monkeypatch.setenv("MEMFARM_BROKER", redis_server.url)
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.04)
    staged = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(data), "--limit", "1",
                                       "--run-id", "target"])
    assert staged.exit_code == 0, staged.output
    ledger = Ledger(connect(redis_server.url))
    meta = json.loads(ledger.r.get("memfarm:target:meta"))
    meta["system"] = "elsewhere.py:Unlisted"
    ledger.r.set("memfarm:target:meta", json.dumps(meta))
    item_id = ledger.r.lrange("memfarm:target:order", 0, -1)[0].decode()

    task = tasks.evaluate_item_task.apply(args=("target", item_id))
    assert task.failed() and isinstance(task.result, tasks.ItemFailed)
    assert " refused: refused by " in str(task.result)
    assert "system 'elsewhere.py:Unlisted' is not allowed on this worker" in str(task.result)
    assert ledger.state("target", item_id) == "failed_final"
    again = tasks.evaluate_item_task.apply(args=("target", item_id))  # a second delivery is not a second attempt
    assert again.successful() and again.result == "already done"
    assert RunLedger(connect(redis_server.url)).attempts("target") == {item_id: 1}
