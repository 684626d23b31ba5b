"""What a holder of a worker's Redis password can plant in a run's ledger, written with a plain client, and
what the coordinator makes of it: each bad value named (key and field) and skipped or failed, never a
traceback, never an unbounded inflation."""

import base64
import json
import resource
import threading
import time
import zlib

import pytest
import redis
from click.testing import CliRunner

from adapters.errors import MemfarmError
from adapters.benchmarks.longmemeval.reader import LongMemEval
from coordinator.cli import main
from coordinator.running.farm_run import (heal_orphans, progress, recover_lost, reduce_farm_run, resume,
                                          retry_failed, run_summaries, stage_run)
from coordinator.running.run_ledger import RunLedger, connect
from tests.farm_support import wait_for
from tests.helpers import write_dataset
from workers.farm.app import make_app
from workers.farm.staging_codec import pack

pytestmark = pytest.mark.server

CONTROL = "\x1b]0;owned\x07\x1b[2J\r\x9b"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("hostile") / "data.json", questions=3, seed=8, scale=0.04)


@pytest.fixture()
def farm(redis_server, dataset):
    """A submitted run of three items (no worker), the coordinator's ledger and app, and a hostile client."""
    result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(dataset), "--run-id", "r1"],
                                env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 0, result.output
    ledger = RunLedger(connect(redis_server.url))
    return {"ledger": ledger, "app": make_app(redis_server.url), "hostile": redis.Redis.from_url(redis_server.url),
            "items": ledger.order("r1"), "url": redis_server.url}


def _message(args) -> bytes:
    body = base64.b64encode(json.dumps([args, {}, {}]).encode()).decode()
    return json.dumps({"body": body, "properties": {"body_encoding": "base64"}}).encode()


def test_broker_entries_that_are_not_task_messages_are_skipped(farm, caplog):
    ledger, hostile, items = farm["ledger"], farm["hostile"], farm["items"]
    for tag, value in {"empty": b"{}", "list": b"[]", "number": b"7", "text": b"not json", "bytes": b"\xff\xfe",
                       "no-body": json.dumps([{"properties": {}}, "", "memfarm"]).encode(),
                       "list-id": json.dumps([json.loads(_message(["r1", ["a"]])), "", "memfarm"]).encode(),
                       "dict-args": json.dumps([json.loads(_message({"r1": 1})), "", "memfarm"]).encode()}.items():
        hostile.hset("unacked", tag, value)
    hostile.rpush("memfarm", _message(["r1", ["a", "b"]]), _message([["r1"], "x"]), _message(["r1", {"x": 1}]),
                  b"\x00garbage")
    assert ledger.waiting_messages("r1") == set(items), "the real messages still count, the planted ones do not"
    assert resume(ledger, farm["app"], "r1") == [], "every staged item's message is waiting: nothing sent again"
    assert heal_orphans(ledger, farm["app"], "r1", older_than=0.0) == []
    assert "unacked" in caplog.text and "'empty'" in caplog.text, "a skipped entry is named"


@pytest.mark.parametrize("meta, words", [
    (b"{}", "lacks 'created'"),
    (b"[]", "not a JSON object"),
    (b"\xff not json", "not JSON"),
    (json.dumps({"created": "yesterday", "max_attempts": 3, "task_time_limit": 60}).encode(), "'created'"),
    (json.dumps({"created": 1.0, "max_attempts": True, "task_time_limit": 60}).encode(), "'max_attempts'"),
    (b'{"created": NaN, "max_attempts": 3, "task_time_limit": 60}', "'created'"),
])
def test_a_damaged_run_meta_is_named_by_runs_and_status(farm, meta, words):
    farm["hostile"].set("memfarm:bad:meta", meta)
    farm["hostile"].zadd("memfarm:runs", {"bad": 0})
    listing = CliRunner().invoke(main, ["runs"], env={"MEMFARM_BROKER": farm["url"]})
    assert listing.exit_code == 0, listing.output
    assert "r1" in listing.output, "the other runs are still listed"
    bad = next(line for line in listing.output.splitlines() if line.startswith("bad"))
    assert "damaged" in bad and "memfarm:bad:meta" in bad and words in bad
    rows = {r["run_id"]: r for r in run_summaries(farm["ledger"])}
    assert rows["bad"]["state"] == "damaged" and rows["r1"]["state"] == "running"
    status = CliRunner().invoke(main, ["status", "bad"], env={"MEMFARM_BROKER": farm["url"]})
    assert status.exit_code != 0 and "memfarm:bad:meta" in status.output and words in status.output
    assert "Traceback" not in status.output and not isinstance(status.exception, (KeyError, TypeError, ValueError))


def test_damaged_item_bookkeeping_is_named_and_skipped(farm, caplog):
    ledger, hostile, items = farm["ledger"], farm["hostile"], farm["items"]
    first, second, third = items
    assert ledger.begin("r1", first, "w", stale_after=3600, max_attempts=3) == ("begun", 1)
    hostile.hset(f"memfarm:r1:info:{first}", mapping={"started_at": "soon", "finished_at": "inf", "lost": "many"})
    hostile.hset("memfarm:r1:attempts", mapping={second: "lots", third: b"\xff"})
    hostile.hset("memfarm:r1:state", mapping={second: "weird", b"\xff\xfe": "queued"})
    hostile.rpush("memfarm:r1:order", b"\xff\xfe", third)
    state = progress(ledger, "r1")
    assert (state["running"], state["queued"], state["total"]) == (1, 1, 2), "the unknown state is left out"
    assert retry_failed(ledger, farm["app"], "r1") == []
    assert recover_lost(ledger, farm["app"], "r1") == {}, "a started item with a live lease is not lost"
    results, manifest = reduce_farm_run(ledger, "r1")
    assert [f["item_id"] for f in manifest["farm"]["failures"]] == items, "each item once, in order"
    assert "'weird'" in next(f["error"] for f in manifest["farm"]["failures"] if f["item_id"] == second)
    for named in (f"memfarm:r1:info:{first}", "'started_at'", "memfarm:r1:attempts", "memfarm:r1:state",
                  "memfarm:r1:order"):
        assert named in caplog.text


@pytest.mark.parametrize("planted, words", [
    (zlib.compress(b" " * 300_000_000, 9), "inflates to more than"),  # about 300 KB that would be 300 MB
    (b"not compressed", "not compressed JSON"),
    (pack(["a", "list"]), "not a JSON object"),
    (pack({"records": "many"}), "'records'"),
    (pack({"records": [{"question_id": ["q"]}]}), "'question_id'"),
    (pack({"records": [{"question_id": "q", "metrics": {"session": {"recall_any@1": "high"}}}]}), "'metrics'"),
    (pack({"records": [], "stats": {"texts_encoded": "many"}}), "'stats'"),
])
def test_a_planted_outcome_is_a_named_failure_and_a_bomb_is_not_inflated(farm, planted, words):
    ledger, hostile, items = farm["ledger"], farm["hostile"], farm["items"]
    hostile.set(f"memfarm:r1:outcome:{items[0]}", planted)
    hostile.hset("memfarm:r1:state", items[0], "done")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results, manifest = reduce_farm_run(ledger, "r1")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 150_000  # KiB: far less than 300 MB
    failure = next(f for f in manifest["farm"]["failures"] if f["item_id"] == items[0])
    assert f"memfarm:r1:outcome:{items[0]}" in failure["error"] and words in failure["error"]
    assert results["question_count"] == 3 and results["failed"] == 3


def test_a_planted_item_payload_is_a_named_error(farm):
    ledger, hostile, items = farm["ledger"], farm["hostile"], farm["items"]
    hostile.set(f"memfarm:r1:item:{items[0]}", zlib.compress(b" " * 300_000_000, 9))
    with pytest.raises(MemfarmError, match=f"memfarm:r1:item:{items[0]}.*inflates to more than"):
        ledger.load_item("r1", items[0])
    staged = ledger.r.get(f"memfarm:r1:item:{items[1]}")
    hostile.set(f"memfarm:r1:item:{items[1]}", pack({**json.loads(zlib.decompress(staged)),
                                                     "turn_chunks": [{"chunk": "x", "bytes": 10 ** 12, "props": {}}]}))
    with pytest.raises(MemfarmError, match=f"memfarm:r1:item:{items[1]}.*'turn_chunks'"):
        ledger.load_item("r1", items[1])


# -- a forced forget while the run is staging ------------------------------------------------------------


def _run_keys(client, run_id):
    return list(client.scan_iter(match=f"memfarm:{run_id}:*"))


def test_forget_during_staging_leaves_no_key_behind(redis_server, tmp_path):
    """Staging in a thread, paused after its third item while `forget --force` runs, then let go: what it
    would still write must not land (the forgotten run's keys would have no expiry and no metadata that
    `runs` or `forget` could find them by)."""
    path = write_dataset(tmp_path / "d.json", questions=12, seed=5, scale=0.05)
    ledger = RunLedger(connect(redis_server.url))
    ledger.create_run("s", {"created": time.time(), "max_attempts": 3, "task_time_limit": 60,
                            "staging_done": False, "item_count": 12})
    paused, forgotten, outcome = threading.Event(), threading.Event(), {}

    class Paused(LongMemEval):
        def iter_items(self, limit=None):
            for n, item in enumerate(super().iter_items(limit=limit)):
                if n == 3:
                    paused.set()
                    forgotten.wait(60)
                yield item

    def staging():
        try:
            outcome["staged"] = stage_run(ledger, make_app(redis_server.url), "s", Paused(path), None)
        except MemfarmError as error:
            outcome["error"] = str(error)

    thread = threading.Thread(target=staging)
    thread.start()
    assert paused.wait(60)
    forced = CliRunner().invoke(main, ["forget", "s", "--force"], env={"MEMFARM_BROKER": redis_server.url})
    forgotten.set()
    thread.join(60)
    assert forced.exit_code == 0, forced.output
    assert _run_keys(ledger.r, "s") == [], "nothing of the forgotten run is left"
    assert "forgotten" in outcome.get("error", ""), "the staging stops with a clear error"


def test_forget_between_an_items_check_and_its_writes_leaves_no_key_behind(redis_server, tmp_path, monkeypatch):
    """The narrowest window: the run is forgotten after `stage` found the item not yet staged and before it
    writes the item's sessions and state."""
    import coordinator.running.run_ledger as module

    item = next(LongMemEval(write_dataset(tmp_path / "d.json", questions=1, seed=5, scale=0.05)).iter_items())
    ledger = RunLedger(connect(redis_server.url))
    ledger.create_run("s", {"created": time.time(), "max_attempts": 3, "task_time_limit": 60})
    real_pack = module.pack

    def forget_then_pack(value):
        ledger.forget("s")
        return real_pack(value)

    monkeypatch.setattr(module, "pack", forget_then_pack)
    with pytest.raises(MemfarmError, match="forgotten"):
        ledger.stage("s", item)
    assert _run_keys(ledger.r, "s") == []


def test_forget_finds_the_keys_of_a_run_whose_metadata_is_gone(farm):
    farm["hostile"].delete("memfarm:r1:meta")
    result = CliRunner().invoke(main, ["forget", "r1"], env={"MEMFARM_BROKER": farm["url"]})
    assert result.exit_code == 0, result.output
    assert "no metadata" in result.output and _run_keys(farm["hostile"], "r1") == []
    nothing = CliRunner().invoke(main, ["forget", "never"], env={"MEMFARM_BROKER": farm["url"]})
    assert nothing.exit_code != 0 and "no run 'never'" in nothing.output


# -- what reaches a terminal ----------------------------------------------------------------------------


def test_control_characters_never_reach_the_terminal(redis_server):
    ledger = RunLedger(connect(redis_server.url))
    ledger.create_run("t", {"created": time.time(), "max_attempts": 1, "task_time_limit": 60, "system": CONTROL,
                            "context": {"benchmark": CONTROL}})
    for item_id in (f"a{CONTROL}", f"b{CONTROL}", f"c{CONTROL}"):
        ledger.stage("t", {"item_id": item_id, "questions": []})
    ledger.begin("t", f"a{CONTROL}", f"w{CONTROL}", stale_after=3600, max_attempts=1)
    ledger.begin("t", f"b{CONTROL}", f"w{CONTROL}", stale_after=3600, max_attempts=1)
    ledger.finish("t", f"b{CONTROL}", 1, {"records": []})
    ledger.begin("t", f"c{CONTROL}", f"w{CONTROL}", stale_after=3600, max_attempts=1)
    ledger.fail("t", f"c{CONTROL}", 1, "boom", final=True)
    outputs = {}
    for command in (["status", "t"], ["runs"], ["requeue", "t", "--failed"]):
        result = CliRunner().invoke(main, [*command], env={"MEMFARM_BROKER": redis_server.url})
        assert result.exit_code == 0, result.output
        outputs[command[0]] = result.output
    ledger.r.delete(f"memfarm:t:lease:a{CONTROL}")  # its worker died: `status` says the attempt was lost
    outputs["lost"] = CliRunner().invoke(main, ["status", "t"], env={"MEMFARM_BROKER": redis_server.url}).output
    for name, output in outputs.items():
        assert not any(ch in output for ch in "\x1b\x07\r\x9b"), f"{name}: {output!r}"
        assert "\\x1b" in output, f"{name} shows the escape, escaped: {output!r}"


@pytest.mark.parametrize("run_id", ["x\n", "x\r", "x\x00", "\nx"])
def test_a_run_id_with_a_line_end_is_refused(redis_server, dataset, run_id):
    result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(dataset), "--run-id", run_id],
                                env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code != 0 and "not valid" in result.output, result.output
    assert redis.Redis.from_url(redis_server.url).keys("memfarm:x*") == []
