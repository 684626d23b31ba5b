"""Paired comparison of systems question by question: is B better than the baseline A, or is it noise?

Every file must come from the same dataset (checksum), scoring profile and
question set, so that each question pairs a baseline value with a system
value. For each metric the table gives both means over the paired questions,
their difference with a 95% paired bootstrap interval (percentile method,
resampling questions), a p-value (exact McNemar for per-question hit/miss
metrics, a paired sign-flip randomisation test for graded ones such as nDCG),
Holm's adjustment over the table's comparisons of that metric (`verdicts.adjust`:
one rule for every place that adjusts), the questions the system wins, loses and
ties, and the verdict in one line (`verdicts.verdict`).

Every file is checked first (`checks.check_results`): a file whose header,
records or stored metrics contradict themselves or their own rankings and gold
is refused, naming the file, the question and the field.

A question whose metric is null in either file (an abstention, a question
without gold at that level) is left out of that metric's pairs; `n` counts
the pairs that remain. A failed question is refused, or with
`count_failed_as_miss` scored 0 on every metric for the file that failed it.

scipy is imported where it is used: the command line reads this module's
defaults at start-up, and scipy.stats takes seconds to load.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from adapters.errors import ResultsError
from adapters.metrics import METRIC_NAMES
from coordinator.results.failures import failure_summary
from adapters.terminal import printable as shown
from coordinator.results import pairing
from coordinator.results.labels import run_label
from coordinator.results.checks import check_results
from coordinator.results.run_files import ResultsFile
from coordinator.results.verdicts import EXPLAINED, adjust, outcome, p_text, verdict
from coordinator.results.verdicts import holm  # noqa: F401  (compare's own name for it, read by its callers)

#: The strict metric first: on LongMemEval-S session recall_any@5 is saturated, recall_all@5 separates systems.
DEFAULT_METRICS = ("session:recall_all@5", "session:recall_any@5", "session:ndcg_any@10", "turn:recall_any@10")
#: Bootstrap resamples of the questions, as in the published paired evaluations of LongMemEval.
DEFAULT_RESAMPLES = 10_000
#: Random sign flips of the sign-flip test (an exact enumeration where 2**n is smaller).
DEFAULT_PERMUTATIONS = 10_000
DEFAULT_SEED = 0
CONFIDENCE = 0.95
#: Metrics whose per-question value is a hit (1) or a miss (0): McNemar's test applies.
HIT_OR_MISS = ("recall_any", "recall_all")
_METRIC = re.compile(r"^(session|turn):([a-z_]+)@(\d+)$")


def compare_files(files: list[dict], metrics=DEFAULT_METRICS, *, resamples: int = DEFAULT_RESAMPLES,
                  seed: int = DEFAULT_SEED, permutations: int = DEFAULT_PERMUTATIONS,
                  count_failed_as_miss: bool = False, checked: bool = False) -> dict:
    """The comparison table of `files` (loaded results, the first the baseline) on `metrics` (`LEVEL:NAME@K`).

    Each file is checked first (`checks.check_results`: its header against its records, its metrics recomputed
    from its rankings); `checked=True` says the caller has already checked each whole file and passes a slimmer
    view of it (the board keeps no candidates past the check, to hold many runs in memory).

    Every comparison draws its bootstrap and its sign flips from a generator
    seeded with `seed` afresh, so a comparison's numbers do not depend on which
    other metrics or systems share the table. Raises `ResultsError` naming the
    file and what differs when the files cannot be paired.
    """
    if len(files) < 2:
        raise ResultsError("compare needs a baseline and at least one other results file")
    parsed = [parse_metric(m) for m in metrics]
    baseline = files[0]
    for other in files[1:]:
        _check_identity(baseline, other)
    pairing.refuse_contradictions(pairing.views(files))  # a file cannot choose which of its questions are compared
    for results in files if not checked else ():
        if not isinstance(results, ResultsFile):  # a file read by `ResultsFile.read` was checked when read
            check_results(results)
    failures = [_check_complete(f, count_failed_as_miss) for f in files]
    for other in files[1:]:
        _check_same(baseline, other)
    labels = _labels(files)
    comparisons = []
    for level, name, k in parsed:
        base_values = _values(baseline, level, name, k, count_failed_as_miss)
        for other, label in zip(files[1:], labels[1:]):
            entry = paired(base_values, _values(other, level, name, k, count_failed_as_miss),
                           hit_or_miss=name in HIT_OR_MISS, resamples=resamples, seed=seed, permutations=permutations)
            comparisons.append({"metric": f"{level}:{name}@{k}", "baseline": labels[0], "system": label, **entry})
    adjust(comparisons)
    for entry in comparisons:
        entry["outcome"], entry["verdict"] = outcome(entry), verdict(entry)
    return {"baseline": labels[0],
            "files": {label: f.get("_path") for label, f in zip(labels, files)},
            "dataset_checksum": baseline.get("dataset_checksum"), "scoring_profile": baseline.get("scoring_profile"),
            "questions": len(baseline["records"]), "resamples": resamples, "seed": seed, "permutations": permutations,
            "confidence": CONFIDENCE, "count_failed_as_miss": count_failed_as_miss,
            "failed_scored_as_miss": {label: {"questions": len(fail["question_ids"]), "item_ids": fail["item_ids"]}
                                      for label, fail in zip(labels, failures) if fail["question_ids"]},
            "tuned_on_this_data": {label: f["tuning"]["weights_file"] for label, f in zip(labels, files)
                                   if (f.get("tuning") or {}).get("tuned_on_this_data")},
            "comparisons": [{key: c[key] for key in _FIELDS} for c in comparisons]}


_FIELDS = ("metric", "baseline", "system", "baseline_value", "system_value", "delta", "ci95", "p_value", "p_holm",
           "holm_family", "test", "wins", "losses", "ties", "n", "outcome", "verdict")


def parse_metric(text: str) -> tuple[str, str, int]:
    """`session:recall_all@5` -> ("session", "recall_all", 5)."""
    match = _METRIC.match(text.strip())
    if not match or match.group(2) not in METRIC_NAMES:
        raise ResultsError(f"metric {text!r}: expected LEVEL:NAME@K with LEVEL session or turn and NAME one of "
                           f"{', '.join(METRIC_NAMES)} (e.g. session:recall_all@5)")
    return match.group(1), match.group(2), int(match.group(3))


def paired(baseline: dict[str, float | None], system: dict[str, float | None], *, hit_or_miss: bool,
           resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
           permutations: int = DEFAULT_PERMUTATIONS) -> dict:
    """Means, difference, interval, p-value and wins/losses/ties of two systems' per-question values.

    Questions null on either side are left out. `hit_or_miss`: values are 0 or
    1 and the p-value is McNemar's exact test (the two-sided binomial test on
    the discordant pairs); otherwise a paired sign-flip randomisation test of
    the mean difference.
    """
    ids = sorted(q for q in baseline if baseline[q] is not None and system.get(q) is not None)
    a = np.array([baseline[q] for q in ids], dtype=float)
    b = np.array([system[q] for q in ids], dtype=float)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        bad = next(q for q, x, y in zip(ids, a, b) if not (math.isfinite(x) and math.isfinite(y)))
        raise ResultsError(f"question {bad}: a value that is not a finite number; no verdict can be drawn from it")
    wins = [q for q, x, y in zip(ids, a, b) if y > x]
    losses = [q for q, x, y in zip(ids, a, b) if y < x]
    ties = [q for q, x, y in zip(ids, a, b) if y == x]
    entry = {"n": len(ids), "wins": {"count": len(wins), "question_ids": wins},
             "losses": {"count": len(losses), "question_ids": losses},
             "ties": {"count": len(ties), "question_ids": ties},
             "test": "mcnemar-exact" if hit_or_miss else _sign_flip_name(len(ids), permutations)}
    if not ids:
        return {**entry, "baseline_value": None, "system_value": None, "delta": None, "ci95": None, "p_value": None}
    if hit_or_miss and not np.isin(np.concatenate([a, b]), (0.0, 1.0)).all():
        raise ResultsError("a hit-or-miss metric holds a value other than 0 or 1; McNemar's test does not apply")
    diffs = b - a
    p_value = (mcnemar_exact(len(wins), len(losses)) if hit_or_miss
               else sign_flip_p(diffs, permutations=permutations, seed=seed))
    return {**entry, "baseline_value": float(a.mean()), "system_value": float(b.mean()),
            "delta": float(diffs.mean()), "ci95": bootstrap_interval(diffs, resamples=resamples, seed=seed),
            "p_value": p_value}


def mcnemar_exact(wins: int, losses: int) -> float:
    """Two-sided exact McNemar p-value: the binomial test of `wins` among the discordant pairs at 1/2."""
    from scipy import stats

    if wins + losses == 0:
        return 1.0
    return float(stats.binomtest(wins, wins + losses, 0.5).pvalue)


def bootstrap_interval(diffs: np.ndarray, *, resamples: int = DEFAULT_RESAMPLES,
                       seed: int = DEFAULT_SEED) -> list[float]:
    """95% percentile interval of the mean paired difference, resampling questions with replacement."""
    from scipy import stats

    if np.all(diffs == diffs[0]):  # every resample has the same mean; scipy warns on such degenerate data
        return [float(diffs[0]), float(diffs[0])]
    result = stats.bootstrap((diffs,), np.mean, n_resamples=resamples, confidence_level=CONFIDENCE,
                             method="percentile", vectorized=True, rng=np.random.default_rng(seed))
    return [float(result.confidence_interval.low), float(result.confidence_interval.high)]


def sign_flip_p(diffs: np.ndarray, *, permutations: int = DEFAULT_PERMUTATIONS, seed: int = DEFAULT_SEED) -> float:
    """Two-sided p-value of the mean paired difference under random sign flips (Fisher's randomisation test)."""
    from scipy import stats

    if not np.any(diffs) or len(diffs) < 2:  # one question: both of its sign patterns are as extreme, p = 1
        return 1.0
    result = stats.permutation_test((diffs,), np.mean, permutation_type="samples", n_resamples=permutations,
                                    vectorized=True, rng=np.random.default_rng(seed))
    return float(min(1.0, result.pvalue))


def _sign_flip_name(n: int, permutations: int) -> str:
    # scipy enumerates every sign pattern where there are no more of them than permutations asked
    return f"sign-flip (exact, all {2 ** n} sign patterns)" if n < 64 and 2 ** n <= permutations \
        else f"sign-flip ({permutations} permutations)"


def _values(results: dict, level: str, name: str, k: int, failed_as_miss: bool) -> dict[str, float | None]:
    """{question_id: value} of one metric; failed questions 0 where `failed_as_miss`, else null."""
    key = f"{name}@{k}"
    values = {}
    for record in results["records"]:
        qid = record["question_id"]
        if record.get("status", "ok") != "ok":
            values[qid] = 0.0 if failed_as_miss else None
            continue
        block = (record.get("metrics") or {}).get(level)
        if block is None:
            values[qid] = None
        elif key not in block:
            raise ResultsError(f"{results.get('_path')}: question {qid}: no {level} {key} in its metrics "
                               f"(it has {', '.join(sorted(block)) or 'none'})")
        else:
            values[qid] = block[key]
    return values


def _check_complete(results: dict, failed_as_miss: bool) -> dict:
    """The file's failures; refuses an incomplete file unless its failures are to be scored as misses."""
    failures = failure_summary(results["records"], results.get("benchmark_key"))  # the header agrees (checked)
    if not failures["item_ids"]:
        return failures
    path = results.get("_path")
    named = ", ".join(failures["item_ids"][:5]) + (" ..." if len(failures["item_ids"]) > 5 else "")
    if not failed_as_miss:
        raise ResultsError(f"{path}: incomplete run ({failures['items']} failed items, {failures['questions']} "
                           f"questions: {named}); its means leave those out, so it pairs with no other file "
                           "(--count-failed-as-miss scores each failed question as a miss)")
    if failures["items_without_question_ids"]:
        raise ResultsError(f"{path}: item(s) {', '.join(failures['items_without_question_ids'])} failed before "
                           "their questions were read; the file does not know their question ids, so they "
                           "cannot be scored as misses")
    return failures


#: How a reader is told what a field of `pairing.PAIRING` is, where the name alone would not say.
_SAID = {"corpus": "corpus (the profile whose corpus the system was given)"}


def _check_identity(baseline: dict, other: dict) -> None:
    """Refuse a file that does not pair with the baseline (`pairing`: another benchmark, dataset, profile or
    corpus), saying which; a question set that differs is said in full by `_check_same`."""
    here, there = other.get("_path"), baseline.get("_path")
    for name, mine, theirs in pairing.differences(pairing.pairing_of(other), pairing.pairing_of(baseline)):
        if name != "question set":
            raise ResultsError(f"{here}: {_SAID.get(name, name)} {mine} differs from the baseline {there}'s "
                               f"{theirs}; their questions do not pair")


def _check_same(baseline: dict, other: dict) -> None:
    """Refuse a file that does not pair with the baseline, saying what differs."""
    here, there = other.get("_path"), baseline.get("_path")
    _check_identity(baseline, other)
    mine = {r["question_id"] for r in other["records"]}
    theirs = {r["question_id"] for r in baseline["records"]}
    gold = {r["question_id"]: r.get("gold") for r in baseline["records"] if r.get("gold") is not None}
    for record in other["records"]:  # one dataset, one profile: every question has the same gold in both
        if record.get("gold") is not None and record["question_id"] in gold and record["gold"] != gold[record["question_id"]]:
            raise ResultsError(f"{here}: question {record['question_id']}: field gold differs from the baseline "
                               f"{there}'s; files of one dataset and profile cannot disagree on it")
    if mine != theirs:
        only_here, only_there = sorted(mine - theirs), sorted(theirs - mine)
        raise ResultsError(f"{here}: question set differs from the baseline {there}'s ({len(only_here)} questions only "
                           f"here{': ' + ', '.join(only_here[:3]) if only_here else ''}; {len(only_there)} only in "
                           f"the baseline{': ' + ', '.join(only_there[:3]) if only_there else ''})")


def _labels(files: list[dict]) -> list[str]:
    """system/mode per file (`run_label`); the file's name (less .json) where two files would share one."""
    labels = [run_label(f.get("system"), f.get("retrieval_mode")) for f in files]
    return [label if labels.count(label) == 1 else Path(str(f.get("_path"))).name.removesuffix(".json")
            for label, f in zip(labels, files)]


def paired_count(table: dict) -> str:
    """How many of the file's questions the rows pair: each row's n is over the questions scored in both files."""
    counts = sorted({c["n"] for c in table["comparisons"]})
    if not counts:
        return f"{table['questions']} questions"
    paired_n = str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return (f"{paired_n} of its {table['questions']} questions paired (n; the rest have no value in a file: "
            "abstentions, exclusions, failures, no gold at a level)")


def render_comparison(table: dict) -> str:
    """The table as text: one row per metric and system, the settings that made its numbers above it."""
    lines = [f"baseline {shown(table['baseline'])} ({shown(table['files'][table['baseline']])})",
             f"dataset {shown(str(table['dataset_checksum'])[:12])}, "
             f"profile {shown(table['scoring_profile'])}, "
             f"{paired_count(table)}; paired bootstrap {table['resamples']} resamples, seed {table['seed']}, "
             f"{int(table['confidence'] * 100)}% percentile interval; Holm over {_families(table)}"]
    for label, failed in table["failed_scored_as_miss"].items():
        lines.append(f"--count-failed-as-miss: {shown(label)} scores its {failed['questions']} failed "
                     f"questions (items {shown(', '.join(failed['item_ids']))}) as misses on every metric")
    for label, weights in table.get("tuned_on_this_data", {}).items():
        lines.append(f"{shown(label)}: tuned on this data (its weights {shown(weights)} were tuned on this "
                     "dataset; its numbers are not held out)")
    width = max([6] + [len(shown(c["system"])) for c in table["comparisons"]])
    head = (f"{'metric':<22} {'system':<{width}} {'n':>5} {'base':>6} {'sys':>6} {'delta':>7} {'95% CI':>17} "
            f"{'p':>7} {'p_holm':>7} {'W/L/T':>13}  test")
    lines += [head, "-" * len(head)]
    for c in table["comparisons"]:
        wlt = f"{c['wins']['count']}/{c['losses']['count']}/{c['ties']['count']}"
        if c["n"] == 0:
            lines.append(f"{c['metric']:<22} {shown(c['system']):<{width}} {0:>5}  "
                         "no question scored in both files")
            continue
        interval = f"[{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]"
        lines.append(f"{c['metric']:<22} {shown(c['system']):<{width}} {c['n']:>5} "
                     f"{c['baseline_value']:>6.3f} "
                     f"{c['system_value']:>6.3f} {c['delta']:>+7.3f} {interval:>17} {p_text(c['p_value']):>7} "
                     f"{p_text(c['p_holm']):>7} {wlt:>13}  {c['test']}")
    lines.append("W/L/T: questions the system wins / loses / ties against the baseline; "
                 "p_holm: p adjusted by Holm over the comparisons of its metric")
    lines.append(EXPLAINED)
    lines += [shown(c["verdict"]) for c in table["comparisons"]]
    return "\n".join(lines)


def _families(table: dict) -> str:
    """How many comparisons Holm adjusted over, per metric: `3 comparisons per metric (every system against the
    baseline on it)`."""
    sizes = {}
    for c in table["comparisons"]:
        sizes.setdefault(c["metric"], c.get("holm_family") or 0)
    counts = sorted(set(sizes.values()))
    said = " or ".join(str(n) for n in counts) if counts else "0"
    return (f"{said} comparison{'s' if counts != [1] else ''} per metric (every system against the baseline "
            "on that metric)")
