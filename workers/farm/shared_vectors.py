"""Vectors shared by every worker of a farm through its Redis (`--shared-embeddings`).

A worker's embedding store (`memoria.embedding_store`) saves re-encoding on one
machine; this tier saves it across machines: a text one worker encoded is
fetched by the others instead of encoded again. Each vector is stored under
`memfarm-vectors:<key>` (the store's key: SHA-256 over the embedder's signature,
model files and the exact text) as float32 bytes after a 16-byte checksum; outside
every run's `memfarm:<run id>:` keys, so no run's forget or expiry touches them.
The checksum catches damage, not forgery: anyone who may write to the farm's Redis
can write a vector with a valid checksum under any text's key. So a fetching machine
checks what it gets against its own encoding of a random sample (`memoria.embedding_store`)
and, when one disagrees, refuses the fetch and removes its keys here (`forget`). A vector that is not finite is never served; a damaged one is deleted
when read, so that the next worker to encode its text writes it again (writes never replace a vector).

Float32, not float16: a vector fetched from Redis is then bit for bit the one the
fetching worker would have made, so a run's numbers never depend on which worker
encoded which text (float16 halves the memory but moves scores in their fourth
digit, enough to flip near ties). Memory is bounded: at most `max_bytes` of
vectors are written per `ttl_seconds` (a counter that expires with them), and
every vector expires. Any Redis error leaves the worker encoding by itself: this
tier is an optimisation and never fails an item.
"""

from __future__ import annotations

import logging
import secrets

import numpy as np
import redis

from memoria.checksums import VECTOR_CHECKSUM_BYTES, vector_checksum

logger = logging.getLogger(__name__)

PREFIX = "memfarm-vectors:"
#: `memfarm-vector-claims:<key>`: which worker is encoding a text now; deleted when its vector is written.
CLAIM_PREFIX = "memfarm-vector-claims:"
#: A claim outlives a worker that died while encoding by this long at most; the others wait less (the store's
#: bound) and encode the text themselves.
CLAIM_TTL_SECONDS = 600
BUDGET_KEY = "memfarm-vectors-budget"
DEFAULT_MAX_BYTES = 256 << 20
DEFAULT_TTL_SECONDS = 7 * 24 * 3600


def forget_all(client: redis.Redis) -> int:
    """Remove every shared vector and the budget; returns how many keys went."""
    keys = list(client.scan_iter(match=PREFIX + "*", count=1000))
    keys += list(client.scan_iter(match=CLAIM_PREFIX + "*", count=1000))
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start:start + 1000])
    return len(keys) + client.delete(BUDGET_KEY)


class RedisVectors:
    """The shared tier of `memoria.embedding_store.StoredEmbedder`, in a farm's Redis."""

    def __init__(self, client: redis.Redis, max_bytes: int = DEFAULT_MAX_BYTES, ttl_seconds: int = DEFAULT_TTL_SECONDS,
                 claims: bool = True):
        self.r = client
        self.claims = claims
        self.token = secrets.token_hex(8)
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self.counts = {"fetched": 0, "written": 0, "damaged": 0, "skipped_full": 0, "errors": 0, "claimed": 0,
                       "claimed_elsewhere": 0, "forgotten": 0}
        self._warned = False

    def _failed(self, exc: Exception) -> None:
        self.counts["errors"] += 1
        if not self._warned:
            logger.warning("shared embeddings unavailable (%s); this worker encodes by itself", exc)
            self._warned = True

    def get(self, keys: list[str], dimension: int) -> dict[str, np.ndarray]:
        found, damaged = {}, []
        try:
            for start in range(0, len(keys), 500):
                part = keys[start:start + 500]
                for key, raw in zip(part, self.r.mget([PREFIX + k for k in part])):
                    if raw is None:
                        continue
                    blob = raw[VECTOR_CHECKSUM_BYTES:]
                    intact = raw[:VECTOR_CHECKSUM_BYTES] == vector_checksum(key, blob)
                    if len(blob) != 4 * dimension or not intact:
                        self.counts["damaged"] += 1
                        damaged += [] if intact else [PREFIX + key]
                        continue
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if not np.isfinite(vector).all():
                        self.counts["damaged"] += 1
                        damaged.append(PREFIX + key)
                        continue
                    found[key] = vector
            if damaged:  # writes are SET NX: the next worker to encode the text replaces it
                self.r.delete(*damaged)
        except redis.RedisError as exc:
            self._failed(exc)
        self.counts["fetched"] += len(found)
        return found

    def forget(self, keys: list[str]) -> None:
        """Remove these vectors (a fetch that held a forged one): the next worker to encode their texts writes them."""
        try:
            for start in range(0, len(keys), 1000):
                self.counts["forgotten"] += self.r.delete(*(PREFIX + k for k in keys[start:start + 1000]))
        except redis.RedisError as exc:
            self._failed(exc)

    def put(self, vectors: dict) -> None:
        if not vectors:
            return
        payloads = {}
        for key, vector in vectors.items():
            blob = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
            payloads[key] = vector_checksum(key, blob) + blob
        size = sum(len(p) for p in payloads.values())
        try:
            pipe = self.r.pipeline(transaction=True)
            pipe.set(BUDGET_KEY, 0, ex=self.ttl_seconds, nx=True)  # the first write of a window starts its clock
            pipe.incrby(BUDGET_KEY, size)  # keeps the key's time to live
            used = pipe.execute()[1]
            if used > self.max_bytes:  # not shared: its claims go, or the others would wait for it
                self.counts["skipped_full"] += len(payloads)
                if self.claims:
                    self.r.delete(*(CLAIM_PREFIX + key for key in payloads))
                return
            pipe = self.r.pipeline(transaction=False)
            for key, payload in payloads.items():
                pipe.set(PREFIX + key, payload, ex=self.ttl_seconds, nx=True)
            if self.claims:
                pipe.delete(*(CLAIM_PREFIX + key for key in payloads))
            pipe.execute()
            self.counts["written"] += len(payloads)
        except redis.RedisError as exc:
            self._failed(exc)

    def claim(self, keys: list[str]) -> set[str]:
        """The keys this worker now encodes: those no other worker claimed. All of them when claims are off,
        the budget is spent (no vector would be shared) or Redis fails: claims only ever save work."""
        if not self.claims or not keys:
            return set(keys)
        try:
            if int(self.r.get(BUDGET_KEY) or 0) > self.max_bytes:
                return set(keys)
            pipe = self.r.pipeline(transaction=False)
            for key in keys:
                pipe.set(CLAIM_PREFIX + key, self.token, ex=CLAIM_TTL_SECONDS, nx=True)
            mine = {key for key, won in zip(keys, pipe.execute()) if won}
        except (redis.RedisError, ValueError) as exc:  # ValueError: a budget key that is not a number
            self._failed(exc)
            return set(keys)
        self.counts["claimed"] += len(mine)
        self.counts["claimed_elsewhere"] += len(keys) - len(mine)
        return mine
