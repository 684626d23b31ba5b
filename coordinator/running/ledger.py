"""The coordinator's half of the ledger: create and stage runs, read their state, requeue, wait, forget.

Built on the worker's half (`workers.ledger.Ledger`), which holds the key
layout and the transitions a worker makes. Every transition here is atomic
too: run creation is `SET NX`, and requeueing an item or declaring an attempt
lost are Lua scripts that check the state (and attempt) they start from.
"""

from __future__ import annotations

import base64
import json
import time

from adapters.errors import MemfarmError
from workers.app import QUEUE
from workers.ledger import (ItemState, Ledger, check_run_id, connect, dictionary_id, pack, pack_session, redact,
                            session_dictionary, split_sessions, unpack)

__all__ = ["ItemState", "RunLedger", "check_run_id", "connect", "redact"]

RUNS_KEY = "memfarm:runs"
#: How long a reduced run's keys stay in Redis (MEMFARM_RUN_TTL_SECONDS overrides).
DEFAULT_RUN_TTL_SECONDS = 3 * 24 * 3600

# KEYS: state, info, attempts. ARGV: item, now, reset_attempts, allowed states...
_REQUEUE = """
local state = redis.call('HGET', KEYS[1], ARGV[1])
local allowed = false
for i = 4, #ARGV do if state == ARGV[i] then allowed = true end end
if not allowed then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], 'queued')
redis.call('HSET', KEYS[2], 'queued_at', ARGV[2], 'error', '')
if ARGV[3] == '1' then redis.call('HDEL', KEYS[3], ARGV[1]) end
return 1
"""

# KEYS: state, attempts, info, lease, events. ARGV: item, attempt, now, reason, max_attempts, stale_after.
# An attempt is lost when it is still `started` under the same attempt number and either its lease lapsed
# or it ran past the hard limit. Lost: queued again under the cap, a final failure at it.
_LOST = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= 'started' then return 'skip' end
if tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') ~= tonumber(ARGV[2]) then return 'skip' end
local started = tonumber(redis.call('HGET', KEYS[3], 'started_at') or '0')
if redis.call('EXISTS', KEYS[4]) == 1 and tonumber(ARGV[3]) - started < tonumber(ARGV[6]) then return 'skip' end
redis.call('DEL', KEYS[4])
redis.call('HINCRBY', KEYS[3], 'lost', 1)
redis.call('RPUSH', KEYS[5], ARGV[1])
if tonumber(ARGV[2]) >= tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], ARGV[1], 'failed_final')
  redis.call('HSET', KEYS[3], 'finished_at', ARGV[3], 'error', ARGV[4])
  return 'final'
end
redis.call('HSET', KEYS[1], ARGV[1], 'queued')
redis.call('HSET', KEYS[3], 'queued_at', ARGV[3], 'error', ARGV[4])
return 'requeued'
"""


class RunLedger(Ledger):
    """A run's whole ledger as the coordinator sees it."""

    def __init__(self, client, **options):
        super().__init__(client, **options)
        #: What this ledger's `stage` calls stored: items, session occurrences and the distinct ones, bytes.
        self.staging_stats = dict.fromkeys(("items", "item_bytes", "session_occurrences", "sessions_stored",
                                            "session_bytes"), 0)
        self._requeue = client.register_script(_REQUEUE)
        self._lost = client.register_script(_LOST)

    # -- runs -----------------------------------------------------------------
    def create_run(self, run_id: str, meta: dict) -> None:
        """Create the run's metadata, atomically refusing an id that exists."""
        if not self.r.set(self._key(check_run_id(run_id), "meta"), redact(json.dumps(meta)), nx=True):
            raise MemfarmError(f"run {run_id} already exists")
        self.r.zadd(RUNS_KEY, {run_id: meta.get("created", time.time())})

    def update_meta(self, run_id: str, **changes) -> None:
        meta = self.meta(run_id)
        meta.update(changes)
        self.r.set(self._key(run_id, "meta"), redact(json.dumps(meta)))

    def runs(self) -> list[str]:
        """Runs whose metadata is still here, oldest first (ids of expired runs are pruned)."""
        ids = [r.decode() for r in self.r.zrange(RUNS_KEY, 0, -1)]
        gone = [i for i in ids if not self.r.exists(self._key(i, "meta"))]
        if gone:
            self.r.zrem(RUNS_KEY, *gone)
        return [i for i in ids if i not in gone]

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
        if self.r.hexists(self._key(run_id, "state"), item_id):
            return False
        staged, chunks = split_sessions(item)
        zdict = self._session_dictionary(run_id, chunks)
        if chunks:
            staged["session_dictionary"] = dictionary_id(zdict)
        payload = pack(staged)
        packed = {digest: pack_session(raw, zdict) for digest, raw in chunks.items()}
        pipe = self.r.pipeline()
        for digest, chunk in packed.items():
            pipe.set(self._key(run_id, "session", digest), chunk, nx=True)
        stored = pipe.execute()
        if not self.r.hsetnx(self._key(run_id, "state"), item_id, ItemState.QUEUED.value):
            return False
        pipe = self.r.pipeline()
        pipe.set(self._key(run_id, "item", item_id), payload)
        pipe.rpush(self._key(run_id, "order"), item_id)
        pipe.hset(self._key(run_id, "info", item_id), mapping={"queued_at": time.time()})
        pipe.execute()
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
            self.r.set(key, session_dictionary(chunks), nx=True)
            zdict = self.r.get(key)
        return zdict or b""

    def order(self, run_id: str) -> list[str]:
        return [i.decode() for i in self.r.lrange(self._key(run_id, "order"), 0, -1)]

    def states(self, run_id: str) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.r.hgetall(self._key(run_id, "state")).items()}

    def attempts(self, run_id: str) -> dict[str, int]:
        return {k.decode(): int(v) for k, v in self.r.hgetall(self._key(run_id, "attempts")).items()}

    def mark_enqueued(self, run_id: str, item_id: str) -> None:
        """Note when the item's message was sent (a queued item with no message is re-sent after a while)."""
        self.r.hset(self._key(run_id, "info", item_id), "enqueued_at", time.time())

    def ttl(self, run_id: str) -> int:
        """Seconds until the run's keys expire; -1 when they never do."""
        return self.r.ttl(self._key(run_id, "meta"))

    def infos(self, run_id: str, item_ids) -> dict[str, dict]:
        """Every named item's info hash, in one round trip."""
        item_ids = list(item_ids)
        pipe = self.r.pipeline()
        for item_id in item_ids:
            pipe.hgetall(self._key(run_id, "info", item_id))
        return {item_id: {k.decode(): v.decode() for k, v in raw.items()}
                for item_id, raw in zip(item_ids, pipe.execute())}

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
        raw = self.r.get(self._key(run_id, "outcome", item_id))
        return unpack(raw) if raw else None

    # -- the broker's own view ----------------------------------------------------
    def waiting_messages(self, run_id: str) -> set[str]:
        """Item ids of this run with a task message waiting in the queue or delivered and not yet acknowledged."""
        found = set()
        raw = list(self.r.lrange(QUEUE, 0, -1)) + [json.loads(v)[0] for v in self.r.hvals("unacked")]
        for message in raw:
            try:
                message = json.loads(message) if isinstance(message, (bytes, str)) else message
                body = message["body"]
                if message.get("properties", {}).get("body_encoding") == "base64":
                    body = base64.b64decode(body)
                args = json.loads(body)[0]
            except (ValueError, KeyError, TypeError, IndexError):
                continue
            if len(args) >= 2 and args[0] == run_id:
                found.add(args[1])
        return found
