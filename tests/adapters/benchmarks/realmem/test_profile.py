"""The `realmem` profile: RealMem's DCG (the first two positions weigh alike), its recall, by hand and by property."""

import json
import math
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from adapters import metrics
from adapters.benchmarks.realmem import profile as realmem_metrics

REPO = Path(__file__).resolve().parents[4]


def _realmem(ranking, gold, ks):
    return metrics.level_metrics(ranking, gold, ks, ndcg=realmem_metrics.ndcg_any)


def test_the_first_two_positions_weigh_alike_and_the_ideal_holds_every_gold_first():
    # gold {a, b}; ranking x, a, b: DCG = 0 + 1/log2(2) + 1/log2(3); ideal = 1 + 1/log2(2) = 2
    values = _realmem(["x", "a", "b"], ["a", "b"], (1, 3))
    assert values["ndcg_any@3"] == (1 + 1 / math.log2(3)) / 2
    assert values["ndcg_any@1"] == 0.0
    assert values["recall_any@3"] == values["recall_all@3"] == 1.0
    assert values["recall_all@1"] == 0.0
    # the standard DCG would weigh position 2 by 1/log2(3): here a at 2 alone scores what a at 1 does
    assert _realmem(["x", "a"], ["a"], (2,))["ndcg_any@2"] == 1.0


def test_a_session_repeated_counts_at_its_first_position_only():
    assert _realmem(["a", "a", "b"], ["a", "b"], (2,)) == \
        _realmem(["a", "b"], ["a", "b"], (2,))


def _independent(ranking, gold, k):
    seen = []
    for doc in ranking:
        if doc not in seen:
            seen.append(doc)
    top = seen[:k]
    rel = [1.0 if d in gold else 0.0 for d in top]
    dcg = sum(r / (1.0 if i == 0 else math.log2(i + 1)) for i, r in enumerate(rel))
    ideal = sum(1.0 / (1.0 if i == 0 else math.log2(i + 1)) for i in range(min(len(gold), k)))
    return {"recall_any": float(any(d in gold for d in top)), "recall_all": float(all(d in top for d in gold)),
            "ndcg_any": dcg / ideal}


@given(st.lists(st.sampled_from("abcdefghij"), max_size=12), st.sets(st.sampled_from("abcdefghij"), min_size=1,
                                                                      max_size=4), st.integers(1, 12))
def test_every_value_equals_an_independent_reading_of_the_formulas(ranking, gold, k):
    mine = _realmem(ranking, gold, (k,))
    for name, value in _independent(ranking, gold, k).items():
        assert math.isclose(mine[f"{name}@{k}"], value, abs_tol=1e-12)


def test_the_published_check_against_realmems_own_script_found_no_difference():
    data = json.loads((REPO / "results/published/realmem_metrics_check.json").read_text())
    assert data["script"] == "eval/compute_auto_metrics_for_realmem.py"
    assert data["values_compared"] == data["rankings"] * len(data["k_values"]) * 3 > 0
    assert data["largest_difference"] < 1e-12
