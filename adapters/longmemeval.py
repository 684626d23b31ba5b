"""LongMemEval-S: one item per question, one doc per turn.

Reads `longmemeval_s_cleaned.json` (or a generated file of the same shape)
as a stream. Native session ids stay with the runner for scoring; the
system only ever sees rendered turns.
"""

from __future__ import annotations

import json
from pathlib import Path

from adapters.contracts import Item, Question, Turn
from adapters.dataset import BadField, StreamedDataset, capped, check_list, check_text, reading
from adapters.errors import DatasetError
from adapters.jsonstream import iter_array
from adapters.registry import BENCHMARKS

REQUIRED_FIELDS = ("question", "haystack_session_ids", "haystack_sessions", "answer_session_ids")


def question_id(raw: dict, index: int) -> str:
    qid = raw.get("question_id") if isinstance(raw, dict) else None
    return str(qid) if qid not in (None, "") else f"q_{index}"


def scan(path: str | Path) -> list[str]:
    """Read the file once for its question ids; refuse duplicates with both positions."""
    return LongMemEval(path).scan()


def first_answer_turn(raw: dict) -> str:
    """Content of the first turn of the first answer session, in haystack order."""
    answers = set(raw.get("answer_session_ids") or [])
    for sid, session in zip(raw.get("haystack_session_ids") or [], raw.get("haystack_sessions") or []):
        if sid in answers and session:
            return str(session[0].get("content", ""))
    return ""


def extract_questions(dataset: str | Path, output: str | Path) -> int:
    """Write the companion file (question_id, query, expected, expected_ids)."""
    entries = []
    for index, raw in enumerate(iter_array(dataset)):
        if not isinstance(raw, dict):
            raise DatasetError(f"{dataset}: element {index} is not an object")
        entries.append({
            "question_id": question_id(raw, index),
            "query": raw.get("question", ""),
            "expected": first_answer_turn(raw),
            "expected_ids": list(raw.get("answer_session_ids") or []),
        })
    Path(output).write_text(json.dumps(entries, ensure_ascii=False, indent=1), encoding="utf-8")
    return len(entries)


def load_companion(path: str | Path | None) -> dict[str, dict] | None:
    if path is None:
        return None
    try:
        entries = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: cannot read the questions file ({exc})") from exc
    if not isinstance(entries, list):
        raise DatasetError(f"{path}: the questions file must be a JSON array")
    return {str(e.get("question_id")): e for e in entries if isinstance(e, dict)}


def abstention_reason(raw: dict, qid: str, expected: str) -> str | None:
    """Which of the four triggers marks this question as an abstention, if any."""
    if raw.get("_abs"):
        return "_abs field"
    if qid.endswith("_abs"):
        return "question_id ends with _abs"
    if "don't know" in expected.lower():
        return "expected says don't know"
    if any("_abs" in str(s) for s in raw.get("answer_session_ids") or []):
        return "answer session id contains _abs"
    return None


class LongMemEval(StreamedDataset):
    """Turns a LongMemEval-S file into items, one per question."""

    benchmark = BENCHMARKS["longmemeval"]
    id_field = "question_id"

    def __init__(self, path: str | Path, companion: str | Path | None = None, profile: str = "memoria"):
        super().__init__(path)
        self.profile = profile
        self.companion = load_companion(companion)

    def item_id(self, raw, index: int) -> str:
        return question_id(raw, index)

    def build(self, raw, qid: str) -> Item:
        return self._item(raw, qid)

    def _item(self, raw: dict, qid: str) -> Item:
        if not isinstance(raw, dict):
            raise BadField(f"question {qid}: element is {type(raw).__name__}, not an object", "question")
        for field in REQUIRED_FIELDS:
            if field not in raw:
                raise BadField(f"question {qid}: missing field {field!r}", field)
        where = f"question {qid}"
        check_text(raw["question"], where, "question")
        check_text(raw.get("question_date"), where, "question_date", optional=True)
        ids = check_list(raw["haystack_session_ids"], where, "haystack_session_ids", str)
        sessions = check_list(raw["haystack_sessions"], where, "haystack_sessions", list)
        if len(ids) != len(sessions):
            raise BadField(f"{where}: haystack_session_ids and haystack_sessions differ in length "
                           f"({len(ids)} and {len(sessions)})", "haystack_sessions")
        for sid in ids:
            check_text(sid, where, "haystack_session_ids")
        dates = raw.get("haystack_dates")
        if dates is None:
            dates = [""] * len(ids)
        elif not isinstance(dates, list) or len(dates) != len(ids):
            got = f"{len(dates)} dates" if isinstance(dates, list) else type(dates).__name__
            raise BadField(f"{where}: haystack_dates has {got} for {len(ids)} sessions", "haystack_dates")
        answer_ids = [check_text(s, where, "answer_session_ids")
                      for s in check_list(raw["answer_session_ids"], where, "answer_session_ids", str)]
        with reading(where, "haystack_sessions"):
            turns, stats = self._turns(qid, ids, sessions, dates)
        with reading(where, "question"):
            question = self._question(raw, qid, answer_ids, turns)
        return {"item_id": qid, "benchmark": "longmemeval", "turns": turns, "questions": [question], "stats": stats}

    def _turns(self, qid, ids, sessions, dates) -> tuple[list[Turn], dict]:
        turns: list[Turn] = []
        seen, stats = set(), {"empty_turns_skipped": 0, "duplicate_sessions_skipped": 0, "assistant_turns_skipped": 0}
        for s_index, (sid, session, date) in enumerate(zip(ids, sessions, dates)):
            sid = str(sid)
            if sid in seen:
                stats["duplicate_sessions_skipped"] += 1
                continue
            seen.add(sid)
            if not isinstance(session, list):
                raise BadField(f"question {qid}: session {sid} is not a list of turns", "haystack_sessions")
            for t_index, turn in enumerate(session):
                if not isinstance(turn, dict):
                    raise BadField(f"question {qid}: session {sid} turn {t_index} is not an object", "haystack_sessions")
                content, role = turn.get("content"), turn.get("role", "")
                if content is not None:
                    check_text(content, f"question {qid}: session {sid} turn {t_index}", "haystack_sessions")
                if self.profile == "longmemeval" and role != "user":
                    stats["assistant_turns_skipped"] += 1
                    continue
                if not isinstance(content, str) or not content.strip():
                    stats["empty_turns_skipped"] += 1
                    continue
                turns.append({
                    "session_id": sid,
                    "turn_id": f"{sid}#{t_index}",
                    "text": capped(content, stats),
                    "props": {"role": role, "date": str(date), "turn_index": t_index, "session_index": s_index},
                    "has_answer": bool(turn.get("has_answer")),
                    "first_of_session": t_index == 0,
                })
        return turns, stats

    def _question(self, raw: dict, qid: str, answer_ids: list[str], turns: list[dict]) -> Question:
        answer_set = set(answer_ids)
        companion = (self.companion or {}).get(qid)
        expected = str(companion.get("expected", "")) if companion else ""
        in_answer = [t for t in turns if t["session_id"] in answer_set]
        if self.profile == "longmemeval":
            gold_turns = [t["turn_id"] for t in in_answer if t["has_answer"]]
        elif expected.strip():
            gold_turns = [t["turn_id"] for t in in_answer if expected in t["text"]]
        else:
            gold_turns = [t["turn_id"] for t in in_answer if t["first_of_session"]]
        if not companion:
            expected = str(raw.get("answer", ""))
        reason = abstention_reason(raw, qid, expected)
        question: Question = {
            "question_id": qid,
            "question": str(raw["question"]),
            "question_date": str(raw.get("question_date", "")),
            "question_type": str(raw.get("question_type", "")),
            "expected": expected,
            "expected_ids": answer_ids,
            "gold_sessions": answer_ids,
            "gold_turns": gold_turns,
            "abstention": reason is not None,
        }
        if reason:
            question["abstention_reason"] = reason
        elif not turns:
            question["excluded"] = "empty haystack (no turn with text)"
        else:
            haystack = {t["session_id"] for t in turns}
            missing = [s for s in answer_ids if s not in haystack]
            if not answer_ids:
                question["excluded"] = "no answer session listed"
            elif missing:
                question["excluded"] = f"gold session(s) not in the haystack: {', '.join(missing[:5])}"
        return question

