"""Qdrant (PyPI `qdrant-client`, its local mode) as a system under test: an embedded vector database, in memory.

Optional: `pip install -e '.[qdrant]'`. Each item is a fresh `QdrantClient(":memory:")`, and each label of the
item a collection of its own; every doc is one point with an integer id the system counts itself, the run's
vector (cosine) and, in `hybrid`, a sparse vector, and a payload that names the doc's `external_id`: a hit's
payload is how the system maps Qdrant's point back to the runner's id (never ranked on). Local mode searches
every point (exact search; it has no HNSW graph), so nothing of an index's approximation enters a ranking.

Modes: `dense` (default) is a nearest-neighbour query on the run's vectors alone. `hybrid` is Qdrant's own
fusion: one `query_points` call with a `prefetch` of the dense query and of a sparse query, fused by
`FusionQuery(fusion=Fusion.RRF)` (Qdrant's reciprocal rank fusion, its own constant). The sparse vectors are
BM25-style term weights made here, the way Qdrant's documentation pairs them with `Modifier.IDF`: a doc holds
each word's saturated, length-normalised frequency, a query each of its words once, and Qdrant multiplies in
the IDF it counts over the collection at query time (local mode supports the modifier). The average length
that normalises a doc is a fixed constant, as in fastembed's Bm25, so a doc's weights never depend on what
else is stored and memory given in steps holds what one ingest would. fastembed's own Bm25 model is not used:
it downloads its stop-word files from the Hugging Face hub on first use, and nothing here reaches the network.
Words are Qdrant's default word tokens (runs of letters and digits, lowercased), not stemmed, no stop words.

Nothing is fetched: qdrant-client reaches a model only when a query or point is given as text to embed
(`models.Document`, through fastembed, which it imports where installed), and this system gives it vectors
only: the run's embedder makes every dense one, the system every sparse one.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter

from adapters.systems.contract import (AddsOnIngest, Closes, Describes, Diagnoses, Embeds, EncodesAhead,
                                       SystemInfo)
from adapters.systems.vendor import RunEmbedder, check_mode, require
from memoria.defaults import DEFAULT_EMBEDDER_BACKEND

MODES = ("dense", "hybrid")
DENSE, SPARSE = "dense", "bm25"
#: BM25's term-frequency saturation and length normalisation, and the fixed average length (fastembed's Bm25's).
BM25_K1 = 1.2
BM25_B = 0.75
BM25_AVG_LEN = 256.0
#: Each prefetch of `hybrid` gives the fusion this many candidates per hit asked (Qdrant's documentation
#: prefetches twice the final limit).
PREFETCH_PER_HIT = 2
#: Points per upsert call.
UPSERT_BATCH = 256
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Qdrant's default word tokens: runs of letters and digits, lowercased."""
    return [token.lower() for token in _WORD.findall(text)]


def term_index(word: str) -> int:
    """A word's sparse dimension: a stable hash (the same in every process), as fastembed's Bm25 hashes its words."""
    return zlib.crc32(word.encode("utf-8")) & 0x7FFFFFFF


def doc_terms(text: str) -> tuple[list[int], list[float]]:
    """A doc's sparse vector: each word's BM25 frequency part, tf(k1+1) / (tf + k1(1 - b + b len/avg_len))."""
    tokens = words(text)
    norm = BM25_K1 * (1 - BM25_B + BM25_B * len(tokens) / BM25_AVG_LEN)
    counts: Counter[int] = Counter(term_index(w) for w in tokens)
    indices = sorted(counts)
    return indices, [counts[i] * (BM25_K1 + 1) / (counts[i] + norm) for i in indices]


def query_terms(text: str) -> tuple[list[int], list[float]]:
    """A query's sparse vector: each distinct word once (Qdrant's IDF modifier weighs it)."""
    indices = sorted({term_index(w) for w in words(text)})
    return indices, [1.0] * len(indices)


def qdrant_version() -> str:
    from importlib.metadata import version

    return version("qdrant-client")


class QdrantSystem(RunEmbedder, AddsOnIngest, Describes, Embeds, Diagnoses, Closes, EncodesAhead):
    name = "qdrant"
    adds_on_ingest = True  # an ingest upserts more points into the item's collections

    def __init__(self, mode: str = "dense", embedder=None, max_seq_length: int | None = None,
                 embedder_backend: str = DEFAULT_EMBEDDER_BACKEND, batch_size: int | None = None):
        check_mode("qdrant", mode, MODES)
        require("qdrant-client", DESCRIPTION.install, "qdrant_client")
        self.mode = mode
        self.use_run_embedder(embedder, max_seq_length, embedder_backend, batch_size)
        self._client = None
        self._collections: dict[str, str] = {}  # label -> its collection
        self._points: dict[str, int] = {}  # collection -> points in it (the next point's id)
        self.last_diagnostics: dict = {}

    @property
    def config(self) -> dict:
        from qdrant_client.hybrid.fusion import DEFAULT_RANKING_CONSTANT_K

        config = {"name": self.name, "retrieval_mode": f"qdrant:{self.mode}", "version": qdrant_version(),
                  "client": "QdrantClient(':memory:'), one per item", "collections": "one per label",
                  "point_ids": "integers counted by the system; payload external_id maps a hit back",
                  "dense": {"distance": "cosine", "search": "exact (local mode scans every point)"},
                  "embedding_signature": self.embedding_signature}
        if self.mode == "hybrid":
            config.update({
                "query": "query_points: prefetch dense + sparse, FusionQuery(Fusion.RRF); a question with no word "
                         "is asked of the dense vector alone",
                "fusion": {"method": "rrf", "k": DEFAULT_RANKING_CONSTANT_K, "prefetch_per_hit": PREFETCH_PER_HIT},
                "sparse": {"weights": "bm25 term frequency part, made by the system", "modifier": "idf",
                           "k1": BM25_K1, "b": BM25_B, "avg_len": BM25_AVG_LEN,
                           "tokens": "Qdrant's default words ([^\\W_]+, lowercased), no stemming, no stop words",
                           "term_index": "crc32 of the word, 31 bits", "query_weights": "1 per distinct word",
                           "fastembed_bm25": "not used: its files download from the Hugging Face hub"}})
        else:
            config["query"] = "query_points: dense vector"
        return config

    def reset(self) -> None:
        self._close_client()
        from qdrant_client import QdrantClient

        self._client = QdrantClient(":memory:")

    def close(self) -> None:
        self._close_client()

    def _close_client(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None
        self._collections, self._points = {}, {}

    def _collection(self, label: str, size: int) -> str:
        from qdrant_client import models

        collection = self._collections.get(label)
        if collection is None:
            collection = f"label-{len(self._collections)}"
            sparse = {SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)} if self.mode == "hybrid" else None
            self._client.create_collection(
                collection, vectors_config={DENSE: models.VectorParams(size=size,
                                                                       distance=models.Distance.COSINE)},
                sparse_vectors_config=sparse)
            self._collections[label], self._points[collection] = collection, 0
        return collection

    def ingest(self, docs: list[dict]) -> None:
        from qdrant_client import models

        if self._client is None:
            self.reset()
        if not docs:
            return
        vectors = self.embedder.encode([d["text"] for d in docs], batch_size=self.batch_size)
        batches: dict[str, list] = {}
        for doc, vector in zip(docs, vectors):
            collection = self._collection(doc["label"], len(vector))
            point_id = self._points[collection]
            self._points[collection] += 1
            named = {DENSE: [float(x) for x in vector]}
            if self.mode == "hybrid":
                indices, values = doc_terms(doc["text"])
                named[SPARSE] = models.SparseVector(indices=indices, values=values)
            batches.setdefault(collection, []).append(
                models.PointStruct(id=point_id, vector=named, payload={"external_id": doc["external_id"]}))
        for collection, points in batches.items():
            for start in range(0, len(points), UPSERT_BATCH):
                self._client.upsert(collection, points[start:start + UPSERT_BATCH], wait=True)

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        from qdrant_client import models

        collection = self._collections.get(label) if self._client is not None else None
        if collection is None or top_k < 1:  # nothing of this label ingested since the reset
            self.last_diagnostics = {"points": 0}
            return []
        vector = [float(x) for x in self.embedder.encode([query])[0]]
        indices, values = query_terms(query)
        if self.mode == "hybrid" and indices:
            pool = PREFETCH_PER_HIT * top_k
            result = self._client.query_points(
                collection, prefetch=[models.Prefetch(query=vector, using=DENSE, limit=pool),
                                      models.Prefetch(query=models.SparseVector(indices=indices, values=values),
                                                      using=SPARSE, limit=pool)],
                query=models.FusionQuery(fusion=models.Fusion.RRF), limit=top_k, with_payload=["external_id"])
        else:  # dense, or a query without a word, which a sparse query could not rank
            result = self._client.query_points(collection, query=vector, using=DENSE, limit=top_k,
                                               with_payload=["external_id"])
        self.last_diagnostics = {"points": self._points[collection], "query_words": len(indices),
                                 "fused": self.mode == "hybrid" and bool(indices)}
        # A point without the payload this system wrote stays visible to the runner, which drops and counts it.
        return [{"external_id": (point.payload or {}).get("external_id", f"qdrant:{point.id}"),
                 "score": float(point.score)} for point in result.points]


DESCRIPTION = SystemInfo("qdrant", QdrantSystem, "Qdrant",
                         ("mode", "embedder", "max_seq_length", "embedder_backend", "batch_size"),
                         modes=MODES, extra="qdrant", vendor_module="qdrant_client")
