"""Who wins, in one line: each verdict, the Holm family rule, and p-values that never read 0."""

import pytest

from coordinator.results import verdicts
from coordinator.results.compare import paired
from coordinator.results.verdicts import adjust, holm, outcome, p_text, verdict


def _entry(delta, ci95, p_value, *, wins=37, losses=12, metric="session:recall_all@5", n=100, family=None):
    entry = {"metric": metric, "baseline": "bm25s", "system": "Memoria full", "delta": delta, "ci95": ci95,
             "p_value": p_value, "n": n, "wins": {"count": wins}, "losses": {"count": losses}}
    entry["p_holm"], entry["holm_family"] = (p_value, 1) if family is None else family
    return entry


def test_a_significant_win_is_said_with_its_family_interval_and_counts():
    line = verdict(_entry(0.12, [0.08, 0.16], 0.0004, family=(0.0048, 12)))
    assert line == ("Memoria full retrieves better than bm25s on session:recall_all@5 on this set: significant after "
                    "Holm over 12 comparisons (p 0.0048; Δ +0.120 [+0.080, +0.160], 37 wins / 12 losses)")


def test_a_significant_loss_says_worse():
    line = verdict(_entry(-0.12, [-0.16, -0.08], 0.0004, wins=12, losses=37, family=(0.0048, 12)))
    assert line.startswith("Memoria full retrieves worse than bm25s on session:recall_all@5 on this set: "
                           "significant after Holm over 12 comparisons")
    assert outcome(_entry(-0.12, [-0.16, -0.08], 0.0004, family=(0.0048, 12))) == verdicts.BEHIND


def test_an_interval_that_excludes_zero_beside_an_adjusted_p_that_does_not_reject_is_not_a_win():
    entry = _entry(0.05, [0.01, 0.09], 0.02, family=(0.061, 12))
    assert outcome(entry) == verdicts.NOT_TOLD_APART
    assert verdict(entry) == ("Memoria full and bm25s are not told apart on session:recall_all@5 on this set: the "
                              "interval excludes zero but the adjusted test does not reject a tie (p 0.061 after Holm "
                              "over 12 comparisons; Δ +0.050 [+0.010, +0.090], 37 wins / 12 losses)")


def test_an_interval_holding_zero_and_a_large_p_are_not_told_apart():
    line = verdict(_entry(0.01, [-0.03, 0.05], 0.6, wins=5, losses=4))
    assert "are not told apart" in line and "the interval holds zero" in line and "over 1 comparison;" in line


def test_no_paired_question_gives_no_verdict():
    entry = {"metric": "turn:recall_any@10", "baseline": "a", "system": "b", "n": 0, "p_value": None,
             "p_holm": None, "ci95": None, "delta": None}
    assert outcome(entry) == verdicts.NO_PAIRS and "no verdict" in verdict(entry)


@pytest.mark.parametrize("value, shown", [(0.0, "<0.001"), (3e-18, "<0.001"), (0.000999, "<0.001"),
                                          (0.001, "0.001"), (0.0089, "0.0089"), (0.875, "0.875"), (1.0, "1"),
                                          (None, "–")])
def test_a_p_value_is_never_printed_as_zero(value, shown):
    assert p_text(value) == shown


def test_an_exact_mcnemar_p_of_many_wins_prints_as_below_a_thousandth_not_zero():
    baseline = {f"q{i}": 0.0 for i in range(40)}
    system = {f"q{i}": 1.0 for i in range(40)}
    entry = paired(baseline, system, hit_or_miss=True, resamples=200)
    assert 0 < entry["p_value"] < 1e-11 and p_text(entry["p_value"]) == "<0.001"


def test_holm_runs_over_each_metric_on_its_own():
    rows = [{"metric": m, "p_value": p} for m, p in
            (("a", 0.01), ("a", 0.04), ("a", 0.03), ("b", 0.01), ("b", None))]
    adjust(rows)
    assert [r["p_holm"] for r in rows[:3]] == pytest.approx(holm([0.01, 0.04, 0.03]))
    assert [r["holm_family"] for r in rows] == [3, 3, 3, 1, 1]
    assert rows[3]["p_holm"] == 0.01 and rows[4]["p_holm"] is None  # b's one test is not adjusted for a's three
