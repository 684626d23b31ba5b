"""LongMemEval-S: one item per question, one doc per turn.

Reads `longmemeval_s_cleaned.json` (or a generated file of the same shape)
as a stream. Native session ids stay with the runner for scoring; the
system only ever sees rendered turns.
"""

from __future__ import annotations

from pathlib import Path

from adapters.contracts import Item, Question, Turn
from adapters.benchmarks.streamed import BadField, StreamedDataset, capped, check_list, check_size, check_text, reading
from adapters.defaults import DEFAULT_SCORING_PROFILE, EXPECTED_TEXT_PROFILE, OFFICIAL_PROFILE as OFFICIAL
from adapters.errors import DatasetError
from adapters.files import read_json, write_json
from adapters.jsonstream import iter_array
from adapters.benchmarks.longmemeval.official import is_gold
from adapters.benchmarks.longmemeval.official import question_gold as official_gold
from adapters.benchmarks.longmemeval.official import session_id as official_session_id
from adapters.benchmarks.longmemeval.official import turn_id as official_turn_id

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
    write_json(output, entries)
    return len(entries)


def load_companion(path: str | Path | None) -> dict[str, dict] | None:
    if path is None:
        return None
    entries = read_json(path, "questions file", DatasetError, top=list)
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


def damaged(ids: list[str], sessions: list[list], answer_ids: list[str]) -> tuple[str, str] | None:
    """(why, field) where a question cannot be evaluated under any profile, else None.

    An empty haystack (no turn with text) or answer_session_ids that name no session of the haystack
    leave nothing the gold can be found in: the question is failed with the reason, whatever the profile
    (the official rules would score it, recall_all 1 without gold, as if it had been answered)."""
    if not any(isinstance(t, dict) and isinstance(t.get("content"), str) and t["content"].strip()
               for session in sessions for t in session):
        return "empty haystack (no turn with text)", "haystack_sessions"
    if not set(answer_ids) & set(ids):
        named = ", ".join(answer_ids[:5]) + (" ..." if len(answer_ids) > 5 else "")
        return (f"answer_session_ids name no session of the haystack ({named or 'the list is empty'})",
                "answer_session_ids")
    return None


#: The field `memfarm synth longmemeval` writes in every question of a generated file and the published file never
#: has: its results are titled as generated (`Benchmark.description`), not as LongMemEval-S.
GENERATED_FIELD = "memfarm_generated"


class LongMemEval(StreamedDataset):
    """Turns a LongMemEval-S file into items, one per question."""

    id_field = "question_id"

    def __init__(self, path: str | Path, companion: str | Path | None = None, profile: str = DEFAULT_SCORING_PROFILE,
                 *, benchmark=None):
        super().__init__(path, profile, benchmark=benchmark)
        self.companion = load_companion(companion)

    def use_companion(self, path: str | Path | None) -> None:
        """Read expected texts from the companion questions file (`memfarm extract-questions`)."""
        self.companion = load_companion(path)

    @classmethod
    def without_companion(cls, profile: str) -> str | None:
        """Under the expected-text profile, without the companion file there is no expected text to find."""
        if profile == EXPECTED_TEXT_PROFILE:
            return "no --questions file; turn gold is the first turn of each answer session"
        return None

    def item_id(self, raw, index: int) -> str:
        return question_id(raw, index)

    def generated(self) -> bool:
        """Whether the file was made by memfarm's generator (its first question carries `GENERATED_FIELD`)."""
        first = next(iter(iter_array(self.path)), None)
        return isinstance(first, dict) and GENERATED_FIELD in first

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
        check_size(where, len(sessions), sum(map(len, sessions)), "haystack_sessions")
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
        damage = None if qid.endswith("_abs") else damaged(ids, sessions, answer_ids)  # an abstention under both
        if damage:
            raise BadField(f"{where}: {damage[0]}", damage[1])
        with reading(where, "haystack_sessions"):
            turns, stats = self._turns(qid, ids, sessions, dates)
        with reading(where, "question"):
            question = self._question(raw, qid, answer_ids, turns, list(zip(ids, sessions)))
        occurrences = [{"session_id": str(sid), "official_id": official_session_id(str(sid), session)}
                       for sid, session in zip(ids, sessions)]
        return {"item_id": qid, "benchmark": self.benchmark.name, "turns": turns, "questions": [question], "stats": stats,
                "sessions": occurrences}

    def _turns(self, qid, ids, sessions, dates) -> tuple[list[Turn], dict]:
        """The run's corpus. `expected-text`: every non-empty turn, a repeated session once. `longmemeval-official`:
        the user turns of every session occurrence (an empty one is counted in the corpus but not indexed)."""
        official = self.profile == OFFICIAL
        turns: list[Turn] = []
        seen, stats = set(), {"empty_turns_skipped": 0, "duplicate_sessions_skipped": 0, "assistant_turns_skipped": 0}
        for s_index, (sid, session, date) in enumerate(zip(ids, sessions, dates)):  # checked: str ids, list sessions
            if sid in seen and not official:
                stats["duplicate_sessions_skipped"] += 1
                continue
            seen.add(sid)
            for t_index, turn in enumerate(session):
                if not isinstance(turn, dict):
                    raise BadField(f"question {qid}: session {sid} turn {t_index} is not an object", "haystack_sessions")
                content, role = turn.get("content"), turn.get("role", "")
                if content is not None:
                    check_text(content, f"question {qid}: session {sid} turn {t_index}", "haystack_sessions")
                if official and role != "user":
                    stats["assistant_turns_skipped"] += 1
                    continue
                if not isinstance(content, str) or not content.strip():
                    if not official:
                        stats["empty_turns_skipped"] += 1
                        continue
                    content = ""  # in the official corpus, but no system is given an empty text (`make_docs`)
                    stats["empty_turns_not_indexed"] = stats.get("empty_turns_not_indexed", 0) + 1
                has_answer = bool(turn.get("has_answer"))
                turns.append({
                    "session_id": sid,
                    "turn_id": f"{sid}#{t_index}",
                    "official_id": official_turn_id(sid, t_index, has_answer) if role == "user" else None,
                    "text": capped(content, stats),
                    "props": {"role": role, "date": str(date), "turn_index": t_index, "session_index": s_index},
                    "has_answer": has_answer,
                    "first_of_session": t_index == 0,
                })
        return turns, stats

    def _question(self, raw: dict, qid: str, answer_ids: list[str], turns: list[dict], haystack) -> Question:
        answer_set = set(answer_ids)
        companion = (self.companion or {}).get(qid)
        expected = str(companion.get("expected", "")) if companion else ""
        in_answer = [t for t in turns if t["session_id"] in answer_set]
        if expected.strip():
            gold_turns = [t["turn_id"] for t in in_answer if expected in t["text"]]
        else:
            gold_turns = [t["turn_id"] for t in in_answer if t["first_of_session"]]
        gold_turns = list(dict.fromkeys(gold_turns))
        if not companion:
            expected = str(raw.get("answer", ""))
        reason = abstention_reason(raw, qid, expected)
        question: Question = {
            "question_id": qid,
            "question": str(raw["question"]),
            "question_date": str(raw.get("question_date", "")),
            "question_type": str(raw.get("question_type", "")),
            "expected": expected,
            "answer": str(raw.get("answer", "")),
            "expected_ids": answer_ids,
            "gold_sessions": answer_ids,
            "gold_turns": gold_turns,
            "abstention": reason is not None,
        }
        if reason:
            question["abstention_reason"] = reason
        else:  # an empty haystack or one without an answer session failed earlier (`damaged`)
            haystack_ids = {t["session_id"] for t in turns if t["text"]}
            missing = [s for s in answer_ids if s not in haystack_ids]
            if missing:
                question["excluded"] = f"gold session(s) not in the haystack: {', '.join(missing[:5])}"
        official = official_gold(qid, haystack)
        question["gold_by_profile"] = {
            EXPECTED_TEXT_PROFILE: {"sessions": answer_ids, "turns": gold_turns,
                                    "scored": not question["abstention"] and "excluded" not in question},
            OFFICIAL: official,
        }
        if self.profile == OFFICIAL:  # the chosen profile's rules decide what the run counts as scored
            question.pop("excluded", None)
            question.pop("abstention_reason", None)
            question["abstention"] = not official["scored"]
            if question["abstention"]:
                question["abstention_reason"] = "question_id contains _abs (the official rule)"
            question["gold_turns"] = [t["turn_id"] for t in turns if t["official_id"] and is_gold(t["official_id"])]
        return question
