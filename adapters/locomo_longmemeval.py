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
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

from adapters.dataset import DatasetError
from adapters.files import read_json
from adapters.locomo import CATEGORIES, conversation_id, normalise_evidence, session_of
from adapters.longmemeval_synth import DATE_FORMAT, write_array

#: How LoCoMo writes a session's date and time ("1:56 pm on 8 May, 2023").
LOCOMO_DATE_FORMAT = "%I:%M %p on %d %B, %Y"


def longmemeval_date(locomo_date: str) -> str:
    """A LoCoMo session date in LongMemEval's format; a date that does not parse is kept as it is."""
    try:
        return dt.datetime.strptime(locomo_date.strip(), LOCOMO_DATE_FORMAT).strftime(DATE_FORMAT)
    except ValueError:
        return locomo_date


def _content(turn: dict) -> str:
    text = str(turn.get("text", ""))
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def _sessions(conversation: dict, where: str) -> list[tuple[int, str, list[dict]]]:
    talk = conversation.get("conversation")
    if not isinstance(talk, dict):
        raise DatasetError(f"{where}: field 'conversation' is not an object")
    numbers = sorted(int(key.split("_")[1]) for key in talk
                     if key.startswith("session_") and key.count("_") == 1 and key.split("_")[1].isdigit())
    out = []
    for n in numbers:
        turns = talk[f"session_{n}"]
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            raise DatasetError(f"{where}: field 'session_{n}' is not a list of turns")
        out.append((n, str(talk.get(f"session_{n}_date_time", "")), turns))
    return out


def convert_conversation(conversation: dict, index: int) -> list[dict]:
    """The LongMemEval questions of one LoCoMo conversation."""
    cid = conversation_id(conversation, index)
    where = f"conversation {cid}"
    sessions = _sessions(conversation, where)
    first_speaker = str((conversation.get("conversation") or {}).get("speaker_a", ""))
    speaker_of = {}
    for _, _, turns in sessions:
        for turn in turns:
            for ident in normalise_evidence([turn.get("dia_id", "")])[0][:1]:
                speaker_of[ident] = str(turn.get("speaker", ""))
    qa = conversation.get("qa")
    if not isinstance(qa, list):
        raise DatasetError(f"{where}: field 'qa' is not a list")
    questions = []
    for q_index, entry in enumerate(qa):
        if not isinstance(entry, dict) or entry.get("category") == 5 or not isinstance(entry.get("question"), str):
            continue
        evidence = [i for i in normalise_evidence(entry.get("evidence"))[0] if i in speaker_of]
        if not evidence or not entry["question"].strip():
            continue
        said = Counter(speaker_of[i] for i in evidence)
        user = max(said, key=lambda s: (said[s], s == first_speaker))
        gold = {session_of(i) for i in evidence}
        ids, dates, haystack = [], [], []
        for n, date, turns in sessions:
            name = f"D{n}"
            ids.append(f"answer_{cid}_{name}" if name in gold else f"{cid}_{name}")
            dates.append(longmemeval_date(date))
            session = []
            for turn in turns:
                ident = normalise_evidence([turn.get("dia_id", "")])[0][:1]
                entry_turn = {"role": "user" if str(turn.get("speaker", "")) == user else "assistant",
                              "content": _content(turn)}
                if ident and ident[0] in evidence:
                    entry_turn["has_answer"] = True
                session.append(entry_turn)
            haystack.append(session)
        questions.append({
            "question_id": f"{cid}_q{q_index}",
            "question_type": CATEGORIES.get(entry.get("category"), f"category {entry.get('category')}"),
            "question": entry["question"],
            "answer": str(entry.get("answer", "")),
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
    questions = []
    for index, conversation in enumerate(data):
        if not isinstance(conversation, dict):
            raise DatasetError(f"{source}: conversation {index} is {type(conversation).__name__}, not an object")
        try:
            questions.extend(convert_conversation(conversation, index))
        except DatasetError as exc:
            raise DatasetError(f"{source}: {exc}") from None
    return questions


def write(source: str | Path, target: str | Path) -> int:
    """Convert `source` into `target` (a JSON array, written as it goes); returns the number of questions."""
    return write_array(target, convert(source))
