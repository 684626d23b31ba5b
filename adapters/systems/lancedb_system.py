"""LanceDB (PyPI `lancedb`) as a system under test: an embedded vector database with its own full-text index.

Optional: `pip install -e '.[lancedb]'`. Each item is a LanceDB database in a
folder of this process's scratch folder (`adapters.systems.scratch`), with one
table per label; every doc is a row keyed by `doc`, an integer this system
mints, with its text and the run's vector for it. The runner's id never enters
a table: a hit's `doc` is mapped back to the doc's `external_id` here.
Nothing uses LanceDB's embedding registry (which would fetch a model): the
vectors are the run's embedder's, so LanceDB runs offline and ranks with the
model every other system uses.

Modes: `hybrid` (default) is LanceDB's own hybrid query, its vector leg and its
full-text leg (top_k rows each) fused by its `RRFReranker`; `vector` is the
vector query alone, exact (a flat scan: no ANN index, so nothing is
approximated), cosine distance; `fts` is the native full-text index alone
(BM25 over LanceDB's English tokenizer: lower case, stemming, stop words, ASCII
folding, as `FTS_SETTINGS` spells out).

The full-text index is not updated by an add: rows added after it are still
searched, but scored apart from the indexed rows (with statistics of their
own), so a table grown in steps would rank otherwise than the same table built
at once. The index is rebuilt (`create_index(..., replace=True)`) on each table
an ingest touched, after it; the tests check that the vendor still behaves so.
A retrieve opens no file that outlives it; a reset removes the item's database
folder, and `close` the scratch folder.
"""

from __future__ import annotations

import os
import shutil
import uuid

from adapters.systems.contract import (AddsOnIngest, Closes, Describes, Diagnoses, Embeds, EncodesAhead,
                                       SystemInfo)
from adapters.systems.vendor import RunEmbedder, check_mode, plain_words, require
from adapters.systems.scratch import held_scratch
from memoria.defaults import DEFAULT_EMBEDDER_BACKEND

MODES = ("hybrid", "vector", "fts")
#: Scratch folders are made in the temporary folder with this prefix (`adapters.systems.scratch`).
SCRATCH_PREFIX = "memfarm-lancedb-"
#: The full-text index, every setting given (LanceDB's defaults in 0.40), so a new default changes nothing here.
FTS_SETTINGS = {"base_tokenizer": "simple", "language": "English", "lower_case": True, "stem": True,
                "remove_stop_words": True, "ascii_folding": True, "max_token_length": 40, "with_position": False}
#: The vector query's distance (the run's embedder gives unit vectors; cosine says so whatever it gives).
DISTANCE = "cosine"
#: RRFReranker's constant, its own default, written here so the configuration discloses it.
RRF_K = 60


class LanceDBSystem(RunEmbedder, AddsOnIngest, Describes, Embeds, Diagnoses, Closes, EncodesAhead):
    name = "lancedb"
    adds_on_ingest = True  # rows are added to the label's table, its full-text index rebuilt

    def __init__(self, mode: str = "hybrid", embedder=None, max_seq_length: int | None = None,
                 embedder_backend: str = DEFAULT_EMBEDDER_BACKEND, batch_size: int | None = None):
        check_mode("lancedb", mode, MODES)
        require("lancedb", DESCRIPTION.install, "lancedb", "pyarrow")
        self.mode = mode
        self.use_run_embedder(embedder, max_seq_length, embedder_backend, batch_size)
        self._root, self._discard = held_scratch(self, SCRATCH_PREFIX)
        self._folder: str | None = None
        self._db = None
        self._tables: dict[str, object] = {}
        self._ids: dict[int, str] = {}
        self.last_diagnostics: dict = {}

    @property
    def config(self) -> dict:
        import lancedb

        legs = {"hybrid": f"vector + full-text, top_k each, fused by RRFReranker(K={RRF_K})",
                "vector": "vector", "fts": "full-text"}
        return {"name": self.name, "retrieval_mode": f"lancedb:{self.mode}", "version": lancedb.__version__,
                "store": "a LanceDB database per item in a scratch folder, a table per label",
                "query": legs[self.mode], "vector_search": f"exact (no ANN index), {DISTANCE} distance",
                "fts_index": {"kind": "native (not tantivy)", **FTS_SETTINGS,
                              "rebuilt": "after each ingest, on each table it touched (replace=True)"},
                "question_text": "plain words: quotes and colons as spaces, AND/OR/NOT/NEAR lowered (no phrase "
                                 "queries); a question with no word left is asked of the vector leg alone",
                "embedding_signature": self.embedding_signature}

    def reset(self) -> None:
        self._drop_database()
        self._folder = os.path.join(self._root, "db-" + uuid.uuid4().hex[:8])
        os.makedirs(self._folder)

    def close(self) -> None:
        """The last database and the scratch folder removed; LanceDB holds no file between calls."""
        self._drop_database()
        self._discard()

    def _drop_database(self) -> None:
        self._tables, self._db, self._ids = {}, None, {}
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)
        self._folder = None

    def ingest(self, docs: list[dict]) -> None:
        if self._folder is None:
            self.reset()
        if not docs:
            return
        import lancedb
        import numpy as np
        import pyarrow as pa
        from lancedb.index import FTS

        if self._db is None:
            self._db = lancedb.connect(self._folder)
        vectors = np.asarray(self.embedder.encode([d["text"] for d in docs], batch_size=self.batch_size),
                             dtype=np.float32)
        first = len(self._ids)  # the docs' keys: first, first + 1, ... in the order given
        rows: dict[str, list[int]] = {}
        for position, doc in enumerate(docs):
            self._ids[first + position] = doc["external_id"]
            rows.setdefault(doc["label"], []).append(position)
        for label, positions in rows.items():
            batch = pa.table({
                "doc": pa.array([first + p for p in positions], pa.int64()),
                "text": pa.array([docs[p]["text"] for p in positions], pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors[positions].ravel()), vectors.shape[1])})
            table = self._tables.get(label)
            if table is None:
                table = self._tables[label] = self._db.create_table(f"t{len(self._tables)}", data=batch)
            else:
                table.add(batch)
            table.create_index("text", config=FTS(**FTS_SETTINGS), replace=True)

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        table = self._tables.get(label)
        if table is None:  # nothing of this label ingested since the reset
            self.last_diagnostics = {"rows": 0}
            return []
        self.last_diagnostics = {"rows": table.count_rows()}
        text = plain_words(query)  # the full-text leg reads phrases; the question is prose (vendor.plain_words)
        if self.mode == "fts":
            found = table.search(text, query_type="fts").select(["doc", "_score"]).limit(top_k).to_arrow()
            return self._hits(found, "_score", lambda s: s)
        from lancedb.rerankers import RRFReranker

        vector = self.embedder.encode([query])[0].astype("float32")
        if self.mode == "vector" or not text.strip():  # LanceDB's hybrid query refuses a blank text
            self.last_diagnostics["legs"] = ["vector"]
            found = (table.search(vector, query_type="vector").distance_type(DISTANCE).select(["doc", "_distance"])
                     .limit(top_k).to_arrow())
            return self._hits(found, "_distance", lambda d: 1.0 - d)
        # every column comes back: the two legs share one selection, which cannot name each leg's own score
        found = (table.search(query_type="hybrid").vector(vector).text(text).distance_type(DISTANCE)
                 .rerank(RRFReranker(K=RRF_K, return_score="all")).limit(top_k).to_arrow())
        return self._hits(found, "_relevance_score", lambda s: s)

    def _hits(self, found, score_column: str, score) -> list[dict]:
        """LanceDB's rows in its own order, each `doc` mapped back to its doc's external id (a key this system
        never minted stays visible to the runner, which drops and counts it)."""
        columns = found.select([c for c in ("doc", "_relevance_score", "_distance", "_score")
                                if c in found.column_names]).to_pydict()
        shown = [c for c in ("_distance", "_score") if c in columns and c != score_column]
        return [{"external_id": self._ids.get(key, f"lancedb:{key}"), "score": float(score(columns[score_column][i])),
                 "diagnostics": {c: columns[c][i] for c in shown}}
                for i, key in enumerate(columns["doc"])]


DESCRIPTION = SystemInfo("lancedb", LanceDBSystem, "LanceDB",
                         ("mode", "embedder", "max_seq_length", "embedder_backend", "batch_size"),
                         modes=MODES, extra="lancedb", vendor_module="lancedb")
