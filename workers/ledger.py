"""The worker's half of the ledger: per-run state in Redis, the single source of truth of a farm run.

Keys live under `memfarm:{run_id}:`. An item is staged once, compressed, by
the coordinator; a worker loads it, marks its attempt begun, and ends it
done (its outcome under one key, so a task that runs twice still leaves one
set of records) or failed. The coordinator's half (staging, requeue, resume,
watch, reduce) is `coordinator.ledger.RunLedger`, built on this class.
"""

from __future__ import annotations

import enum
import json
import time
import zlib
from urllib.parse import urlsplit, urlunsplit

import redis

from adapters.errors import MemfarmError


class ItemState(str, enum.Enum):
    """The lifecycle of one item: queued -> started -> done | failed (retried) | failed_final."""

    QUEUED = "queued"
    STARTED = "started"
    DONE = "done"
    FAILED = "failed"
    FAILED_FINAL = "failed_final"


#: States an item never leaves on its own.
FINISHED_STATES = (ItemState.DONE.value, ItemState.FAILED_FINAL.value)


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
    """What a worker reads and writes: a run's settings, its staged items and their lifecycle."""

    def __init__(self, client: redis.Redis):
        self.r = client

    @staticmethod
    def _key(run_id: str, *parts: str) -> str:
        return ":".join(("memfarm", run_id, *parts))

    def meta(self, run_id: str) -> dict:
        raw = self.r.get(self._key(run_id, "meta"))
        if raw is None:
            raise MemfarmError(f"no run {run_id!r} in this redis")
        return json.loads(raw)

    def load_item(self, run_id: str, item_id: str) -> dict:
        payload = self.r.get(self._key(run_id, "item", item_id))
        if payload is None:
            raise MemfarmError(f"run {run_id}: item {item_id} was never staged")
        return json.loads(zlib.decompress(payload))

    def state(self, run_id: str, item_id: str) -> str | None:
        value = self.r.hget(self._key(run_id, "state"), item_id)
        return value.decode() if value else None

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
        pipe.rpush(self._key(run_id, "events"), item_id)
        pipe.execute()

    def fail(self, run_id: str, item_id: str, error: str, final: bool = False) -> None:
        """Mark the item failed: `failed` is retried by the coordinator, `failed_final` is not."""
        state = ItemState.FAILED_FINAL if final else ItemState.FAILED
        pipe = self.r.pipeline()
        pipe.hset(self._key(run_id, "state"), item_id, state.value)
        pipe.hset(self._key(run_id, "info", item_id), mapping={"finished_at": time.time(), "error": error[:4000]})
        pipe.rpush(self._key(run_id, "events"), item_id)
        pipe.execute()
