"""Memoria behind the same narrow contract every system under test uses."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import NamedTuple

from dataclasses import fields

from adapters.systems.contract import (AddsOnIngest, AsksAhead, CountsWork, EncodesAhead, Describes, Diagnoses, Embeds, GrowsWhileAsked,
                                       HasBuildIdentity, SharesVectors, Snapshots, SystemInfo)
from adapters.threads import model_threads
from memoria import BatchLoader, MemoryInterface, defaults
from memoria.embedder import LazyEmbedder
from memoria.encoding import reads_vectors
from memoria.errors import SettingsError
from memoria.settings import MemoriaSettings


def onnx_folder() -> Path:
    """Where the ONNX export of the packaged model lives (MEMFARM_ONNX_DIR; one per machine by default)."""
    return Path(os.environ.get("MEMFARM_ONNX_DIR") or Path.home() / ".cache" / "memoria-farm" / "onnx")


class Parts(NamedTuple):
    """What a mode asks once some of its sources and parts are left out."""

    sources: tuple[str, ...]
    switched_off: tuple[str, ...]
    #: Windows cost encoding: only a mode that submits the window source, with a weight on it, builds them.
    windows: bool
    #: Whether anything the mode asks reads a vector (`memoria.encoding.reads_vectors`); where nothing does, no
    #: text is encoded at all (`bm25`, `raw` without `faiss`).
    vectors: bool


def plan_parts(mode: str, without=(), weights: dict | None = None) -> Parts:
    """The sources `mode` asks and the ranking or query parts it switches off with `without` left out.

    Raises ValueError for a mode or part the engine does not have, and for a `without` that leaves no source.
    """
    if mode not in defaults.MODE_SOURCES:
        raise ValueError(f"unknown retrieval mode {mode!r}; choose from {sorted(defaults.MODE_SOURCES)}")
    switches = defaults.SWITCHES if mode in defaults.RANKED_MODES else ()
    without = tuple(dict.fromkeys(without))  # a part named twice is left out once
    unknown = [part for part in without if part not in defaults.MODE_SOURCES[mode] + switches]
    if unknown:
        raise ValueError(f"mode {mode} has no sources or ranking parts {unknown} to leave out; it has "
                         f"{', '.join(defaults.MODE_SOURCES[mode] + switches)}")
    weights = defaults.DEFAULT_WEIGHTS if weights is None else weights
    windows = ("window" in defaults.MODE_SOURCES[mode] and "window" not in without
               and weights.get("window", 0.0) > 0)
    sources = tuple(s for s in defaults.MODE_SOURCES[mode] if s not in without and (s != "window" or windows))
    if not sources:
        raise ValueError(f"mode {mode} without {', '.join(without)} has no source left to ask")
    return Parts(sources, tuple(part for part in without if part in switches), windows, reads_vectors(mode, sources))


class MemoriaSystem(AddsOnIngest, EncodesAhead, AsksAhead, Describes, Embeds, HasBuildIdentity, Snapshots, GrowsWhileAsked, CountsWork, Diagnoses,
                    SharesVectors):
    """One Memoria state per item; `mode` picks the retrieval sources.

    `max_workers` is the number of extraction threads at insert time;
    `max_seq_length` shortens the embedder's window (and so changes the signature). `embedder` is an embedder,
    or the name of the model (`minilm`, `mpnet`, a folder) a lazy one loads; the `full` weights default to that
    model's (`memoria.defaults.weights_for`).
    `settings` are the engine's (`memoria.settings.MemoriaSettings`) by field name; one that
    is None or absent keeps its default. `without` then switches parts off: a ranking part
    weighs 0, a query part is off, and windows that nothing searches are not built.
    """

    name = "memoria"
    #: A second ingest adds rows to the same state (ids, BM25, FAISS; windows and views brought up to date).
    adds_on_ingest = True

    def __init__(self, mode: str = defaults.DEFAULT_MODE, batch_size: int = defaults.DEFAULT_BATCH_SIZE,
                 max_workers: int = defaults.DEFAULT_MAX_WORKERS, parallel_extract: bool = True, embedder=None,
                 without: tuple[str, ...] = (), max_seq_length: int | None = None, embedding_store: str | None = None,
                 embedder_backend: str = defaults.DEFAULT_EMBEDDER_BACKEND, **settings):
        embedder_name = embedder if isinstance(embedder, str) else None  # a model's name or folder, or an embedder
        embedder = None if isinstance(embedder, str) else embedder
        given = {name: value for name, value in settings.items() if value is not None}
        parts = plan_parts(mode, without, given.get("weights"))
        self.mode = mode
        self.batch_size = batch_size
        self.max_workers = max_workers
        self.parallel_extract = parallel_extract
        weights = dict(given.get("weights", defaults.weights_for(embedder_name)))
        for part in parts.switched_off:  # a ranking part switched off weighs nothing; a query part is off
            if part in defaults.QUERY_SWITCHES:
                given[part] = False
            else:
                weights[part] = 0.0
        if not parts.windows:
            given["window_size"] = 0
        #: What the engine is built with: the settings given, after `without`.
        self.settings = MemoriaSettings().updated(**{**given, "weights": weights})
        self.max_seq_length = max_seq_length
        embedder = embedder or LazyEmbedder(max_seq_length, embedder_backend, onnx_dir=onnx_folder(),
                                            threads=model_threads(), embedder=embedder_name)
        self.embedder_backend = embedder_backend
        self.embedder_name = getattr(embedder, "embedder", embedder_name)
        self.weights_source = ("given" if "weights" in given
                               else defaults.weights_label(self.embedder_name))
        self.embedding_store = embedding_store
        self._stored = None  # the embedder that keeps vectors in a store, where there is one
        if embedding_store:  # each distinct text is encoded once per machine (memoria.embedding_store)
            from memoria.model_files import model_files_sha256
            from memoria.embedding_store import EmbeddingStore, StoredEmbedder

            embedder = self._stored = StoredEmbedder(embedder, EmbeddingStore(embedding_store),
                                                     model_files=model_files_sha256(self.embedder_name))
        self.memory = MemoryInterface(embedder=embedder, settings=self.settings)
        self.sources, self.switched_off = parts.sources, parts.switched_off
        #: Whether this mode reads vectors; where it reads none, its turns are stored without any.
        self.encodes = parts.vectors
        if self.sources != defaults.MODE_SOURCES[mode]:
            self.memory.mode_sources[mode] = self.sources
        self.last_diagnostics: dict = {}
        self.ingest_timings: dict[str, float] = {}

    @property
    def embedding_counts(self) -> dict | None:
        """Texts encoded and served from the embedding store so far (None without a store)."""
        return dict(self._stored.counts) if self._stored is not None else None

    @property
    def encoded_by_kind(self) -> dict:
        """Texts the model encoded for this system so far, by kind (`memoria.encoding.ENCODED_KINDS`)."""
        return dict(self.memory.encoded)

    @property
    def unsaved_state(self) -> bool:
        """Whether questions added to the state since it was snapshotted or restored (sentence vectors of the
        turns that reached ranking), so that a cache entry should be stored again to hold them."""
        return self.memory.pieces.unsaved > 0

    @property
    def embedding_signature(self) -> dict:
        """The signature of the vectors this system makes; read without loading the model when it is not loaded."""
        return self.memory.embedder.signature

    @property
    def build_identity(self) -> dict:
        """What a cached state depends on beyond the docs and the signature: the engine's code, the model's files."""
        from memoria.model_files import model_files_sha256
        from memoria.version import BUILD_VERSION

        identity = {"engine_code": BUILD_VERSION, "model_files": model_files_sha256(self.embedder_name)}
        if not self.encodes:  # a state without vectors is another entry: a mode that reads them never restores it
            identity["variant"] = "no-vectors"
        return identity

    @property
    def config(self) -> dict:
        """What the manifest discloses about this system."""
        return {
            "name": self.name,
            "retrieval_mode": self.mode,
            "sources": list(self.sources),
            "ranking": ({"enabled": True, "mmr": self.memory.mmr_lambda < 1.0, **self.memory.ranking_settings,
                         "switched_off": list(self.switched_off), "weights_source": self.weights_source}
                        if self.mode in defaults.RANKED_MODES else {"enabled": False, "mmr": False}),
            "batch_size": self.batch_size,
            "extraction_threads": self.max_workers,
            "embedding_signature": self.embedding_signature,
            "vector_store": type(self.memory.vectors.index).__name__ + "(IndexFlatIP)",
            **self.memory.settings,
        }

    @property
    def stores_vectors(self) -> bool:
        """Whether the embedder keeps vectors in a store (the farm can then share them)."""
        return self._stored is not None

    def share_vectors(self, shared, verify_share: float) -> None:
        """Where the stored embedder finds what other workers encoded (None: nowhere); the share checked."""
        self._stored.shared = shared
        self._stored.verify_share = verify_share

    def reset(self) -> None:
        self.memory.reset()

    def ingest(self, docs: list[dict]) -> None:
        texts = [d["text"] for d in docs]
        metadatas = [_metadata(d) for d in docs]
        loader = BatchLoader(self.memory)
        loader.insert_batch(
            texts, metadatas, batch_size=self.batch_size, skip_embedding=not self.encodes,
            parallel_extract=self.parallel_extract, max_workers=self.max_workers,
        )
        self.ingest_timings = dict(loader.timings)  # vectors go into FAISS inside the insert: index_ms holds it
        if "window" in self.sources:  # windows are built now, so that the cached state holds them; sentence
            started = time.perf_counter()  # vectors wait for the turns that reach ranking (memoria.pieces)
            self.memory.build_windows(batch_size=self.batch_size)
            self.ingest_timings["encode_ms"] = self.ingest_timings.get("encode_ms", 0.0) + \
                (time.perf_counter() - started) * 1000

    def encode_ahead(self, docs: list[dict]) -> None:
        """The vectors of `docs` made now, served when they are ingested in steps (`MemoryInterface.encode_ahead`);
        sentence pieces only in a mode that ranks, the one reader of them; nothing in a mode that reads no vector."""
        docs = docs if self.encodes else []
        self.memory.encode_ahead([d["text"] for d in docs], [_metadata(d) for d in docs], batch_size=self.batch_size,
                                 ranked=self.mode in defaults.RANKED_MODES)

    def questions_ahead(self, queries: list[str], top_k: int) -> None:
        """What the questions about to be asked will read, encoded together (`MemoryInterface.encode_questions`)."""
        if self.encodes:
            self.memory.encode_questions(queries, self.mode, limit=top_k, batch_size=self.batch_size)

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        response = self.memory.recall(query, mode=self.mode, limit=top_k)
        self.last_diagnostics = response["diagnostics"]
        return [
            {
                "external_id": c["metadata"]["external_id"],
                "score": c["score"],
                "diagnostics": {"final_score": c["final_score"], **c["diagnostics"]},
            }
            for c in response["results"]
            if c["metadata"].get("label") == label
        ]

    def snapshot(self, directory: Path) -> list[Path]:
        return list(self.memory.snapshot(directory).values())

    def restore(self, directory: Path) -> None:
        self.memory.restore(directory)



def _metadata(doc: dict) -> dict:
    """What the engine stores beside a doc's text."""
    return {"external_id": doc["external_id"], "label": doc["label"], **doc["props"]}


def check_run(*, mode: str, without=(), given: dict, weights_file: str | None, weights: dict | None,
              embedder: str) -> list[str]:
    """Memoria's own check of a run's settings, before anything is built: what only the engine reads. Raises
    ValueError naming the option it refuses; returns warnings about settings given that the run would not use."""
    if weights_file and mode not in defaults.RANKED_MODES:
        raise ValueError(f"--weights sets the ranking of --retrieval-mode full, not {mode}")
    ranked = {spec.name for spec in fields(MemoriaSettings) if spec.metadata["ranked"]}
    for option in given:
        if option in ranked and mode not in defaults.RANKED_MODES:
            raise ValueError(f"{_flag(option)} sets the ranking of --retrieval-mode full, not {mode}")
    try:
        parts = plan_parts(mode, without, weights)
    except ValueError as exc:
        raise ValueError(f"--without: {exc}") from None
    try:
        MemoriaSettings().updated(**given)
    except SettingsError as exc:
        raise ValueError(f"{_flag(exc.field)}: {exc.problem}") from None
    warnings = []
    windowed = [o for o in ("window_size", "window_overlap") if o in given]
    if windowed and not parts.windows:
        warnings.append(f"{_flag(windowed[0])} is not used: windows weigh 0 unless --weights "
                        "gives `window` a weight, and windows weighing nothing are not built")
    if "max_pieces" in given:
        if "sentence" in parts.switched_off or (weights or defaults.weights_for(embedder)).get("sentence", 0.0) <= 0:
            warnings.append("--max-pieces is not used: sentence vectors weigh 0 (--weights gives `sentence` "
                            "none, or --without sentence), and sentence vectors weighing nothing are not built")
    return warnings


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


DESCRIPTION = SystemInfo(
    "memoria", MemoriaSystem, "Memoria",
    ("mode", "batch_size", "max_workers", "without", "max_seq_length", "embedding_store", "embedder_backend",
     "embedder") + tuple(spec.name for spec in fields(MemoriaSettings)),
    modes=defaults.MODES,
    plan=plan_parts,
    check=check_run,
    compared=("full", "fusion", "bm25"))
