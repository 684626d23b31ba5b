"""bm25s (PyPI `bm25s`) as a system under test: the plain lexical baseline, BM25 as a sparse matrix, no model.

Optional: `pip install -e '.[bm25s]'` (bm25s and PyStemmer). Each label is one
bm25s index of its docs, tokenized the way bm25s's own documentation does it:
`bm25s.tokenize(texts, stopwords="en", stemmer=...)` (lower case, words of two
or more characters, bm25s's English stopwords, the Snowball English stemmer of
PyStemmer), then `bm25s.BM25(method=..., k1=1.5, b=0.75)` (bm25s's defaults) and
`index`. A bm25s index is static: each ingest of a label rebuilds the label's
index over every doc the label holds, so a second ingest adds to the first.

Modes are bm25s's scoring variants that score a doc sharing no term with the
question zero: `lucene` (its default), `robertson` (the original Okapi, idf
floored at zero) and `atire`. A doc scoring zero is dropped: a lexical miss is
not a hit, so an answer may hold fewer than top_k docs. bm25s's `bm25l` and
`bm25+` give every doc a score for the terms it lacks, so a miss would rank as a
hit; they are left out. Retrieval runs on numpy (no numba, no jax); nothing is
fetched, nothing is written to disk. bm25s names a doc by its position in the
label's index; the system maps the position back to the doc's external id.
"""

from __future__ import annotations

import logging
import threading

from adapters.systems.contract import AddsOnIngest, Describes, Diagnoses, SystemInfo

#: bm25s's scoring variants in which a doc sharing no term with the question scores zero; its default first.
MODES = ("lucene", "robertson", "atire")
#: bm25s's own defaults, disclosed in the configuration.
K1 = 1.5
B = 0.75
STOPWORDS = "en"
STEMMER_LANGUAGE = "english"
BACKEND = "numpy"


class Bm25sSystem(AddsOnIngest, Describes, Diagnoses):
    name = "bm25s"
    adds_on_ingest = True  # the label's held docs grow; its index is rebuilt over all of them

    def __init__(self, mode: str = MODES[0]):
        if mode not in MODES:
            raise ValueError(f"retrieval mode {mode!r} is not one of bm25s's: {', '.join(MODES)}")
        try:
            import bm25s  # noqa: F401
            import Stemmer
        except ImportError as exc:
            raise ImportError(f"bm25s is not installed: {DESCRIPTION.install} (in the checkout)") from exc
        # bm25s sets its logger to DEBUG when imported (a line per index built): it follows the run's level instead
        logging.getLogger("bm25s").setLevel(logging.NOTSET)
        self.mode = mode
        self._stemmer = Stemmer.Stemmer(STEMMER_LANGUAGE)
        self._lock = threading.Lock()  # a Snowball stemmer keeps state while it works
        self._held: dict[str, list[dict]] = {}
        self._indexes: dict[str, object] = {}
        self.last_diagnostics: dict = {}

    @property
    def config(self) -> dict:
        import bm25s
        import Stemmer

        return {"name": self.name, "retrieval_mode": f"bm25s:{self.mode}", "version": bm25s.__version__,
                "method": self.mode, "k1": K1, "b": B, "idf": f"{self.mode} (bm25s's own for the method)",
                "tokenizer": "bm25s.tokenize: lower case, token pattern (?u)\\b\\w\\w+\\b",
                "stopwords": f"bm25s {STOPWORDS!r}", "stemmer": f"PyStemmer {Stemmer.version()} {STEMMER_LANGUAGE}",
                "backend": BACKEND, "dtype": "float32", "index": "one per label, rebuilt on each ingest of it",
                "zero_scores": "dropped (a doc sharing no scored term is no hit)", "embeds": False}

    def reset(self) -> None:
        self._held = {}
        self._indexes = {}

    def ingest(self, docs: list[dict]) -> None:
        touched = []
        for doc in docs:
            if doc["label"] not in touched:
                touched.append(doc["label"])
            self._held.setdefault(doc["label"], []).append(doc)
        for label in touched:
            self._indexes[label] = self._index([d["text"] for d in self._held[label]])

    def _tokenize(self, texts: list[str]):
        import bm25s

        with self._lock:
            return bm25s.tokenize(texts, stopwords=STOPWORDS, stemmer=self._stemmer, show_progress=False)

    def _index(self, texts: list[str]):
        """The label's bm25s index, or None where no doc has a word left to index (bm25s cannot index nothing)."""
        import bm25s

        tokens = self._tokenize(texts)
        if not tokens.vocab:
            return None
        retriever = bm25s.BM25(method=self.mode, k1=K1, b=B, backend=BACKEND, csc_backend=BACKEND)
        retriever.index(tokens, show_progress=False)
        return retriever

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        retriever = self._indexes.get(label)
        docs = self._held.get(label, [])
        if retriever is None or top_k <= 0:  # nothing held for the label, or nothing in it to match
            self.last_diagnostics = {"docs": len(docs), "query_terms": 0, "dropped_zero": 0}
            return []
        query_tokens = self._tokenize([query])
        found = retriever.retrieve(query_tokens, k=min(top_k, len(docs)), show_progress=False,
                                   backend_selection=BACKEND)
        positions, scores = found.documents[0], found.scores[0]
        hits = [{"external_id": docs[int(position)]["external_id"], "score": float(score)}
                for position, score in zip(positions, scores) if score > 0]
        self.last_diagnostics = {"docs": len(docs), "query_terms": len(query_tokens.ids[0]),
                                 "dropped_zero": len(positions) - len(hits)}
        return hits


DESCRIPTION = SystemInfo("bm25s", Bm25sSystem, "bm25s", ("mode",), modes=MODES, extra="bm25s",
                         vendor_module="bm25s", compared=("lucene", "robertson"))
