"""LoCoMo conversations as a LongMemEval-format file: real conversations in the other benchmark's shape.

Each LoCoMo question (category 5 and questions without resolvable evidence left
out) becomes one LongMemEval question whose haystack is its conversation's
sessions, in order. What changes is the shape, not the words:

- Speakers become roles. The speaker who says most of the question's evidence
  (ties: the conversation's first speaker) is the `user`, the other the
  `assistant`; the turn's text loses its `speaker: ` prefix, so names no longer
  open every turn. LongMemEval's questions ask about what the user said, and the
  official corpus holds user turns only.
- Evidence sessions become answer sessions: their ids contain `answer`
  (`answer_<conversation>_D<n>`; the others `<conversation>_D<n>`), evidence turns
  carry `has_answer`, and `answer_session_ids` lists them, one or several.
- Dates are written as LongMemEval writes them (`2023/05/08 (Mon) 13:56`); the
  question is dated at the last session.

The question type is the LoCoMo category (`multi-hop`, `temporal`, ...), so
misses break down the same way on both files.

The questions are the ones the LoCoMo adapter scores: evidence resolves to the
turns it indexes (a `dia_id` and some text), and an answer session is a session
that holds an evidence turn. LongMemEval's rules read marks inside ids
(`answer`: gold; `_abs`: abstention), so a conversation whose `sample_id` holds
one is refused rather than written with every session gold or every question
abstained; so is a text that is not valid Unicode, and two conversations with
one id (their question ids would clash).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from pathlib import Path

from adapters.benchmarks.streamed import DatasetError
from adapters.files import read_json
from adapters.benchmarks.locomo.reader import CATEGORIES, conversation_id, id_number, normalise_evidence
from adapters.generators.longmemeval_s import DATE_FORMAT, write_array

#: How LoCoMo writes a session's date and time ("1:56 pm on 8 May, 2023").
LOCOMO_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
#: Marks LongMemEval's rules find in ids, and what each would do to a conversation id that held it.
RESERVED_MARKS = {"answer": "every session would count as an evidence session",
                  "_abs": "every question would count as an abstention"}
_SESSION_KEY = re.compile(r"session_([0-9]+)")


def longmemeval_date(locomo_date: str) -> str:
    """A LoCoMo session date in LongMemEval's format; a date that does not parse is kept as it is."""
    try:
        return dt.datetime.strptime(locomo_date.strip(), LOCOMO_DATE_FORMAT).strftime(DATE_FORMAT)
    except ValueError:
        return locomo_date


def _text(value, where: str) -> str:
    """`value` as text; a DatasetError when it holds what UTF-8 cannot write (a lone surrogate)."""
    value = str(value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DatasetError(f"{where} holds text that is not valid Unicode ({exc.reason} at position {exc.start})") \
            from None
    return value


def _content(turn: dict, where: str) -> str:
    text = _text(turn.get("text", ""), f"{where}: field 'text'")
    caption = turn.get("blip_caption")
    if not caption:
        return text
    return f"{text} [shares a photo: {_text(caption, where + ': field ' + repr('blip_caption'))}]"


def _turn_id(turn: dict) -> str | None:
    """The turn's id as the LoCoMo adapter reads it (`D<session>:<turn>`), None without one."""
    ids = normalise_evidence([turn["dia_id"]])[0] if "dia_id" in turn else []
    return ids[0] if ids else None


def _sessions(conversation: dict, where: str) -> list[tuple[int, str, str, list[dict]]]:
    """(number, field, date, turns) of each `session_<n>` field, in number order."""
    talk = conversation.get("conversation")
    if not isinstance(talk, dict):
        raise DatasetError(f"{where}: field 'conversation' is not an object")
    keys: dict[int, str] = {}
    for key in talk:
        match = _SESSION_KEY.fullmatch(key)
        if not match:
            continue
        number = id_number(match.group(1))
        if number is None:
            raise DatasetError(f"{where}: field {key[:40]}...: a session number of {len(match.group(1))} digits "
                               "names no session")
        if number in keys:
            raise DatasetError(f"{where}: fields {keys[number]!r} and {key!r} are both session {number}")
        keys[number] = key
    out = []
    for number in sorted(keys):
        key = keys[number]
        turns = talk[key]
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            raise DatasetError(f"{where}: field {key!r} is not a list of turns")
        date = _text(talk.get(f"{key}_date_time", ""), f"{where}: field '{key}_date_time'")
        out.append((number, key, date, turns))
    return out


def _conversation_id(conversation: dict, index: int) -> str:
    cid = _text(conversation_id(conversation, index), f"conversation {index}: field 'sample_id'")
    for mark, effect in RESERVED_MARKS.items():
        if mark in cid:
            raise DatasetError(f"conversation {cid}: field 'sample_id' contains {mark!r}, which LongMemEval's rules "
                               f"read in ids ({effect}); give the conversation another sample_id")
    return cid


def convert_conversation(conversation: dict, index: int) -> list[dict]:
    """The LongMemEval questions of one LoCoMo conversation."""
    cid = _conversation_id(conversation, index)
    where = f"conversation {cid}"
    sessions = []  # (session id without its mark, date, [(turn id if indexed, speaker, content)])
    speaker_of, session_holding = {}, {}  # of each turn the LoCoMo adapter indexes
    for number, key, date, turns in _sessions(conversation, where):
        name = f"{cid}_D{number}"
        rows = []
        for position, turn in enumerate(turns):
            ident, speaker = _turn_id(turn), str(turn.get("speaker", ""))
            if not str(turn.get("text", "")).strip():
                ident = None  # not indexed by the LoCoMo adapter: never evidence
            rows.append((ident, speaker, _content(turn, f"{where}: {key} turn {position}")))
            if ident:
                speaker_of[ident] = speaker
                session_holding.setdefault(ident, set()).add(name)
        sessions.append((name, longmemeval_date(date), rows))
    first_speaker = str(conversation["conversation"].get("speaker_a", ""))
    qa = conversation.get("qa")
    if not isinstance(qa, list):
        raise DatasetError(f"{where}: field 'qa' is not a list")
    questions = []
    for q_index, entry in enumerate(qa):
        if not isinstance(entry, dict) or not isinstance(entry.get("question"), str) or not entry["question"].strip():
            continue
        category = entry.get("category")
        if isinstance(category, (list, dict)):
            raise DatasetError(f"{where}: qa {q_index}: field 'category' is {type(category).__name__}, not a number")
        if category == 5 or not isinstance(entry.get("evidence"), (list, str)):
            continue
        evidence = [i for i in normalise_evidence(entry["evidence"])[0] if i in speaker_of]
        if not evidence:
            continue
        said = Counter(speaker_of[i] for i in evidence)
        user = max(said, key=lambda s: (said[s], s == first_speaker))
        gold = set().union(*(session_holding[i] for i in evidence))
        ids = [f"answer_{name}" if name in gold else name for name, _, _ in sessions]
        haystack = []
        for _, _, rows in sessions:
            session = []
            for ident, speaker, content in rows:
                turn = {"role": "user" if speaker == user else "assistant", "content": content}
                if ident in evidence:
                    turn["has_answer"] = True
                session.append(turn)
            haystack.append(session)
        dates = [date for _, date, _ in sessions]
        questions.append({
            "question_id": f"{cid}_q{q_index}",
            "question_type": CATEGORIES.get(category, f"category {category}"),
            "question": _text(entry["question"], f"{where}: qa {q_index}: field 'question'"),
            "answer": _text(entry.get("answer", ""), f"{where}: qa {q_index}: field 'answer'"),
            "question_date": dates[-1] if dates else "",
            "haystack_session_ids": ids,
            "haystack_dates": dates,
            "haystack_sessions": haystack,
            "answer_session_ids": [i for i in ids if i.startswith("answer_")],
        })
    return questions


def convert(source: str | Path) -> list[dict]:
    """Every convertible question of a LoCoMo file, conversation by conversation."""
    data = read_json(source, "LoCoMo file (an array of conversations)", DatasetError, top=list)
    questions, seen = [], {}
    for index, conversation in enumerate(data):
        if not isinstance(conversation, dict):
            raise DatasetError(f"{source}: conversation {index} is {type(conversation).__name__}, not an object")
        try:
            cid = _conversation_id(conversation, index)
            if cid in seen:
                raise DatasetError(f"conversations {seen[cid]} and {index} are both {cid!r} (field 'sample_id'): "
                                   "their question ids would clash")
            seen[cid] = index
            questions.extend(convert_conversation(conversation, index))
        except DatasetError as exc:
            raise DatasetError(f"{source}: {exc}") from None
    return questions


def write(source: str | Path, target: str | Path) -> int:
    """Convert `source` into `target` (a JSON array); returns the number of questions. Nothing is written when
    the source cannot be converted."""
    questions = convert(source)
    if not questions:
        raise DatasetError(f"{source}: no question to convert (no conversation with a question that has "
                           f"evidence); {target} is not written")
    try:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        return write_array(target, questions)
    except OSError as exc:
        raise DatasetError(f"{target}: cannot write the LongMemEval file: {exc.strerror or exc}") from exc
