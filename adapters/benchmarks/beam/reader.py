"""BEAM: one item per chat; every message a doc; the probing questions asked after the whole chat.

Docs. Every message of both roles is a turn: its turn id is its integer `id` as a string (unique in the chat;
a repeated id fails the chat), its text its `content`. Its session id is its batch, `B<batch_number>`
(`P<k>B<n>` in a 10M chat, whose parts each number their batches from 1): the batch is the coarser unit the
chat itself has, one section of the chat's plan, opened by its own time anchor (3 to 10 batches a development
chat, about 90 messages each), so it is the level a coarser metric can be scored at; BEAM's turns (a
question and its replies, two to eight messages) are too close to the messages to say anything more. Props:
`role`, `date` (the time anchor in force: the batch's own, else the latest one a message of the batch carried,
which on BEAM's files is its first message's), `turn_index` (the message's position in its batch) and
`session_index` (the batch's position in the chat). Native ids never reach props.

The marker. About three user messages in four, and a few dozen assistant ones, end with `->-> <batch>,<bullet>`
(`->-> 3,8`; also `2,N/A`, `1,5)`, `2,22, 24`): an artefact of generation naming the plan bullet the message was
written from. It is stripped from every message, for every system alike, before any system sees it: no user
writes it, and it hands a system the batch and position of the message (`stats.markers_stripped` counts them).
A marker is `->->`, a batch number and a comma, then the rest of the message's last line.

Gold. `source_chat_ids` is a list of ids, a list whose entries may themselves be lists (event ordering groups
the messages of one event), or a dict of such lists (`first_statement`/`second_statement`,
`original_info`/`updated_info`, `first_event`/`second_event`): flattened in order, each id once. An entry that
is not an integer is dropped and named (`details.unparseable`); an id that names no message is dropped and
counted (`details.dropped_gold`, `stats.dropped_gold_ids`); a question left with no gold is excluded, naming
why. Gold sessions are the batches of the gold messages. Abstention questions (the `abstention` ability) have
no evidence by design: marked as abstention with that reason, and counted.

Questions: every probing question, asked after the whole chat, as BEAM asks it. Its id is
`<chat>:<ability>:<index>` (the ability's key and the question's position in its list, so unique in the chat;
the chat's id starts it, so unique in a run); its `question_type` the ability, its `category` the chat's size
(the size folder: `100K` holds the 128K chats), so results group by ability, by size and by chat. Its answer text
is kept as `answer` and `expected` from the field the ability uses (`answer`, `ideal_answer`, `ideal_response`,
`ideal_summary`; instruction and preference following have none, their `expected_compliance` is kept).

Which file: `chat.json`. BEAM's own answer generation reads `chat_trunecated.json` where a chat has one (26
chats of its repository; the first batches of the chat, every gold message among them); the farm searches the
whole chat, and warns where the shorter file is beside it.

Reading: the chat file is streamed (`iter_array`), one batch at a time and parsed once; the probing file (tens
of KB) is read whole; one chat is held at a time. Bad input fails its chat alone, naming file, chat, batch,
message and field: a missing or malformed field, a repeated message id or batch number, an unreadable,
truncated or non-JSON file, a chat without its probing file and a probing file without its chat, a 10M chat
missing one of its parts. A malformed question is excluded, naming its field; the chat's other questions run.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

from adapters.benchmarks import declaration_of
from adapters.benchmarks.beam.known import KNOWN_FILES
from adapters.benchmarks.beam.layout import CHAT_FILE, PROBING_FILE, TRUNCATED_FILE, ChatFolder, find_chats
from adapters.benchmarks.contract import Benchmark
from adapters.benchmarks.streamed import BadField, capped, check_list, check_size, check_text
from adapters.contracts import Item, Question, Turn
from adapters.defaults import DEFAULT_SCORING_PROFILE
from adapters.errors import DatasetError
from adapters.files import read_json
from adapters.jsonstream import iter_array
from memoria.checksums import file_sha256

logger = logging.getLogger(__name__)

ABILITIES = ("abstention", "contradiction_resolution", "event_ordering", "information_extraction",
             "instruction_following", "knowledge_update", "multi_session_reasoning", "preference_following",
             "summarization", "temporal_reasoning")
ABSTENTION = "abstention"
#: Where a question keeps its answer text, by ability; the first one present is taken.
ANSWER_FIELDS = ("answer", "ideal_answer", "ideal_response", "ideal_summary", "expected_compliance")
_MARKER = re.compile(r"->->\s*\d+\s*,[^\n]*")


def strip_marker(text: str) -> tuple[str, bool]:
    """`text` without its trailing `->-> b,t` marker (and the space before it), and whether it had one."""
    start = text.rfind("->->")
    if start < 0 or not _MARKER.fullmatch(text, start):
        return text, False
    return text[:start].rstrip(), True


class Beam:
    """Turns BEAM's chat folders into items, one per chat."""

    def __init__(self, path: str | Path, profile: str = DEFAULT_SCORING_PROFILE, *, benchmark: Benchmark | None = None):
        self.path = Path(path)
        self.benchmark = benchmark or declaration_of(Beam)
        self.profile = profile

    def scan(self) -> list[str]:
        """Every chat's id (`<size>/<n>`), from the folders alone: nothing is read."""
        return [chat.chat_id for chat in find_chats(self.path)]

    @classmethod
    def files_of(cls, path: Path) -> list[list[Path]]:
        """Each chat's files that are read, in chat order (its chat file or parts, then its probing file), those
        present: what the dataset's checksums cover (`adapters.files.dataset_checksums`)."""
        return [[file for file in [*(f for _, f in chat.chat_files()), chat.probing_file] if file.is_file()]
                for chat in find_chats(path)]

    def warnings(self) -> list[str]:
        """One line per chat whose files are not BEAM's development files by checksum, or that BEAM reads
        otherwise (a shorter `chat_trunecated.json` beside it; a combined 10M `chat.json` beside its parts)."""
        lines = []
        for chat in find_chats(self.path):
            files = [file for _, file in chat.chat_files()] + [chat.probing_file]
            unknown = [str(file.relative_to(chat.folder)) for file in files
                       if file.is_file() and file_sha256(file) not in KNOWN_FILES]
            if unknown:
                lines.append(f"{chat.folder}: {', '.join(unknown)}: not among BEAM's development files by checksum "
                             "(commit b2a3ee8b); running as given")
            if (chat.folder / TRUNCATED_FILE).is_file():
                lines.append(f"{chat.folder}: holds {TRUNCATED_FILE}, which BEAM's own answer generation reads "
                             f"instead; the farm searches the whole {CHAT_FILE}")
            if chat.parts() and (chat.folder / CHAT_FILE).is_file():
                lines.append(f"{chat.folder}: holds plan-<k>/ parts and a combined {CHAT_FILE}; the parts are read")
        return lines

    def iter_items(self, limit: int | None = None) -> Iterator[Item]:
        for index, chat in enumerate(find_chats(self.path)):
            if limit is not None and index >= limit:
                return
            started = time.perf_counter()
            try:
                item = chat_item(chat, self.benchmark.name)
                item["stats"]["parse_ms"] = round((time.perf_counter() - started) * 1000, 3)
            except BadField as bad:
                item = {"item_id": chat.chat_id, "benchmark": self.benchmark.name, "error": str(bad),
                        "field": bad.field}
            except Exception as exc:  # one unreadable chat never sinks a run: it becomes a recorded failure
                item = {"item_id": chat.chat_id, "benchmark": self.benchmark.name, "field": None,
                        "error": f"{chat.folder}: chat {chat.chat_id}: cannot be read ({type(exc).__name__}: {exc})"}
            yield item


def chat_item(chat: ChatFolder, benchmark: str = "beam") -> Item:
    """The item of one chat: every message a turn, every probing question with its gold."""
    _check_files(chat)
    stats = {"parts": len(chat.parts()), "batches": 0, "messages": 0, "markers_stripped": 0,
             "empty_messages_skipped": 0}
    turns, sessions, empty = _messages(chat, stats)
    if not turns:
        raise BadField(f"{chat.folder}: chat {chat.chat_id}: holds no message with text", "turns")
    try:
        data = read_json(chat.probing_file, "BEAM probing questions file", DatasetError, top=dict)
    except DatasetError as exc:
        raise BadField(f"chat {chat.chat_id}: {exc}", "probing_questions") from None
    questions = _questions(chat, data, sessions, empty)
    stats["questions"] = len(questions)
    stats["abstention_questions"] = sum(1 for q in questions if q["abstention"])
    stats["excluded_questions"] = sum(1 for q in questions if q.get("excluded"))
    stats["dropped_gold_ids"] = sum(len(q["details"]["dropped_gold"]) for q in questions)
    stats["unparseable_gold_entries"] = sum(len(q["details"]["unparseable"]) for q in questions)
    return {"item_id": chat.chat_id, "benchmark": benchmark, "turns": turns, "questions": questions, "stats": stats}


def _check_files(chat: ChatFolder) -> None:
    """Refuse a chat missing a file before reading any: a chat without questions, questions without a chat,
    a 10M chat missing a part (each later part's ids follow the one before)."""
    where = f"{chat.folder}: chat {chat.chat_id}"
    numbers = [k for k, _ in chat.parts()]
    if numbers and numbers != list(range(len(numbers))):
        missing = min(set(range(numbers[-1] + 1)) - set(numbers))
        raise BadField(f"{where}: its parts are plan-{', plan-'.join(map(str, numbers))}; plan-{missing} is missing "
                       "and every later part's message ids follow the part before", "plan")
    for _, file in chat.chat_files():
        if not file.is_file():
            raise BadField(f"{file}: chat {chat.chat_id}: the chat file is missing"
                           + (" (the folder holds its probing questions)" if chat.probing_file.is_file() else ""),
                           "chat")
    if not chat.probing_file.is_file():
        raise BadField(f"{chat.probing_file}: chat {chat.chat_id}: the probing questions file is missing; "
                       "the chat has nothing to ask", "probing_questions")


def _messages(chat: ChatFolder, stats: dict) -> tuple[list[Turn], dict[int, str], set[int]]:
    """The chat's turns, each message id's session, and the ids of messages with no text (no doc)."""
    turns: list[Turn] = []
    sessions: dict[int, str] = {}
    place: dict[int, str] = {}
    empty: set[int] = set()
    offset = 0
    for plan, file in chat.chat_files():
        last = None
        numbers: set[int] = set()
        try:
            for position, batch in enumerate(iter_array(file)):
                ended = _batch(chat, file, plan, position, batch, offset, numbers, turns, sessions, place, empty,
                               stats)
                last = last if ended is None else ended
        except DatasetError as exc:
            raise BadField(f"chat {chat.chat_id}: {exc}", "chat") from None
        if last is None:
            raise BadField(f"{file}: chat {chat.chat_id}: holds no message", "chat")
        offset = last + 1  # BEAM's combine_10m_chats: the next part's ids follow this part's last id
    return turns, sessions, empty


def _batch(chat: ChatFolder, file: Path, plan: int | None, position: int, batch, offset: int, numbers: set[int],
           turns: list[Turn], sessions: dict[int, str], place: dict[int, str], empty: set[int],
           stats: dict) -> int | None:
    """Add one batch's messages; the (shifted) id of its last message, None where it holds none."""
    where = f"{file}: chat {chat.chat_id}: batch at position {position}"
    if not isinstance(batch, dict):
        raise BadField(f"{where}: is a {type(batch).__name__}, not an object", "batch")
    number = batch.get("batch_number")
    if not _is_integer(number):
        raise BadField(f"{where}: field 'batch_number' is {_kind(number)}, not an integer", "batch_number")
    where = f"{file}: chat {chat.chat_id}: batch {number}"
    if number in numbers:
        raise BadField(f"{where}: batch_number {number} is used by two batches", "batch_number")
    numbers.add(number)
    session_id = f"B{number}" if plan is None else f"P{plan}B{number}"
    session_index = stats["batches"]
    stats["batches"] += 1
    date = check_text(batch.get("time_anchor"), where, "time_anchor", optional=True)
    batch_turns = check_list(batch.get("turns"), where, "turns", list)
    check_size(f"chat {chat.chat_id}", stats["batches"], stats["messages"] + sum(map(len, batch_turns)), "turns")
    last = None
    index = 0
    for t, turn in enumerate(batch_turns):
        for m, message in enumerate(turn):
            mwhere = f"{where}, turn {t}, message {m}"
            if not isinstance(message, dict):
                raise BadField(f"{mwhere}: is a {type(message).__name__}, not an object", "message")
            native = message.get("id")
            if not _is_integer(native):
                raise BadField(f"{mwhere}: field 'id' is {_kind(native)}, not an integer", "id")
            ident = native + offset
            if ident in place:
                raise BadField(f"{mwhere}: message id {ident} is also the id of {place[ident]}", "id")
            place[ident] = f"batch {number}, turn {t}, message {m}" + (f" of plan-{plan}" if plan is not None else "")
            role = check_text(message.get("role"), mwhere, "role")
            if not role.strip():
                raise BadField(f"{mwhere}: field 'role' is empty", "role")
            content = check_text(message.get("content"), mwhere, "content")
            own = check_text(message.get("time_anchor"), mwhere, "time_anchor", optional=True)
            date = own or date
            text, marked = strip_marker(content)
            stats["messages"] += 1
            stats["markers_stripped"] += marked
            last = ident
            sessions[ident] = session_id
            if not text.strip():
                stats["empty_messages_skipped"] += 1
                empty.add(ident)
                continue
            turns.append({"session_id": session_id, "turn_id": str(ident), "text": capped(text, stats),
                          "props": {"role": role, "date": date, "turn_index": index, "session_index": session_index}})
            index += 1
    return last


def _questions(chat: ChatFolder, data: dict, sessions: dict[int, str], empty: set[int]) -> list[Question]:
    where = f"{chat.probing_file}: chat {chat.chat_id}"
    questions = []
    for ability, entries in data.items():
        check_text(ability, where, "ability")
        if not ability.strip():
            raise BadField(f"{where}: an ability's key is empty", "ability")
        if not isinstance(entries, list):
            raise BadField(f"{where}: ability {ability!r} is {_kind(entries)}, not a list of questions", ability)
        questions.extend(_question(chat, ability, index, raw, sessions, empty) for index, raw in enumerate(entries))
    return questions


def _question(chat: ChatFolder, ability: str, index: int, raw, sessions: dict[int, str],
              empty: set[int]) -> Question:
    question: Question = {
        "question_id": f"{chat.chat_id}:{ability}:{index}", "question": "", "question_type": ability,
        "category": chat.size, "expected": "", "answer": "", "expected_ids": [], "gold_turns": [],
        "gold_sessions": [], "abstention": False,
        "details": {"ability": ability, "index": index, "gold_form": None, "dropped_gold": [], "unparseable": []},
    }
    where = f"chat {chat.chat_id}, {PROBING_FILE.name}, question {ability}[{index}]"
    if not isinstance(raw, dict):
        question["excluded"] = f"{where}: is {_kind(raw)}, not an object"
        return question
    text = raw.get("question")
    if not isinstance(text, str) or not _encodable(text) or not text.strip():
        problem = ("is empty" if isinstance(text, str) and _encodable(text)
                   else "holds text that is not valid Unicode" if isinstance(text, str)
                   else f"is {_kind(text)}, not a string")
        question["excluded"] = f"{where}: field 'question' {problem}"
        return question
    question["question"] = text
    field, answer = _answer(raw)
    question["answer"] = question["expected"] = answer
    question["details"]["answer_field"] = field
    if ability == ABSTENTION:
        question["abstention"] = True
        question["abstention_reason"] = "BEAM's abstention ability: the chat holds no answer, so no message is gold"
        return question
    ids, unparseable, form = _flatten_gold(raw.get("source_chat_ids"))
    question["details"]["gold_form"] = form
    question["details"]["unparseable"] = unparseable
    if form is None:
        value = raw.get("source_chat_ids")
        question["excluded"] = (f"{where}: field 'source_chat_ids' is missing" if value is None else
                                f"{where}: field 'source_chat_ids' is {_kind(value)}, not a list or a dict of lists")
        return question
    resolved = [i for i in ids if i in sessions and i not in empty]
    dropped = [i for i in ids if i not in resolved]
    question["details"]["dropped_gold"] = dropped
    gold_sessions = list(dict.fromkeys(sessions[i] for i in resolved))
    question["gold_turns"] = [str(i) for i in resolved]
    question["gold_sessions"] = question["expected_ids"] = gold_sessions
    if not resolved:
        if not ids and not unparseable:
            question["excluded"] = f"{where}: field 'source_chat_ids' is empty: the question names no evidence"
        else:
            named = [f"id {i}" + (" (a message with no text)" if i in empty else "") for i in dropped]
            named += [f"entry {u}" for u in unparseable]
            question["excluded"] = (f"{where}: field 'source_chat_ids' names no message of the chat "
                                    f"({', '.join(named[:5])}{', ...' if len(named) > 5 else ''})")
    return question


def _flatten_gold(value) -> tuple[list[int], list[str], str | None]:
    """(the message ids in order, each once; entries that are not integers; the form), form None where
    `value` is no list and no dict of lists."""
    if isinstance(value, dict):
        if not all(isinstance(v, list) for v in value.values()):
            return [], [], None
        form = "dict: " + ", ".join(str(k) for k in value)
        lists = list(value.values())
    elif isinstance(value, list):
        form = "list of lists" if any(isinstance(v, list) for v in value) else "list"
        lists = [value]
    else:
        return [], [], None
    ids, unparseable = [], []
    stack = [entry for entries in reversed(lists) for entry in reversed(entries)]
    while stack:
        entry = stack.pop()
        if isinstance(entry, list):
            stack.extend(reversed(entry))
        elif _is_integer(entry):
            ids.append(entry)
        else:
            unparseable.append(repr(entry)[:40])
    return list(dict.fromkeys(ids)), unparseable, form


def _answer(raw: dict) -> tuple[str | None, str]:
    """(the field holding the question's answer text, the text); (None, "") where it has none."""
    for field in ANSWER_FIELDS:
        value = raw.get(field)
        if isinstance(value, str) and _encodable(value):
            return field, value
        if _is_integer(value) or isinstance(value, float):
            return field, str(value)
    return None, ""


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(value) -> str:
    return "missing" if value is None else f"a {type(value).__name__}"
