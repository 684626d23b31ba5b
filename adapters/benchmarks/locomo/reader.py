"""LoCoMo: one item per conversation; all of its questions query one stored state.

Turn id = `dia_id` (`D<session>:<turn>`), session id = `D<session>`. Evidence
ids in the official file need normalising (`'D8:6; D9:17'`, `'D:11:26'`,
space-joined lists, `D30:05`, a bare `'D'`); ids that match no turn are
dropped and counted, and a question left with no evidence is excluded with
its reason. Category 5 (adversarial) is treated as abstention.
"""

from __future__ import annotations

import re

from adapters.contracts import Item, Question, Turn
from adapters.benchmarks.streamed import BadField, StreamedDataset, capped, check_size, check_text, reading

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


#: Most digits a session or turn number may have once its leading zeros are gone (LoCoMo's are below 100).
#: Python refuses to read an integer of more than 4,300 digits; far fewer already name no session.
MAX_NUMBER_DIGITS = 9


def id_number(digits: str) -> int | None:
    """The number written by `digits` (leading zeros allowed, `D30:05`), None where it has too many digits."""
    significant = digits.lstrip("0") or "0"
    return int(significant) if len(significant) <= MAX_NUMBER_DIGITS and significant.isdigit() else None


def normalise_evidence(entries) -> tuple[list[str], list[str]]:
    """(normalised ids in order, raw fragments that hold no id)."""
    if isinstance(entries, str):
        entries = [entries]
    ids, unparseable = [], []
    for entry in entries or []:
        found = _EVIDENCE.findall(str(entry))
        if not found:
            unparseable.append(str(entry))
        for session, turn in found:
            if id_number(session) is None or id_number(turn) is None:
                unparseable.append(str(entry))
                continue
            ident = f"D{id_number(session)}:{id_number(turn)}"
            if ident not in ids:
                ids.append(ident)
    return ids, unparseable


def session_of(turn_id: str) -> str:
    return turn_id.split(":", 1)[0]


def render(turn: dict) -> str:
    text = f"{turn.get('speaker', '')}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


def conversation_id(raw: dict, index: int) -> str:
    sid = raw.get("sample_id") if isinstance(raw, dict) else None
    return str(sid) if sid not in (None, "") else f"conv_{index}"


class LoCoMo(StreamedDataset):
    """Turns a LoCoMo file into items, one per conversation."""

    id_field = "sample_id"

    def item_id(self, raw, index: int) -> str:
        return conversation_id(raw, index)

    def build(self, raw, cid: str) -> Item:
        return self._item(raw, cid)

    def _item(self, raw, cid: str) -> Item:
        if not isinstance(raw, dict):
            raise BadField(f"conversation {cid}: element is not an object", "conversation")
        conversation, qa = raw.get("conversation"), raw.get("qa")
        if not isinstance(conversation, dict):
            raise BadField(f"conversation {cid}: missing or malformed field 'conversation'", "conversation")
        if not isinstance(qa, list):
            raise BadField(f"conversation {cid}: missing or malformed field 'qa'", "qa")
        sessions = [value for key, value in conversation.items() if _SESSION_KEY.match(key)]
        check_size(f"conversation {cid}", len(sessions), sum(len(s) for s in sessions if isinstance(s, list)),
                   "conversation")
        with reading(f"conversation {cid}", "conversation"):
            turns, stats = self._turns(cid, conversation)
        known = {t["turn_id"] for t in turns}
        with reading(f"conversation {cid}", "qa"):
            questions = [self._question(cid, i, q, known) for i, q in enumerate(qa)]
        stats["dropped_evidence_ids"] = sum(len(q["details"]["dropped_evidence"]) for q in questions)
        stats["excluded_questions"] = sum(1 for q in questions if q.get("excluded"))
        return {"item_id": cid, "benchmark": self.benchmark.name, "turns": turns, "questions": questions, "stats": stats}

    def _turns(self, cid: str, conversation: dict) -> tuple[list[Turn], dict]:
        numbers = []
        for key in conversation:
            if match := _SESSION_KEY.match(key):
                if id_number(match.group(1)) is None:
                    raise BadField(f"conversation {cid}: field {key[:40]}...: a session number of "
                                   f"{len(match.group(1))} digits", "conversation")
                numbers.append(id_number(match.group(1)))
        numbers.sort()
        date_keys = [k for k in conversation if k.endswith("_date_time")]
        orphans = sum(1 for k in date_keys if f"{k[: -len('_date_time')]}" not in conversation)
        turns: list[Turn] = []
        stats = {"sessions": 0, "orphan_session_dates": orphans, "empty_turns_skipped": 0}
        for number in numbers:
            session = conversation[f"session_{number}"]
            if not isinstance(session, list):
                raise BadField(f"conversation {cid}: session_{number} is not a list of turns", f"session_{number}")
            stats["sessions"] += 1
            date = str(conversation.get(f"session_{number}_date_time", ""))
            for position, turn in enumerate(session):
                if not isinstance(turn, dict) or "dia_id" not in turn:
                    raise BadField(f"conversation {cid}: session_{number} turn {position} has no dia_id", "dia_id")
                turn_id, _ = normalise_evidence([turn["dia_id"]])
                where = f"conversation {cid}: session_{number} turn {position}"
                for field in ("text", "speaker", "blip_caption"):
                    if isinstance(turn.get(field), str):
                        check_text(turn[field], where, f"session_{number}")
                if not turn_id or not str(turn.get("text", "")).strip():
                    stats["empty_turns_skipped"] += 1
                    continue
                props = {"speaker": str(turn.get("speaker", "")), "date": date, "turn_index": position,
                         "session_index": number}
                if turn.get("blip_caption"):
                    props["caption"] = str(turn["blip_caption"])
                turns.append({"session_id": session_of(turn_id[0]), "turn_id": turn_id[0],
                              "text": capped(render(turn), stats),
                              "props": props})
        return turns, stats

    def _question(self, cid: str, index: int, qa: dict, known: set[str]) -> Question:
        problem = _question_problem(qa)
        if problem:  # one malformed question is excluded with its reason; the conversation's others still run
            return {"question_id": f"{cid}:q{index}", "question": "", "question_type": "malformed", "category": None,
                    "expected": "", "expected_ids": [], "gold_turns": [], "gold_sessions": [], "abstention": False,
                    "excluded": problem, "details": {"raw_evidence": None, "dropped_evidence": [], "unparseable": []}}
        category = qa.get("category")
        answer = qa.get("answer", qa.get("adversarial_answer", ""))
        ids, unparseable = normalise_evidence(qa.get("evidence"))
        resolved = [i for i in ids if i in known]
        dropped = [i for i in ids if i not in known]
        gold_sessions = list(dict.fromkeys(session_of(i) for i in resolved))
        question: Question = {
            "question_id": f"{cid}:q{index}",
            "question": str(qa.get("question", "")),
            "question_type": CATEGORIES.get(category, f"category {category}"),
            "category": category,
            "expected": str(answer),
            "expected_ids": gold_sessions,
            "gold_turns": resolved,
            "gold_sessions": gold_sessions,
            "abstention": category == 5,
            "details": {"raw_evidence": qa.get("evidence"), "dropped_evidence": dropped, "unparseable": unparseable},
        }
        if category == 5:
            question["abstention_reason"] = "category 5 (adversarial)"
        elif not resolved:
            question["excluded"] = "no resolvable evidence" if ids or unparseable else "no evidence listed"
        if not question["question"].strip():
            question["excluded"] = "empty question"
        return question



def _question_problem(qa) -> str | None:
    """Why a `qa` entry cannot be asked at all, or None."""
    if not isinstance(qa, dict):
        return f"qa entry is {type(qa).__name__}, not an object"
    question = qa.get("question", "")
    if not isinstance(question, str):
        return f"field 'question' is {type(question).__name__}, not a string"
    try:
        question.encode("utf-8")
    except UnicodeEncodeError:
        return "field 'question' holds text that is not valid Unicode"
    if not isinstance(qa.get("evidence", []), (list, str)):
        return f"field 'evidence' is {type(qa.get('evidence')).__name__}, not a list"
    return None
