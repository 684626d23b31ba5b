"""Damaged LongMemEval-S files, generated: whatever the damage, no traceback escapes, the harm is named
(a whole-file error, or failed / excluded records), the files are written, and nothing damaged is scored."""

import copy
import json
import math
import os

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from adapters.defaults import MAX_JSON_DEPTH, MAX_SESSIONS_PER_ITEM
from adapters.errors import DatasetError
from adapters.benchmarks.longmemeval.reader import LongMemEval
from adapters.generators.longmemeval_s import generate
from coordinator.running.local_executor import run_items
from coordinator.running.reducer import reduce_run, write_results
from tests.factories import run_context

BASE = generate(4, seed=21, scale=0.03)
#: Fields a question cannot do without (question_id falls back to q_<index>, haystack_dates to none).
REQUIRED = ("question", "haystack_session_ids", "haystack_sessions", "answer_session_ids")
WRONG = st.one_of(st.integers(), st.none(), st.floats(allow_nan=True), st.booleans(),
                  st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                  st.just("\udc80"), st.just([[[["deep"]]]]))
TRIED = {"files": 0}


class Echo:
    """A system that returns the docs it was given in order: the fuzz target is the harness, not a model."""

    name = "echo"

    def reset(self):
        self.docs = []

    def ingest(self, docs):
        self.docs = list(docs)

    def retrieve(self, label, query, top_k):
        return [{"external_id": d["external_id"], "score": 1.0 / (i + 1)} for i, d in enumerate(self.docs[:top_k])]


@st.composite
def damage(draw):
    data = copy.deepcopy(BASE)
    index = draw(st.integers(0, len(data) - 1))
    question = data[index]
    kind = draw(st.sampled_from(["wrong_type", "missing", "shorter", "surrogate_text", "nested_turn", "huge",
                                 "duplicate_id", "not_an_object", "empty_haystack", "deep_id", "many_sessions"]))
    if kind == "wrong_type":
        question[draw(st.sampled_from(REQUIRED))] = draw(WRONG)
    elif kind == "missing":
        del question[draw(st.sampled_from(REQUIRED))]
    elif kind == "shorter":
        field = draw(st.sampled_from(["haystack_session_ids", "haystack_sessions", "haystack_dates"]))
        question[field] = question[field][:-1]
    elif kind == "surrogate_text":
        session = draw(st.integers(0, len(question["haystack_sessions"]) - 1))
        question["haystack_sessions"][session][0]["content"] += "\udc80"
    elif kind == "nested_turn":
        session = draw(st.integers(0, len(question["haystack_sessions"]) - 1))
        question["haystack_sessions"][session][0] = [[{"content": "deep"}]]
    elif kind == "huge":
        question["haystack_sessions"][0][0]["content"] = "x " * draw(st.integers(60_000, 120_000))
    elif kind == "duplicate_id":
        question["question_id"] = data[(index + 1) % len(data)]["question_id"]
    elif kind == "not_an_object":
        data[index] = draw(WRONG)
    elif kind == "deep_id":  # past the limit, below the depth at which json.dumps itself gives up
        deep = "x"
        for _ in range(draw(st.integers(MAX_JSON_DEPTH, 600))):
            deep = [deep]
        question["question_id"] = deep
    elif kind == "many_sessions":  # tiny sessions, one past the limit or a few more
        extra = MAX_SESSIONS_PER_ITEM - len(question["haystack_sessions"]) + draw(st.integers(1, 50))
        question["haystack_session_ids"] += [f"tiny_{i}" for i in range(extra)]
        question["haystack_sessions"] += [[{"role": "user", "content": "a"}] for _ in range(extra)]
        question["haystack_dates"] += ["2023/05/20 (Sat) 02:21"] * extra
    else:
        question.update(haystack_session_ids=[], haystack_sessions=[], haystack_dates=[])
    return data, index, kind


def _standard_json(value) -> bool:
    """Whether `value` is what RFC 8259 JSON and a 64-bit parser hold: no NaN or infinity, no integer past 64 bits."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return -2**63 <= value < 2**63
    if isinstance(value, list):
        return all(_standard_json(v) for v in value)
    if isinstance(value, dict):
        return all(_standard_json(v) for v in value.values())
    return True


@given(damage())
def test_damaged_files_never_escape_as_tracebacks_and_nothing_damaged_is_scored(tmp_path_factory, case):
    data, index, kind = case
    note(f"damage {kind} on question {index}")
    TRIED["files"] += 1
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "d.json"
    path.write_text(json.dumps(data))
    adapter = LongMemEval(path)
    try:
        adapter.scan()
    except DatasetError as exc:  # the whole file is unusable: one line naming the file and the positions
        assert str(path) in str(exc)
        if kind == "deep_id":
            assert f"element {index} is nested more than {MAX_JSON_DEPTH} levels deep" in str(exc), str(exc)
        elif kind != "duplicate_id":  # only what is not JSON at all (NaN, Infinity) or past 64-bit integers
            assert not _standard_json(data) and f"element {index}" in str(exc), str(exc)
        return
    assert kind != "deep_id", "a file nested past the limit is refused"
    context = run_context(dataset_path=str(path), system_config={"name": "echo"}, command="fuzz")
    outcomes = run_items(adapter.iter_items(), Echo(), context, cache=None)
    results, manifest = reduce_run(outcomes, context, elapsed_seconds=0.0)
    written, _ = write_results(results, manifest, folder / "r.json")
    assert json.loads(written.read_text())["question_count"] == len(data)
    damaged = results["records"][index]
    if kind in ("huge",):
        assert damaged["status"] == "ok" and manifest["evaluation"]["truncated_texts"] >= 1
    elif kind == "empty_haystack":  # failed with the reason (an abstention is left out as one)
        assert damaged["metrics"] is None and (
            (damaged["status"] == "failed" and "empty haystack" in damaged["error"]) or damaged.get("abstention"))
    else:
        assert damaged["metrics"] is None, (kind, damaged.get("error"))
        assert damaged["status"] == "failed" or damaged.get("excluded") or damaged.get("abstention")
    others = [r for i, r in enumerate(results["records"]) if i != index]
    assert all(r["status"] == "ok" for r in others), "one damaged item never harms another"


def _small_locomo():
    from tests.conftest import SHARED_DATA

    path = SHARED_DATA / "locomo_dev5.json"
    if not path.is_file():
        return None
    conversations = []
    for raw in json.loads(path.read_text())[:2]:
        talk = {k: v for k, v in raw["conversation"].items()
                if not k.startswith("session_") or k.split("_")[1] in ("1", "2")}
        conversations.append({**raw, "conversation": talk, "qa": raw["qa"][:15]})
    return conversations


LOCOMO = _small_locomo()


@st.composite
def locomo_damage(draw):
    data = copy.deepcopy(LOCOMO)
    index = draw(st.integers(0, len(data) - 1))
    conversation = data[index]
    kind = draw(st.sampled_from(["conversation", "qa", "session", "turn", "question", "evidence", "surrogate"]))
    if kind == "conversation":
        conversation["conversation"] = draw(WRONG)
    elif kind == "qa":
        conversation["qa"] = draw(st.one_of(st.integers(), st.none(), st.text(max_size=3)))
    elif kind == "session":
        conversation["conversation"]["session_1"] = draw(st.one_of(st.integers(), st.none(), st.text(max_size=3)))
    elif kind == "turn":
        conversation["conversation"]["session_1"][0] = draw(st.one_of(st.integers(), st.lists(st.integers())))
    elif kind == "question":
        conversation["qa"][0]["question"] = draw(WRONG)
    elif kind == "evidence":
        conversation["qa"][0]["evidence"] = draw(st.one_of(st.integers(), st.dictionaries(st.text(max_size=2),
                                                                                          st.integers())))
    else:
        conversation["conversation"]["session_1"][0]["text"] = "x \udc80"
    return data, index, kind


@pytest.mark.skipif(LOCOMO is None and os.environ.get("CI") != "true",
                    reason="the real LoCoMo file is not here (set MEMFARM_SHARED_DATA)")
@given(locomo_damage())
def test_damaged_locomo_files_name_the_harm_and_score_nothing_damaged(tmp_path_factory, case):
    from adapters.benchmarks.locomo.reader import LoCoMo

    data, index, kind = case
    note(f"damage {kind} on conversation {index}")
    TRIED["locomo"] = TRIED.get("locomo", 0) + 1
    path = tmp_path_factory.mktemp("fuzz-locomo") / "l.json"
    path.write_text(json.dumps(data))
    if not _standard_json(data):  # NaN, Infinity or a 65-bit integer: not JSON a 64-bit parser reads
        with pytest.raises(DatasetError, match=f"element {index}") as refused:
            list(LoCoMo(path).iter_items())
        assert str(path) in str(refused.value)
        return
    items = list(LoCoMo(path).iter_items())
    outcomes = run_items(iter(items), Echo(), run_context(), cache=None)
    damaged = outcomes[index]["records"]
    if kind in ("question", "evidence"):  # one question: excluded with its reason, its conversation runs on
        assert damaged[0]["status"] == "ok" and damaged[0]["metrics"] is None and damaged[0]["excluded"]
        assert all(r["status"] == "ok" for r in damaged[1:])
    else:  # the conversation itself: failed, or (no session left) every question excluded
        assert all(r["metrics"] is None and (r["status"] == "failed" or r.get("excluded") or r.get("abstention"))
                   for r in damaged), kind
    other = outcomes[1 - index]["records"]
    assert all(r["status"] == "ok" for r in other)
