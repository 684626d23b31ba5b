"""The worker's half of the ledger: per-run state in Redis, the single source of truth of a farm run.

Keys live under `memfarm:{run_id}:`. An item is staged once, compressed, by
the coordinator; a worker begins an attempt, holds a lease on it while it
works (a key with a time to live, refreshed by a heartbeat), and ends it
done (its outcome under one key, so a task that runs twice still leaves one
set of records) or failed. Every transition is one Lua script, so it is
atomic, and each is tied to the attempt that made it: a late finish or
failure of an attempt that was given up on changes nothing, and `done` is
never overwritten. The coordinator's half (staging, requeue, resume, watch,
reduce) is `coordinator.running.run_ledger.RunLedger`, built on this class.
"""

from __future__ import annotations

import enum
import hashlib
import json
import logging
import re
import threading
import time
import zlib

import redis

from adapters.errors import MemfarmError
from workers.farm.ledger_scripts import BEGIN, FAIL, FINISH, HEARTBEAT, LUA_NUMBERS
from workers.ledger_values import (MAX_META_BYTES, MAX_UNPACKED_BYTES, STAGED_FIELDS, LedgerValueError,
                                        check_fields, check_info, check_item_id, check_meta, kind_checked,
                                        shown, unpack)
from workers import ledger_values
from workers.farm.staging_codec import dictionary_id, join_sessions, unpack_session

logger = logging.getLogger(__name__)


#: How the ledger records an attempt a worker refused for what it is (its code, its model, the systems it may run):
#: the same worker refuses the item again, so `requeue --failed` leaves such items out unless told they may go back.
REFUSED_BY = "refused by "


def refused_by(worker: str, reason) -> str:
    return f"{REFUSED_BY}{worker}: {reason}"


class OutcomeTooLarge(MemfarmError):
    """An item's outcome larger than a ledger value may be read back: every attempt would make the same one, so
    the item fails once, for good, rather than being stored, refused by the reducer and queued again."""


def outcome_json(item_id: str, outcome: dict) -> bytes:
    """`outcome` as JSON; `OutcomeTooLarge` where it is past the bound the reducer reads a ledger value to
    (`ledger_values.MAX_UNPACKED_BYTES`). A local run asks the same, so an item fails alike on the farm and here."""
    raw = json.dumps(outcome, ensure_ascii=False).encode()
    bound = ledger_values.MAX_UNPACKED_BYTES
    if len(raw) > bound:
        raise OutcomeTooLarge(
            f"item {shown(item_id)}: its outcome is {len(raw):,} bytes of JSON, more than the {bound:,} a farm "
            f"ledger value may hold (workers/ledger_values.py MAX_UNPACKED_BYTES), so the reducer could never read "
            f"it, and a local run holds items to the same bound so that both give the same results; lower "
            f"--top-k (each record keeps its top_k candidates)")
    return raw


def packed_outcome(item_id: str, outcome: dict) -> bytes:
    """`outcome` as the ledger stores it (compressed JSON), checked against the bound before it is stored."""
    return zlib.compress(outcome_json(item_id, outcome), 6)

#: Run ids are key parts and file names: letters, digits, dot, dash, underscore; bounded. Checked with
#: `fullmatch`: a `$` would let a final newline through.
RUN_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: How long a lease lives without a heartbeat, and how often a working attempt renews it.
DEFAULT_LEASE_SECONDS = 30
HEARTBEAT_FRACTION = 5
#: A started attempt older than the hard time limit plus this is lost, whatever its lease says.
DEFAULT_LOST_GRACE_SECONDS = 60


class ItemState(str, enum.Enum):
    """The lifecycle of one item: queued -> started -> done | failed (retried) | failed_final."""

    QUEUED = "queued"
    STARTED = "started"
    DONE = "done"
    FAILED = "failed"
    FAILED_FINAL = "failed_final"


STATES = frozenset(s.value for s in ItemState)


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise MemfarmError(f"run id {shown(run_id)} is not valid: use 1 to 64 letters, digits, '.', '-' or '_'")
    return run_id


def stale_after(meta: dict) -> float:
    """Seconds after which a started attempt of this run counts as lost even if its lease is renewed."""
    return meta["task_time_limit"] + meta.get("lost_grace_seconds", DEFAULT_LOST_GRACE_SECONDS)


class Ledger:
    """What a worker reads and writes: a run's settings, its staged items and their lifecycle."""

    def __init__(self, client: redis.Redis, lease_seconds: int = DEFAULT_LEASE_SECONDS):
        self.r = client
        self.lease_seconds = lease_seconds
        self._begin = client.register_script(LUA_NUMBERS + BEGIN)
        self._heartbeat = client.register_script(LUA_NUMBERS + HEARTBEAT)
        self._finish = client.register_script(LUA_NUMBERS + FINISH)
        self._fail = client.register_script(LUA_NUMBERS + FAIL)
        self._warned: set[str] = set()

    def _warn(self, message: str) -> None:
        """Log what was wrong with a value read back, once: a watch loop reads the same values every second."""
        if message not in self._warned:
            self._warned.add(message)
            logger.warning("%s", message)

    @staticmethod
    def _key(run_id: str, *parts: str) -> str:
        return ":".join(("memfarm", run_id, *parts))

    def _item_keys(self, run_id: str, item_id: str) -> dict[str, str]:
        return {"state": self._key(run_id, "state"), "attempts": self._key(run_id, "attempts"),
                "info": self._key(run_id, "info", item_id), "lease": self._key(run_id, "lease", item_id),
                "outcome": self._key(run_id, "outcome", item_id), "events": self._key(run_id, "events")}

    def meta(self, run_id: str, *required: str) -> dict:
        """The run's metadata, checked (`META_FIELDS`); `required` names fields it must hold besides those
        every run has."""
        key = self._key(check_run_id(run_id), "meta")
        raw = self.bounded_get(key, MAX_META_BYTES)
        if raw is None:
            raise MemfarmError(f"no run {shown(run_id)} in this redis")
        return check_meta(raw, key, required)

    def bounded_get(self, key: str, limit: int) -> bytes | None:
        """GET, refused (a named error) when the value is longer than `limit` bytes: it is not read."""
        with kind_checked(key):
            size = self.r.strlen(key)
            if size > limit:
                raise LedgerValueError(f"{key} holds {size} bytes, more than the {limit} it may; refused unread")
            return self.r.get(key)

    def load_item(self, run_id: str, item_id: str) -> dict:
        key = self._key(run_id, "item", item_id)
        payload = self.bounded_get(key, MAX_UNPACKED_BYTES)
        if payload is None:
            raise MemfarmError(f"run {run_id}: item {shown(item_id)} was never staged")
        staged = unpack(payload, key)
        if not isinstance(staged, dict):
            raise LedgerValueError(f"{key} is not a JSON object but {type(staged).__name__}")
        required = ("turn_chunks", "session_dictionary") if "turn_chunks" in staged else ()
        check_fields(staged, STAGED_FIELDS, required, key)
        if "turn_chunks" not in staged:
            return staged
        sizes = {o["chunk"]: o["bytes"] for o in staged["turn_chunks"]}
        digests = list(sizes)
        zdict = self.r.get(self._key(run_id, "zdict")) or b""
        if dictionary_id(zdict) != staged.get("session_dictionary"):
            raise MemfarmError(f"run {run_id}: item {item_id}: the run's session dictionary is "
                               f"{'missing' if not zdict else 'not the one it was staged with'}; stage the run again")
        del staged["session_dictionary"]
        chunks = {}
        for start in range(0, len(digests), 200):
            part = digests[start:start + 200]
            for digest, payload in zip(part, self.r.mget([self._key(run_id, "session", d) for d in part])):
                if payload is None:
                    raise MemfarmError(f"run {run_id}: item {item_id}: staged session {digest[:12]} is missing "
                                       f"from Redis (lost with a Redis that kept no data?); stage the run again")
                try:
                    raw = unpack_session(payload, zdict, sizes[digest])
                except zlib.error:
                    raw = b""
                if hashlib.sha256(raw).hexdigest() != digest:
                    raise MemfarmError(f"run {run_id}: item {item_id}: staged session {digest[:12]} is damaged")
                chunks[digest] = json.loads(raw)
        return join_sessions(staged, chunks)

    def state(self, run_id: str, item_id: str) -> str | None:
        """The item's state as Redis holds it (one that is no `ItemState` included, for messages to name)."""
        value = self.r.hget(self._key(run_id, "state"), item_id)
        return value.decode(errors="backslashreplace") if value else None

    def info(self, run_id: str, item_id: str) -> dict:
        key = self._key(run_id, "info", item_id)
        with kind_checked(key):
            return check_info(self.r.hgetall(key), key, self._warn)

    # -- transitions ----------------------------------------------------------------
    def begin(self, run_id: str, item_id: str, worker: str, *, stale_after: float, max_attempts: int) -> tuple[str, int]:
        """(verdict, attempt): `begun` with the attempt's number, or why not: `unknown` (never staged),
        `finished`, `busy` (a live attempt holds it), `not_queued` (failed, waiting for the coordinator),
        `cap` (this would be one attempt too many: now a final failure), `damaged` (its attempt count in Redis
        is not a number)."""
        try:  # an id no run could have staged is never looked up: it would go whole into key names and lines
            check_item_id(item_id, f"run {run_id}: a message's item")
        except LedgerValueError as error:
            logger.warning("%s; ignored", error)
            return "unknown", 0
        k = self._item_keys(run_id, item_id)
        verdict, attempt = self._begin(keys=[k["state"], k["attempts"], k["info"], k["lease"]],
                                       args=[item_id, worker, time.time(), self.lease_seconds, stale_after,
                                             max_attempts])
        verdict = verdict.decode() if isinstance(verdict, bytes) else verdict
        if verdict == "unknown":
            logger.warning("run %s: a message for item %s, which was never staged, ignored", run_id, shown(item_id))
        elif verdict == "damaged":
            logger.warning("%s field %s is not a number; item not begun", k["attempts"], shown(item_id))
        return verdict, int(attempt)

    def heartbeat(self, run_id: str, item_id: str, attempt: int) -> bool:
        k = self._item_keys(run_id, item_id)
        return bool(self._heartbeat(keys=[k["state"], k["attempts"], k["lease"]],
                                    args=[item_id, attempt, self.lease_seconds]))

    def finish(self, run_id: str, item_id: str, attempt: int, outcome: dict) -> bool:
        """Store the outcome (compressed) and mark the item done, if `attempt` is still the current one."""
        k = self._item_keys(run_id, item_id)
        return bool(self._finish(keys=[k["state"], k["attempts"], k["info"], k["lease"], k["outcome"], k["events"]],
                                 args=[item_id, attempt, time.time(), packed_outcome(item_id, outcome)]))

    def fail(self, run_id: str, item_id: str, attempt: int, error: str, final: bool = False,
             max_attempts: int | None = None) -> bool:
        """Mark the current attempt failed: `failed` is retried by the coordinator, `failed_final` is not.
        Final when `final` says so, or when `max_attempts` is given and this attempt was the item's last (its
        budget counted from the last reset by hand, which the ledger alone knows)."""
        k = self._item_keys(run_id, item_id)
        return bool(self._fail(keys=[k["state"], k["attempts"], k["info"], k["lease"], k["events"]],
                               args=[item_id, attempt, time.time(), error[:4000], "1" if final else "0",
                                     max_attempts or 0]))

    def hold(self, run_id: str, item_id: str, attempt: int) -> "Lease":
        """A heartbeat that keeps this attempt's lease alive while the `with` block runs."""
        return Lease(self, run_id, item_id, attempt)


class Lease:
    """Renews an attempt's lease from a background thread; a process that dies stops renewing it."""

    def __init__(self, ledger: Ledger, run_id: str, item_id: str, attempt: int):
        self.ledger, self.run_id, self.item_id, self.attempt = ledger, run_id, item_id, attempt
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{item_id}", daemon=True)

    def _beat(self) -> None:
        interval = max(0.5, self.ledger.lease_seconds / HEARTBEAT_FRACTION)
        while not self._stop.wait(interval):
            try:
                if not self.ledger.heartbeat(self.run_id, self.item_id, self.attempt):
                    logger.warning("item %s attempt %d is no longer current; its result will not count",
                                   self.item_id, self.attempt)
                    return
            except redis.exceptions.RedisError as exc:  # cut off: the lease lapses, the coordinator takes over
                logger.warning("lease heartbeat for %s failed: %s", self.item_id, exc)

    def __enter__(self) -> "Lease":
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
