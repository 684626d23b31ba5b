"""A vendor's BaseException (a Rust panic through pyo3 is one) fails its item, here and on the farm, never the run;
a request to stop still stops."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.helpers import write_dataset

SPEC = "tests.coordinator.running.test_vendor_crash:PanickySystem"


class Panic(BaseException):
    """What pyo3_runtime.PanicException is: a BaseException, past every `except Exception`."""


class PanickySystem:
    """Ranks by shared words (no model); its retrieve panics on the second item it is given."""

    name = "panicky"
    items_seen = 0  # counted on the class: the farm builds its own instance

    def __init__(self):
        self.docs: list[dict] = []

    def reset(self):
        type(self).items_seen += 1
        self.docs = []

    def ingest(self, docs):
        self.docs.extend(docs)

    def retrieve(self, label, query, top_k):
        if type(self).items_seen == 2:
            raise Panic("called `Result::unwrap()` on an `Err` value: Too many open files")
        words = set(query.lower().split())
        ranked = sorted((d for d in self.docs if d["label"] == label),
                        key=lambda d: (-len(words & set(d["text"].lower().split())), d["external_id"]))
        return [{"external_id": d["external_id"], "score": float(len(words & set(d["text"].lower().split())))}
                for d in ranked[:top_k]]


class Interrupted(PanickySystem):
    def retrieve(self, label, query, top_k):
        raise KeyboardInterrupt


@pytest.fixture(autouse=True)
def _fresh_count():
    PanickySystem.items_seen = 0


def _states(records):
    return {r["question_id"]: (r["status"], r.get("error") or "") for r in records}


def test_a_vendor_panic_fails_its_item_and_the_local_run_completes(tmp_path):
    data = write_dataset(tmp_path / "lme.json", questions=3, seed=5, scale=0.02)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", SPEC,
                                       "--output", str(out)])
    assert result.exit_code == 1, result.output  # the run completes, writes its results and says an item failed
    assert "1 of 3 items failed" in result.output
    states = _states(json.loads(out.read_text())["records"])
    second = json.loads(data.read_text())[1]["question_id"]
    assert [s for s, _ in states.values()].count("ok") == 2
    assert states[second][0] == "failed"
    assert "Panic: called `Result::unwrap()`" in states[second][1] and "Too many open files" in states[second][1]


def test_a_request_to_stop_is_not_an_item_failure(tmp_path):
    from adapters.benchmarks.longmemeval.reader import LongMemEval
    from workers.item.evaluate import evaluate_item

    data = write_dataset(tmp_path / "lme.json", questions=1, seed=5, scale=0.02)
    item = next(iter(LongMemEval(data).iter_items()))
    with pytest.raises(KeyboardInterrupt):
        evaluate_item(item, Interrupted(), top_k=5)


def test_a_vendor_panic_fails_the_farm_attempt_not_the_worker(redis_server, tmp_path, monkeypatch):
    from coordinator.running.run_ledger import RunLedger, connect
    from workers.farm.tasks import process_item

    monkeypatch.setenv("MEMFARM_BROKER", redis_server.url)
    monkeypatch.setenv("MEMFARM_ALLOWED_SYSTEMS", json.dumps([SPEC]))
    data = write_dataset(tmp_path / "lme.json", questions=3, seed=5, scale=0.02)
    result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(data), "--system", SPEC])
    assert result.exit_code == 0, result.output
    run_id = result.output.strip().splitlines()[-1]
    ledger = RunLedger(connect(redis_server.url))
    said = [process_item(ledger, run_id, item_id, "inline") for item_id in ledger.order(run_id)]
    assert said == ["done", "failed", "done"]
    error = ledger.info(run_id, ledger.order(run_id)[1])["error"]
    assert "SystemCrash: Panic: called `Result::unwrap()`" in error and "Too many open files" in error
