"""What the ledger reads back from Redis, checked before anything uses it.

Anyone holding a worker's Redis password can write any key of the farm's, so
every value read back is bounded (a compressed one is never inflated past a
cap), typed, and, when it is not what the farm writes there, named by its key
and field in a `LedgerValueError` or in a warning that leaves it out.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import math
import zlib

import redis

from adapters.errors import MemfarmError
from adapters.terminal import printable

logger = logging.getLogger(__name__)

#: The most a compressed ledger value (a staged item, an outcome) may inflate to. An outcome of a LoCoMo
#: conversation (about 200 questions, 50 candidates each) is a few MiB; a planted compression bomb stops here.
MAX_UNPACKED_BYTES = 64 * 1024 * 1024
#: The most a run's plain JSON metadata may hold (a real one is a few KiB).
MAX_META_BYTES = 1024 * 1024
#: The longest item id the farm stages. A benchmark's ids are tens of characters; a longer one is refused where
#: it is staged and wherever one is read back from Redis (a run's order list, the fields of its state and
#: attempts hashes, a task message), so that an id planted with a Redis password never puts megabytes into a
#: key name or a line.
MAX_ITEM_ID_CHARS = 1024


class LedgerValueError(MemfarmError):
    """A value in Redis that is not what the farm writes there: damaged, or planted by someone holding a
    Redis password. The message names the key (and the field); a key holds an item id, so it is printable."""

    def __init__(self, message: str):
        super().__init__(printable(message))


def unpack(payload: bytes, key: str = "a ledger value", limit: int = MAX_UNPACKED_BYTES):
    """The JSON value `pack` made, read from `key`; never more than `limit` bytes are inflated."""
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(payload, limit + 1)
    except zlib.error as exc:
        raise LedgerValueError(f"{key} is not compressed JSON (zlib: {exc})") from None
    if len(raw) > limit or inflater.unconsumed_tail:
        raise LedgerValueError(f"{key} inflates to more than {limit} bytes; refused unread")
    if not inflater.eof:
        raise LedgerValueError(f"{key} is not compressed JSON (it ends early)")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise LedgerValueError(f"{key} is not compressed JSON ({type(exc).__name__}: {str(exc)[:100]})") from None


def shown(value, limit: int = 60) -> str:
    """A value from Redis as an error message quotes it: its repr (control characters escaped), bounded."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check_item_id(item_id: str, where: str) -> str:
    """`item_id`, when it is one the farm could have staged; a `LedgerValueError` naming `where` otherwise."""
    if len(item_id) > MAX_ITEM_ID_CHARS:
        raise LedgerValueError(f"{where} is no item id: {shown(item_id)} has {len(item_id)} characters, more than "
                               f"the {MAX_ITEM_ID_CHARS} an item id may")
    return item_id


def text(raw: bytes, key: str, field: str | None = None) -> str:
    """A Redis string as text; bytes that are not UTF-8 are a named error."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        where = f"{key} field {shown(field)}" if field is not None else key
        raise LedgerValueError(f"{where} is not UTF-8 text ({shown(raw)})") from None


@contextlib.contextmanager
def kind_checked(key: str):
    """Redis's WRONGTYPE (a key holding another kind of value than the farm writes there) as a named error."""
    try:
        yield
    except redis.exceptions.ResponseError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        raise LedgerValueError(f"{key} is not the kind of Redis value the farm writes there") from None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


#: The fields of a run's metadata the ledger and the coordinator read, each with its check and what the
#: check wants. Settings only a worker's system reads are its own to check.
META_FIELDS = {
    "created": (_number, "a number"),
    "max_attempts": (lambda v: _whole(v) and v >= 1, "a whole number of at least 1"),
    "task_time_limit": (lambda v: _number(v) and v > 0, "a positive number"),
    "lost_grace_seconds": (lambda v: _number(v) and v >= 0, "a number of at least 0"),
    "item_count": (_whole, "a whole number"),
    "staging_done": (lambda v: isinstance(v, bool), "true or false"),
    "reduced_at": (_number, "a number"),
    "system": (lambda v: isinstance(v, str), "text"),
    "broker": (lambda v: isinstance(v, str), "text"),
    "code_version": (lambda v: isinstance(v, str), "text"),
    "dataset_sha256": (lambda v: isinstance(v, str), "text"),
    "context": (lambda v: isinstance(v, dict), "an object"),
    "arguments": (lambda v: isinstance(v, dict), "an object"),
    "staging": (lambda v: isinstance(v, dict), "an object"),
    "embedding_signature": (lambda v: v is None or isinstance(v, dict), "an object or null"),
}
#: What every run's metadata holds: a worker and the coordinator cannot judge an attempt without them.
META_REQUIRED = ("created", "max_attempts", "task_time_limit")


def check_fields(value: dict, checks: dict, required, where: str) -> dict:
    """`value` if every field in `checks` it holds passes, and it holds every `required` one; else a named error."""
    for name in required:
        if name not in value:
            raise LedgerValueError(f"{where} lacks {name!r}")
    for name, (check, wanted) in checks.items():
        if name in value and not check(value[name]):
            raise LedgerValueError(f"{where} field {name!r} is {shown(value[name])}, not {wanted}")
    return value


def check_meta(raw: bytes, key: str, required=()) -> dict:
    """A run's metadata as JSON from Redis, bounded and checked (`META_REQUIRED` and `required` present)."""
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise LedgerValueError(f"{key} is not JSON ({type(exc).__name__}: {str(exc)[:100]})") from None
    if not isinstance(meta, dict):
        raise LedgerValueError(f"{key} is not a JSON object but {type(meta).__name__}")
    return check_fields(meta, META_FIELDS, (*META_REQUIRED, *required), key)


def _chunk_reference(value) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("chunk"), str) and len(value["chunk"]) == 64
            and isinstance(value.get("props"), dict) and _whole(value.get("bytes"))
            and value["bytes"] <= MAX_UNPACKED_BYTES)


#: A staged item as `stage` writes it: its sessions as references to chunks of a bounded size.
STAGED_FIELDS = {
    "turn_chunks": (lambda v: isinstance(v, list) and all(_chunk_reference(o) for o in v),
                    f"a list of session references ({{chunk, props, bytes}}, at most {MAX_UNPACKED_BYTES} bytes)"),
    "session_dictionary": (lambda v: isinstance(v, str), "text"),
}


#: The fields of an item's info hash that hold numbers: times (seconds since the epoch) and counts.
INFO_NUMBERS = ("queued_at", "enqueued_at", "started_at", "finished_at", "lost", "attempt_base")
#: The longest text an info field is read back as (a failure's error is cut to 4000 characters when written).
INFO_TEXT_LIMIT = 4000


def check_info(raw: dict, key: str, warn=None) -> dict:
    """An item's info hash as text: a field that is not UTF-8, or not a number where one belongs, is left out
    (and named to `warn`, by default the log); text is cut to `INFO_TEXT_LIMIT`."""
    warn = warn or logger.warning
    info = {}
    for field, value in raw.items():
        try:
            name = text(field, key)
            value = text(value, key, name)
        except LedgerValueError as error:
            warn(f"{error}; left out")
            continue
        if name in INFO_NUMBERS:
            try:
                if not math.isfinite(float(value)):
                    raise ValueError(value)
            except ValueError:
                warn(f"{key} field {name!r} is {shown(value)}, not a number; left out")
                continue
        info[name] = value[:INFO_TEXT_LIMIT]
    return info


def _numbers(value) -> bool:
    return isinstance(value, dict) and all(_number(v) for v in value.values())


def _metric_levels(value) -> bool:
    """A record's metrics as the reducer averages them: per level (session, turn), numbers by name."""
    return value is None or (isinstance(value, dict) and all(
        value.get(level) is None or _numbers(value[level]) for level in ("session", "turn")))


#: The counters of an outcome's stats that the reducer adds up over items.
STAT_SUMS = ("texts_encoded", "texts_served", "texts_from_shared")

#: What the reducer reads of an outcome a worker stored, and of each of its records.
OUTCOME_FIELDS = {
    "records": (lambda v: isinstance(v, list) and all(isinstance(r, dict) for r in v), "a list of objects"),
    "stats": (lambda v: isinstance(v, dict) and all(_number(v[k]) for k in STAT_SUMS if k in v),
              f"an object whose {', '.join(STAT_SUMS)} are numbers"),
    "timings": (lambda v: isinstance(v, dict) and _numbers(v.get("phases_ms") or {}),
                "an object whose phases_ms are numbers"),
    "cache": (lambda v: v is None or isinstance(v, dict), "an object or null"),
}
RECORD_FIELDS = {
    "question_id": (lambda v: isinstance(v, str), "text"),
    "status": (lambda v: isinstance(v, str), "text"),
    "metrics": (_metric_levels, "an object of numbers per level (session, turn) or null"),
    "metrics_by_profile": (lambda v: v is None or (isinstance(v, dict) and all(_metric_levels(m) for m in v.values())),
                           "an object of metrics per profile or null"),
}


def check_outcome(value, key: str) -> dict:
    """An outcome as the reducer may read it, else a named error."""
    if not isinstance(value, dict):
        raise LedgerValueError(f"{key} is not a JSON object but {type(value).__name__}")
    check_fields(value, OUTCOME_FIELDS, ("records",), key)
    for n, record in enumerate(value["records"]):
        check_fields(record, RECORD_FIELDS, ("question_id",), f"{key} record {n}")
    return value


def message_args(raw: bytes, wrapped: bool):
    """The (run id, item id) a broker entry's task message carries; ValueError (why) when it is not one.
    `wrapped`: an `unacked` entry, the message inside [message, exchange, routing key]."""
    try:
        message = json.loads(raw)
        if wrapped:
            if not isinstance(message, list) or not message:
                raise ValueError("not [message, exchange, routing key]")
            message = message[0]
        if not isinstance(message, dict) or not isinstance(message.get("body"), str):
            raise ValueError("no message body")
        body = message["body"]
        properties = message.get("properties")
        if isinstance(properties, dict) and properties.get("body_encoding") == "base64":
            body = base64.b64decode(body, validate=True)
        payload = json.loads(body)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:  # binascii.Error is a ValueError
        raise ValueError(f"not a task message ({type(exc).__name__}: {str(exc)[:80]})") from None
    args = payload[0] if isinstance(payload, list) and payload else None
    if not isinstance(args, list) or len(args) < 2:
        raise ValueError("its arguments are not [run id, item id]")
    if not isinstance(args[0], str) or not isinstance(args[1], str):
        raise ValueError(f"its arguments {shown(args[:2])} are not two texts")
    return args[0], args[1]
