"""One results file as the board reads it (`load_run`): who ran what, the summary, the view the paired test reads,
and for each question what the dataset says of it and what the run returned, gold marked. Grouping runs into
leaderboards is `coordinator.board.data`'s."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from coordinator.board.headline import headline_of, value_of
from coordinator.results import pairing
from coordinator.results.pairing import question_set
from coordinator.results.run_files import ResultsFile

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
