"""RealMem: one item per persona; memory grows one session at a time and only the past is searchable.

A persona file (`dataset/<Name>_dialogues_256k.json` of the RealMem repository) holds `_metadata` and
`dialogues`, its sessions in chronological order. A query is a turn with `is_query: true`; its gold is the
`memory_session_uuids` of the assistant turn right after it, as the benchmark's own loader reads it.

The benchmark's evaluation order (`eval/eval_mem0.py`): for each session in file order, every query in it is
asked against memory holding only the sessions before it, then the session is added. So each turn carries
its session's position (`step`), each question the step it is asked at, and the runner ingests in steps
(`workers.item.evaluate`). A query whose gold is not all in the past (its own session or a later one) cannot
be answered from memory: it is excluded, naming why, never scored.

Ids: a session is its `session_identifier` (RealMem's corpus id); a turn is `<session_identifier>#<n>`, n its
0-based position in the session. Turn gold: each memory point the answer used (`memory_used`) is one of its
session's `extracted_memory` entries, whose `source_content_snapshot` is the text of the turn it came from.
Where every point of a query names exactly one turn of its session, the query has turn gold; otherwise its
turn metrics are null and `details.turn_gold` says why. (`source_turn` alone cannot be used: it counts from
0 in some sessions and from 1 in others.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

from adapters.contracts import Item, Question, Turn
from adapters.benchmarks.streamed import BadField, capped, check_list, check_size, check_text
from adapters.defaults import REALMEM_PROFILE
from adapters.errors import DatasetError
from adapters.files import json_files as persona_files
from adapters.files import read_json
from adapters.benchmarks import declaration_of
from adapters.benchmarks.contract import Benchmark
from memoria.checksums import file_sha256

logger = logging.getLogger(__name__)


CATEGORIES = ("Dynamic Incremental", "Dynamic Updating", "Implicit Preference", "Temporal-reasoning")

#: The development personas' checksums (RealMem at commit 067c486a); any other file runs with a warning.
KNOWN_FILES = {
    "9dc2a8bf2777c182108b3859be6987b4203b65bd6df5cbb6e1a02e4e9f871fdb": "Adeleke_Okonjo_dialogues_256k.json",
    "67bd20d962cd0b01c1531cc82a73a0b1a1e58ef17db6e2f743fc9b35273734ac": "Ethan_Hunt_dialogues_256k.json",
    "b8fe2e606db96dbce1ffa0ab7c21b23ce83d4b5d472d80cd4bd23cd8a259d397": "Kenta_Tanaka_dialogues_256k.json",
    "e3e286120bc5e42d3dbe513d720f969ecebf3518fbe1a4782595e927474356a9": "Kim_Ji_young_dialogues_256k.json",
    "2427ab7d7012b28c0da9b2a70b1763cb60630f5198cf6eeed1ee68d0271c551c": "Liam_O_Connor_dialogues_256k.json",
}


def question_id(pid: str, query: str | int) -> str:
    """A query's id in results, `<persona>:<query>`, one to one: a `\\` or `:` in the persona's name is escaped with
    `\\`, so the first bare `:` always ends the name (`Ann:Q` + `1` and `Ann` + `Q:1` stay two questions)."""
    escaped = pid.replace("\\", "\\\\").replace(":", "\\:")
    return f"{escaped}:{query}"


def persona_id(data, file: Path) -> str:
    """A persona's item id: its `_metadata.person_name`, else the file's name up to `_dialogues`."""
    meta = data.get("_metadata") if isinstance(data, dict) else None
    name = meta.get("person_name") if isinstance(meta, dict) else None
    if isinstance(name, str) and name.strip():
        return name.strip()
    return file.stem.split("_dialogues")[0]


class RealMem:
    """Turns RealMem persona files into items, one per persona."""

    def __init__(self, path: str | Path, profile: str = REALMEM_PROFILE, *, benchmark: Benchmark | None = None):
        self.path = Path(path)
        self.benchmark = benchmark or declaration_of(RealMem)
        self.profile = profile

    def warnings(self) -> list[str]:
        """One line per file whose checksum is not a known development persona's."""
        return [f"{file}: checksum {sha} is not one of RealMem's known persona files; running it as given"
                for file in persona_files(self.path) if (sha := file_sha256(file)) not in KNOWN_FILES]

    def scan(self) -> list[str]:
        """Every persona's id, in file order; two files of one persona are refused, naming both."""
        seen: dict[str, Path] = {}
        for file in persona_files(self.path):
            pid = persona_id(read_json(file, "RealMem persona file", DatasetError), file)
            if pid in seen:
                raise DatasetError(f"{file}: persona {pid!r} is also in {seen[pid]}")
            seen[pid] = file
        return list(seen)

    def iter_items(self, limit: int | None = None) -> Iterator[Item]:
        for index, file in enumerate(persona_files(self.path)):
            if limit is not None and index >= limit:
                return
            started = time.perf_counter()
            data = read_json(file, "RealMem persona file", DatasetError)
            pid = persona_id(data, file)
            try:
                item = persona_item(data, pid)
                item["stats"]["parse_ms"] = round((time.perf_counter() - started) * 1000, 3)
            except BadField as bad:
                item = {"item_id": pid, "benchmark": self.benchmark.name, "error": f"{file}: {bad}", "field": bad.field}
            except Exception as exc:  # one malformed persona never sinks a run: it becomes a recorded failure
                item = {"item_id": pid, "benchmark": self.benchmark.name, "field": None,
                        "error": f"{file}: persona {pid}: cannot be read ({type(exc).__name__}: {exc})"}
            yield item


def persona_item(data, pid: str) -> Item:
    """The item of one persona: every turn with its session's step, every query with its gold and step."""
    where = f"persona {pid}"
    if not isinstance(data, dict):
        raise BadField(f"{where}: the file is not an object", "dialogues")
    sessions = check_list(data.get("dialogues"), where, "dialogues", dict)
    turn_lists = [s.get("dialogue_turns") for s in sessions]
    check_size(where, len(sessions), sum(len(t) for t in turn_lists if isinstance(t, list)), "dialogues")
    ids, position = _session_ids(sessions, where)
    query_ids: dict[str, str] = {}
    turns: list[Turn] = []
    questions: list[Question] = []
    stats = {"sessions": len(sessions), "empty_turns_skipped": 0}
    for step, session in enumerate(sessions):
        sid = ids[step][0]
        swhere = f"{where}: session {sid}"
        session_turns = check_list(session.get("dialogue_turns"), swhere, "dialogue_turns", dict)
        date = check_text(session.get("current_time"), swhere, "current_time", optional=True)
        for n, turn in enumerate(session_turns):
            twhere = f"{swhere}: turn {n}"
            text = check_text(turn.get("content"), twhere, "content")
            speaker = check_text(turn.get("speaker"), twhere, "speaker")
            if turn.get("is_query") is True:
                question = _question(pid, session_turns, n, sid, step, position, ids, swhere, date, sessions)
                if question["question_id"] in query_ids:
                    raise BadField(f"{twhere}: query_id {turn.get('query_id')!r} is also the query of "
                                   f"{query_ids[question['question_id']]}", "query_id")
                query_ids[question["question_id"]] = twhere
                question["gold_by_profile"] = {REALMEM_PROFILE: {
                    "sessions": question["gold_sessions"], "turns": question["gold_turns"],
                    "scored": not question.get("excluded")}}
                questions.append(question)
            if not text.strip():
                stats["empty_turns_skipped"] += 1
                continue
            turns.append({"session_id": sid, "turn_id": f"{sid}#{n}", "step": step,
                          "text": capped(f"{speaker}: {text}", stats),
                          "props": {"speaker": speaker, "role": speaker.lower(), "date": date, "turn_index": n,
                                    "session_index": step}})
    stats["queries"] = len(questions)
    stats["excluded_questions"] = sum(1 for q in questions if q.get("excluded"))
    stats["queries_without_turn_gold"] = sum(1 for q in questions if not q["gold_turns"] and not q.get("excluded"))
    return {"item_id": pid, "benchmark": "realmem", "turns": turns, "questions": questions, "stats": stats,
            "steps": len(sessions)}


def _session_ids(sessions: list[dict], where: str) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Each session's (identifier, uuid), and the step of each uuid; a missing or repeated id is refused."""
    ids, position, names = [], {}, {}
    for step, session in enumerate(sessions):
        sid = check_text(session.get("session_identifier"), f"{where}: session {step}", "session_identifier")
        uuid = check_text(session.get("session_uuid"), f"{where}: session {sid}", "session_uuid")
        if not sid.strip() or not uuid.strip():
            raise BadField(f"{where}: session {step} has an empty session_identifier or session_uuid",
                           "session_identifier")
        if sid in names:
            raise BadField(f"{where}: session_identifier {sid!r} is used by sessions {names[sid]} and {step}",
                           "session_identifier")
        if uuid in position:
            raise BadField(f"{where}: session_uuid {uuid!r} is used by sessions {position[uuid]} and {step}",
                           "session_uuid")
        names[sid], position[uuid] = step, step
        ids.append((sid, uuid))
    return ids, position


def _question(pid: str, turns: list[dict], n: int, sid: str, step: int, position: dict[str, int],
              ids: list[tuple[str, str]], where: str, date: str, sessions: list[dict]) -> Question:
    query = turns[n]
    qid = query.get("query_id")
    question: Question = {
        "question_id": question_id(pid, qid if isinstance(qid, (str, int)) and str(qid).strip() else f"{sid}#{n}"),
        "question": query["content"],
        "question_date": date,
        "question_type": str(query.get("category_name") or "uncategorised"),
        "category": query.get("category_name"),
        "expected": "",
        "expected_ids": [],
        "gold_sessions": [],
        "gold_turns": [],
        "abstention": False,
        "step": step,
        "details": {"session": sid, "turn": n, "topic": query.get("topic"), "session_type": query.get("session_type")},
    }
    answer = turns[n + 1] if n + 1 < len(turns) else None
    if not isinstance(answer, dict) or answer.get("speaker") != "Assistant":
        question["excluded"] = "no assistant turn follows the query"
        return question
    question["expected"] = answer.get("content") if isinstance(answer.get("content"), str) else ""
    uuids = answer.get("memory_session_uuids")
    if not isinstance(uuids, list) or not all(isinstance(u, str) for u in uuids):
        question["excluded"] = "the answer's memory_session_uuids is not a list of session uuids"
        return question
    unknown = [u for u in uuids if u not in position]
    if not uuids:
        question["excluded"] = "the answer used no memory (memory_session_uuids is empty)"
    elif unknown:
        question["excluded"] = f"gold names session uuid {unknown[0]!r}, which is not in the file"
    elif any(position[u] >= step for u in uuids):
        later = "its own session" if any(position[u] == step for u in uuids) else "a later session"
        question["excluded"] = f"gold includes {later}: memory never holds it when the query is asked"
    if question.get("excluded"):
        return question
    gold_sessions = list(dict.fromkeys(ids[position[u]][0] for u in uuids))
    question["gold_sessions"] = gold_sessions
    question["expected_ids"] = gold_sessions
    turns_gold, problem = _turn_gold(answer.get("memory_used"), position, ids, sessions, set(uuids))
    question["gold_turns"] = turns_gold
    question["details"]["turn_gold"] = problem or "every memory point names its source turn"
    return question


def _turn_gold(points, position: dict[str, int], ids: list[tuple[str, str]],
               sessions: list[dict], gold_uuids: set[str]) -> tuple[list[str], str | None]:
    """The turns the answer's memory points came from, or ([], why not).

    A point may only name a session of the answer's own `memory_session_uuids`, which are already known to be in
    the past: a point naming any other session (the query's own, a later one) would be turn gold memory never
    holds when the query is asked, so the query keeps its session gold and has no turn gold."""
    if not isinstance(points, list) or not points:
        return [], "the answer lists no memory points"
    gold = []
    for point in points:
        if not isinstance(point, dict) or point.get("session_uuid") not in position:
            return [], "a memory point names no known session"
        if point["session_uuid"] not in gold_uuids:
            return [], "a memory point names a session that is not among the answer's memory_session_uuids"
        step = position[point["session_uuid"]]
        source = _source_turn(sessions[step], point.get("content"))
        if source is None:
            return [], "a memory point's source turn cannot be told from its session's turns"
        gold.append(f"{ids[step][0]}#{source}")
    return list(dict.fromkeys(gold)), None


def _source_turn(session: dict, content) -> int | None:
    """The position of the one turn of `session` that the extracted memory `content` was taken from."""
    memories = session.get("extracted_memory")
    if not isinstance(memories, list):
        return None
    snapshots = {m.get("source_content_snapshot") for m in memories
                 if isinstance(m, dict) and m.get("content") == content}
    if len(snapshots) != 1:
        return None
    snapshot = snapshots.pop()
    found = [n for n, t in enumerate(session.get("dialogue_turns") or [])
             if isinstance(t, dict) and t.get("content") == snapshot]
    return found[0] if len(found) == 1 else None
