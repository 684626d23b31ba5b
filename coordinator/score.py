"""`memfarm score`: anyone's rankings, scored with exactly the code the runs use.

A rankings file is JSON lines: `{"question_id": ..., "ranked": [id, ...]}`,
best first, with session ids (`--level session`) or turn ids (`--level turn`;
LongMemEval turn ids are `<session_id>#<turn_index>` with a 0-based index, or
the official `<session_id>_<n>`; LoCoMo's are `dia_id`s). Ids the corpus does
not hold are dropped and counted; so is a repeat beyond the corpus's own count.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

from adapters.errors import ResultsError
from adapters.jsonstream import iter_json_lines
from adapters.records import candidate, outcome, question_record

logger = logging.getLogger(__name__)


def read_rankings(path: str | Path, known: set[str]) -> tuple[dict[str, list[str]], list[str]]:
    """(rankings by question id, problems naming their line); bad lines are skipped, not fatal."""
    rankings, problems = {}, []
    for number, entry, problem in iter_json_lines(path, ResultsError):
        if problem:
            problems.append(problem)
            continue
        qid = entry.get("question_id") if isinstance(entry, dict) else None
        ranked = entry.get("ranked", entry.get("ranking")) if isinstance(entry, dict) else None
        if qid is None or not isinstance(ranked, list):
            problems.append(f"{path}:{number}: needs question_id and a list 'ranked'")
        elif str(qid) not in known:
            problems.append(f"{path}:{number}: unknown question_id {qid!r} skipped")
        elif str(qid) in rankings:
            problems.append(f"{path}:{number}: duplicate question_id {qid!r} skipped (the first line counts)")
        elif not all(isinstance(x, str) for x in ranked):
            problems.append(f"{path}:{number}: 'ranked' must hold id strings only; line skipped")
        else:
            rankings[str(qid)] = [str(x) for x in ranked]
    for problem in problems:
        logger.warning(problem)
    return rankings, problems


def accepted_ids(item: dict, level: str) -> tuple[dict[str, dict], Counter]:
    """(every accepted spelling of a ranked id -> its native ids, how often the corpus holds each).

    Turns: `<session_id>#<i>` (0-based index within the session), and for
    LongMemEval also the official `<session_id>_<n>` and its `noans` form.
    Sessions: the session id, and the official `noans` form of an evidence session.
    A session listed twice in a haystack may be ranked twice.
    """
    lookup, counts = {}, Counter()
    if level == "turn":
        for turn in item["turns"]:
            ids = {"session_id": turn["session_id"], "turn_id": turn["turn_id"]}
            forms = [turn["turn_id"]]
            if turn.get("official_id"):
                ids["official_id"] = turn["official_id"]
                forms += [f"{turn['session_id']}_{turn['props']['turn_index'] + 1}", turn["official_id"]]
            for form in forms:
                lookup.setdefault(form, ids)
            counts[turn["turn_id"]] += 1
        return lookup, counts
    sessions = item.get("sessions") or [{"session_id": sid} for sid in dict.fromkeys(t["session_id"]
                                                                                      for t in item["turns"])]
    for session in sessions:
        ids = {"session_id": session["session_id"], "turn_id": None, **({"official_id": session["official_id"]}
                                                                         if session.get("official_id") else {})}
        for form in (session["session_id"], session.get("official_id")):
            if form:
                lookup.setdefault(form, ids)
        counts[session["session_id"]] += 1
    return lookup, counts


def resolve(ranked: list[str], lookup: dict[str, dict], counts: Counter, level: str) -> tuple[list[dict], int]:
    """The ranking as native ids: unknown ids dropped, each kept at most as often as the corpus holds it."""
    key = "turn_id" if level == "turn" else "session_id"
    kept, seen = [], Counter()
    for doc_id in ranked:
        ids = lookup.get(doc_id)
        if ids is not None and seen[ids[key]] < counts[ids[key]]:
            seen[ids[key]] += 1
            kept.append(ids)
    return kept, len(ranked) - len(kept)


def score_rankings(adapter, rankings_path, level: str, profile: str, k_values) -> tuple[list[dict], dict]:
    """Item outcomes (as a run makes them) for a rankings file, and what was wrong with it."""
    if level not in ("session", "turn"):
        raise ResultsError(f"level must be session or turn, not {level!r}")
    items = [item for item in adapter.iter_items() if not item.get("error")]
    known = {q["question_id"] for item in items for q in item["questions"]}
    rankings, problems = read_rankings(rankings_path, known)
    outcomes, missing, dropped_total = [], [], 0
    for item in items:
        lookup, counts = accepted_ids(item, level)
        records = []
        for question in item["questions"]:
            qid = question["question_id"]
            if qid not in rankings:
                missing.append(qid)
            ranked, dropped = resolve(rankings.get(qid, []), lookup, counts, level)
            dropped_total += dropped
            candidates = [candidate(rank, ids["turn_id"] if level == "turn" else ids["session_id"], **ids)
                          for rank, ids in enumerate(ranked, start=1)]
            records.append(question_record(
                question, item["item_id"], candidates, level=level, k_values=k_values, profile=profile,
                ranking=ranked, worker="score", attempt=1,
                diagnostics={"source": "rankings file", "missing": qid not in rankings, "dropped_ids": dropped}))
        outcomes.append(outcome(item["item_id"], records))
    report = {"problems": problems, "missing": missing, "dropped_ids": dropped_total, "scored": len(rankings)}
    return outcomes, report


def export_rankings(results: dict, level: str) -> list[str]:
    """JSON lines of a run's own rankings, for `memfarm score` (and for checking it)."""
    lines = []
    for record in results["records"]:
        if record.get("status", "ok") != "ok":
            continue
        key = "turn_id" if level == "turn" else "session_id"
        ids = [c["metadata"][key] for c in record.get("candidates", [])]
        if level == "session":  # a session's turns become one entry; a turn of a session listed twice stays twice
            ids = list(dict.fromkeys(ids))
        lines.append(json.dumps({"question_id": record["question_id"], "ranked": ids}))
    return lines
