"""A longer BEAM chat joined from shorter ones: the stand-in for a size the development data does not hold.

BEAM's 1M chats (about 1,800 messages, 4 MB) are kept out of the development data, so the farm's 1M figures are made
on two 500K development chats joined into one chat of BEAM's single-file layout, `chats/1M/<n>/chat.json` with its
`probing_questions/probing_questions.json`: nothing BEAM does not have. The chats follow each other in the order
given, as BEAM's own `combine_10m_chats` joins a 10M chat's parts: each chat's message ids are shifted to follow the
last id of the chat before, its batch numbers to follow the last batch number before, and its questions' gold
(`source_chat_ids`, however nested) by the same id shift, so every question still names its own message. Each
ability's questions are those of every chat, in chat order. Message contents, roles and time anchors are copied as
they are.

The result is a chat of the joined length, not a 1M chat: its second half is another user's chat, and its questions
ask about either half.
"""

from __future__ import annotations

import json
from pathlib import Path

from adapters.benchmarks.beam.layout import CHAT_FILE, PROBING_FILE, find_chats
from adapters.errors import DatasetError
from adapters.files import read_json
from adapters.jsonstream import iter_array


def join_chats(chats: list[str | Path], root: str | Path, *, size: str = "1M", number: int = 1) -> Path:
    """Write the chats at `chats` (each a BEAM chat folder of one `chat.json`) joined as `root/chats/SIZE/NUMBER/`;
    returns that folder. A chat given twice, a chat kept in `plan-<k>/` parts, or one missing a file is refused."""
    if len(chats) < 2:
        raise DatasetError(f"joining BEAM chats: {len(chats)} chat given; a joined chat needs two or more")
    folders = []
    for path in chats:
        found = find_chats(path)
        if len(found) != 1:
            raise DatasetError(f"{path}: holds {len(found)} BEAM chats; give one chat folder (chats/500K/3)")
        chat = found[0]
        if chat.parts():
            raise DatasetError(f"{chat.folder}: chat {chat.chat_id} is kept in plan-<k>/ parts; join single-file chats")
        for file in (chat.folder / CHAT_FILE, chat.probing_file):
            if not file.is_file():
                raise DatasetError(f"{file}: chat {chat.chat_id}: missing; a joined chat needs each chat's file")
        if chat.folder.resolve() in (f.folder.resolve() for f in folders):
            raise DatasetError(f"{chat.folder}: chat {chat.chat_id} is given twice")
        folders.append(chat)
    target = Path(root) / "chats" / size / str(number)
    target.mkdir(parents=True, exist_ok=True)
    batches, probing = [], {}
    id_offset = batch_offset = 0
    for chat in folders:
        file = chat.folder / CHAT_FILE
        last_id = last_batch = None
        for position, batch in enumerate(iter_array(file)):
            where = f"{file}: chat {chat.chat_id}: batch at position {position}"
            if not isinstance(batch, dict) or not _is_int(batch.get("batch_number")):
                raise DatasetError(f"{where}: not an object with an integer 'batch_number'")
            turns = batch.get("turns")
            if not isinstance(turns, list):
                raise DatasetError(f"{where}: field 'turns' is not a list")
            shifted = []
            for t, turn in enumerate(turns):
                if not isinstance(turn, list):
                    raise DatasetError(f"{where}, turn {t}: not a list of messages")
                for m, message in enumerate(turn):
                    if not isinstance(message, dict) or not _is_int(message.get("id")):
                        raise DatasetError(f"{where}, turn {t}, message {m}: not an object with an integer 'id'")
                    last_id = message["id"] + id_offset
                shifted.append([{**message, "id": message["id"] + id_offset} for message in turn])
            last_batch = batch["batch_number"] + batch_offset
            batches.append({**batch, "batch_number": last_batch, "turns": shifted})
        if last_id is None:
            raise DatasetError(f"{file}: chat {chat.chat_id}: holds no message")
        questions = read_json(chat.probing_file, "BEAM probing questions file", DatasetError, top=dict)
        for ability, entries in questions.items():
            if not isinstance(entries, list):
                raise DatasetError(f"{chat.probing_file}: ability {ability!r} is not a list of questions")
            probing.setdefault(ability, []).extend(_shift_question(q, id_offset) for q in entries)
        id_offset, batch_offset = last_id + 1, last_batch
    (target / CHAT_FILE).write_text(json.dumps(batches, ensure_ascii=False), encoding="utf-8")
    (target / PROBING_FILE).parent.mkdir(parents=True, exist_ok=True)
    (target / PROBING_FILE).write_text(json.dumps(probing, ensure_ascii=False, indent=1), encoding="utf-8")
    return target


def _shift_question(question, offset: int):
    if not isinstance(question, dict) or "source_chat_ids" not in question:
        return question
    return {**question, "source_chat_ids": _shift_ids(question["source_chat_ids"], offset)}


def _shift_ids(value, offset: int):
    """`value` (an id, a list or a dict of them, nested) with every integer id moved by `offset`; anything else as
    it is (the reader names what is not an id)."""
    if isinstance(value, dict):
        return {key: _shift_ids(entry, offset) for key, entry in value.items()}
    if isinstance(value, list):
        return [_shift_ids(entry, offset) for entry in value]
    return value + offset if _is_int(value) else value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
