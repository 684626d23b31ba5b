"""txtai (PyPI `txtai`) as a system under test: its own embeddings index per item, in memory, with the run's embedder.

Optional: `pip install -e '.[txtai]'`. Each label (an item) is one `txtai.Embeddings` index, built by txtai's
own `index` and grown by its `upsert`, and asked through its own `search`. txtai embeds through an external
transform (`method="external"`): a plain function that hands it the run's embedder's vectors, so no model is
named and nothing is fetched from the hub; txtai L2-normalises what it is given, as it does any model's vectors.
Its dense index is Faiss with the exact components `IDMap,Flat` (inner product on unit vectors: cosine) set
explicitly, since txtai itself turns to an approximate IVF index above 5000 rows.

Modes, txtai's own configurations:
- `hybrid` (default): `hybrid=True`, which txtai expands to the dense index plus its BM25 keyword index with a
  terms database and normalised scores (`HYBRID_SCORING`); `search` takes `10 x top_k` candidates from each,
  keeps those scoring above 0 and fuses them by a convex combination with its default weights (`WEIGHTS`);
- `dense`: the Faiss index alone;
- `sparse`: `keyword=True`, the BM25 index alone (no vectors: nothing is embedded, the run's embedder is never
  loaded and the configuration says so).
Both lanes return only hits scoring above 0 (txtai's rule), so a ranking may be shorter than top_k; the runner
records it.

Provenance: the index is built with `content=False` and `(id, text, None)` rows whose id is this system's own
integer, the row's position in its label's index; txtai's search answers with those ids, mapped back here to
the docs' `external_id` (never ranked by). The BM25 terms database is a temporary SQLite file that txtai keeps
open: every index is closed through `Embeddings.close` at each reset and at `close`.

txtai's import takes seconds (it brings torch and transformers): it is imported when a system is built, never
when this module is.
"""

from __future__ import annotations

import importlib.util

from adapters.systems.contract import AddsOnIngest, Closes, Describes, Embeds, EncodesAhead, SystemInfo
from adapters.systems.vendor import DEFAULT_BATCH, RunEmbedder, check_mode
from memoria.defaults import DEFAULT_EMBEDDER_BACKEND

MODES = ("hybrid", "dense", "sparse")
#: The exact Faiss index (txtai's own choice up to 5000 rows, held at any size).
FAISS_COMPONENTS = "IDMap,Flat"
#: What txtai 9.14 makes of `hybrid=True` / `keyword=True` (`Embeddings.defaultsparse`) and its BM25 constants;
#: the tests check these against the index txtai builds.
HYBRID_SCORING = {"method": "bm25", "terms": True, "normalize": True}
BM25 = {"k1": 1.2, "b": 0.75}
#: txtai's default hybrid weights, [dense, sparse] (`Search`: 0.5 given as [w, 1 - w]), fused convexly since its
#: BM25 scores are normalised; each lane brings this many times top_k candidates.
WEIGHTS = (0.5, 0.5)
FUSION = "convex"
CANDIDATES_PER_LANE = 10


class TxtaiSystem(RunEmbedder, AddsOnIngest, Describes, Embeds, Closes, EncodesAhead):
    name = "txtai"
    adds_on_ingest = True  # a second ingest is txtai's upsert: it appends to the label's index

    def __init__(self, mode: str = "hybrid", embedder=None, max_seq_length: int | None = None,
                 embedder_backend: str = DEFAULT_EMBEDDER_BACKEND, batch_size: int | None = None):
        check_mode("txtai", mode, MODES)
        if importlib.util.find_spec("txtai") is None or importlib.util.find_spec("faiss") is None:
            raise ImportError(f"txtai is not installed: {DESCRIPTION.install} (in the checkout)")
        from memoria.model_files import offline_environment

        offline_environment()  # txtai loads ONNX Runtime, whose telemetry switch is read as it loads
        import txtai  # noqa: F401  (seconds: paid here, once per process, not at the first item)

        self.mode = mode
        self.batch_size = batch_size or DEFAULT_BATCH
        if mode != "sparse":  # `sparse` makes no vectors: no embedder, no signature
            self.use_run_embedder(embedder, max_seq_length, embedder_backend, batch_size)
        self._indexes: dict = {}  # label -> txtai.Embeddings
        self._ids: dict[str, list[str]] = {}  # label -> external ids, at the position that is txtai's row id

    @property
    def config(self) -> dict:
        from txtai.version import __version__

        dense = self.mode in ("hybrid", "dense")
        sparse = self.mode in ("hybrid", "sparse")
        return {"name": self.name, "retrieval_mode": f"txtai:{self.mode}", "version": __version__,
                "index": "one txtai Embeddings per label (item), in memory, content=False",
                "shortcut": {"hybrid": "hybrid=True", "dense": "external vectors only",
                             "sparse": "keyword=True"}[self.mode],
                "vectors": "method=external: the run's embedder, L2-normalised by txtai" if dense else "none",
                "dense_backend": f"faiss {FAISS_COMPONENTS} (exact inner product)" if dense else "none",
                "sparse_scoring": {**HYBRID_SCORING, **BM25, "tokenizer": "txtai Tokenizer"} if sparse else "none",
                "fusion": (f"{FUSION}, weights dense/sparse {WEIGHTS[0]}/{WEIGHTS[1]} (txtai's default), "
                           f"{CANDIDATES_PER_LANE}x top_k candidates per lane") if self.mode == "hybrid" else "none",
                "hits": "score > 0 only (txtai's rule): a ranking may be shorter than top_k",
                "network": "none: no model path is given to txtai",
                "embedding_signature": self.embedding_signature}

    def _settings(self) -> dict:
        """The index's configuration as txtai takes it."""
        settings: dict = {"content": False}
        if self.mode in ("hybrid", "dense"):
            embedder, batch_size = self.embedder, self.batch_size

            def transform(texts):  # a plain function: txtai calls any other callable it is given to build one
                return embedder.encode(list(texts), batch_size=batch_size)

            settings.update(method="external", transform=transform, backend="faiss",
                            faiss={"components": FAISS_COMPONENTS})
        if self.mode == "hybrid":
            settings["hybrid"] = True
        elif self.mode == "sparse":
            settings["keyword"] = True
        return settings

    def reset(self) -> None:
        self.close()

    def close(self) -> None:
        """Every index closed through txtai (its BM25 terms database is an open temporary SQLite file)."""
        indexes, self._indexes, self._ids = self._indexes, {}, {}
        for index in indexes.values():
            index.close()

    def ingest(self, docs: list[dict]) -> None:
        from txtai import Embeddings

        by_label: dict[str, list[dict]] = {}
        for doc in docs:
            by_label.setdefault(doc["label"], []).append(doc)
        for label, given in by_label.items():
            ids = self._ids.setdefault(label, [])
            rows = [(len(ids) + n, doc["text"], None) for n, doc in enumerate(given)]
            index = self._indexes.get(label)
            if index is None:
                index = self._indexes[label] = Embeddings(self._settings())
                index.index(rows)
            else:
                index.upsert(rows)
            ids.extend(doc["external_id"] for doc in given)

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        index = self._indexes.get(label)
        if index is None:  # nothing ingested under this label since the reset
            return []
        ids = self._ids[label]
        # A row id txtai made that this system never minted stays visible to the runner, which drops and counts it.
        return [{"external_id": ids[uid] if isinstance(uid, int) and 0 <= uid < len(ids) else f"txtai:{uid}",
                 "score": float(score)} for uid, score in index.search(query, top_k)]


DESCRIPTION = SystemInfo("txtai", TxtaiSystem, "txtai",
                         ("mode", "embedder", "max_seq_length", "embedder_backend", "batch_size"),
                         modes=MODES, extra="txtai", vendor_module="txtai")
