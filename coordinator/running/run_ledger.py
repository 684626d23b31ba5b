"""The coordinator's half of the ledger: create and stage runs, read their state, requeue, wait, forget.

Built on the worker's half (`workers.farm.ledger.Ledger`), which holds the key
layout and the transitions a worker makes. Every transition here is atomic
too: run creation is `SET NX`, and requeueing an item or declaring an attempt
lost are Lua scripts that check the state (and attempt) they start from.
Staging writes only while the run's metadata exists, each write in a script
that checks it, so a run forgotten mid-staging gets no key afterwards.

Everything read back is checked, since anyone holding a worker's password can
write there: a value that is not what the farm writes is named (key and
field) and left out, or fails the one item or command that needed it.
"""

from __future__ import annotations

import json
import time

from adapters.errors import MemfarmError
from adapters.redaction import redact
from workers.farm.app import QUEUE
from workers.farm.connection import connect
from workers.farm.ledger import STATES, ItemState, Ledger, check_run_id
from workers.farm.ledger_scripts import LUA_NUMBERS
from workers.item.run_context import RunContext
from workers.ledger_values import (MAX_ITEM_ID_CHARS, MAX_UNPACKED_BYTES, LedgerValueError, check_info,
                                   check_item_id, check_outcome, kind_checked, message_args, shown, text, unpack)
from workers.farm.staging_codec import dictionary_id, pack, pack_session, session_dictionary, split_sessions

__all__ = ["ItemState", "LedgerValueError", "RunLedger", "check_run_id", "connect", "redact"]

RUNS_KEY = "memfarm:runs"
#: How long a reduced run's keys stay in Redis (MEMFARM_RUN_TTL_SECONDS overrides).
DEFAULT_RUN_TTL_SECONDS = 3 * 24 * 3600

# KEYS: state, info, attempts. ARGV: item, now, reset_attempts, allowed states...
# A reset never lowers the attempt count (a lost attempt still running would then share its number with a
# new one, and its late finish would count): it moves the item's budget to start from the count now.
_REQUEUE = """
local state = redis.call('HGET', KEYS[1], ARGV[1])
local allowed = false
for i = 4, #ARGV do if state == ARGV[i] then allowed = true end end
if not allowed then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], 'queued')
redis.call('HSET', KEYS[2], 'queued_at', ARGV[2], 'error', '')
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[2], 'attempt_base', number(redis.call('HGET', KEYS[3], ARGV[1]), 0))
end
return 1
"""

# KEYS: state, attempts, info, lease, events. ARGV: item, attempt, now, reason, max_attempts, stale_after.
# An attempt is lost when it is still `started` under the same attempt number and either its lease lapsed
# or it ran past the hard limit. Lost: queued again under the cap, a final failure at it.
_LOST = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= 'started' then return 'skip' end
if number(redis.call('HGET', KEYS[2], ARGV[1]), 0) ~= tonumber(ARGV[2]) then return 'skip' end
local started = number(redis.call('HGET', KEYS[3], 'started_at') or '0', tonumber(ARGV[3]))
if redis.call('EXISTS', KEYS[4]) == 1 and tonumber(ARGV[3]) - started < tonumber(ARGV[6]) then return 'skip' end
redis.call('DEL', KEYS[4])
redis.call('HINCRBY', KEYS[3], 'lost', 1)
redis.call('RPUSH', KEYS[5], ARGV[1])
if tonumber(ARGV[2]) - attempt_base(KEYS[3]) >= tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], ARGV[1], 'failed_final')
  redis.call('HSET', KEYS[3], 'finished_at', ARGV[3], 'error', ARGV[4])
  return 'final'
end
redis.call('HSET', KEYS[1], ARGV[1], 'queued')
redis.call('HSET', KEYS[3], 'queued_at', ARGV[3], 'error', ARGV[4])
return 'requeued'
"""

# Staging's writes, each only while the run's metadata exists (KEYS[1]): `forget` deletes it first, so after
# that nothing of the run is written again, and every key written before is there for its scan to find.
# KEYS: meta, session chunks... ARGV: their payloads. Returns -1 (no run), else per chunk 1 if it was new.
_STAGE_CHUNKS = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local stored = {}
for i = 2, #KEYS do
  if redis.call('SET', KEYS[i], ARGV[i - 1], 'NX') then stored[i - 1] = 1 else stored[i - 1] = 0 end
end
return stored
"""

# KEYS: meta, state, item, order, info. ARGV: item, payload, now. Returns -1 (no run), 0 (staged before), 1.
_STAGE_ITEM = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HSETNX', KEYS[2], ARGV[1], 'queued') == 0 then return 0 end
redis.call('SET', KEYS[3], ARGV[2])
redis.call('RPUSH', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[5], 'queued_at', ARGV[3])
return 1
"""

# KEYS: meta, zdict. ARGV: a dictionary to store if there is none. Returns the run's dictionary, nil if no run.
_ZDICT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('SET', KEYS[2], ARGV[1], 'NX')
return redis.call('GET', KEYS[2])
"""

# KEYS: state, info. ARGV: item, now. Notes the message as sent, only for an item the run still has.
_MARK_ENQUEUED = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], 'enqueued_at', ARGV[2])
return 1
"""

#: Session chunks written per staging script: a bound on one script's arguments.
STAGE_CHUNK_BATCH = 500


class RunLedger(Ledger):
    """A run's whole ledger as the coordinator sees it."""

    def __init__(self, client, **options):
        super().__init__(client, **options)
        #: What this ledger's `stage` calls stored: items, session occurrences and the distinct ones, bytes.
        self.staging_stats = dict.fromkeys(("items", "item_bytes", "session_occurrences", "sessions_stored",
                                            "session_bytes"), 0)
        self._requeue = client.register_script(LUA_NUMBERS + _REQUEUE)
        self._lost = client.register_script(LUA_NUMBERS + _LOST)
        self._stage_chunks = client.register_script(_STAGE_CHUNKS)
        self._stage_item = client.register_script(_STAGE_ITEM)
        self._zdict = client.register_script(_ZDICT)
        self._mark_enqueued = client.register_script(_MARK_ENQUEUED)

    # -- runs -----------------------------------------------------------------
    def create_run(self, run_id: str, meta: dict) -> None:
        """Create the run's metadata, atomically refusing an id that exists."""
        if not self.r.set(self._key(check_run_id(run_id), "meta"), redact(json.dumps(meta)), nx=True):
            raise MemfarmError(f"run {run_id} already exists")
        self.r.zadd(RUNS_KEY, {run_id: meta.get("created", time.time())})

    def meta(self, run_id: str, *required: str) -> dict:
        """The run's metadata, checked; its `context` too (every field the reducer reads when `required`
        names it)."""
        meta = super().meta(run_id, *required)
        if "context" in meta:
            RunContext.check(meta["context"], f"{self._key(run_id, 'meta')} field 'context'",
                             whole="context" in required)
        return meta

    def update_meta(self, run_id: str, **changes) -> None:
        """Change fields of the run's metadata; never brings back the metadata of a run forgotten meanwhile."""
        meta = self.meta(run_id)
        meta.update(changes)
        if not self.r.set(self._key(run_id, "meta"), redact(json.dumps(meta)), xx=True):
            raise MemfarmError(f"run {run_id} was forgotten meanwhile")

    def runs(self) -> list[str]:
        """Runs whose metadata is still here, oldest first (ids of expired runs are pruned; an entry that is
        no run id is named and left out)."""
        ids = []
        with kind_checked(RUNS_KEY):
            members = self.r.zrange(RUNS_KEY, 0, -1)
        for raw in members:
            run_id = raw.decode(errors="backslashreplace")
            try:
                ids.append(check_run_id(run_id))
            except MemfarmError as error:
                self._warn(f"{RUNS_KEY}: {error}; left out")
        gone = [i for i in ids if not self.r.exists(self._key(i, "meta"))]
        if gone:
            self.r.zrem(RUNS_KEY, *gone)
        return [i for i in ids if i not in gone]

    def has_meta(self, run_id: str) -> bool:
        return bool(self.r.exists(self._key(check_run_id(run_id), "meta")))

    def run_keys(self, run_id: str) -> list[bytes]:
        return list(self.r.scan_iter(match=self._key(check_run_id(run_id), "*"), count=500))

    def forget(self, run_id: str) -> int:
        """Remove every key of the run (and its entry in the run index); returns how many keys went.

        The state hash goes first, in one command with the metadata: every transition a worker makes is a
        script that starts by reading the item's state, so from then on a worker still running an item of
        this run writes nothing (no outcome, no event) that the scan below could miss and leave behind.
        """
        removed = self.r.delete(self._key(check_run_id(run_id), "state"), self._key(run_id, "meta"))
        self.r.zrem(RUNS_KEY, run_id)
        for _ in range(3):  # a write begun before the state went may land after one scan: look again
            keys = self.run_keys(run_id)
            if not keys:
                break
            for start in range(0, len(keys), 500):
                removed += self.r.delete(*keys[start:start + 500])
        return removed

    def expire(self, run_id: str, seconds: int) -> int:
        """Let every key of the run expire after `seconds`; returns how many keys got the expiry."""
        keys = self.run_keys(run_id)
        pipe = self.r.pipeline()
        for key in keys:
            pipe.expire(key, seconds)
        pipe.execute()
        return len(keys)

    # -- staging --------------------------------------------------------------
    def stage(self, run_id: str, item: dict) -> bool:
        """Stage one item, once: an id already staged is left as it is (a resumed staging skips it).

        Its sessions go to Redis as content-addressed chunks, each stored once per run however many items
        hold it (LongMemEval-S repeats a fifth of its session occurrences); the chunks are written before
        the item is marked staged, so a worker never finds an item without its sessions.
        """
        item_id = item["item_id"]
        if len(item_id) > MAX_ITEM_ID_CHARS:  # it would be refused wherever it is read back from Redis
            raise MemfarmError(f"run {run_id}: item id {shown(item_id)} has {len(item_id)} characters; the farm "
                               f"stages ids of at most {MAX_ITEM_ID_CHARS}")
        if self.r.hexists(self._key(run_id, "state"), item_id):
            return False
        staged, chunks = split_sessions(item)
        zdict = self._session_dictionary(run_id, chunks)
        if chunks:
            staged["session_dictionary"] = dictionary_id(zdict)
        payload = pack(staged)
        packed = {digest: pack_session(raw, zdict) for digest, raw in chunks.items()}
        meta = self._key(run_id, "meta")
        stored, digests = [], list(packed)
        for start in range(0, len(digests), STAGE_CHUNK_BATCH):
            part = digests[start:start + STAGE_CHUNK_BATCH]
            flags = self._stage_chunks(keys=[meta, *(self._key(run_id, "session", d) for d in part)],
                                       args=[packed[d] for d in part])
            if flags == -1:
                raise self._forgotten(run_id)
            stored += [bool(f) for f in flags]
        verdict = self._stage_item(keys=[meta, self._key(run_id, "state"), self._key(run_id, "item", item_id),
                                         self._key(run_id, "order"), self._key(run_id, "info", item_id)],
                                   args=[item_id, payload, time.time()])
        if verdict == -1:
            raise self._forgotten(run_id)
        if not verdict:
            return False
        stats = self.staging_stats
        stats["items"] += 1
        stats["item_bytes"] += len(payload)
        stats["session_occurrences"] += len(staged.get("turn_chunks", ()))
        stats["sessions_stored"] += sum(1 for s in stored if s)
        stats["session_bytes"] += sum(len(c) for c, s in zip(packed.values(), stored) if s)
        return True

    def _session_dictionary(self, run_id: str, chunks: dict[str, bytes]) -> bytes:
        """The run's preset dictionary, as Redis holds it: made from the first item staged with sessions (a
        resumed or second staging finds the one already there; a Redis that lost it gets a new one, and each
        item records which it was packed with)."""
        key = self._key(run_id, "zdict")
        zdict = self.r.get(key)
        if zdict is None and chunks:
            zdict = self._zdict(keys=[self._key(run_id, "meta"), key], args=[session_dictionary(chunks)])
            if zdict is None:
                raise self._forgotten(run_id)
        return zdict or b""

    @staticmethod
    def _forgotten(run_id: str) -> MemfarmError:
        return MemfarmError(f"run {run_id} was forgotten while it was staging; staging stopped")

    def order(self, run_id: str) -> list[str]:
        """The run's item ids in dataset order, each once (an entry that is not UTF-8, or a repeat, is named
        and left out). An entry too long for an item id is a `LedgerValueError`: no staging wrote it, and as
        with an id that was never staged, the run cannot be reduced from a list it is in."""
        key = self._key(run_id, "order")
        with kind_checked(key):
            raw = self.r.lrange(key, 0, -1)
        order = {}
        for n, entry in enumerate(raw):
            try:
                item_id = text(entry, f"{key} entry {n}")
            except LedgerValueError as error:
                self._warn(f"{error}; left out")
                continue
            check_item_id(item_id, f"{key} entry {n}")
            if item_id in order:
                self._warn(f"{key} entry {n} repeats item {shown(item_id)}; left out")
                continue
            order[item_id] = None
        return list(order)

    def _hash(self, key: str) -> dict[str, str]:
        """A hash of the ledger keyed by item id, as text; a field that is not UTF-8 or no item id, or a value
        that is not UTF-8, is named and left out."""
        with kind_checked(key):
            raw = self.r.hgetall(key)
        values = {}
        for field, value in raw.items():
            try:
                name = check_item_id(text(field, key), f"{key} field")
                values[name] = text(value, key, name)
            except LedgerValueError as error:
                self._warn(f"{error}; left out")
        return values

    def states(self, run_id: str) -> dict[str, str]:
        """Each item's state; a value that is no `ItemState` is named and left out."""
        key = self._key(run_id, "state")
        states = {}
        for item_id, state in self._hash(key).items():
            if state in STATES:
                states[item_id] = state
            else:
                self._warn(f"{key} field {shown(item_id)} is {shown(state)}, not an item state; left out")
        return states

    def attempts(self, run_id: str) -> dict[str, int]:
        """Each item's attempt count; one that is not a whole number is named and left out."""
        key = self._key(run_id, "attempts")
        attempts = {}
        for item_id, value in self._hash(key).items():
            try:
                attempts[item_id] = int(value)
            except ValueError:
                self._warn(f"{key} field {shown(item_id)} is {shown(value)}, not a whole number; left out")
        return attempts

    def mark_enqueued(self, run_id: str, item_id: str) -> None:
        """Note when the item's message was sent (a queued item with no message is re-sent after a while)."""
        self._mark_enqueued(keys=[self._key(run_id, "state"), self._key(run_id, "info", item_id)],
                            args=[item_id, time.time()])

    def ttl(self, run_id: str) -> int:
        """Seconds until the run's keys expire; -1 when they never do."""
        return self.r.ttl(self._key(run_id, "meta"))

    def infos(self, run_id: str, item_ids) -> dict[str, dict]:
        """Every named item's info hash, in one round trip."""
        item_ids = list(item_ids)
        pipe = self.r.pipeline()
        for item_id in item_ids:
            pipe.hgetall(self._key(run_id, "info", item_id))
        with kind_checked(self._key(run_id, "info", "*")):
            replies = pipe.execute()
        return {item_id: check_info(raw, self._key(run_id, "info", item_id), self._warn)
                for item_id, raw in zip(item_ids, replies)}

    def has_lease(self, run_id: str, item_id: str) -> bool:
        return bool(self.r.exists(self._key(run_id, "lease", item_id)))

    # -- transitions ----------------------------------------------------------------
    def requeue(self, run_id: str, item_id: str, from_states=(ItemState.FAILED.value,),
                reset_attempts: bool = False) -> bool:
        """Queue the item again, only if it is in one of `from_states`; True if it was."""
        keys = [self._key(run_id, "state"), self._key(run_id, "info", item_id), self._key(run_id, "attempts")]
        return bool(self._requeue(keys=keys, args=[item_id, time.time(), "1" if reset_attempts else "0",
                                                    *from_states]))

    def declare_lost(self, run_id: str, item_id: str, attempt: int, *, reason: str, max_attempts: int,
                     stale_after: float) -> str:
        """`requeued`, `final` (the cap is reached) or `skip` (the attempt is alive or already over)."""
        k = self._item_keys(run_id, item_id)
        verdict = self._lost(keys=[k["state"], k["attempts"], k["info"], k["lease"], k["events"]],
                             args=[item_id, attempt, time.time(), reason, max_attempts, stale_after])
        return verdict.decode() if isinstance(verdict, bytes) else verdict

    def wait_event(self, run_id: str, timeout: float) -> int:
        """Block until an item finishes or fails (or `timeout` passes); returns how many did."""
        key = self._key(run_id, "events")
        first = self.r.blpop([key], timeout=timeout)
        if first is None:
            return 0
        pipe = self.r.pipeline()
        pipe.lrange(key, 0, -1)
        pipe.delete(key)
        return 1 + len(pipe.execute()[0])

    def outcome(self, run_id: str, item_id: str) -> dict | None:
        """The item's outcome, inflated no further than `MAX_UNPACKED_BYTES` and checked (`check_outcome`);
        one that is not is a `LedgerValueError` naming its key."""
        key = self._key(run_id, "outcome", item_id)
        raw = self.bounded_get(key, MAX_UNPACKED_BYTES)
        return check_outcome(unpack(raw, key), key) if raw else None

    # -- the broker's own view ----------------------------------------------------
    def waiting_messages(self, run_id: str) -> set[str]:
        """Item ids of this run with a task message waiting in the queue or delivered and not yet acknowledged.
        An entry that is not a task message is named and skipped."""
        with kind_checked(QUEUE):
            queued = self.r.lrange(QUEUE, 0, -1)
        with kind_checked("unacked"):
            unacked = self.r.hgetall("unacked")
        entries = [(f"{QUEUE} entry {n}", raw, False) for n, raw in enumerate(queued)]
        entries += [(f"unacked field {shown(tag.decode(errors='backslashreplace'))}", raw, True)
                    for tag, raw in unacked.items()]
        found = set()
        for where, raw, wrapped in entries:
            try:
                message_run, item_id = message_args(raw, wrapped)
            except ValueError as why:
                self._warn(f"{where} is skipped: {why}")
                continue
            if message_run == run_id:
                found.add(item_id)
        return found
