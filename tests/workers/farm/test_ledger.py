"""Every ledger transition against a real redis-server: atomic, tied to its attempt, races provoked."""

import json
import threading
import time
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.errors import MemfarmError
from coordinator.running.farm_run import progress
from coordinator.running.run_ledger import RunLedger, check_run_id, connect, redact
from workers.farm.staging_codec import join_sessions, pack, split_sessions

pytestmark = pytest.mark.server

STALE = 3600.0


@pytest.fixture()
def ledger(redis_server):
    return RunLedger(connect(redis_server.url), lease_seconds=30)


def _run(ledger, run_id="r1", items=("a", "b"), max_attempts=3):
    ledger.create_run(run_id, {"created": time.time(), "max_attempts": max_attempts, "task_time_limit": 60,
                               "staging_done": False, "item_count": len(items)})
    for item_id in items:
        ledger.stage(run_id, {"item_id": item_id, "turns": [], "questions": []})
    ledger.update_meta(run_id, staging_done=True)
    return run_id


def _begin(ledger, item="a", run="r1", worker="w", max_attempts=3, stale_after=STALE):
    return ledger.begin(run, item, worker, stale_after=stale_after, max_attempts=max_attempts)


def test_begin_only_from_queued_and_never_for_an_unknown_item(ledger):
    _run(ledger)
    assert _begin(ledger) == ("begun", 1)
    assert _begin(ledger) == ("busy", 0), "a live attempt holds the item"
    assert _begin(ledger, item="never-staged") == ("unknown", 0)
    assert ledger.state("r1", "never-staged") is None, "an unknown id must not create a state"
    assert progress(ledger, "r1")["total"] == 2


def test_a_stale_start_is_begun_again_under_a_new_attempt(ledger):
    _run(ledger)
    _begin(ledger)
    ledger.r.delete(ledger._key("r1", "lease", "a"))  # the process holding it died: no more heartbeats
    assert _begin(ledger) == ("begun", 2)
    assert _begin(ledger, item="b") == ("begun", 1)
    assert _begin(ledger, item="b", stale_after=0.0) == ("begun", 2), "past the hard limit counts as stale"


def test_one_attempt_too_many_is_a_final_failure(ledger):
    _run(ledger, max_attempts=1)
    _begin(ledger, max_attempts=1)
    ledger.r.delete(ledger._key("r1", "lease", "a"))
    assert _begin(ledger, max_attempts=1) == ("cap", 2)
    assert ledger.state("r1", "a") == "failed_final"
    assert "gave up after 1 attempts" in ledger.info("r1", "a")["error"]


def test_finish_and_fail_count_only_for_the_current_attempt(ledger):
    _run(ledger)
    _begin(ledger)
    ledger.r.delete(ledger._key("r1", "lease", "a"))
    _begin(ledger)  # attempt 2 now holds it
    late = {"records": [{"question_id": "late"}]}
    assert not ledger.finish("r1", "a", 1, late), "a late finish of attempt 1 must not count"
    assert not ledger.fail("r1", "a", 1, "late failure")
    assert ledger.state("r1", "a") == "started" and ledger.outcome("r1", "a") is None
    assert ledger.finish("r1", "a", 2, {"records": [{"question_id": "ok"}]})
    assert ledger.outcome("r1", "a") == {"records": [{"question_id": "ok"}]}
    assert not ledger.fail("r1", "a", 2, "too late", final=True), "done is never overwritten"
    assert ledger.state("r1", "a") == "done"
    assert _begin(ledger) == ("finished", 0)


def test_fail_is_retryable_or_final(ledger):
    _run(ledger)
    _begin(ledger)
    assert ledger.fail("r1", "a", 1, "boom")
    assert ledger.state("r1", "a") == "failed"
    assert _begin(ledger) == ("not_queued", 0), "only the coordinator requeues a failed item"
    assert ledger.requeue("r1", "a") and _begin(ledger) == ("begun", 2)
    assert ledger.fail("r1", "a", 2, "boom again", final=True)
    assert ledger.state("r1", "a") == "failed_final"
    assert not ledger.requeue("r1", "a"), "a final failure is requeued only when asked for by name"
    assert ledger.requeue("r1", "a", from_states=("failed", "failed_final"), reset_attempts=True)
    assert ledger.state("r1", "a") == "queued"
    assert ledger.attempts("r1")["a"] == 2 and ledger.info("r1", "a")["attempt_base"] == "2", \
        "a reset keeps the count (attempts only grow) and starts the budget from it"


def test_a_lost_attempt_is_queued_again_then_final_at_the_cap(ledger):
    _run(ledger, max_attempts=2)
    _begin(ledger, max_attempts=2)
    assert ledger.declare_lost("r1", "a", 1, reason="x", max_attempts=2, stale_after=STALE) == "skip", "lease alive"
    ledger.r.delete(ledger._key("r1", "lease", "a"))
    assert ledger.declare_lost("r1", "a", 1, reason="lost 1", max_attempts=2, stale_after=STALE) == "requeued"
    assert ledger.declare_lost("r1", "a", 1, reason="again", max_attempts=2, stale_after=STALE) == "skip"
    assert _begin(ledger, max_attempts=2) == ("begun", 2)
    assert ledger.declare_lost("r1", "a", 2, reason="over the limit", max_attempts=2, stale_after=0.0) == "final"
    assert ledger.state("r1", "a") == "failed_final" and ledger.info("r1", "a")["error"] == "over the limit"
    assert ledger.info("r1", "a")["lost"] == "2"


def test_attempts_only_grow_when_failed_items_are_requeued_by_hand(ledger):
    """`requeue --failed` while a lost attempt still lives: the frozen attempt wakes after the item was
    queued again and begun anew. Its finish must not count, and the new attempt's must."""
    _run(ledger, max_attempts=1)
    assert _begin(ledger, max_attempts=1) == ("begun", 1)
    ledger.r.delete("memfarm:r1:lease:a")  # attempt 1 froze: its lease lapsed, its process lives on
    assert ledger.declare_lost("r1", "a", 1, reason="lost", max_attempts=1, stale_after=STALE) == "final"
    assert ledger.requeue("r1", "a", from_states=("failed", "failed_final"), reset_attempts=True)
    assert _begin(ledger, worker="w2", max_attempts=1) == ("begun", 2), "a fresh budget, not a reused number"
    frozen = {"records": [{"question_id": "q", "status": "ok", "by": "frozen attempt"}]}
    current = {"records": [{"question_id": "q", "status": "ok", "by": "current attempt"}]}
    assert not ledger.finish("r1", "a", 1, frozen), "the frozen attempt woke: its result must not count"
    assert ledger.finish("r1", "a", 2, current), "the current attempt is not superseded"
    assert ledger.outcome("r1", "a")["records"][0]["by"] == "current attempt"
    assert ledger.attempts("r1")["a"] == 2


def test_a_reset_budget_is_counted_from_the_requeue(ledger):
    """After `requeue --failed` the item has max_attempts attempts again: a failure within them is retried,
    the last one is final, and a lost attempt at the new cap fails for good."""
    from coordinator.running.farm_run import retry_failed

    _run(ledger, max_attempts=2)
    for attempt in (1, 2):
        assert _begin(ledger, max_attempts=2) == ("begun", attempt)
        assert ledger.fail("r1", "a", attempt, "boom", max_attempts=2)
        if attempt == 1:
            assert ledger.state("r1", "a") == "failed" and ledger.requeue("r1", "a")
    assert ledger.state("r1", "a") == "failed_final", "the second of two attempts is final"
    assert ledger.requeue("r1", "a", from_states=("failed", "failed_final"), reset_attempts=True)
    assert _begin(ledger, max_attempts=2) == ("begun", 3)
    assert ledger.fail("r1", "a", 3, "boom", max_attempts=2)
    assert ledger.state("r1", "a") == "failed", "the first attempt of the new budget is not final"
    assert retry_failed(ledger, _NoApp(), "r1") == ["a"]
    assert _begin(ledger, max_attempts=2) == ("begun", 4)
    ledger.r.delete("memfarm:r1:lease:a")
    assert ledger.declare_lost("r1", "a", 4, reason="lost", max_attempts=2, stale_after=STALE) == "final"


class _NoApp:
    def send_task(self, *args, **kwargs):
        pass


def test_racing_begins_start_one_attempt(ledger):
    _run(ledger, items=("a",))
    verdicts = []
    threads = [threading.Thread(target=lambda: verdicts.append(_begin(ledger)[0])) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(verdicts) == ["begun"] + ["busy"] * 15
    assert ledger.attempts("r1")["a"] == 1


def test_racing_finish_and_fail_leave_one_consistent_end(ledger):
    for round_ in range(20):
        ledger.r.flushdb()
        _run(ledger, items=("a",))
        _begin(ledger)
        barrier = threading.Barrier(2)
        results = {}

        def finish():
            barrier.wait()
            results["finish"] = ledger.finish("r1", "a", 1, {"records": [{"question_id": str(round_)}]})

        def fail():
            barrier.wait()
            results["fail"] = ledger.fail("r1", "a", 1, "crash")

        threads = [threading.Thread(target=finish), threading.Thread(target=fail)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results["finish"] != results["fail"], "exactly one transition wins"
        state = ledger.state("r1", "a")
        assert (state == "done") == results["finish"]
        assert (ledger.outcome("r1", "a") is not None) == (state == "done")


def test_run_creation_is_atomic_and_ids_are_checked(ledger):
    outcomes = []

    def create():
        try:
            ledger.create_run("same", {"created": time.time()})
            outcomes.append("created")
        except MemfarmError:
            outcomes.append("refused")

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["created"] + ["refused"] * 7
    for bad in ("", "a:b", "x*", "a b", "r" * 65, "../up", "x\n", "x\r\n", "\nx", "x\x1b[2J"):
        with pytest.raises(MemfarmError, match="not valid"):
            check_run_id(bad)
    assert check_run_id("2026-11-30_run.1") == "2026-11-30_run.1"


def test_complete_only_when_staging_is_done(ledger):
    ledger.create_run("half", {"created": time.time(), "max_attempts": 3, "task_time_limit": 60,
                               "staging_done": False, "item_count": 3})
    ledger.stage("half", {"item_id": "a"})
    _begin(ledger, run="half")
    ledger.finish("half", "a", 1, {"records": []})
    state = progress(ledger, "half")
    assert state["total"] == 3 and not state["complete"], "one of three staged: not complete"
    assert not ledger.stage("half", {"item_id": "a"}), "staging again skips what is staged"
    ledger.update_meta("half", staging_done=True)
    assert progress(ledger, "half")["complete"]


def test_forget_removes_every_key_of_the_run_and_nothing_else(ledger):
    _run(ledger, "keep", items=("a",))
    _run(ledger, "gone", items=("a", "b"))
    _run(ledger, "gone2", items=("a",))  # shares a prefix with the run forgotten
    ledger.r.set("unrelated", "1")
    _begin(ledger, run="gone")
    ledger.finish("gone", "a", 1, {"records": []})
    before = {k for k in ledger.r.keys("*") if not k.startswith(b"memfarm:gone:")}
    assert ledger.forget("gone") > 5
    assert ledger.r.keys("memfarm:gone:*") == []
    assert set(ledger.r.keys("*")) == before
    assert ledger.runs() == ["keep", "gone2"]


def test_a_worker_finishing_while_the_run_is_forgotten_leaves_nothing_behind(ledger, monkeypatch):
    """The race a forced `forget` meets when a worker is mid-item: its finish lands between the scan
    of the run's keys and their deletion, and must not leave an outcome or an event list behind."""
    _run(ledger, "busy", items=("a",))
    _begin(ledger, run="busy")
    scan = ledger.run_keys
    finished = []

    def scan_then_the_worker_finishes(run_id):
        keys = scan(run_id)
        if not finished:
            finished.append(ledger.finish("busy", "a", 1, {"records": []}))
        return keys

    monkeypatch.setattr(ledger, "run_keys", scan_then_the_worker_finishes)
    ledger.forget("busy")
    assert finished == [False], "the state went first: the worker's finish must be refused"
    assert scan("busy") == [] and ledger.runs() == []


@pytest.mark.parametrize("late_writes", [1, 2])
def test_writes_landing_while_a_pass_deletes_are_found_by_the_next_pass(ledger, monkeypatch, late_writes):
    """A write begun before the state went (a staging pipeline's session chunk, say) may land while a pass
    deletes what its scan found; the next pass must find it, and the third must find one that lands during
    the second."""
    _run(ledger, "busy", items=("a",))
    scan = ledger.run_keys
    keys_before = len(scan("busy"))
    late_keys = [ledger._key("busy", "session", f"late{n}") for n in range(late_writes)]
    scans = []

    def scan_then_a_late_write_lands(run_id):
        keys = scan(run_id)
        scans.append(keys)
        if len(scans) <= late_writes:
            ledger.r.set(late_keys[len(scans) - 1], b"chunk")
        return keys

    monkeypatch.setattr(ledger, "run_keys", scan_then_a_late_write_lands)
    assert ledger.forget("busy") == keys_before + late_writes
    assert ledger.r.exists(*late_keys) == 0
    assert scan("busy") == [] and ledger.runs() == []


def test_expiry_reaches_every_key_of_the_run(ledger):
    _run(ledger, "old", items=("a",))
    _run(ledger, "new", items=("a",))
    assert ledger.expire("old", 120) == len(ledger.run_keys("old"))
    assert all(0 < ledger.r.ttl(k) <= 120 for k in ledger.run_keys("old"))
    assert all(ledger.r.ttl(k) == -1 for k in ledger.run_keys("new"))


def test_redact_hides_every_form_of_password():
    assert redact("redis://:pw@h:1/0") == "redis://:***@h:1/0"
    assert "pw" not in redact("redis://u:pw@h:1/0?password=pw2")
    assert redact("redis://h:1/0?password=pw2&db=1") == "redis://h:1/0?password=***&db=1"


def _lease(ledger, item="a", run="r1"):
    return ledger.r.get(ledger._key(run, "lease", item))


def _events(ledger, run="r1"):
    return [e.decode() for e in ledger.r.lrange(ledger._key(run, "events"), 0, -1)]


def test_heartbeat_renews_only_the_current_started_attempt(ledger):
    _run(ledger)
    assert not ledger.heartbeat("r1", "a", 1), "nothing to renew before a start"
    _begin(ledger)
    ledger.r.expire(ledger._key("r1", "lease", "a"), 5)
    assert ledger.heartbeat("r1", "a", 1) is True
    assert ledger.r.ttl(ledger._key("r1", "lease", "a")) > 5, "the lease is renewed to its full length"
    assert _lease(ledger) == b"1"
    assert not ledger.heartbeat("r1", "a", 2), "another attempt's heartbeat renews nothing"
    ledger.r.delete(ledger._key("r1", "lease", "a"))
    _begin(ledger)  # attempt 2
    assert not ledger.heartbeat("r1", "a", 1) and _lease(ledger) == b"2"
    assert ledger.finish("r1", "a", 2, {"records": []})
    assert not ledger.heartbeat("r1", "a", 2) and _lease(ledger) is None, "a finished item has no lease to renew"


def test_finish_and_fail_leave_their_marks_everywhere(ledger):
    _run(ledger)
    _begin(ledger)
    _begin(ledger, item="b")
    assert _lease(ledger) == b"1"
    ledger.finish("r1", "a", 1, {"records": [{"question_id": "ok"}]})
    info = ledger.info("r1", "a")
    assert _lease(ledger) is None and info["error"] == "" and float(info["finished_at"]) > 0
    assert ledger.fail("r1", "b", 1, "x" * 5000)
    info = ledger.info("r1", "b")
    assert _lease(ledger, "b") is None and info["error"] == "x" * 4000 and float(info["finished_at"]) > 0
    assert _events(ledger) == ["a", "b"], "each end is announced once, in order"


def test_the_cap_clears_the_lease_and_an_unknown_item_is_logged(ledger, caplog):
    _run(ledger, max_attempts=1)
    _begin(ledger, max_attempts=1)
    assert _lease(ledger) == b"1"
    # a stale start (past the hard limit) with its lease still there: the cap must remove the lease too
    assert _begin(ledger, max_attempts=1, stale_after=0.0) == ("cap", 2) and _lease(ledger) is None
    with caplog.at_level("WARNING", logger="workers.farm.ledger"):
        _begin(ledger, item="b", max_attempts=1)
        assert not caplog.records, "a staged item is no news"
        _begin(ledger, item="ghost")
    assert [r.getMessage() for r in caplog.records] == [
        "run r1: a message for item 'ghost', which was never staged, ignored"]


def test_stale_after_is_the_hard_limit_plus_the_grace():
    from workers.farm.ledger import DEFAULT_LOST_GRACE_SECONDS, stale_after

    assert stale_after({"task_time_limit": 100}) == 100 + DEFAULT_LOST_GRACE_SECONDS
    assert stale_after({"task_time_limit": 100, "lost_grace_seconds": 7}) == 107


def test_a_start_exactly_at_the_hard_limit_is_stale(ledger, monkeypatch):
    import workers.farm.ledger as worker_ledger

    class Clock:
        now = 1000.0

        @classmethod
        def time(cls):
            return cls.now

    monkeypatch.setattr(worker_ledger, "time", Clock)
    _run(ledger)
    assert _begin(ledger, stale_after=10.0) == ("begun", 1)
    Clock.now = 1009.5
    assert _begin(ledger, stale_after=10.0) == ("busy", 0), "inside the hard limit, with a live lease"
    Clock.now = 1010.0
    assert _begin(ledger, stale_after=10.0) == ("begun", 2), "at the limit the start no longer counts"


def test_progress_detail_rates_slowest_and_recent_eta(ledger):
    from coordinator.running.farm_run import progress

    _run(ledger, items=("a", "b", "c", "d", "e"))
    for item, worker in (("a", "w1"), ("b", "w1"), ("c", "w2"), ("d", "w2")):
        ledger.begin("r1", item, worker, stale_after=STALE, max_attempts=3)
    for item, started, ended in (("a", 100.0, 130.0), ("b", 130.0, 160.0), ("c", 100.0, 190.0)):
        ledger.finish("r1", item, 1, {"records": []})
        ledger.r.hset(ledger._key("r1", "info", item), mapping={"started_at": started, "finished_at": ended})
    ledger.r.hset(ledger._key("r1", "info", "d"), "started_at", 150.0)
    state = progress(ledger, "r1", now=200.0)
    assert state["worker_rates"] == {"w1": {"done": 2, "per_minute": 2.0}, "w2": {"done": 1, "per_minute": 60 / 90}}
    assert state["slowest"] == [{"item_id": "d", "worker": "w2", "age_seconds": 50.0}]
    # 3 ends at 130, 160, 190: 2 more items in the 70 s since the first; 2 items left -> 70 s
    assert state["throughput_per_minute"] == 60 * 2 / 70 and state["eta_seconds"] == 70.0
    assert "worker_rates" not in progress(ledger, "r1", per_worker=False, now=200.0)
    # the run finished: asked an hour later (`memfarm status`), its rate is the one it ran at, as `run` showed it
    ledger.finish("r1", "d", 1, {"records": []})
    ledger.r.hset(ledger._key("r1", "info", "d"), "finished_at", 200.0)
    ledger.begin("r1", "e", "w1", stale_after=STALE, max_attempts=3)
    ledger.finish("r1", "e", 1, {"records": []})
    ledger.r.hset(ledger._key("r1", "info", "e"), mapping={"started_at": 190.0, "finished_at": 210.0})
    late = progress(ledger, "r1", now=3800.0)
    assert late["complete"] and late["throughput_per_minute"] == 60 * 4 / 80


# -- sessions staged once ---------------------------------------------------------------------------------------
def _longmemeval_items(tmp_path, questions=6):
    from adapters.benchmarks.longmemeval.reader import LongMemEval
    from tests.helpers import write_dataset

    return list(LongMemEval(write_dataset(tmp_path / "d.json", questions=questions, seed=5, scale=0.1)).iter_items())


def test_shared_sessions_are_stored_once_and_items_come_back_exactly(ledger, tmp_path):
    items = _longmemeval_items(tmp_path)
    ledger.create_run("s1", {"created": time.time(), "max_attempts": 3, "task_time_limit": 60})
    for item in items[:3]:
        assert ledger.stage("s1", item)
    resumed = RunLedger(ledger.r)  # a staging resumed by another coordinator finds the run's dictionary
    for item in items[3:]:
        assert resumed.stage("s1", item)
    occurrences = [(t["session_id"], t["props"]["session_index"]) for i in items for t in i["turns"]]
    distinct = {}
    for item in items:  # what a session is: its turns without the occurrence's date and position
        for sid in dict.fromkeys(t["session_id"] for t in item["turns"]):
            body = [{**t, "props": {k: v for k, v in t["props"].items() if k not in ("date", "session_index")}}
                    for t in item["turns"] if t["session_id"] == sid]
            distinct[json.dumps(body, sort_keys=True)] = True
    stored = list(ledger.r.scan_iter("memfarm:s1:session:*"))
    assert len(stored) == len(distinct) < len(set(occurrences))  # the generated file repeats sessions
    stats = {k: ledger.staging_stats[k] + resumed.staging_stats[k] for k in ledger.staging_stats}
    assert stats["sessions_stored"] == len(distinct) and stats["items"] == len(items)
    assert stats["session_occurrences"] == sum(len(dict.fromkeys(t["session_id"] for t in i["turns"])) for i in items)
    alone = sum(len(zlib.compress(json.dumps(json.loads(body)).encode(), 6)) for body in distinct)
    assert stats["session_bytes"] < alone, "the run's preset dictionary makes each session smaller than alone"
    for item in items:  # the very same dicts, key order included (caches hash what they are given)
        assert json.dumps(ledger.load_item("s1", item["item_id"])) == json.dumps(item)


def test_staging_an_item_again_stores_nothing_new(ledger, tmp_path):
    item = _longmemeval_items(tmp_path, questions=1)[0]
    ledger.create_run("s2", {"created": time.time()})
    assert ledger.stage("s2", item) and not ledger.stage("s2", item)
    assert ledger.staging_stats["items"] == 1


@pytest.mark.parametrize("harm, words", [("delete", "is missing"), ("damage", "is damaged")])
def test_a_lost_or_damaged_session_chunk_is_a_clear_error(ledger, tmp_path, harm, words):
    item = _longmemeval_items(tmp_path, questions=1)[0]
    ledger.create_run("s3", {"created": time.time()})
    ledger.stage("s3", item)
    key = next(ledger.r.scan_iter("memfarm:s3:session:*"))
    if harm == "delete":
        ledger.r.delete(key)
    else:
        ledger.r.set(key, pack([{"session_id": "x", "turn_id": "x#0", "text": "planted", "props": {}}]))
    with pytest.raises(MemfarmError, match=f"item {item['item_id']}: staged session .* {words}"):
        ledger.load_item("s3", item["item_id"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.sampled_from(["a", "b"]),
                          st.one_of(st.integers(0, 2), st.just(True), st.just(1.0)),
                          st.sampled_from(["2023/01/01", "2023/02/02", None])), max_size=12))
def test_split_and_join_give_back_any_turn_list(rows):
    """Whatever the turns' props (mixed per session, a bool beside an equal int, missing), the item comes back."""
    turns = []
    for n, (sid, text, index, date) in enumerate(rows):
        props = {"role": "user", "session_index": index}
        if date is not None:
            props["date"] = date
        turns.append({"session_id": sid, "turn_id": f"{sid}#{n}", "text": text, "props": props})
    item = {"item_id": "q", "benchmark": "x", "turns": turns, "questions": []}
    staged, chunks = split_sessions(item)
    back = join_sessions(staged, {digest: json.loads(payload) for digest, payload in chunks.items()})
    assert json.dumps(back) == json.dumps(item)
    assert [type(t["props"]["session_index"]) for t in back["turns"]] == [type(i) for _, _, i, _ in rows]


def test_the_run_dictionary_is_what_redis_holds_even_after_forget_and_restage(ledger, tmp_path):
    from workers.farm.staging_codec import ZDICT_BYTES

    item = _longmemeval_items(tmp_path, questions=1)[0]
    ledger.create_run("s4", {"created": time.time()})
    ledger.stage("s4", item)
    assert len(ledger.r.get("memfarm:s4:zdict")) == ZDICT_BYTES  # the first item's sessions are longer than that
    ledger.forget("s4")
    ledger.create_run("s4", {"created": time.time()})
    ledger.stage("s4", item)  # the same ledger object: nothing of the forgotten run may linger in it
    assert json.dumps(ledger.load_item("s4", item["item_id"])) == json.dumps(item)
    ledger.r.delete("memfarm:s4:zdict")
    with pytest.raises(MemfarmError, match="session dictionary is missing"):
        ledger.load_item("s4", item["item_id"])
    ledger.r.set("memfarm:s4:zdict", b"another dictionary")
    with pytest.raises(MemfarmError, match="not the one it was staged with"):
        ledger.load_item("s4", item["item_id"])


def test_a_planted_compression_bomb_is_refused_without_inflating_it(ledger, tmp_path):
    import tracemalloc

    item = _longmemeval_items(tmp_path, questions=1)[0]
    ledger.create_run("s5", {"created": time.time()})
    ledger.stage("s5", item)
    key = next(ledger.r.scan_iter("memfarm:s5:session:*"))
    ledger.r.set(key, zlib.compress(b" " * 300_000_000, 9))  # about 300 KB that would inflate to 300 MB
    # The peak of what Python allocates during this one call (zlib's output buffers included), not the
    # process's lifetime high-water mark, which earlier tests may already have raised past any bomb.
    tracemalloc.start()
    try:
        with pytest.raises(MemfarmError, match="is damaged"):
            ledger.load_item("s5", item["item_id"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, f"loading the bomb allocated {peak / 1e6:.0f} MB: it was inflated"
