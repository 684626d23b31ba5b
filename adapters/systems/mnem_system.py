"""mnem (PyPI `mnem-py`, module `pymnem`) as a system under test, in memory, with the run's embedder.

Optional: `pip install -e '.[mnem]'`. mnem ships no model: every node gets
the run's vector (`Transaction.add_embedding_f32`), so a comparison shares one
embedder. Each item is a fresh in-memory repository and its docs are nodes of
one label (the item's); mnem honours caller labels only while the environment
variable `MNEM_BENCH` is set, read at each call, so it is set around mnem's
own calls and put back at once (`_labels_on`): no other system sees it.

Modes: `hybrid` (default) is mnem's own retrieve given the query's text and its
vector, `dense` the vector alone (the configuration of mnem's published LoCoMo
run). In mnem 0.1.0 the text drives no ranker: mnem-core keeps it only for a
cross-encoder reranker, which the Python binding cannot install, so a text-only
retrieve ranks nothing (every node scores 1.0) and `hybrid` ranks as `dense`
does; the tests check that this still holds.
A retrieved item carries mnem's `node_id`, never the props written with it:
the system keeps its own node id -> external id map.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

from adapters.systems.contract import AddsOnIngest, Describes, Diagnoses, Embeds, EncodesAhead, SystemInfo
from adapters.systems.vendor import RunEmbedder, check_mode, require
from memoria.defaults import DEFAULT_EMBEDDER_BACKEND

MODES = ("hybrid", "dense")
#: The embedding lane's model name inside mnem (any name; the same one on write and read).
VECTOR_MODEL = "memfarm-embedder"
#: No token budget cut: the runner asks for top_k items and scores them all.
TOKEN_BUDGET = 2**31
_ENV_LOCK = threading.Lock()


@contextmanager
def _labels_on():
    """`MNEM_BENCH=1` for the calls inside only, the variable's previous state restored after."""
    with _ENV_LOCK:
        previous = os.environ.get("MNEM_BENCH")
        os.environ["MNEM_BENCH"] = "1"
        try:
            yield
        finally:
            if previous is None:
                del os.environ["MNEM_BENCH"]
            else:
                os.environ["MNEM_BENCH"] = previous


class MnemSystem(RunEmbedder, AddsOnIngest, Describes, Embeds, Diagnoses, EncodesAhead):
    name = "mnem"
    adds_on_ingest = True  # each ingest is one more transaction of nodes

    def __init__(self, mode: str = "hybrid", embedder=None, max_seq_length: int | None = None,
                 embedder_backend: str = DEFAULT_EMBEDDER_BACKEND, batch_size: int | None = None):
        check_mode("mnem", mode, MODES)
        require("mnem", DESCRIPTION.install, "pymnem")
        self.mode = mode
        self.use_run_embedder(embedder, max_seq_length, embedder_backend, batch_size)
        self._repo = None
        self._ids: dict[str, str] = {}
        self.last_diagnostics: dict = {}

    @property
    def config(self) -> dict:
        import pymnem

        return {"name": self.name, "retrieval_mode": f"mnem:{self.mode}", "version": pymnem.__version__,
                "repository": "in memory, one per item", "labels": "one per item (MNEM_BENCH set around mnem's calls)",
                "query": "text + vector" if self.mode == "hybrid" else "vector",
                "vector_model": VECTOR_MODEL, "token_budget": TOKEN_BUDGET,
                "embedding_signature": self.embedding_signature}

    def reset(self) -> None:
        import pymnem

        self._repo = pymnem.Repo.init_memory()
        self._ids = {}

    def ingest(self, docs: list[dict]) -> None:
        if self._repo is None:
            self.reset()
        vectors = self.embedder.encode([d["text"] for d in docs], batch_size=self.batch_size) if docs else []
        with _labels_on(), self._repo.transaction(author="memfarm", message="ingest") as tx:
            for doc, vector in zip(docs, vectors):
                node_id = tx.add_node(doc["label"], doc["text"], {"external_id": doc["external_id"]})
                tx.add_embedding_f32(VECTOR_MODEL, [float(x) for x in vector])
                self._ids[node_id] = doc["external_id"]

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        if not self._ids:  # nothing ingested since the reset: mnem's empty repository refuses to be asked
            self.last_diagnostics = {"candidates_seen": 0, "dropped": 0}
            return []
        vector = [float(x) for x in self.embedder.encode([query])[0]]
        text = query if self.mode == "hybrid" else None
        with _labels_on():
            result = self._repo.retrieve(text=text, label=label, vector=vector, model=VECTOR_MODEL, limit=top_k,
                                         token_budget=TOKEN_BUDGET)
        self.last_diagnostics = {"candidates_seen": result.candidates_seen, "dropped": result.dropped}
        # A node id mnem made that this system never mapped stays visible to the runner, which drops and counts it.
        return [{"external_id": self._ids.get(item.node_id, f"mnem:{item.node_id}"), "score": float(item.score)}
                for item in result.items]


DESCRIPTION = SystemInfo("mnem", MnemSystem, "mnem",
                         ("mode", "embedder", "max_seq_length", "embedder_backend", "batch_size"),
                         modes=MODES, extra="mnem", vendor_module="pymnem")
