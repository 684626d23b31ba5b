"""MemoryInterface: store raw text, recall ranked candidates, snapshot the state.

One interface is one isolated memory state. The harness builds one per item,
snapshots it into the item cache, and restores it on the next run.
"""

from __future__ import annotations

import json
import logging
import time
from functools import partial
from pathlib import Path

import numpy as np

from memoria import defaults
from memoria.ahead import VectorsAhead, docs_ahead, questions_ahead
from memoria.bm25 import BM25Index
from memoria.candidates import fused, materialise, round_robin
from memoria.encoding import ENCODED_KINDS, Tally, reads_vectors
from memoria.boosts import without_names
from memoria.discourse import without_frame
from memoria.errors import UnknownModeError
from memoria.pieces import SentenceVectors
from memoria.question_vectors import QuestionVectors
from memoria.ranking import RankingContext, rank
from memoria.scheduler import SourceScheduler
from memoria.settings import MemoriaSettings
from memoria.snapshot import read_snapshot, write_snapshot
from memoria.retrieval_sources import DerivedView, attribute_search, graph_search, phrase_search
from memoria.store import MemoryStore
from memoria.vectors import VectorIndex, encode_reusing
from memoria.windows import build_windows, credit_turns

logger = logging.getLogger(__name__)



class MemoryInterface:
    """One memory state: SQLite rows plus FAISS and BM25 indexes derived from them."""

    def __init__(self, embedder=None, settings: MemoriaSettings | None = None, **overrides):
        """A memory under `settings` (the defaults when None), with any of them overridden by name.

        Each setting is also an attribute of the same name (`memory.weights`), so a caller can
        tune one in place between recalls. `SettingsError` names a setting the engine cannot use.
        """
        if embedder is None:
            from memoria.embedder import LazyEmbedder

            embedder = LazyEmbedder()
        self.embedder = embedder
        for name, value in (settings or MemoriaSettings()).updated(**overrides).as_dict().items():
            setattr(self, name, value)
        self.scheduler = SourceScheduler()
        #: Extra or replacement sources by name (tests, experiments): {name: callable() -> [(id, score)]}.
        self.custom_sources: dict = {}
        #: The sources a mode submits, where they differ from `MODE_SOURCES` (ablations leave some out).
        self.mode_sources: dict[str, tuple[str, ...]] = {}
        self._pending_vectors: list[tuple[list[int], np.ndarray]] = []
        self._view = None
        #: What the view of the state before the last insert carries to the next (`DerivedView.carried`).
        self._carried_view = None
        #: Texts the model encoded for this memory, by kind, since it was made (a reset keeps counting): with an
        #: embedding store, only those it did not serve.
        self.encoded = dict.fromkeys(ENCODED_KINDS, 0)
        self.ahead = VectorsAhead()  # vectors of texts a caller will insert later (`encode_ahead`)
        self.questions = QuestionVectors()  # `_question_vector`, `encode_questions`
        self.dimension = embedder.dimension
        self.store = MemoryStore()
        self.vectors = VectorIndex(self.dimension)
        self.bm25 = BM25Index()
        self._clear_windows()
        self._clear_pieces()

    def __len__(self) -> int:
        return len(self.store)

    @property
    def settings(self) -> dict:
        """The pool, fusion, BM25, scheduler and window settings as a manifest discloses them."""
        return {"candidate_pool": self.candidate_pool, "rrf_k": self.rrf_k,
                "bm25": {"k1": self.bm25.k1, "b": self.bm25.b, "epsilon": self.bm25.epsilon},
                "scheduler": {"policy": self.policy, "budget_ms": self.budget_ms},
                "windows": self.window_settings}

    @property
    def window_settings(self) -> dict:
        return {"size": self.window_size, "overlap": self.window_overlap, "turn_chars": self.window_turn_chars}

    @property
    def ranking_settings(self) -> dict:
        """The settings of the ranked modes as a manifest discloses them."""
        return {"weights": dict(self.weights), "mmr_lambda": self.mmr_lambda, "mmr_window": self.mmr_window,
                "graph_seeds": self.graph_seeds, "session_top_n": self.session_top_n, "max_pieces": self.max_pieces,
                "sentence_head": self.sentence_head,
                "feedback": {"turns": self.feedback_turns, "terms": self.feedback_terms},
                "speaker_strip": self.speaker_strip, "frame_strip": self.frame_strip}

    # -- writing -----------------------------------------------------------
    def insert(self, texts: list[str], metadatas: list[dict], vectors: np.ndarray | None,
               derived: list[dict] | None = None, defer_vectors: bool = False) -> list[int]:
        """Store already-validated memories (and what was extracted from them); all of them or none.

        With `defer_vectors` the vectors wait and go into FAISS in one build, on the next
        recall or snapshot (or `build_indexes()`).
        """
        first = self.store.next_id()
        ids = list(range(first, first + len(texts)))
        self.store.insert(ids, texts, [json.dumps(m, ensure_ascii=False, sort_keys=True) for m in metadatas], derived)
        try:
            if vectors is not None and defer_vectors:
                self._pending_vectors.append((ids, vectors))
            elif vectors is not None:
                self.vectors.add(ids, vectors)
            self.bm25.add(ids, texts)
        except Exception:
            self.store.delete(ids)
            self.vectors.index.remove_ids(np.asarray(ids, dtype=np.int64))
            del self.bm25.ids[-len(ids):], self.bm25.tokens[-len(ids):]
            raise
        self._forget_view()
        return ids

    def build_indexes(self) -> None:
        """Add every deferred vector to FAISS in one go."""
        if self._pending_vectors:
            ids = [i for batch, _ in self._pending_vectors for i in batch]
            self.vectors.add(ids, np.concatenate([v for _, v in self._pending_vectors]))
            self._pending_vectors = []
            self._forget_view()  # a view read before these vectors came would keep sessions without their centroids

    def reset(self) -> None:
        """Forget everything: rows and every derived index."""
        self.store.clear()
        self.vectors.clear()
        self.bm25.clear()
        self._clear_windows()
        self._clear_pieces()
        self._pending_vectors = []
        self._view = self._carried_view = None
        self.questions.clear()

    # -- turn windows --------------------------------------------------------
    def _clear_windows(self) -> None:
        self.window_vectors = VectorIndex(self.dimension)
        self.window_turns: list[list[int]] = []
        self._window_texts: list[str] = []
        self._windows_built: dict | None = None  # the settings and row count the windows were built for

    def _windows_current(self) -> bool:
        return self._windows_built == {**self.window_settings, "rows": len(self.store)}

    def build_windows(self, batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> int:
        """Build (or bring up to date) the turn windows and their vectors; returns how many texts were encoded.

        Windows are built over every stored row, each session on its own; a window
        whose text is unchanged since the last build keeps its vector.
        """
        if self.window_size <= 0 or self._windows_current():
            return 0
        windows = build_windows(self.store.all_rows(), self.window_size, self.window_overlap, self.window_turn_chars)
        texts = [w["text"] for w in windows]
        self.window_vectors, _, encoded = encode_reusing(texts, self.window_vectors, self._window_texts, self.counted("windows"),
                                                         self.dimension, batch_size)
        self.window_turns = [w["turns"] for w in windows]
        self._window_texts = texts
        self._windows_built = {**self.window_settings, "rows": len(self.store)}
        return encoded

    def _window_search(self, query_vector, pool: int) -> list[tuple[int, float]]:
        """Window hits as turn hits: each turn keeps its best window's cosine; at most `pool` turns."""
        hits = self.window_vectors.search(query_vector, max(1, pool // max(1, self.window_size - self.window_overlap)))
        return credit_turns(hits, self.window_turns)[:pool]

    # -- sentence vectors (memoria.pieces) ----------------------------------------
    def _clear_pieces(self) -> None:
        self.pieces = SentenceVectors(self.dimension)

    @property
    def pieces_wanted(self) -> bool:
        """Whether the ranking reads sentence vectors: a `sentence` weight, and pieces allowed."""
        return self.max_pieces >= 2 and self.weights.get("sentence", 0.0) > 0

    def build_pieces(self, batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> int:
        """Split and encode the sentence pieces of every stored turn not split yet; returns how many texts were
        given to the embedder. A recall needs none of this: it splits the turns that reach its ranking."""
        return self.pieces_of(self.store.get(self.view().ids), batch_size) if self.max_pieces >= 2 else 0

    def pieces_of(self, rows: dict, batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> int:
        """Bring the sentence vectors of `rows` ({id: (text, metadata)}) up to date; texts given to the embedder."""
        return self.pieces.ensure(rows, self.counted("pieces"), self.max_pieces, batch_size)

    def _best_pieces(self, query_vector, ids) -> dict[int, float]:
        """The best sentence cosine of each of `ids` (the head of a first ranking) that has pieces, its pieces
        encoded now if it never reached that head before. Only `ids` are read, whatever else holds pieces, so a
        ranking never depends on which questions came before it."""
        wanted = set(ids)
        if self.pieces.max_pieces != self.max_pieces:
            missing = wanted
        else:
            missing = wanted - self.pieces.checked
        if missing:
            self.pieces_of(self.store.get(sorted(missing)))
        return self.pieces.best(query_vector, sorted(wanted))

    def encode_ahead(self, texts: list[str], metadatas: list[dict],
                     batch_size: int = defaults.DEFAULT_BATCH_SIZE, ranked: bool = True) -> int:
        """Encode now, one batch per kind, the vectors that `texts` (to be inserted later, in order) will need
        (`memoria.ahead.docs_ahead`); what was encoded ahead before is forgotten. Returns the texts encoded."""
        return docs_ahead(self, texts, metadatas, batch_size, ranked)

    def _question_vector(self, text: str) -> np.ndarray:
        """The vector of a question's dense text (`dense_question`), encoded once until the next reset. A vector
        depends on its text alone (`memoria.canonical_batches`), so one served again has the bits it would have had
        encoded again."""
        return self.questions.get(text, self.counted("questions"))

    def searched_question(self, query: str, mode: str) -> str:
        """The text the sources and the ranking search for `query` under `mode`: a ranked mode takes out the phrases
        that frame it by the conversation (`frame_strip`, memoria.discourse), "the order in which I brought up ...
        throughout our conversations", which name no message."""
        if mode in defaults.RANKED_MODES and self.frame_strip:
            return without_frame(query)
        return query

    def dense_question(self, query: str, mode: str) -> str:
        """The text the model reads for `query` under `mode`: the searched question (`searched_question`), in a
        ranked mode without the speakers' names (`speaker_strip`), so questions that differ only by whose they are
        ("What did Caroline paint?", "What did Melanie paint?") are one text to the encoder."""
        searched = self.searched_question(query, mode)
        if mode in defaults.RANKED_MODES and self.speaker_strip:
            return without_names(searched, self.view().speakers)
        return searched

    def encode_questions(self, queries: list[str], mode: str, limit: int = defaults.DEFAULT_RECALL_LIMIT,
                         batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> int:
        """Encode now, together, what `queries`, about to be asked of this state in `mode` for `limit` candidates,
        will read: their vectors and the sentence pieces their rankings read (`memoria.ahead.questions_ahead`);
        nothing where `mode` reads no vector. Returns the texts encoded."""
        if mode not in defaults.MODE_SOURCES:
            raise UnknownModeError(f"unknown retrieval mode {mode!r}; choose from {sorted(defaults.MODE_SOURCES)}")
        if not reads_vectors(mode, self.mode_sources.get(mode, defaults.MODE_SOURCES[mode])) or not len(self.store):
            return 0
        return questions_ahead(self, [query for query in queries if query.strip()], mode, limit, batch_size)

    # -- what was encoded, by kind ------------------------------------------------
    def counted(self, kind: str) -> Tally:
        """This memory's embedder, adding what it encodes to `encoded[kind]` (one of `ENCODED_KINDS`)."""
        return Tally(self, kind)

    # -- reading -----------------------------------------------------------
    def view(self) -> DerivedView:
        if self._view is None:
            self._view = DerivedView(self.store, dict(zip(self.bm25.ids, self.bm25.tokens)), self._carried_view)
            self._carried_view = None
        return self._view

    def _forget_view(self) -> None:
        """The view no longer matches the state; the next is built from what it carries where a memory's text is
        unchanged (the rest of it is let go now)."""
        if self._view is not None:
            self._carried_view, self._view = self._view.carried(), None

    def _source(self, name: str, query: str, query_vector, pool: int):
        if name == "faiss":
            return self.vectors.search(query_vector, pool)
        if name == "bm25":
            return self.bm25.search(query, pool)
        if name == "fusion":
            parts = {"faiss": self.vectors.search(query_vector, pool), "bm25": self.bm25.search(query, pool)}
            return {"parts": parts, "fused": fused(parts, self.rrf_k)}
        if name == "graph":
            return graph_search(self.view(), query, pool, self.graph_seeds)
        if name == "phrase":
            return phrase_search(self.view(), query, pool)
        if name == "attribute":
            return attribute_search(self.view(), query, pool)
        if name == "window":
            return self._window_search(query_vector, pool) if self._windows_current() else []
        raise UnknownModeError(f"unknown source {name!r}")

    def recall(self, query: str, mode: str = defaults.DEFAULT_MODE, limit: int = defaults.DEFAULT_RECALL_LIMIT,
               policy: str | None = None, budget_ms: float | None = None) -> dict:
        """Ranked candidates for `query` under `mode`, with per-source diagnostics.

        Returns `{"results": [candidate, ...], "diagnostics": {...}}`; each
        candidate has rank, id, text, metadata, score, final_score and
        diagnostics saying which sources found it, at which rank and score
        (and, in `full`, every ranking signal's value and contribution).
        """
        started = time.perf_counter()
        outcome, lists, query_vector, diagnostics = self._ask(query, mode, limit, policy, budget_ms)
        if outcome is None:
            return {"results": [], "diagnostics": diagnostics}
        if mode == "fusion" and "fusion" in outcome:
            ranked = outcome["fusion"]["fused"]
        elif mode in defaults.RANKED_MODES:
            ranked, diagnostics["ranking"] = self.rank(self._ranking_context(query, query_vector, lists, mode), limit)
            ranked = [(i, score, {"kind": "ranking", **extra}) for i, score, extra in ranked]
        else:
            ranked = round_robin(lists, diagnostics["sources_submitted"])
        diagnostics["total_ms"] = _ms(started)
        return {"results": materialise(self.store, ranked[:limit], lists), "diagnostics": diagnostics}

    def _ask(self, query: str, mode: str, limit: int, policy: str | None, budget_ms: float | None):
        """Ask `mode`'s sources: (their outcome, their lists by source, the question's vector, diagnostics); the
        outcome is None, and the diagnostics say why, when the memory or the question is empty."""
        if mode not in defaults.MODE_SOURCES:
            raise UnknownModeError(f"unknown retrieval mode {mode!r}; choose from {sorted(defaults.MODE_SOURCES)}")
        self.build_indexes()
        submitted = list(self.mode_sources.get(mode, defaults.MODE_SOURCES[mode]))
        pool = max(self.candidate_pool, limit)
        if len(self.store) == 0 or not query.strip():
            diagnostics = {"mode": mode, "policy": policy or self.policy, "sources_submitted": submitted,
                           "sources_completed": [], "sources_pending": [], "sources_failed": {}, "source_ms": {},
                           "candidate_pool": pool, "total_ms": 0.0,
                           "finish_reason": "empty_store" if len(self.store) == 0 else "empty_query"}
            return None, {}, None, diagnostics
        if "window" in submitted:
            self.build_windows()
        asked, query = query, self.searched_question(query, mode)
        query_vector, embed_ms, dense_query = None, 0.0, self.dense_question(asked, mode)
        if reads_vectors(mode, submitted):
            t0 = time.perf_counter()
            query_vector = self._question_vector(dense_query)
            embed_ms = _ms(t0)
        calls = {name: self.custom_sources.get(name) or partial(self._source, name, query, query_vector, pool)
                 for name in submitted}
        outcome, schedule = self.scheduler.run(calls, policy or self.policy, budget_ms or self.budget_ms)
        diagnostics = {"mode": mode, **schedule, "embed_ms": embed_ms, "candidate_pool": pool}
        if query != asked:
            diagnostics["searched_query"] = query
        if dense_query != asked:  # what the model read, where it is not the question asked
            diagnostics["dense_query"] = dense_query
        lists = {}
        for name, value in outcome.items():
            if name == "fusion":
                lists.update(value["parts"])
            else:
                lists[name] = value
        return outcome, lists, query_vector, diagnostics

    def _ranking_context(self, query: str, query_vector, lists, mode: str) -> RankingContext:
        return RankingContext(query_vector, lists, self.view(), self.vectors, self.view().ids,
                              self.searched_question(query, mode), asked=query,
                              lexical_search=lambda terms: self.bm25.search_terms(terms, len(self.store)),
                              pieces_for=(partial(self._best_pieces, query_vector) if self.max_pieces >= 2
                                          and query_vector is not None else None))

    def ranking_context(self, query: str, mode: str = "full", limit: int = defaults.DEFAULT_RECALL_LIMIT):
        """What the ranking of a ranked `mode` reads for `query` (the sources' candidates, the question's vector),
        or None where a recall would rank nothing. A tuning tool asks the sources once per question and then
        calls `rank` under as many settings as it likes; `rank(ranking_context(q), limit)` is `recall`'s order."""
        if mode not in defaults.RANKED_MODES:
            raise UnknownModeError(f"{mode!r} is not a ranked mode; ranked modes: {', '.join(defaults.RANKED_MODES)}")
        outcome, lists, query_vector, _ = self._ask(query, mode, limit, None, None)
        return None if outcome is None else self._ranking_context(query, query_vector, lists, mode)

    def rank(self, context: RankingContext, limit: int, weights: dict | None = None):
        """Best-first `(id, score, diagnostics)` of a ranking context under this memory's ranking settings
        (`weights` replaces its weights for this call), and the ranking's diagnostics."""
        return rank(context, self.weights if weights is None else weights, limit, self.mmr_lambda, self.mmr_window,
                    self.session_top_n, self.feedback_turns, self.feedback_terms, self.sentence_head)

    # -- persistence: memoria.snapshot --------------------------------------
    def snapshot(self, directory: str | Path) -> dict[str, Path]:
        """Write the whole state into `directory`; returns the files written."""
        return write_snapshot(self, directory)

    def restore(self, directory: str | Path) -> None:
        """Replace this state with the one snapshotted in `directory`; the question vectors kept for the state
        before go with it, as at a reset (a worker restores item after item into one memory)."""
        read_snapshot(self, directory)
        self.questions.clear()


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000.0, 3)
