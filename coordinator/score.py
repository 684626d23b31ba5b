"""`memfarm score`: anyone's rankings, scored with exactly the code the runs use.

A rankings file is JSON lines: `{"question_id": ..., "ranked": [id, ...]}`,
best first, with session ids (`--level session`) or turn ids (`--level turn`;
LongMemEval turn ids are `<session_id>#<turn_index>`, LoCoMo's are `dia_id`s).
"""

from __future__ import annotations

import json
import logging
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


def score_rankings(adapter, rankings_path, level: str, profile: str, k_values) -> tuple[list[dict], dict]:
    """Item outcomes (as a run makes them) for a rankings file, and what was wrong with it."""
    if level not in ("session", "turn"):
        raise ResultsError(f"level must be session or turn, not {level!r}")
    items = [item for item in adapter.iter_items() if not item.get("error")]
    known = {q["question_id"] for item in items for q in item["questions"]}
    rankings, problems = read_rankings(rankings_path, known)
    outcomes, missing, dropped_total = [], [], 0
    for item in items:
        session_of = {t["turn_id"]: t["session_id"] for t in item["turns"]}
        valid_ids = session_of if level == "turn" else set(session_of.values())
        records = []
        for question in item["questions"]:
            qid = question["question_id"]
            if qid not in rankings:
                missing.append(qid)
            ranked = list(dict.fromkeys(rankings.get(qid, [])))
            valid = [x for x in ranked if x in valid_ids]
            dropped_total += len(ranked) - len(valid)
            candidates = [candidate(rank, x, session_id=session_of[x] if level == "turn" else x,
                                    turn_id=x if level == "turn" else None)
                          for rank, x in enumerate(valid, start=1)]
            records.append(question_record(
                question, item["item_id"], candidates, level=level, k_values=k_values, profile=profile,
                session_of_turn=session_of, worker="score", attempt=1,
                diagnostics={"source": "rankings file", "missing": qid not in rankings,
                             "dropped_ids": len(ranked) - len(valid)}))
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
        ids = list(dict.fromkeys(c["metadata"][key] for c in record.get("candidates", [])))
        lines.append(json.dumps({"question_id": record["question_id"], "ranked": ids}))
    return lines
