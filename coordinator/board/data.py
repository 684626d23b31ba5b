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

import hashlib
import json
import logging
import re
import time
from pathlib import Path

import numpy as np

from adapters.errors import ResultsError
from coordinator.board.files import find_results
from coordinator.board.markup import count
from coordinator.board import pairs
from coordinator.board.headline import headline_of, value_of
from coordinator.board.pairs import strict_values
from coordinator.results import compare, pairing, verdicts
from coordinator.results.labels import run_label
from coordinator.results.pairing import question_set
from coordinator.results.run_files import ResultsFile

logger = logging.getLogger(__name__)

#: The other columns of a leaderboard: (key, level, metric name).
OTHER_METRICS = (("session_recall_any@5", "session", "recall_any@5"),
                 ("session_ndcg_any@10", "session", "ndcg_any@10"),
                 ("turn_recall_any@10", "turn", "recall_any@10"))
#: Candidates shown per run on a question page.
SHOWN_CANDIDATES = 10
#: Characters of a candidate's text kept on a question page (the rest is in the results file).
TEXT_CHARS = 400
#: Record fields that say how a run went, not what it returned: left out of the content hash that tells two
#: copies of one run (`make run` rerun on the same code and data) apart from two runs.
_VOLATILE = ("runtime_ms", "worker", "attempt", "diagnostics")
#: Record fields too heavy to keep for the paired test (it reads status and metrics).
_HEAVY = ("candidates", "metrics_by_profile", "ranking", "diagnostics", "details", "judgement")


def settings_digest(results: dict) -> str:
    """A short digest of the run's settings (the engine's and harness's defaults and the system's
    configuration): two runs with the same digest ran with the same settings."""
    blob = json.dumps({"settings": results.get("settings"), "system": results.get("settings_system")},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def records_digest(records: list[dict]) -> str:
    """The SHA-256 of what a run returned and how it scored, question by question: its records without the
    fields that only say how long it took and where it ran (`_VOLATILE`). Two files with one digest are copies
    of one run, whatever their names."""
    kept = [{k: v for k, v in r.items() if k not in _VOLATILE} for r in records]
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


def embedder_text(embedder, settings_system) -> str:
    """The embedder as the board shows it: its model id; "not disclosed" for a system behind a server (an HTTP
    system says nothing of how it embeds); "none" for a system that embeds nothing. Never `None`."""
    if embedder:
        return str(embedder)
    system = settings_system if isinstance(settings_system, dict) else {}
    return "not disclosed" if "url" in system or "wire_version" in system else "none"


def mode_text(system, mode) -> str:
    """A run's mode as the board shows it: an outside system names its modes `SYSTEM:MODE`, said once; a user's
    class that declares none has none."""
    if mode is None:
        return ""
    system, mode = str(system), str(mode)
    return mode.removeprefix(f"{system}:") or mode


def control_arm(settings_system) -> str | None:
    """The control arm a run is (`random`, `recency`: a floor, not a system), or None."""
    system = settings_system if isinstance(settings_system, dict) else {}
    arm = system.get("control_arm")
    return str(arm) if arm else None


def ceiling_of(summary: dict, headline: dict) -> float | None:
    """The headline metric a perfect system reaches on the run's questions, where the results carry it (recall_all
    has a ceiling: a question with more gold ids than K cannot have them all in its top K)."""
    value = ((summary.get("ceiling") or {}).get(headline["level"]) or {}).get(f'{headline["name"]}@{headline["k"]}')
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def natural_key(text) -> list:
    """A sort key that orders the numbers inside ids by value: q2, q11, q100 (as text: q100, q11, q2)."""
    return [(0, int(part), part) if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", str(text))]


def load_run(path: str | Path) -> dict:
    """One results file as the board needs it: identity, summary, the paired test's view and each question's
    top candidates; the rest of the file (every candidate's full text, diagnostics) is let go."""
    data = ResultsFile.read(path)  # checked here, whole: the paired test sees only a view without candidates
    records = data.records
    ids = [str(r["question_id"]) for r in records]
    judged = any(r.get("judgement") for r in records)
    summary = (data.get("metrics") or {}).get("all") or {}
    tuning = data.get("tuning") or {}
    failures = data.get("failures") or {}
    view = {key: value for key, value in data.items() if key not in ("records", "metrics_by_profile", "settings")}
    view["records"] = [{k: v for k, v in r.items() if k not in _HEAVY} for r in records]
    question_count = len(records)
    elapsed = data.get("elapsed_seconds")
    paired_by = pairing.pairing_of(data)
    headline = headline_of(paired_by["benchmark"])
    return {
        "path": str(path), "name": Path(path).name,
        "system": str(data.get("system")), "mode": mode_text(data.get("system"), data.get("retrieval_mode")),
        "embedder": embedder_text(data.get("embedder"), data.get("settings_system")),
        "arm": control_arm(data.get("settings_system")), "ceiling": ceiling_of(summary, headline),
        "headline": headline,
        "records_digest": records_digest(records), "copies": [str(path)],
        "commit": data.get("commit"), "digest": settings_digest(data),
        "command": data.get("command"), "settings_system": data.get("settings_system"),
        "complete": bool(data.get("complete", not data.get("failed"))),
        "failures": {"items": failures.get("items", data.get("failed", 0)), "item_ids": failures.get("item_ids", []),
                     "questions": failures.get("questions", data.get("failed", 0))},
        "tuned": tuning.get("weights_file") if tuning.get("tuned_on_this_data") else None,
        "benchmark": str(data.get("benchmark")), "benchmark_key": str(data.get("benchmark_key")),
        "dataset_checksum": data.get("dataset_checksum"), "scoring_profile": data.get("scoring_profile"),
        "corpus": data.get("corpus") or data.get("scoring_profile"),
        "question_ids": ids, "question_set": question_set(ids), "pairing": paired_by,
        "decisions": pairing.decisions(data),
        "judged": judged, "support": summary.get("support"), "summary": summary,
        "seconds_per_question": (elapsed / question_count) if elapsed and question_count else None,
        "peak_rss_bytes": data.get("peak_rss_bytes"),
        "compare_view": view,
        "questions": {str(r["question_id"]): _question_of(r) for r in records},
        "runs_of": {str(r["question_id"]): _answer_of(r, headline) for r in records},
    }


def _question_type(record: dict) -> str:
    kind = record.get("question_type", record.get("category"))
    return "-" if kind is None else str(kind)


def _question_of(record: dict) -> dict:
    """What the dataset says of a question (the same in every run of its group)."""
    gold = record.get("gold") or {}
    return {"id": str(record["question_id"]), "text": record.get("query"), "type": _question_type(record),
            "expected": record.get("expected"), "item_id": record.get("item_id"),
            "gold_sessions": [str(s) for s in gold.get("sessions", record.get("expected_ids") or [])],
            "gold_turns": [str(t) for t in gold.get("turns", [])],
            "abstention": bool(record.get("abstention")),
            "excluded": record.get("abstention_reason") or record.get("excluded")}


def _metric(record: dict, level: str, name: str):
    block = (record.get("metrics") or {}).get(level)
    return None if not isinstance(block, dict) else block.get(name)


def gold_ranks(candidates: list[dict], gold: list[str], key: str) -> tuple[int | None, int | None]:
    """(rank of the first gold id, rank by which every gold id has appeared) in the ranking of `key` (session_id
    or turn_id) that the candidates make, each id counted once at its first place, as the metrics rank sessions;
    the second is None where some gold id is not among the candidates."""
    gold_set, seen, ranking = set(gold), set(), {}
    first = None
    if not gold_set:
        return None, None
    for c in candidates:
        value = str((c.get("metadata") or {}).get(key))
        rank = ranking.setdefault(value, len(ranking) + 1)
        if value in gold_set:
            first = rank if first is None else first
            seen.add(value)
            if seen == gold_set:
                return first, rank
    return first, None


def _answer_of(record: dict, headline: dict) -> dict:
    """What one run returned for a question: its status, its headline metric's value (`strict`) and other metric
    values, the top candidates with gold marked, and where the gold sat in everything it kept."""
    status = record.get("status", "ok")
    if status != "ok":
        return {"status": "failed", "error": str(record.get("error") or "")[:TEXT_CHARS]}
    gold = record.get("gold") or {}
    sessions, turns = [str(s) for s in gold.get("sessions", record.get("expected_ids") or [])], \
        [str(t) for t in gold.get("turns", [])]
    candidates = [c for c in record.get("candidates") or [] if isinstance(c, dict)]
    top = []
    for c in candidates[:SHOWN_CANDIDATES]:
        meta = c.get("metadata") or {}
        session, turn = meta.get("session_id"), meta.get("turn_id")
        mark = "turn" if turn is not None and str(turn) in turns else \
            "session" if session is not None and str(session) in sessions else None
        text = str(c.get("text") or "")
        top.append({"rank": c.get("rank"), "session": session, "turn": turn, "gold": mark,
                    "text": text[:TEXT_CHARS] + ("…" if len(text) > TEXT_CHARS else ""),
                    "score": c.get("final_score", c.get("score"))})
    scored = record.get("metrics") is not None
    return {"status": "scored" if scored else "not scored", "top": top, "kept": len(candidates),
            "strict": value_of(record, headline),
            "session_recall_any@5": _metric(record, "session", "recall_any@5"),
            "turn_recall_any@10": _metric(record, "turn", "recall_any@10"),
            "session_ranks": gold_ranks(candidates, sessions, "session_id"),
            "turn_ranks": gold_ranks(candidates, turns, "turn_id"),
            "runtime_ms": record.get("runtime_ms"),
            "judgement": record.get("judgement")}


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
