"""An item's outcome the reducer could never read back (past `MAX_UNPACKED_BYTES`) fails its item once, for good,
with a message saying its size, the bound and what to do, where it was stored as done, refused by the reducer and
queued again on every attempt."""

import json
from types import SimpleNamespace

from click.testing import CliRunner

from coordinator.cli import main
from tests.helpers import write_dataset


def test_an_outcome_past_the_ledger_bound_fails_its_item_once_naming_size_bound_and_remedy(redis_server, tmp_path,
                                                                                         monkeypatch):
    from coordinator.running.run_ledger import RunLedger, connect
    from workers.farm.tasks import process_item

    monkeypatch.setenv("MEMFARM_BROKER", redis_server.url)
    monkeypatch.setenv("MEMFARM_ALLOWED_SYSTEMS", json.dumps(["recency"]))
    data = write_dataset(tmp_path / "lme.json", questions=1, seed=5, scale=0.02)
    result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(data), "--system", "recency"])
    assert result.exit_code == 0, result.output
    run_id = result.output.strip().splitlines()[-1]
    ledger = RunLedger(connect(redis_server.url))
    [item_id] = ledger.order(run_id)
    # an outcome of a few KiB stands for one of 64 MiB: the bound as the worker's ledger reads it, no other
    monkeypatch.setattr("workers.farm.ledger.ledger_values", SimpleNamespace(MAX_UNPACKED_BYTES=2_000))
    assert process_item(ledger, run_id, item_id, "inline") == "failed"
    info = ledger.info(run_id, item_id)
    assert ledger.state(run_id, item_id) == "failed_final"
    error = info["error"]
    assert error.startswith(f"item {item_id!r}: its outcome is ") and "more than the 2,000" in error
    assert "MAX_UNPACKED_BYTES" in error and "lower --top-k" in error and "a local run holds items to the same" in error
    assert process_item(ledger, run_id, item_id, "inline") != "done"  # not taken again


def test_a_local_run_holds_an_item_to_the_farms_bound_so_both_give_the_same_results(tmp_path, monkeypatch):
    """The same item fails alike here and on the farm: a local run that scored it would give a results file the
    farm can never give."""
    data = write_dataset(tmp_path / "lme.json", questions=2, seed=5, scale=0.02)
    monkeypatch.setattr("workers.farm.ledger.ledger_values", SimpleNamespace(MAX_UNPACKED_BYTES=2_000))
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "recency",
                                       "--output", str(out)])
    assert result.exit_code == 1, result.output
    records = json.loads(out.read_text())["records"]
    assert [r["status"] for r in records] == ["failed", "failed"]
    assert all("more than the 2,000 a farm ledger value may hold" in r["error"] for r in records)
    assert "lower --top-k" in result.output
