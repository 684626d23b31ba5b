import math

import pytest

from adapters.metrics import average, level_metrics, ndcg_any, question_metrics, recall_all, recall_any, sessions_of


def test_session_ranking_dedupes_by_first_occurrence():
    session_of = {"a1": "A", "b1": "B", "a2": "A", "c1": "C", "b2": "B"}
    assert sessions_of(["a1", "b1", "a2", "c1", "b2"], session_of) == ["A", "B", "C"]


def test_recall_all_with_several_gold_sessions():
    ranking = ["X", "A", "Y", "B"]
    assert recall_any(ranking, {"A", "B"}, 1) == 0.0
    assert recall_any(ranking, {"A", "B"}, 2) == 1.0
    assert recall_all(ranking, {"A", "B"}, 3) == 0.0
    assert recall_all(ranking, {"A", "B"}, 4) == 1.0
    assert recall_all(ranking, set(), 4) == 0.0


def test_ndcg_by_hand():
    # gold at ranks 2 and 3: DCG = 1/log2(3) + 1/log2(4); ideal = 1/log2(2) + 1/log2(3)
    expected = (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert ndcg_any(["x", "a", "b"], {"a", "b"}, 10) == pytest.approx(expected)


def test_ideal_dcg_when_gold_outnumbers_k():
    # 3 gold, K = 2: the ideal holds only 2 relevant items, so a perfect top 2 scores 1.
    assert ndcg_any(["a", "b", "c"], {"a", "b", "c"}, 2) == pytest.approx(1.0)
    assert ndcg_any(["a", "x", "b"], {"a", "b", "c"}, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_memoria_dcg_is_the_standard_one():
    assert ndcg_any(["x", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(3))


def test_turn_metrics_are_none_without_turn_gold():
    metrics = question_metrics(["t1"], {"t1": "S"}, {"S"}, [], k_values=(1,))
    assert metrics["session"]["recall_any@1"] == 1.0 and metrics["turn"] is None


def test_level_metrics_names_every_k():
    names = set(level_metrics(["a"], {"a"}, k_values=(1, 5)))
    assert names == {f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg_any") for k in (1, 5)}


def test_average_skips_null_metrics_and_counts_denominators():
    records = [
        {"metrics": {"session": {"recall_any@1": 1.0}, "turn": {"recall_any@1": 0.0}}},
        {"metrics": {"session": {"recall_any@1": 0.0}, "turn": None}},
        {"metrics": None},
    ]
    summary = average(records)
    assert summary["session"]["recall_any@1"] == 0.5 and summary["turn"]["recall_any@1"] == 0.0
    assert summary["evaluable"] == {"session": 2, "turn": 1}


def test_level_metrics_cut_every_metric_at_its_own_k():
    values = level_metrics(["a", "x", "b"], {"a", "b"}, k_values=(1, 2, 3))
    assert [values[f"recall_all@{k}"] for k in (1, 2, 3)] == [0.0, 0.0, 1.0]
    assert [values[f"recall_any@{k}"] for k in (1, 2, 3)] == [1.0, 1.0, 1.0]
    assert values["ndcg_any@2"] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_any(["a"], set(), 5) == 0.0
    metrics = question_metrics(["x", "a"], {"x": "X", "a": "A"}, {"A"}, {"a"}, k_values=(1,))
    assert set(metrics["session"]) == set(metrics["turn"]) == {"recall_any@1", "recall_all@1", "ndcg_any@1"}
    assert metrics["session"]["recall_any@1"] == 0.0 and metrics["turn"]["recall_any@1"] == 0.0


def test_average_reads_past_records_without_metrics():
    records = [{"metrics": None}, {"metrics": {"session": {"recall_any@1": 1.0}, "turn": None}},
               {"metrics": {"session": {"recall_any@1": 0.0}, "turn": {"recall_any@1": 1.0}}}]
    summary = average(records)
    assert summary["evaluable"] == {"session": 2, "turn": 1} and summary["session"]["recall_any@1"] == 0.5


def test_profile_metrics_for_every_profile_at_the_asked_k_only():
    from adapters.metrics import profile_metrics

    ranked = [{"session_id": "S", "turn_id": "S#0"}]
    bare = profile_metrics({"question_id": "q"}, ranked, level="turn", k_values=(2,), depth=5)
    assert bare["expected-text"]["session"] == {"recall_any@2": 0.0, "recall_all@2": 0.0, "ndcg_any@2": 0.0}
    assert bare["expected-text"]["turn"] is None and set(bare) == {"expected-text"}
    assert profile_metrics({"question_id": "q", "abstention": True}, ranked, level="turn", k_values=(2,),
                           depth=5) == {"expected-text": None}
    session = profile_metrics({"question_id": "q", "gold_sessions": ["S"]}, ranked, level="session", k_values=(2,),
                              depth=5)
    assert session == {"expected-text": {"session": {"recall_any@2": 1.0, "recall_all@2": 1.0, "ndcg_any@2": 1.0},
                                   "turn": None}}
    turn = profile_metrics({"question_id": "q", "gold_sessions": ["S"], "gold_turns": ["S#0"]}, ranked, level="turn",
                           k_values=(2,), depth=5)
    assert set(turn["expected-text"]["turn"]) == {"recall_any@2", "recall_all@2", "ndcg_any@2"}
