"""A content-addressed store of embeddings on local disk: each distinct text is encoded once per machine.

In LongMemEval-S most filler sessions recur across questions with identical
content, so most of a cold run's encoding is of texts encoded before. The store
keys a vector by (the embedder's signature and model files, SHA-256 of the exact
text the model is given) and keeps it in SQLite (WAL mode), so every process of
a worker shares it safely: readers never block, writers wait their turn, and an
insert of a vector another process wrote first is a no-op. Each row carries a
checksum of its key and bytes; a row that fails it is deleted and encoded again.
A size cap evicts the least recently used rows. Vectors are raw float32 bytes:
no pickle anywhere. Each row records where its vector came from (`origin`: encoded
here, taken from the shared tier, or unknown for rows written before origins were
kept), so that a machine can forget everything it took from elsewhere.

`StoredEmbedder` wraps any embedder (same `encode`, `signature`, `dimension`) and
counts texts encoded and texts served from the store; it may also ask a second,
shared tier (a farm's Redis) before encoding, and give it what it encoded. A tier that
can `claim` texts makes a fleet encode each new text once: a text another machine
claimed is waited for rather than encoded a second time at the same moment.
Anyone who may write to that tier can write any vector under any text's key, with a
valid checksum: a vector from another machine is checked before it is used or kept
(`SHARED_VERIFY_SHARE`, `SHARED_VERIFY_TOLERANCE`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from memoria.checksums import vector_checksum

logger = logging.getLogger(__name__)

#: Default cap of a store, in bytes of vectors (a 384-d vector is 1.5 KiB: about 700k vectors).
DEFAULT_MAX_BYTES = 1 << 30
#: How often (per cap's worth of bytes written by one process) the size is summed and the cap enforced;
#: a store may overshoot its cap by about 1/this per writing process between two checks.
EVICTION_CHECKS_PER_CAP = 64
#: Waiting for texts another machine claimed: poll the shared tier this often, for at least this long, and at most
#: as long as encoding them here would take at this process's last measured rate (or this one, before any).
CLAIM_POLL_SECONDS = 0.25
CLAIM_MIN_WAIT_SECONDS = 2.0
CLAIM_WAIT_RATE = 20.0
#: ... and never longer than this, whatever the rate (a first encode that included the model's load measures a
#: rate far too low); below the claims' own lifetime (`workers.farm.shared_vectors.CLAIM_TTL_SECONDS`,
#: 10 minutes).
CLAIM_MAX_WAIT_SECONDS = 120.0
#: Where a stored vector came from: encoded on this machine, taken from the shared tier (another machine), or not
#: known (a row written before origins were kept; it may have come from the shared tier).
ORIGIN_LOCAL, ORIGIN_SHARED, ORIGIN_UNKNOWN = "local", "shared", "unknown"
#: Each vector the shared tier returns is encoded here again with this probability, and at least one of every
#: fetch, chosen by a random source no one else sees; a fetch holding one vector farther than the tolerance (per
#: component) from this machine's own is refused whole, and this process reads the tier no more. A tier filled with
#: forged vectors is caught at the first fetch; k forged vectors hidden among genuine ones go unseen with
#: probability about (1 - share) ** k per machine that fetches them. Machines with other CPUs differ by ~1e-7.
SHARED_VERIFY_SHARE = 0.05
SHARED_VERIFY_TOLERANCE = 1e-4
_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    key TEXT PRIMARY KEY,
    vector BLOB NOT NULL,
    checksum TEXT NOT NULL,
    used REAL NOT NULL,
    origin TEXT NOT NULL DEFAULT 'unknown'
);
CREATE INDEX IF NOT EXISTS vectors_used ON vectors (used);
"""


def text_key(space: str, text: str) -> str:
    """The key of `text` in a vector space: SHA-256 over the space and the exact text."""
    return hashlib.sha256(f"{space}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


#: Tries, and the longest pause between two, of a step that SQLite refuses with "database is locked" at once.
LOCKED_TRIES, LOCKED_PAUSE_MAX = 40, 0.5


def _while_locked(step):
    """Run `step`, again while SQLite says the database is locked. Several processes opening a new store
    together (workers sharing one cache volume, starting at once) race to switch it to WAL and create its
    tables; SQLite reports that lock at once rather than through the busy timeout, so the loser tries again,
    backing off, for about 15 s at most."""
    for attempt in range(LOCKED_TRIES):
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == LOCKED_TRIES - 1:
                raise
            time.sleep(min(LOCKED_PAUSE_MAX, 0.01 * 2 ** attempt))


def _add_origin(db: sqlite3.Connection) -> None:
    """A store made before origins were kept gets the column; its rows' origin is unknown."""
    if "origin" in {row[1] for row in db.execute("PRAGMA table_info(vectors)")}:
        return
    try:
        db.execute(f"ALTER TABLE vectors ADD COLUMN origin TEXT NOT NULL DEFAULT '{ORIGIN_UNKNOWN}'")
    except sqlite3.OperationalError as exc:
        if "duplicate column" not in str(exc):  # another process added it first
            raise


class EmbeddingStore:
    """Vectors by key in one SQLite file; safe for many processes and threads at once."""

    def __init__(self, path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self._written = 0  # bytes this process put since it last summed the store's size
        self._local = threading.local()
        with self._connection() as db:
            _while_locked(lambda: db.executescript(_SCHEMA))
            _while_locked(lambda: _add_origin(db))

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            _while_locked(lambda: db.execute("PRAGMA journal_mode=WAL"))
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=60000")
            self._local.db = db
        return db

    def get(self, keys: list[str], dimension: int) -> tuple[dict[str, np.ndarray], int]:
        """({key: vector} for the keys held and intact, how many damaged rows were dropped)."""
        found, damaged = {}, []
        db = self._connection()
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            rows = db.execute(f"SELECT key, vector, checksum FROM vectors WHERE key IN ({','.join('?' * len(chunk))})",
                              chunk).fetchall()
            for key, blob, checksum in rows:
                if len(blob) != 4 * dimension or vector_checksum(key, blob).hex() != checksum:
                    damaged.append(key)
                    continue
                found[key] = np.frombuffer(blob, dtype=np.float32)
        if damaged:
            logger.warning("embedding store %s: %d damaged vectors dropped, to be encoded again", self.path,
                           len(damaged))
        if damaged or found:  # one write transaction per call, not one per row
            now = time.time()
            with self._transaction() as tx:
                tx.executemany("DELETE FROM vectors WHERE key = ?", [(k,) for k in damaged])
                tx.executemany("UPDATE vectors SET used = ? WHERE key = ?", [(now, k) for k in found])
        return found, len(damaged)

    @contextmanager
    def _transaction(self):
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def put(self, vectors: dict[str, np.ndarray], origin: str = ORIGIN_LOCAL) -> None:
        if not vectors:
            return
        now = time.time()
        rows = []
        for key, vector in vectors.items():
            blob = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
            rows.append((key, blob, vector_checksum(key, blob).hex(), now, origin))
        with self._transaction() as tx:
            tx.executemany("INSERT OR IGNORE INTO vectors (key, vector, checksum, used, origin) VALUES (?, ?, ?, ?, ?)",
                           rows)
        # Summing the store's size reads every row, so it is done once per slice of the cap this process
        # wrote, not after every insert.
        self._written += sum(len(row[1]) for row in rows)
        if self._written >= self.max_bytes / EVICTION_CHECKS_PER_CAP:
            self._written = 0
            self._evict()

    def _evict(self) -> None:
        """Drop the least recently used rows while the store holds more than its cap."""
        db = self._connection()
        count, size = db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(vector)), 0) FROM vectors").fetchone()
        if size <= self.max_bytes or not count:
            return
        excess = int(count * (size - self.max_bytes) / size) + 1
        db.execute("DELETE FROM vectors WHERE key IN (SELECT key FROM vectors ORDER BY used LIMIT ?)", (excess,))

    def forget(self, origins=(ORIGIN_SHARED, ORIGIN_UNKNOWN)) -> int:
        """Delete the rows of these origins (by default all this machine did not encode itself); returns how many."""
        origins = list(origins)
        with self._transaction() as tx:
            return tx.execute(f"DELETE FROM vectors WHERE origin IN ({','.join('?' * len(origins))})",
                              origins).rowcount

    def stats(self) -> dict:
        db = self._connection()
        count, size = db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(vector)), 0) FROM vectors").fetchone()
        by_origin = dict(db.execute("SELECT origin, COUNT(*) FROM vectors GROUP BY origin ORDER BY origin"))
        return {"vectors": count, "bytes": size, "max_bytes": self.max_bytes, "path": str(self.path),
                "by_origin": by_origin}


class StoredEmbedder:
    """An embedder that asks the store first and encodes only what it lacks."""

    def __init__(self, embedder, store: EmbeddingStore, model_files: str = "", shared=None,
                 verify_share: float = SHARED_VERIFY_SHARE):
        self.embedder = embedder
        self.store = store
        #: A second tier other machines also fill (e.g. a farm's Redis): `get(keys, dimension) -> {key: vector}`
        #: and `put({key: vector})`, asked after the local store and before the model; it may fail silently.
        self.shared = shared
        #: The share of the shared tier's vectors encoded again to check them (0: trust the tier, unchecked).
        self.verify_share = verify_share
        #: Set once the tier served a vector that is not this machine's: it is not read again by this process.
        self.shared_refused = False
        self.dimension = embedder.dimension
        self.space = json.dumps({"signature": embedder.signature, "model_files": model_files}, sort_keys=True)
        self.counts = {"encoded": 0, "served": 0, "damaged": 0, "shared": 0, "verified": 0, "forged": 0}
        self._rate = CLAIM_WAIT_RATE  # texts a second this process last encoded at

    @property
    def signature(self) -> dict:
        return self.embedder.signature

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        key_of = {t: text_key(self.space, t) for t in dict.fromkeys(texts)}
        verified_before = self.counts["verified"]
        found, damaged = self.store.get(list(key_of.values()), self.dimension)
        missing = [t for t, k in key_of.items() if k not in found]
        if missing and self.shared is not None:
            missing = self._from_shared(missing, key_of, found)
        encoded = len(missing)
        if missing and callable(getattr(self.shared, "claim", None)):
            missing, encoded = self._claimed(missing, key_of, found, batch_size)
        if missing:
            found.update(self._make(missing, key_of, batch_size))
        encoded += self.counts["verified"] - verified_before  # encoded here again to check the shared tier
        self.counts["encoded"] += encoded
        self.counts["served"] += len(texts) - encoded
        self.counts["damaged"] += damaged
        return np.ascontiguousarray(np.stack([found[key_of[t]] for t in texts]), dtype=np.float32)

    def _from_shared(self, missing: list[str], key_of: dict, found: dict) -> list[str]:
        if self.shared_refused:
            return missing
        fetched = self.shared.get([key_of[t] for t in missing], self.dimension)
        if fetched:
            found.update(self._checked({t: key_of[t] for t in missing if key_of[t] in fetched}, fetched))
        return [t for t in missing if key_of[t] not in found]

    def _checked(self, keys: dict[str, str], fetched: dict) -> dict:
        """What of `fetched` (the tier's vectors of the texts `keys` maps to their keys) may be used and kept: all
        of it when every vector encoded here again to check it agrees; else only those encoded here, the fetch
        refused whole, its keys removed from the tier (this machine writes its own vectors there instead), and
        the tier no more read by this process. Kept vectors carry their origin."""
        if self.verify_share <= 0:
            self.store.put(fetched, origin=ORIGIN_SHARED)
            self.counts["shared"] += len(fetched)
            return fetched
        chooser = secrets.SystemRandom()
        sample = [t for t in keys if chooser.random() < self.verify_share] or [chooser.choice(list(keys))]
        mine = {keys[t]: v for t, v in zip(sample, self.embedder.encode(sample))}
        self.counts["verified"] += len(sample)
        self.store.put(mine, origin=ORIGIN_LOCAL)
        forged = [k for k, v in mine.items() if np.abs(fetched[k] - v).max() > SHARED_VERIFY_TOLERANCE]
        if forged:
            self.counts["forged"] += len(forged)
            self.shared_refused = True
            logger.warning("shared embeddings: %d of %d vectors checked are not this machine's (farther than %g); "
                           "the fetch of %d is refused and the shared tier no longer read by this process",
                           len(forged), len(sample), SHARED_VERIFY_TOLERANCE, len(fetched))
            forget = getattr(self.shared, "forget", None)
            if callable(forget):
                forget(list(fetched))
                self.shared.put(mine)
            return mine
        rest = {k: v for k, v in fetched.items() if k not in mine}
        self.store.put(rest, origin=ORIGIN_SHARED)
        self.counts["shared"] += len(rest)
        return {**rest, **mine}

    def _make(self, texts: list[str], key_of: dict, batch_size: int | None) -> dict:
        options = {"batch_size": batch_size} if batch_size else {}
        started = time.perf_counter()
        made = {key_of[t]: v for t, v in zip(texts, self.embedder.encode(texts, **options))}
        seconds = time.perf_counter() - started
        if seconds > 0:
            self._rate = len(texts) / seconds
        self.store.put(made)
        if self.shared is not None:
            self.shared.put(made)
        return made

    def _claimed(self, missing: list[str], key_of: dict, found: dict, batch_size) -> tuple[list[str], int]:
        """Encode the texts this process claimed in the shared tier; wait for the ones other machines claimed
        (at most about as long as encoding them here would take), then encode whatever is still missing.
        Returns (texts still to encode, texts encoded so far): without claims, two machines that meet a new
        text at about the same time would both encode it."""
        mine = self.shared.claim([key_of[t] for t in missing])
        own = [t for t in missing if key_of[t] in mine]
        others = [t for t in missing if key_of[t] not in mine]
        if own:
            found.update(self._make(own, key_of, batch_size))
        if not others:
            return [], len(own)
        wait = min(CLAIM_MAX_WAIT_SECONDS, max(CLAIM_MIN_WAIT_SECONDS, len(others) / self._rate))
        deadline = time.monotonic() + wait
        while others and time.monotonic() < deadline and not self.shared_refused:
            others = self._from_shared(others, key_of, found)
            if others:
                time.sleep(CLAIM_POLL_SECONDS)
        return others, len(own) + len(others)
