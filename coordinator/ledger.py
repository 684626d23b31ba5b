"""The ledger: per-run state in Redis, the single source of truth of a farm run.

Keys live under `memfarm:{run_id}:`. Items are staged once, compressed; each
item has a state (an explicit lifecycle), an attempt counter, worker and
error text; an item's outcome is written under one key, so a task that runs
twice still leaves one set of records.
"""

from __future__ import annotations

import enum
import json
import time
import zlib
from urllib.parse import urlsplit, urlunsplit

import redis

from memoria.errors import MemfarmError

RUNS_KEY = "memfarm:runs"


class ItemState(str, enum.Enum):
    QUEUED = "queued"
    STARTED = "started"
    DONE = "done"
    FAILED = "failed"


def redact(url: str) -> str:
    """The URL without its password, for logs and manifests."""
    parts = urlsplit(url)
    if parts.password:
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        user = parts.username or ""
        return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))
    return url


def connect(url: str) -> redis.Redis:
    """A checked connection; a bad password or an unreachable server is one clear error."""
    client = redis.Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30)
    try:
        client.ping()
    except redis.exceptions.AuthenticationError as exc:
        if not urlsplit(url).password:
            raise MemfarmError(f"redis at {redact(url)} needs a password: put it in the broker URL") from exc
        raise MemfarmError(f"redis at {redact(url)} refused the credentials: check the password in the broker URL") from exc
    except redis.exceptions.ResponseError as exc:
        if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            raise MemfarmError(f"redis at {redact(url)} needs a password: put it in the broker URL") from exc
        raise MemfarmError(f"redis at {redact(url)}: {exc}") from exc
    except redis.exceptions.ConnectionError as exc:
        raise MemfarmError(f"cannot reach redis at {redact(url)}: {exc}") from exc
    return client


class Ledger:
    def __init__(self, client: redis.Redis):
        self.r = client

    @staticmethod
    def _key(run_id: str, *parts: str) -> str:
        return ":".join(("memfarm", run_id, *parts))

    # -- runs -----------------------------------------------------------------
    def create_run(self, run_id: str, meta: dict) -> None:
        if self.r.exists(self._key(run_id, "meta")):
            raise MemfarmError(f"run {run_id} already exists")
        self.r.set(self._key(run_id, "meta"), json.dumps(meta))
        self.r.zadd(RUNS_KEY, {run_id: time.time()})

    def meta(self, run_id: str) -> dict:
        raw = self.r.get(self._key(run_id, "meta"))
        if raw is None:
            raise MemfarmError(f"no run {run_id!r} in this redis")
        return json.loads(raw)

    def update_meta(self, run_id: str, **changes) -> None:
        meta = self.meta(run_id)
        meta.update(changes)
        self.r.set(self._key(run_id, "meta"), json.dumps(meta))

    def runs(self) -> list[str]:
        return [r.decode() for r in self.r.zrange(RUNS_KEY, 0, -1)]

    # -- staging --------------------------------------------------------------
    def stage(self, run_id: str, item: dict) -> None:
        item_id = item["item_id"]
        payload = zlib.compress(json.dumps(item, ensure_ascii=False).encode(), 6)
        pipe = self.r.pipeline()
        pipe.set(self._key(run_id, "item", item_id), payload)
        pipe.rpush(self._key(run_id, "order"), item_id)
        pipe.hset(self._key(run_id, "state"), item_id, ItemState.QUEUED.value)
        pipe.hset(self._key(run_id, "info", item_id), mapping={"queued_at": time.time()})
        pipe.execute()

    def load_item(self, run_id: str, item_id: str) -> dict:
        payload = self.r.get(self._key(run_id, "item", item_id))
        if payload is None:
            raise MemfarmError(f"run {run_id}: item {item_id} was never staged")
        return json.loads(zlib.decompress(payload))

    def order(self, run_id: str) -> list[str]:
        return [i.decode() for i in self.r.lrange(self._key(run_id, "order"), 0, -1)]

    # -- lifecycle ------------------------------------------------------------
    def states(self, run_id: str) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.r.hgetall(self._key(run_id, "state")).items()}

    def state(self, run_id: str, item_id: str) -> str | None:
        value = self.r.hget(self._key(run_id, "state"), item_id)
        return value.decode() if value else None

    def attempts(self, run_id: str) -> dict[str, int]:
        return {k.decode(): int(v) for k, v in self.r.hgetall(self._key(run_id, "attempts")).items()}

    def info(self, run_id: str, item_id: str) -> dict:
        return {k.decode(): v.decode() for k, v in self.r.hgetall(self._key(run_id, "info", item_id)).items()}

    def begin(self, run_id: str, item_id: str, worker: str) -> int:
        """Mark an attempt as started; returns its number (1 for the first)."""
        pipe = self.r.pipeline()
        pipe.hincrby(self._key(run_id, "attempts"), item_id, 1)
        pipe.hset(self._key(run_id, "state"), item_id, ItemState.STARTED.value)
        pipe.hset(self._key(run_id, "info", item_id), mapping={"worker": worker, "started_at": time.time()})
        return int(pipe.execute()[0])

    def finish(self, run_id: str, item_id: str, outcome: dict) -> None:
        """Store the outcome under its one key and mark the item done (idempotent)."""
        pipe = self.r.pipeline()
        pipe.set(self._key(run_id, "outcome", item_id), json.dumps(outcome, ensure_ascii=False))
        pipe.hset(self._key(run_id, "state"), item_id, ItemState.DONE.value)
        pipe.hset(self._key(run_id, "info", item_id), mapping={"finished_at": time.time(), "error": ""})
        pipe.hdel(self._key(run_id, "final"), item_id)
        pipe.rpush(self._key(run_id, "events"), item_id)
        pipe.execute()

    def fail(self, run_id: str, item_id: str, error: str, final: bool = False) -> None:
        pipe = self.r.pipeline()
        pipe.hset(self._key(run_id, "state"), item_id, ItemState.FAILED.value)
        pipe.hset(self._key(run_id, "info", item_id), mapping={"finished_at": time.time(), "error": error[:4000]})
        if final:
            pipe.hset(self._key(run_id, "final"), item_id, 1)
        pipe.rpush(self._key(run_id, "events"), item_id)
        pipe.execute()

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

    def is_final(self, run_id: str, item_id: str) -> bool:
        return bool(self.r.hexists(self._key(run_id, "final"), item_id))

    def requeue(self, run_id: str, item_id: str, reset_attempts: bool = False) -> None:
        pipe = self.r.pipeline()
        pipe.hset(self._key(run_id, "state"), item_id, ItemState.QUEUED.value)
        pipe.hset(self._key(run_id, "info", item_id), mapping={"queued_at": time.time()})
        pipe.hdel(self._key(run_id, "final"), item_id)
        if reset_attempts:
            pipe.hdel(self._key(run_id, "attempts"), item_id)
        pipe.execute()

    def outcome(self, run_id: str, item_id: str) -> dict | None:
        raw = self.r.get(self._key(run_id, "outcome", item_id))
        return json.loads(raw) if raw else None

    def record_count(self, run_id: str) -> int:
        return sum(1 for _ in self.r.scan_iter(self._key(run_id, "outcome", "*")))
