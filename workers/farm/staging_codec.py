"""How an item is staged in Redis: compressed JSON, its sessions as shared chunks.

LongMemEval's haystacks repeat sessions across questions, so each run of turns of one session occurrence
is stored once, by its hash, compressed against a run-wide preset dictionary; the staged item keeps
references to its chunks. `split_sessions` and `join_sessions` are each other's inverse; what comes back
from Redis is checked by `workers.ledger_values` before it reaches them.
"""

from __future__ import annotations

import hashlib
import json
import zlib


def pack(value) -> bytes:
    return zlib.compress(json.dumps(value, ensure_ascii=False).encode(), 6)


#: Turn props that belong to one occurrence of a session in a haystack, not to its content: lifted out of
#: the staged session so that the same session in two questions is one chunk in Redis.
OCCURRENCE_PROPS = ("date", "session_index")


def split_sessions(item: dict) -> tuple[dict, dict[str, bytes]]:
    """The item with its turns replaced by references to session chunks, and those chunks (JSON bytes, not yet
    compressed) by their SHA-256.

    A chunk is one run of consecutive turns of one session occurrence, with the occurrence props (when every turn of
    the run has the same value) blanked, keys kept, so that `join_sessions` gives back the very same dicts.
    """
    turns = item.get("turns")
    if not turns:
        return item, {}
    occurrences, chunks, start = [], {}, 0
    while start < len(turns):
        end = start + 1
        while end < len(turns) and _occurrence(turns[end]) == _occurrence(turns[start]):
            end += 1
        run = turns[start:end]
        lifted = {name: run[0]["props"][name] for name in OCCURRENCE_PROPS if _same_in_all(run, name)}
        chunk = [{**t, "props": {k: (None if k in lifted else v) for k, v in t["props"].items()}} for t in run] \
            if lifted else run
        payload = json.dumps(chunk, ensure_ascii=False).encode()
        digest = hashlib.sha256(payload).hexdigest()
        chunks[digest] = payload
        occurrences.append({"chunk": digest, "props": lifted, "bytes": len(payload)})
        start = end
    staged = {("turn_chunks" if k == "turns" else k): (occurrences if k == "turns" else v) for k, v in item.items()}
    return staged, chunks


def _occurrence(turn: dict) -> tuple:
    """A turn's session occurrence (id, place): an M history repeats ids, and adjacent repeats stay two chunks."""
    props = turn.get("props")
    return turn.get("session_id"), props.get("session_index") if isinstance(props, dict) else None


def _same_in_all(run: list[dict], name: str) -> bool:
    props = [t.get("props") for t in run]
    if not all(isinstance(p, dict) and name in p for p in props):
        return False
    first = props[0][name]
    return all(type(p[name]) is type(first) and p[name] == first for p in props)


#: The preset dictionary a run's session chunks are compressed with: the end of the first staged item's
#: sessions. A chunk is one session (a few KiB); alone, zlib would start each from nothing and the
#: turns' recurring keys and phrasing would cost what whole-item compression gets for free.
ZDICT_BYTES = 32 * 1024


def session_dictionary(chunks: dict[str, bytes]) -> bytes:
    return b"".join(chunks.values())[-ZDICT_BYTES:]


def pack_session(raw: bytes, zdict: bytes) -> bytes:
    packer = zlib.compressobj(6, zdict=zdict) if zdict else zlib.compressobj(6)
    return packer.compress(raw) + packer.flush()


def unpack_session(payload: bytes, zdict: bytes, size: int) -> bytes:
    """The chunk's JSON bytes; never more than `size` (its recorded length) + 1 are inflated, so a planted
    compression bomb costs nothing."""
    unpacker = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
    return unpacker.decompress(payload, size + 1)


def dictionary_id(zdict: bytes) -> str:
    return hashlib.sha256(zdict).hexdigest()[:16]


def join_sessions(staged: dict, chunks: dict[str, list]) -> dict:
    """The item `split_sessions` was given, from its staged form and its chunks (unpacked, by hash)."""
    if "turn_chunks" not in staged:
        return staged
    turns = []
    for occurrence in staged["turn_chunks"]:
        lifted = occurrence["props"]
        for turn in chunks[occurrence["chunk"]]:
            if lifted:
                turn = {**turn, "props": {k: (lifted[k] if k in lifted else v) for k, v in turn["props"].items()}}
            turns.append(turn)
    return {("turns" if k == "turn_chunks" else k): (turns if k == "turn_chunks" else v) for k, v in staged.items()}
