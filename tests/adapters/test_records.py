"""The evaluation core and the registry, checked by hand on records small enough to read."""

import pytest

from adapters.records import candidate, expected_rank, failed_records, judged_record, question_record
from coordinator.running.reducer import default_output, summarize

K = (1, 3)


def _cands(*pairs):
    return [candidate(rank, f"x{rank}", session_id=s, turn_id=t) for rank, (s, t) in enumerate(pairs, start=1)]


@pytest.mark.parametrize("cands, gold_turns, gold_sessions, rank", [
    (_cands(("S1", "S1#0"), ("S2", "S2#1")), ["S2#1"], ["S2"], 2),   # the gold turn's rank
    (_cands(("S2", "S2#0"), ("S2", "S2#1")), ["S2#1"], ["S2"], 2),   # a turn of the gold session is not the gold turn
    (_cands(("S1", "S1#0"), ("S2", "S2#0")), [], ["S2"], 2),         # no turn gold: the first gold session
    (_cands(("S1", "S1#0")), ["S2#1"], ["S2"], None),                # not retrieved
    (_cands(("S1", None), ("S2", None)), ["S2#1"], ["S2"], 2),       # session-level candidates: by session
])
def test_expected_rank(cands, gold_turns, gold_sessions, rank):
    assert expected_rank(cands, gold_turns, gold_sessions) == rank


def test_question_record_scores_turns_and_sessions_and_excludes_what_it_must():
    question = {"question_id": "q", "question": "?", "gold_sessions": ["S2"], "gold_turns": ["S2#1"],
                "question_type": "t", "expected_ids": ["S2"]}
    cands = _cands(("S1", "S1#0"), ("S2", "S2#0"), ("S2", "S2#1"))
    record = question_record(question, "i", cands, level="turn", k_values=K, profile="expected-text",
                             worker="w", attempt=2)
    assert record["metrics"]["turn"]["recall_any@1"] == 0.0 and record["metrics"]["turn"]["recall_any@3"] == 1.0
    assert record["metrics"]["session"]["recall_any@1"] == 0.0 and record["metrics"]["session"]["recall_all@3"] == 1.0
    assert record["metrics"]["session"]["ndcg_any@3"] == pytest.approx(1 / 1.584962500721156)
    assert record["expected_rank"] == 3 and record["retrieved"] and record["attempt"] == 2
    assert record["question_type"] == "t" and record["status"] == "ok"
    session_level = question_record(question, "i", _cands(("S2", None)), level="session", k_values=K,
                                    profile="expected-text", worker="w", attempt=1)
    assert session_level["metrics"]["turn"] is None and session_level["metrics"]["session"]["recall_any@1"] == 1.0
    for flag in ({"abstention": True}, {"excluded": "no evidence"}):
        excluded = question_record({**question, **flag}, "i", cands, level="turn", k_values=K, profile="expected-text",
                                   worker="w", attempt=1)
        assert excluded["metrics"] is None and excluded["status"] == "ok"


def test_failed_and_judged_records_and_the_support_summary():
    failed = failed_records({"item_id": "i", "questions": [{"question_id": "a"}, {"question_id": "b"}]},
                            "boom", "answer_session_ids", "w", 3)
    assert [(r["question_id"], r["status"], r["field"], r["attempt"]) for r in failed] == [
        ("a", "failed", "answer_session_ids", 3), ("b", "failed", "answer_session_ids", 3)]
    hits = [{"id": 0, "content": "old code 4512", "score": 1.0, "contributions": {}},
            {"id": 1, "content": "new code 9981", "score": 0.5, "contributions": {}}]
    stale = judged_record({"id": "q1", "query": "code?", "expected_substrings": ["9981"],
                           "forbidden_substrings": ["4512"]}, "ep", hits, runtime_ms=1.0, worker="w", attempt=1)
    clean = judged_record({"id": "q2", "query": "code?", "expected_substrings": ["9981"]}, "ep", hits[1:],
                          runtime_ms=1.0, worker="w", attempt=1)
    missing = judged_record({"id": "q3", "query": "code?", "expected_substrings": ["1234"]}, "ep", hits,
                            runtime_ms=1.0, worker="w", attempt=1)
    assert stale["judgement"] == {"passed": False, "missing": [], "forbidden_found": ["4512"]}
    assert clean["judgement"]["passed"] and not missing["judgement"]["passed"]
    support = summarize([stale, clean, missing, *failed], None)["all"]["support"]
    assert support == {"queries": 3, "passed": 1, "stale_hits": 1, "pass_rate": pytest.approx(1 / 3)}


def test_default_output_names_benchmark_system_and_mode_safely():
    path = default_output({"benchmark_key": "locomo", "system": "my/sys", "retrieval_mode": "adamem:full"})
    assert path.parent.name == "results"
    assert path.name.startswith("locomo_my-sys_adamem-full_") and path.suffix == ".json"


