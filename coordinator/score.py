"""`memfarm score`: anyone's rankings, scored with exactly the code the runs use.

A rankings file is JSON lines: `{"question_id": ..., "ranked": [id, ...]}`,
best first, with session ids (`--level session`) or turn ids (`--level turn`;
LongMemEval turn ids are `<session_id>#<turn_index>`, LoCoMo's are `dia_id`s).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from memoria.errors import ResultsError
from workers.metrics import level_metrics, question_metrics

logger = logging.getLogger(__name__)


def read_rankings(path: str | Path, known: set[str]) -> tuple[dict[str, list[str]], list[str]]:
    """(rankings by question id, problems naming their line); bad lines are skipped, not fatal."""
    rankings, problems = {}, []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: cannot read rankings ({exc})") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            problems.append(f"{path}:{number}: not JSON ({exc.msg})")
            continue
        qid = entry.get("question_id") if isinstance(entry, dict) else None
        ranked = entry.get("ranked", entry.get("ranking")) if isinstance(entry, dict) else None
        if qid is None or not isinstance(ranked, list):
            problems.append(f"{path}:{number}: needs question_id and a list 'ranked'")
        elif str(qid) not in known:
            problems.append(f"{path}:{number}: unknown question_id {qid!r} skipped")
        elif str(qid) in rankings:
            problems.append(f"{path}:{number}: duplicate question_id {qid!r} skipped (the first line counts)")
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
        sessions = set(session_of.values())
        records = []
        for question in item["questions"]:
            qid = question["question_id"]
            if qid not in rankings:
                missing.append(qid)
            ranked = list(dict.fromkeys(rankings.get(qid, [])))
            valid = [x for x in ranked if x in (session_of if level == "turn" else sessions)]
            dropped_total += len(ranked) - len(valid)
            gold_turns, gold_sessions = question.get("gold_turns", []), question.get("gold_sessions", [])
            scorable = not question.get("abstention") and not question.get("excluded")
            if not scorable:
                metrics = None
            elif level == "turn":
                metrics = question_metrics(valid, session_of, gold_sessions, gold_turns, k_values, profile)
            else:
                metrics = {"session": level_metrics(valid, gold_sessions, k_values, profile), "turn": None}
            candidates = [{"rank": r, "id": x, "text": "", "score": None, "final_score": None, "diagnostics": {},
                           "metadata": {"turn_id": x if level == "turn" else None,
                                        "session_id": session_of[x] if level == "turn" else x}}
                          for r, x in enumerate(valid, start=1)]
            gold = set(gold_turns if level == "turn" and gold_turns else gold_sessions)
            key = "turn_id" if level == "turn" and gold_turns else "session_id"
            expected_rank = next((c["rank"] for c in candidates if c["metadata"][key] in gold), None)
            record = {"question_id": qid, "item_id": item["item_id"], "status": "ok", "query": question["question"],
                      "expected": question.get("expected", ""), "expected_ids": question.get("expected_ids", []),
                      "gold": {"sessions": sorted(gold_sessions), "turns": sorted(gold_turns)},
                      "expected_rank": expected_rank, "retrieved": expected_rank is not None, "candidates": candidates,
                      "runtime_ms": None, "metrics": metrics, "abstention": bool(question.get("abstention")),
                      "diagnostics": {"source": "rankings file", "missing": qid not in rankings,
                                      "dropped_ids": len(ranked) - len(valid)},
                      "worker": "score", "attempt": 1}
            for field in ("question_type", "category", "abstention_reason", "excluded"):
                if field in question:
                    record[field] = question[field]
            records.append(record)
        outcomes.append({"item_id": item["item_id"], "records": records, "cache": None, "timings": {}, "stats": {}})
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
