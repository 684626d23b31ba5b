"""Who wins, in one line: the verdict on a paired comparison, and the one rule for which comparisons Holm's
adjustment runs over.

Two numbers stand beside every comparison and answer different questions:

- the 95% paired bootstrap interval of the mean difference (`compare.bootstrap_interval`): how far the
  difference could move on another set of questions of the same kind. It is approximate and it is not adjusted
  for how many comparisons were made;
- the test's p: the exact McNemar test (wins against losses; hit-or-miss metrics such as recall_all@5) or the
  paired sign-flip randomisation test (graded metrics such as nDCG), adjusted by Holm's method over the
  comparison's family.

The verdict goes by the adjusted test alone: a system is ahead or behind only where the adjusted p is below
`ALPHA`. An interval that excludes zero beside an adjusted p that does not reject a tie is said as such, never
read as a win: the interval ignores the other comparisons, and McNemar weighs only the questions where the two
disagree.

The family (`adjust`): every comparison of one metric in one table (`memfarm compare`'s table against its
baseline, a dataset of `memfarm bench systems`, a leaderboard of the board, the board's table of every pair).
A comparison's adjusted p therefore does not change with the other metrics asked, and the same pair compared
alongside the same other runs shows the same p in every place. Each place says over how many comparisons it
adjusted (`holm_family`).
"""

from __future__ import annotations

#: The level below which an adjusted p rejects a tie.
ALPHA = 0.05
#: p-values below this are said as "<0.001": a p is never printed as 0.
SMALLEST_SHOWN = 1e-3
#: What a verdict can say, as the JSON's `outcome` spells it.
AHEAD, BEHIND, NOT_TOLD_APART, NO_PAIRS = "ahead", "behind", "not told apart", "no pairs"


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of `p_values` (None stays None and does not count as a test)."""
    order = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p))
        adjusted[index] = running
    return adjusted


def adjust(comparisons: list[dict]) -> list[dict]:
    """Set `p_holm` and `holm_family` on each of `comparisons` (entries of one table with `metric` and
    `p_value`): Holm's adjustment over the comparisons of each metric, `holm_family` the number of tests in that
    family (comparisons without a p, no question paired, do not count). Returns `comparisons`."""
    by_metric: dict[str, list[dict]] = {}
    for entry in comparisons:
        by_metric.setdefault(entry["metric"], []).append(entry)
    for family in by_metric.values():
        size = sum(entry["p_value"] is not None for entry in family)
        for entry, adjusted in zip(family, holm([entry["p_value"] for entry in family])):
            entry["p_holm"] = adjusted
            entry["holm_family"] = size
    return comparisons


def p_text(value: float | None) -> str:
    """A p-value as a reader sees it: three significant digits, `<0.001` below that (never `0`), `–` for none."""
    if value is None:
        return "–"
    if value < SMALLEST_SHOWN:
        return f"<{SMALLEST_SHOWN:g}"
    return f"{value:.3g}"


def outcome(entry: dict) -> str:
    """`AHEAD` or `BEHIND` (the system against the baseline, significant after Holm), `NOT_TOLD_APART` or
    `NO_PAIRS`."""
    if not entry.get("n") or entry.get("p_holm") is None:
        return NO_PAIRS
    if entry["p_holm"] < ALPHA and entry["delta"] > 0:
        return AHEAD
    if entry["p_holm"] < ALPHA and entry["delta"] < 0:
        return BEHIND
    return NOT_TOLD_APART


def _family(entry: dict) -> str:
    size = entry.get("holm_family") or 1
    return f"{size} comparison" if size == 1 else f"{size} comparisons"


def verdict(entry: dict) -> str:
    """One line saying who retrieves better on the comparison `entry` (a row of `compare.compare_files`, with
    `p_holm` and `holm_family` set by `adjust`), and on what evidence."""
    system, baseline, metric = entry["system"], entry["baseline"], entry["metric"]
    said = outcome(entry)
    if said == NO_PAIRS:
        return f"{system} and {baseline}: no question scored in both on {metric}; no verdict"
    low, high = entry["ci95"]
    excludes_zero = low > 0 or high < 0
    evidence = (f"Δ {entry['delta']:+.3f} [{low:+.3f}, {high:+.3f}], {entry['wins']['count']} wins / "
                f"{entry['losses']['count']} losses")
    adjusted = f"p {p_text(entry['p_holm'])} after Holm over {_family(entry)}"
    if said in (AHEAD, BEHIND):
        better = "better" if said == AHEAD else "worse"
        caveat = "" if excludes_zero else "; the bootstrap interval still holds zero"
        return (f"{system} retrieves {better} than {baseline} on {metric} on this set: significant after Holm over "
                f"{_family(entry)} (p {p_text(entry['p_holm'])}; {evidence}){caveat}")
    if excludes_zero:
        why = "the interval excludes zero but the adjusted test does not reject a tie"
    else:
        why = "the interval holds zero and the adjusted test does not reject a tie"
    return f"{system} and {baseline} are not told apart on {metric} on this set: {why} ({adjusted}; {evidence})"


#: How the two numbers differ, in the words every place that shows them uses.
EXPLAINED = ("The interval is a 95% paired bootstrap interval of Δ, not adjusted for the other comparisons; "
             "the verdict goes by the test's p (exact McNemar on hit-or-miss metrics, sign-flip on graded ones) "
             f"adjusted by Holm's method, significant below {ALPHA:g}.")
