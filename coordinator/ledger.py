"""The coordinator's half of the ledger: create and stage runs, read their state, requeue, wait.

Built on the worker's half (`workers.ledger.Ledger`), which holds the key
layout and the transitions a worker makes.
"""

from __future__ import annotations

import json
import time
import zlib

from adapters.errors import MemfarmError
from workers.ledger import ItemState, Ledger, connect, redact

__all__ = ["ItemState", "RunLedger", "connect", "redact"]

RUNS_KEY = "memfarm:runs"


class RunLedger(Ledger):
    """A run's whole ledger as the coordinator sees it."""

    def create_run(self, run_id: str, meta: dict) -> None:
        if self.r.exists(self._key(run_id, "meta")):
            raise MemfarmError(f"run {run_id} already exists")
        self.r.set(self._key(run_id, "meta"), json.dumps(meta))
        self.r.zadd(RUNS_KEY, {run_id: time.time()})

    def update_meta(self, run_id: str, **changes) -> None:
        meta = self.meta(run_id)
        meta.update(changes)
        self.r.set(self._key(run_id, "meta"), json.dumps(meta))

    def runs(self) -> list[str]:
        return [r.decode() for r in self.r.zrange(RUNS_KEY, 0, -1)]

    def stage(self, run_id: str, item: dict) -> None:
        item_id = item["item_id"]
        payload = zlib.compress(json.dumps(item, ensure_ascii=False).encode(), 6)
        pipe = self.r.pipeline()
        pipe.set(self._key(run_id, "item", item_id), payload)
        pipe.rpush(self._key(run_id, "order"), item_id)
        pipe.hset(self._key(run_id, "state"), item_id, ItemState.QUEUED.value)
        pipe.hset(self._key(run_id, "info", item_id), mapping={"queued_at": time.time()})
        pipe.execute()

    def order(self, run_id: str) -> list[str]:
        return [i.decode() for i in self.r.lrange(self._key(run_id, "order"), 0, -1)]

    def states(self, run_id: str) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.r.hgetall(self._key(run_id, "state")).items()}

    def attempts(self, run_id: str) -> dict[str, int]:
        return {k.decode(): int(v) for k, v in self.r.hgetall(self._key(run_id, "attempts")).items()}

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

    def requeue(self, run_id: str, item_id: str, reset_attempts: bool = False) -> None:
        pipe = self.r.pipeline()
        pipe.hset(self._key(run_id, "state"), item_id, ItemState.QUEUED.value)
        pipe.hset(self._key(run_id, "info", item_id), mapping={"queued_at": time.time()})
        if reset_attempts:
            pipe.hdel(self._key(run_id, "attempts"), item_id)
        pipe.execute()

    def outcome(self, run_id: str, item_id: str) -> dict | None:
        raw = self.r.get(self._key(run_id, "outcome", item_id))
        return json.loads(raw) if raw else None

    def record_count(self, run_id: str) -> int:
        return sum(1 for _ in self.r.scan_iter(self._key(run_id, "outcome", "*")))
