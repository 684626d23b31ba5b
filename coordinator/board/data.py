"""The board's data: results files grouped into leaderboards, each question's answers run by run.

Runs are grouped by what makes their questions pair: the benchmark, the
dataset checksum, the scoring profile and the corpus it gave the system, and
the question set. A group is one leaderboard. Its rows are ordered by its
benchmark's headline metric (`headline`: session recall_all@5, the strict
metric, unless the benchmark declares another; BEAM's message
recall_any@10) with a bootstrap interval of the mean,
and each complete run is paired with the first by `compare.compare_files`,
the code of `memfarm compare` (exact McNemar, paired bootstrap interval, Holm
over the leaderboard's rows, the verdict of `verdicts`); the first is called the
leader only where it is significantly ahead of every other run. Every pair of
complete runs is compared too (`pairs`, Holm over every pair). A run whose
items failed stays on its leaderboard, marked, but is paired with nobody: its
means leave its failed questions out. Runs judged by substrings (AdaMem
episodes) have no gold ids to rank against and stand in a group of their own.

This module turns results files into plain data (`build_data`); `board` builds the site, the pages are
written by `pages`, the pictures by `charts`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from adapters.errors import ResultsError
from coordinator.board.files import find_results
from coordinator.board.markup import count
from coordinator.board import pairs
from coordinator.board.pairs import strict_values
from coordinator.results import compare, pairing, verdicts
from coordinator.results.labels import run_label
from coordinator.board.run_view import load_run, records_digest

logger = logging.getLogger(__name__)

#: The other columns of a leaderboard: (key, level, metric name).
OTHER_METRICS = (("session_recall_any@5", "session", "recall_any@5"),
                 ("session_ndcg_any@10", "session", "ndcg_any@10"),
                 ("turn_recall_any@10", "turn", "recall_any@10"))
def identity(run: dict) -> tuple:
    """What groups runs: what pairs their questions (`pairing`), and whether they are judged by substrings."""
    return tuple(run["pairing"][name] for name in pairing.PAIRING) + (run["judged"],)


def group_runs(runs: list[dict]) -> list[dict]:
    """Runs grouped by what pairs their questions; each group knows why it stands apart from the others of its
    benchmark. Groups come by benchmark, the largest first. Runs of one dataset that disagree on which questions are
    abstentions or excluded are refused (`pairing.refuse_contradictions`), whichever groups they would fall in."""
    pairing.refuse_contradictions([(run["path"], run["pairing"], run["decisions"]) for run in runs])
    keyed: dict[tuple, list[dict]] = {}
    for run in runs:
        keyed.setdefault(identity(run), []).append(run)
    groups = [{"runs": members, "judged": members[0]["judged"], "pairing": members[0]["pairing"],
               **{f: members[0][f] for f in ("benchmark_key", "dataset_checksum", "scoring_profile", "corpus")},
               "benchmark": members[0]["benchmark"], "headline": members[0]["headline"],
               "question_set": members[0]["question_set"],
               "question_ids": members[0]["question_ids"]} for members in keyed.values()]
    groups.sort(key=lambda g: (g["benchmark_key"], -len(g["runs"]), str(g["dataset_checksum"]),
                               str(g["scoring_profile"]), g["question_set"]))
    for number, group in enumerate(groups, start=1):
        group["id"] = f"g{number}"
        group["number"] = number
        _label(group["runs"])
    for group in groups:
        group["apart"] = [{"group": other["number"], "differences": differences(group, other)}
                          for other in groups if other is not group and other["benchmark_key"] == group["benchmark_key"]]
        group["apart"] = group["apart"][:5]
    return groups


def differences(group: dict, other: dict) -> list[str]:
    """What keeps two groups' runs from pairing, in words."""
    said = []
    for name, mine, theirs in pairing.differences(group["pairing"], other["pairing"]):
        if name == "question set":
            here, there = set(group["question_ids"]), set(other["question_ids"])
            said.append(f"question set differs ({len(here - there)} questions only here, {len(there - here)} only "
                        "there)")
        else:
            said.append(f"{name} {_short(mine)} here, {_short(theirs)} there")
    if group["judged"] != other["judged"]:
        said.append("judged by substrings here" if group["judged"] else "judged by substrings there")
    return said


def _short(value) -> str:
    text = str(value)
    return text[:12] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text


def _label(runs: list[dict]) -> None:
    """system/mode in every group, the leader's too; where two runs of the group share one, each is followed by
    its file's name, so that the label still begins with what ran."""
    labels = [run_label(r["system"], r["mode"]) for r in runs]
    for run, label in zip(runs, labels):
        run["label"] = label if labels.count(label) == 1 else f'{label} ({run["name"].removesuffix(".json")})'


def fold_copies(runs: list[dict]) -> list[dict]:
    """One run per set of identical results files (one system, mode, settings and embedder, and records equal
    but for timings: `make run` rerun on the same code and data), the first found standing for them all with
    every copy's path in `copies`; runs in their first-found order."""
    kept: dict[tuple, dict] = {}
    for run in runs:
        key = identity(run) + (run["system"], run["mode"], run["digest"], run["embedder"], run["records_digest"])
        if key in kept:
            kept[key]["copies"].append(run["path"])
        else:
            kept[key] = run
    return list(kept.values())


def mean_interval(values: list[float], *, resamples: int, seed: int) -> list[float] | None:
    """95% percentile bootstrap interval of a mean, by `compare.bootstrap_interval` (the paired test's own)."""
    if not values:
        return None
    return compare.bootstrap_interval(np.array(values, dtype=float), resamples=resamples, seed=seed)


def leaderboard(group: dict, *, resamples: int = compare.DEFAULT_RESAMPLES, seed: int = compare.DEFAULT_SEED) -> dict:
    """The group's rows, best first by its headline metric (`headline`), each complete run paired with the first.

    The first is the complete run with the highest headline mean (ties: by
    label). Every other complete run is paired with it in one
    `compare.compare_files` call, so Holm's adjustment runs over the rows of
    this leaderboard (`verdicts.adjust`: the same family `memfarm compare`
    gives these files, the first named first). The first is the leader only
    where every other complete run is significantly behind it after Holm;
    otherwise `tied` holds the top runs the test does not tell apart (the first
    and every run not significantly behind it). An incomplete run is ranked
    after the complete ones and not paired.
    """
    rows = []
    for run in group["runs"]:
        values = [v for v in strict_values(run).values() if v is not None]
        summary = run["summary"]
        row = {"run": run, "label": run["label"], "strict": float(np.mean(values)) if values else None,
               "n": len(values), "strict_ci95": mean_interval(values, resamples=resamples, seed=seed)}
        for key, level, name in OTHER_METRICS:
            row[key] = (summary.get(level) or {}).get(name)
        rows.append(row)
    rows.sort(key=lambda r: (not r["run"]["complete"], r["strict"] is None, -(r["strict"] or 0.0), r["label"]))
    for position, row in enumerate(rows, start=1):
        row["position"] = position
        row["pair"] = None
    paired = [r for r in rows if r["run"]["complete"] and r["strict"] is not None]
    top = paired[0] if paired else None
    if top:
        top["pair"] = {"top": True}
    for row in rows:
        if not row["run"]["complete"]:
            failures = row["run"]["failures"]
            row["pair"] = {"not_paired": f"incomplete run: {count(failures['items'], 'failed item')} "
                                         f"({count(failures['questions'], 'question')}); its means leave them out"}
        elif row["strict"] is None and top:
            row["pair"] = {"not_paired": f'no question scored on {group["headline"]["role"]}'}
    if top and len(paired) > 1:
        table = compare.compare_files([r["run"]["compare_view"] for r in paired], (group["headline"]["metric"],),
                                      resamples=resamples, seed=seed, checked=True)
        for row, entry in zip(paired[1:], table["comparisons"]):
            entry.update(baseline=top["label"], system=row["label"])  # named as the board names them
            row["pair"] = {**entry, "verdict": verdicts.verdict(entry)}
    behind = [r for r in paired[1:] if r["pair"].get("outcome") == verdicts.BEHIND]
    leader = top if top and len(paired) > 1 and len(behind) == len(paired) - 1 else None
    tied = [] if leader or not top else [r for r in paired if r is top or r["pair"].get("outcome") != verdicts.BEHIND]
    if leader:
        leader["pair"]["leader"] = True
    return {"rows": rows, "top": top, "leader": leader, "tied": tied}


def judged_rows(group: dict) -> list[dict]:
    """Substring-judged runs: queries passed and stale hits, best pass rate first."""
    rows = [{"run": run, "label": run["label"], "support": run["support"] or {}} for run in group["runs"]]
    rows.sort(key=lambda r: (-(r["support"].get("pass_rate") or 0.0), r["label"]))
    for position, row in enumerate(rows, start=1):
        row["position"] = position
    return rows


def question_table(group: dict, rows: list[dict]) -> list[dict]:
    """Every question of the group in dataset order, with what it is and each run's answer (in leaderboard
    order), and whether the runs disagree on it or all missed it."""
    ordered = [row["run"] for row in rows]
    table = []
    for number, qid in enumerate(group["question_ids"], start=1):
        info = next((run["questions"][qid] for run in ordered if run["runs_of"][qid]["status"] != "failed"),
                    ordered[0]["questions"][qid])
        answers = [run["runs_of"][qid] for run in ordered]
        strict = [a["strict"] for a in answers if a["status"] == "scored" and a.get("strict") is not None]
        table.append({"number": number, "page": f"q/{number:05d}.html", **info, "answers": answers,
                      "missed_by_all": bool(strict) and not any(strict),
                      "disagree": bool(strict) and any(strict) and not all(strict)})
    return table


def build_data(paths: list[str | Path], *, exclude: Path | None = None,
               resamples: int = compare.DEFAULT_RESAMPLES, seed: int = compare.DEFAULT_SEED) -> dict:
    """Everything the board shows, from results files and folders."""
    started = time.perf_counter()
    files, skipped = find_results(paths, exclude=exclude)
    if not files:
        raise ResultsError(f"no results file among {', '.join(str(p) for p in paths)}"
                           + (f" ({len(skipped)} other JSON files skipped)" if skipped else ""))
    runs = fold_copies([load_run(path) for path in files])
    loaded = time.perf_counter()
    groups = group_runs(runs)
    for group in groups:
        if group["judged"]:
            group["rows"], group["leader"], group["top"], group["tied"], group["pairs"] = \
                judged_rows(group), None, None, [], []
        else:
            board = leaderboard(group, resamples=resamples, seed=seed)
            group["rows"], group["leader"], group["top"], group["tied"] = \
                board["rows"], board["leader"], board["top"], board["tied"]
            group["pairs"] = pairs.all_pairs(group, resamples=resamples, seed=seed)
        group["questions"] = question_table(group, group["rows"])
    for group in groups:  # runs of another question set of the same data, on the questions both hold
        group["shared"] = [table for other in groups if other is not group
                           for table in [pairs.shared_pairs(group, other, resamples=resamples, seed=seed)]
                           if table]
    logger.info("board: %d runs read in %.1f s, paired in %.1f s", len(runs), loaded - started,
                time.perf_counter() - loaded)
    return {"groups": groups, "runs": len(runs), "files": [str(f) for f in files], "skipped": skipped,
            "resamples": resamples, "seed": seed}
