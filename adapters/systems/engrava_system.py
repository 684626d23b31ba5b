"""Engrava (PyPI `engrava`) as a system under test: its own SQLite memory graph and its own hybrid recall, offline.

Optional: `pip install -e '.[engrava]'`. Each item's label is a store of its own:
an in-memory SQLite database under engrava's `SqliteEngravaCore`, the store-per-
tenant isolation engrava itself recommends. Every doc is one OBSERVATION thought
(its essence the text's opening, its content the text), written in one
`bulk_store` transaction per ingest, and embedded by engrava's auto-embed
through its own provider interface (`EmbeddingProviderProtocol`), which here is
fed by the run's embedder, so no model of engrava's is ever loaded and nothing
is fetched. Thought ids are minted by this system in ingest order (engrava
breaks tied scores by thought id, so ties fall to the older doc, never to the
runner's ids) and mapped back to the docs' ids by its own map.

Modes:
- `hybrid` (default): `recall`, engrava's one-call retrieval, with its default
  fusion (FTS5 BM25 0.30, vector 0.55, recency 0.10, priority 0.05, graph 0);
  no cycle is given, so recency is skipped and its weight spread over the rest,
  as engrava's own LongMemEval harness asks;
- `hybrid-cycle`: the same fusion with cognitive-cycle recency on: a doc's cycle
  is its position in ingest order (chronological here) and the query is asked
  at the cycle after the newest doc;
- `vector`: `search_similar` alone (cosine over the run's vectors);
- `keyword`: `search_fts` alone (SQLite FTS5 BM25, OR-matched words).

Engrava's core calls no language model; its consolidation ("dreaming"), memory
hygiene, derivation hooks and TTL are off, and none of its network embedding
providers is used. Its API is async: the system owns an event loop on a daemon
thread of its own (so a caller's own loop never clashes with it, and aiosqlite's
worker threads, made from that thread, never hold a process open at exit); its
stores are closed at each reset and at `close`.
"""

from __future__ import annotations

import asyncio
import threading
import weakref

from adapters.systems.contract import (AddsOnIngest, Closes, Describes, Diagnoses, Embeds, EncodesAhead,
                                       SystemInfo)
from adapters.systems.vendor import RunEmbedder, check_mode, plain_words, require
from memoria.defaults import DEFAULT_EMBEDDER_BACKEND

MODES = ("hybrid", "hybrid-cycle", "vector", "keyword")
#: What each mode calls in engrava.
QUERIES = {"hybrid": "recall (hybrid fusion, no cycle: recency skipped)",
           "hybrid-cycle": "search_hybrid (hybrid fusion, cognitive-cycle recency on)",
           "vector": "search_similar (cosine)", "keyword": "search_fts (FTS5 BM25)"}
#: The name engrava records as the store's embedding model (its model lock); the signature says which model it is.
VECTOR_MODEL = "memfarm-embedder"
#: The opening of a text kept as a thought's essence (engrava's own `remember` convention); the embedded text is
#: the content alone, since the essence is its prefix.
ESSENCE_CHARS = 200
#: Seconds a closing store may take before the system gives up on it.
CLOSE_TIMEOUT_S = 30.0


class EngravaSystem(RunEmbedder, AddsOnIngest, Describes, Embeds, Diagnoses, Closes, EncodesAhead):
    name = "engrava"
    adds_on_ingest = True  # each ingest is one more bulk_store into the label's store

    def __init__(self, mode: str = "hybrid", embedder=None, max_seq_length: int | None = None,
                 embedder_backend: str = DEFAULT_EMBEDDER_BACKEND, batch_size: int | None = None):
        check_mode("engrava", mode, MODES)
        require("engrava", DESCRIPTION.install, "aiosqlite", "engrava")
        self.mode = mode
        self.use_run_embedder(embedder, max_seq_length, embedder_backend, batch_size)
        self._loop = _Loop()
        self._stores: dict[str, _Store] = {}
        self._ids: dict[str, str] = {}
        self._minted = 0
        self._finalize = weakref.finalize(self, _shut, self._loop, self._stores)
        self.last_diagnostics: dict = {}

    @property
    def config(self) -> dict:
        import inspect
        from importlib.metadata import version

        from engrava import SqliteEngravaCore
        from engrava.config import SearchConfig

        search = SearchConfig()
        weights = {"fts": search.default_fts_weight, "vector": search.default_vector_weight,
                   "recency": search.default_recency_weight, "priority": search.default_priority_weight,
                   "graph": search.default_graph_weight}
        hybrid = self.mode.startswith("hybrid")
        pools = inspect.signature(SqliteEngravaCore.search_hybrid).parameters  # engrava's own, unchanged here
        recency = (f"cycle = the doc's ingest position, asked at the next, half-life {search.recency_half_life} cycles"
                   if self.mode == "hybrid-cycle" else
                   "skipped (no cycle given): engrava spreads its weight over the active signals")
        return {"name": self.name, "retrieval_mode": f"engrava:{self.mode}", "version": version("engrava"),
                "query": QUERIES[self.mode], "store": "SqliteEngravaCore over an in-memory SQLite, one per label",
                "thoughts": f"one OBSERVATION per doc, P3, essence = the text's first {ESSENCE_CHARS} characters "
                            "(full-text search reads essence and content, so those characters count twice)",
                "question_text": "plain words: quotes and colons as spaces, AND/OR/NOT/NEAR lowered, so engrava "
                                 "never reads a question as FTS5 expert syntax (the vector leg embeds the same text)",
                "weights": weights if hybrid else None, "recency": recency if hybrid else None,
                "priority": "every thought P3: the priority signal is the same for all",
                "candidate_pools": ({arm: pools[f"{arm}_top_k"].default for arm in ("fts", "vector")}
                                    if hybrid else None),
                "vector_backend": "numpy cosine", "embedding_model_name": VECTOR_MODEL,
                "language_model": "none (engrava's core calls none)",
                "off": ["dreaming (consolidation)", "memory hygiene", "derived records", "TTL", "journal",
                        "access tracking", "network embedding providers"],
                "embedding_signature": self.embedding_signature}

    def reset(self) -> None:
        _close_stores(self._loop, self._stores)
        self._ids = {}
        self._minted = 0

    def close(self) -> None:
        """Every store closed, then the loop and its thread ended."""
        self._finalize()

    def ingest(self, docs: list[dict]) -> None:
        by_label: dict[str, list[dict]] = {}
        for doc in docs:
            by_label.setdefault(doc["label"], []).append(doc)
        for label, held in by_label.items():
            store = self._stores.get(label)
            if store is None:
                store = self._stores[label] = self._loop.run(_open_store(self._provider()))
            records = []
            for doc in held:
                thought_id = f"thought-{self._minted:08d}"
                self._minted += 1
                records.append(_thought(thought_id, doc["text"], store.cycle))
                store.cycle += 1
                self._ids[thought_id] = doc["external_id"]
            self._loop.run(store.core.bulk_store(records))

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        store = self._stores.get(label)
        if store is None:  # nothing of this label ingested since the reset
            self.last_diagnostics = {"backends_used": []}
            return []
        hits, backends = self._loop.run(self._ask(store, query, top_k))
        self.last_diagnostics = {"backends_used": backends}
        # A thought id this system never minted stays visible to the runner, which drops and counts it.
        return [{"external_id": self._ids.get(thought_id, f"engrava:{thought_id}"), "score": float(score)}
                for thought_id, score in hits]

    async def _ask(self, store: _Store, query: str, top_k: int) -> tuple[list, list[str]]:
        core = store.core
        query = plain_words(query)  # engrava reads quotes, AND/OR/NOT and column filters as FTS5 syntax
        if self.mode == "hybrid":
            found = await core.recall(query, top_k=top_k)
            return found.results, sorted(found.backends_used)
        if self.mode == "hybrid-cycle":
            found = await core.search_hybrid(query, top_k=top_k, current_cycle=store.cycle)
            return found.results, sorted(found.backends_used)
        if self.mode == "vector":
            vector = await store.provider.embed(query)
            return await core.search_similar(vector, top_k=top_k), ["vector"]
        return await core.search_fts(query, top_k=top_k), ["fts5"]

    def _provider(self) -> _RunEmbeddings:
        return _RunEmbeddings(self.embedder, self.batch_size)


class _Store:
    """One label's engrava store, its connection (the caller's to close: engrava closes only one it opened), its
    embedding provider, and the cycle its next thought is written at."""

    def __init__(self, core, db, provider):
        self.core = core
        self.db = db
        self.provider = provider
        self.cycle = 0

    async def close(self) -> None:
        try:
            await self.core.close()
        finally:
            await self.db.close()

    def worker(self) -> threading.Thread | None:
        """aiosqlite's worker thread of this connection (0.22 keeps it on `_thread`; older ones are the thread),
        which a closed connection has told to stop: it answers the close just before it ends."""
        found = self.db if isinstance(self.db, threading.Thread) else getattr(self.db, "_thread", None)
        return found if isinstance(found, threading.Thread) else None


async def _open_store(provider) -> _Store:
    import aiosqlite
    from engrava import SqliteEngravaCore
    from engrava.infrastructure.sqlite.aiosqlite_connect import connect

    db = await connect(":memory:")
    db.row_factory = aiosqlite.Row
    core = SqliteEngravaCore(db, embedding_provider=provider, auto_embed=True, require_embedding=True)
    try:
        await core.ensure_schema()
    except BaseException:
        await db.close()
        raise
    return _Store(core, db, provider)


def _thought(thought_id: str, text: str, cycle: int):
    from engrava.domain.enums import LifecycleStatus, Priority, ThoughtType
    from engrava.domain.models.thought import ThoughtRecord

    return ThoughtRecord(thought_id=thought_id, thought_type=ThoughtType.OBSERVATION, essence=text[:ESSENCE_CHARS],
                         content=text, priority=Priority.P3, lifecycle_status=LifecycleStatus.ACTIVE,
                         created_cycle=cycle, updated_cycle=cycle, source="memfarm")


class _RunEmbeddings:
    """The run's embedder behind engrava's `EmbeddingProviderProtocol`: a batch is one call to the embedder."""

    def __init__(self, embedder, batch_size: int):
        self._embedder = embedder
        self._batch_size = batch_size

    @property
    def dimension(self) -> int:
        return int(self._embedder.dimension)

    @property
    def model_name(self) -> str:
        return VECTOR_MODEL

    async def embed(self, text: str) -> list[float]:
        return (await self.embed_batch([text]))[0]

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        vectors = self._embedder.encode(list(texts), batch_size=self._batch_size)
        return [[float(x) for x in vector] for vector in vectors]


class _Loop:
    """An event loop on a daemon thread of its own; `run` waits for one coroutine on it."""

    def __init__(self):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="engrava-loop", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return not self._loop.is_closed()

    def run(self, coroutine, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def stop(self) -> None:
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CLOSE_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()


def _close_stores(loop: _Loop, stores: dict[str, _Store]) -> None:
    held = list(stores.values())
    stores.clear()
    for store in held:
        loop.run(store.close(), timeout=CLOSE_TIMEOUT_S)
        worker = store.worker()
        if worker is not None and worker is not threading.current_thread():
            worker.join(CLOSE_TIMEOUT_S)


def _shut(loop: _Loop, stores: dict[str, _Store]) -> None:
    if loop.alive:
        try:
            _close_stores(loop, stores)
        finally:
            loop.stop()


DESCRIPTION = SystemInfo("engrava", EngravaSystem, "Engrava",
                         ("mode", "embedder", "max_seq_length", "embedder_backend", "batch_size"),
                         modes=MODES, extra="engrava", vendor_module="engrava",
                         compared=("hybrid", "hybrid-cycle"))
