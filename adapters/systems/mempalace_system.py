"""MemPalace (PyPI `mempalace`) as a system under test: its own store and its own hybrid search, offline.

Optional: `pip install -e '.[mempalace]'`. Each item is a palace of its own
(a ChromaDB store in a scratch folder of the run); every doc is one drawer, in
the item's wing, under the runner's opaque id. Retrieval is MemPalace's own
`search_memories` (vector candidates re-ranked with BM25), scoped to the wing.

MemPalace embeds through `mempalace.embedding.get_embedding_function`, whose
default model (Chroma's ONNX MiniLM) downloads on first use; here that function
hands MemPalace the run's embedder instead, so it runs offline and shares the
model of every other system. MemPalace writes under `$HOME` (config, locks): HOME
and its config folder point at the run's scratch folder during MemPalace's own
calls only (`_scratch_home`), and are put back at once.

MemPalace keeps what it opens for the life of the process (a Chroma client per palace, a SQLite anchor and
a probe connection per database file): a palace is closed through its own hooks before its folder goes, at
each reset and at `close`, or every item would keep a dozen handles on deleted files until the process runs
out. The scratch folder is held by a lock on a file inside it for as long as its process lives; a system
made later removes every folder whose lock is free, so a process that ended by `os._exit` (a Celery pool
process) or was killed leaves nothing behind for long.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
import uuid
import warnings
from contextlib import contextmanager

from adapters.systems.contract import (AddsOnIngest, Closes, Describes, Diagnoses, Embeds, EncodesAhead,
                                       SystemInfo)
from adapters.systems.scratch import held_scratch, remove_abandoned
from adapters.systems.vendor import RunEmbedder, require
from memoria.defaults import DEFAULT_EMBEDDER_BACKEND

#: MemPalace searches a pool this many times wider than top_k before its re-rank (its own default).
CANDIDATE_STRATEGY = "vector"
_ENV_LOCK = threading.Lock()
#: Scratch folders are made in the temporary folder with this prefix (`adapters.systems.scratch`).
SCRATCH_PREFIX = "memfarm-mempalace-"
#: MemPalace's abandoned scratch folders removed, from `parent` (the temporary folder) or the given one.
remove_abandoned_scratch = functools.partial(remove_abandoned, SCRATCH_PREFIX)


class MemPalaceSystem(RunEmbedder, AddsOnIngest, Describes, Embeds, Diagnoses, Closes, EncodesAhead):
    name = "mempalace"
    adds_on_ingest = True  # drawers are added to the palace's collection

    def __init__(self, embedder=None, max_seq_length: int | None = None,
                 embedder_backend: str = DEFAULT_EMBEDDER_BACKEND,
                 batch_size: int | None = None, workdir: str | None = None):
        require("mempalace", DESCRIPTION.install, "mempalace", "chromadb.api.types")
        self.use_run_embedder(embedder, max_seq_length, embedder_backend, batch_size)
        if workdir is None:  # a scratch folder of its own, held while its process lives, goes with the system
            self._root, self._discard = held_scratch(self, SCRATCH_PREFIX)
        else:
            self._root, self._discard = workdir, None
        self._home = os.path.join(self._root, "home")
        self._palace: str | None = None
        self.last_diagnostics: dict = {}

    @property
    def config(self) -> dict:
        from mempalace.version import __version__

        return {"name": self.name, "retrieval_mode": "mempalace:search_memories", "version": __version__,
                "search": "search_memories (vector pool re-ranked with BM25)", "candidate_strategy": CANDIDATE_STRATEGY,
                "store": "ChromaDB palace per item in a scratch folder", "scope": "one wing per item",
                "embedding_signature": self.embedding_signature}

    @contextmanager
    def _scratch_home(self):
        """HOME, MemPalace's config folder and its embedding function pointed at this run's, for the calls inside."""
        import mempalace.embedding as vendor

        function = _RunEmbedding(self.embedder, self.batch_size)
        with _ENV_LOCK:
            saved = {k: os.environ.get(k) for k in ("HOME", "MEMPALACE_CONFIG_DIR")}
            original = vendor.get_embedding_function
            os.environ["HOME"] = self._home
            os.environ["MEMPALACE_CONFIG_DIR"] = os.path.join(self._home, ".mempalace")
            vendor.get_embedding_function = lambda *args, **kwargs: function
            try:
                with warnings.catch_warnings():  # ChromaDB says, for every collection it opens, that it cannot
                    warnings.filterwarnings(  # rebuild our embedding function from a config: by design, never
                        "ignore", message="Could not reconstruct embedding function", category=UserWarning)
                    yield
            finally:
                vendor.get_embedding_function = original
                for key, value in saved.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value

    def reset(self) -> None:
        self._drop_palace()
        os.makedirs(self._home, exist_ok=True)
        self._palace = os.path.join(self._root, "palace-" + uuid.uuid4().hex[:8])

    def close(self) -> None:
        """The last palace closed and removed, then the scratch folder where it is this system's own."""
        self._drop_palace()
        if self._discard is not None:
            self._discard()

    def _drop_palace(self) -> None:
        if self._palace:
            _close_palace(self._palace)
            shutil.rmtree(self._palace, ignore_errors=True)
        self._palace = None

    def ingest(self, docs: list[dict]) -> None:
        if self._palace is None:
            self.reset()
        self.embedder.encode(["load the model before HOME moves"])
        from mempalace.palace import get_collection

        with self._scratch_home():
            collection = get_collection(self._palace, create=True)
            for start in range(0, len(docs), 256):
                batch = docs[start:start + 256]
                collection.add(documents=[d["text"] for d in batch], ids=[d["external_id"] for d in batch],
                               metadatas=[{"wing": d["label"], "room": "conversation",
                                           "source_file": d["external_id"]} for d in batch])

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        if self._palace is None or not os.path.isdir(self._palace):  # nothing ingested since the reset
            self.last_diagnostics = {"total_before_filter": 0}
            return []
        from mempalace.searcher import search_memories

        with self._scratch_home():
            found = search_memories(query, self._palace, wing=label, n_results=top_k,
                                    candidate_strategy=CANDIDATE_STRATEGY)
        if "error" in found and not found.get("results"):
            raise RuntimeError(f"mempalace search_memories: {found['error']}")
        hits = found.get("results") or []
        self.last_diagnostics = {"total_before_filter": found.get("total_before_filter")}
        return [{"external_id": hit.get("drawer_id"), "score": _score(hit),
                 "diagnostics": {k: hit[k] for k in ("similarity", "bm25_score", "closet_boost") if k in hit}}
                for hit in hits]


def _close_palace(palace: str) -> None:
    """Every handle MemPalace keeps on `palace` closed (its hooks for tests and maintenance, mempalace 3.11):
    the Chroma client of each backend, the SQLite anchor, the probe connection kept per database inode."""
    from mempalace.backends import _inproc_sqlite, _magic, registry

    for backend in list(registry._instances.values()):
        backend.close_palace(palace)
    database = os.path.join(palace, "chroma.sqlite3")
    _inproc_sqlite.release(database)
    try:
        found = os.stat(database)
    except OSError:
        return
    with _magic._lock:
        probe = _magic._retained_conns.pop((found.st_dev, found.st_ino), None)
        _magic._positive.pop((found.st_dev, found.st_ino), None)
    if probe is not None:
        probe.close()


def _score(hit: dict) -> float:
    """MemPalace's own order is the ranking; its fused score where it gives one, else its similarity."""
    for key in ("hybrid_score", "score", "similarity"):
        if isinstance(hit.get(key), (int, float)):
            return float(hit[key])
    return 0.0


class _RunEmbedding:
    """The run's embedder in the shape ChromaDB calls (a list of float32 vectors per list of texts)."""

    def __init__(self, embedder, batch_size: int):
        self._embedder = embedder
        self._batch_size = batch_size

    def __call__(self, input):  # noqa: A002  (ChromaDB's keyword)
        return [vector.astype("float32") for vector in self._embedder.encode(list(input), batch_size=self._batch_size)]

    def embed_query(self, input):  # noqa: A002
        return self(input)

    def embed_documents(self, input):  # noqa: A002
        return self(input)

    @staticmethod
    def name() -> str:
        return "default"

    @staticmethod
    def is_legacy() -> bool:
        return False

    def get_config(self) -> dict:
        return {}

    @staticmethod
    def build_from_config(config):
        raise ValueError("the run's embedder is given, never rebuilt from a config")

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine"]


DESCRIPTION = SystemInfo("mempalace", MemPalaceSystem, "MemPalace",
                         ("embedder", "max_seq_length", "embedder_backend", "batch_size"),
                         extra="mempalace", vendor_module="mempalace")
