"""Memoria behind the same narrow contract every system under test uses."""

from __future__ import annotations

import os
import time
from pathlib import Path

from memoria import BatchLoader, MemoryInterface, defaults
from memoria.embedder import LazyEmbedder


def onnx_folder() -> Path:
    """Where the ONNX export of the packaged model lives (MEMFARM_ONNX_DIR; one per machine by default)."""
    return Path(os.environ.get("MEMFARM_ONNX_DIR") or Path.home() / ".cache" / "memoria-farm" / "onnx")


def embedder_threads() -> int:
    """Threads for ONNX Runtime: a worker's --torch-threads, else every core (torch's own default)."""
    return int(os.environ.get("MEMFARM_TORCH_THREADS") or 0) or os.cpu_count() or 1


class MemoriaSystem:
    """One Memoria state per item; `mode` picks the retrieval sources.

    `max_workers` is the number of extraction threads at insert time;
    `max_seq_length` shortens the embedder's window (and so changes the signature).
    """

    name = "memoria"

    def __init__(self, mode: str = defaults.DEFAULT_MODE, batch_size: int = defaults.DEFAULT_BATCH_SIZE,
                 max_workers: int = defaults.DEFAULT_MAX_WORKERS, parallel_extract: bool = True, embedder=None,
                 weights: dict | None = None, without: tuple[str, ...] = (), mmr_lambda: float | None = None,
                 max_seq_length: int | None = None, embedding_store: str | None = None,
                 embedder_backend: str = "torch", window_size: int | None = None, window_overlap: int | None = None,
                 session_top_n: int | None = None, feedback_turns: int | None = None,
                 feedback_terms: int | None = None):
        if mode not in defaults.MODE_SOURCES:
            raise ValueError(f"unknown retrieval mode {mode!r}; choose from {sorted(defaults.MODE_SOURCES)}")
        switches = defaults.RANKING_SWITCHES + defaults.QUERY_SWITCHES if mode in defaults.RANKED_MODES else ()
        without = tuple(dict.fromkeys(without))  # a part named twice is left out once
        unknown = set(without) - set(defaults.MODE_SOURCES[mode]) - set(switches)
        if unknown:
            raise ValueError(f"mode {mode} has no sources or ranking parts {sorted(unknown)} to leave out")
        self.mode = mode
        self.batch_size = batch_size
        self.max_workers = max_workers
        self.parallel_extract = parallel_extract
        options = {"weights": dict(defaults.DEFAULT_WEIGHTS if weights is None else weights)}
        for part in set(without) & set(switches):  # a ranking part switched off weighs nothing; a query part is off
            if part in defaults.QUERY_SWITCHES:
                options[part] = False
            else:
                options["weights"][part] = 0.0
        if mmr_lambda is not None:
            options["mmr_lambda"] = mmr_lambda
        if session_top_n is not None:
            options["session_top_n"] = session_top_n
        if feedback_turns is not None:
            options["feedback_turns"] = feedback_turns
        if feedback_terms is not None:
            options["feedback_terms"] = feedback_terms
        if window_overlap is not None:
            options["window_overlap"] = window_overlap
        # Windows cost encoding: only a mode that submits the window source, with a weight on it, builds them.
        uses_windows = ("window" in defaults.MODE_SOURCES[mode] and "window" not in without
                        and options["weights"].get("window", 0.0) > 0)
        if "window" in defaults.MODE_SOURCES[mode] and not uses_windows:
            without = tuple(without) + ("window",) if "window" not in without else tuple(without)
        options["window_size"] = (defaults.DEFAULT_WINDOW_SIZE if window_size is None else window_size) \
            if uses_windows else 0
        self.max_seq_length = max_seq_length
        embedder = embedder or LazyEmbedder(max_seq_length, embedder_backend, onnx_dir=onnx_folder(),
                                            threads=embedder_threads())
        self.embedder_backend = embedder_backend
        self.embedding_store = embedding_store
        if embedding_store:  # each distinct text is encoded once per machine (memoria.embedding_store)
            from memoria.embedder import model_files_sha256
            from memoria.embedding_store import EmbeddingStore, StoredEmbedder

            embedder = StoredEmbedder(embedder, EmbeddingStore(embedding_store), model_files=model_files_sha256())
        self.memory = MemoryInterface(embedder=embedder, **options)
        self.sources = tuple(s for s in defaults.MODE_SOURCES[mode] if s not in without)
        if not self.sources:
            raise ValueError(f"mode {mode} without {', '.join(without)} has no source left to ask")
        self.without = tuple(without)
        if set(without) - set(switches):
            self.memory.mode_sources[mode] = self.sources
        self.last_diagnostics: dict = {}
        self.ingest_timings: dict[str, float] = {}

    @property
    def embedding_counts(self) -> dict | None:
        """Texts encoded and served from the embedding store so far (None without a store)."""
        counts = getattr(self.memory.embedder, "counts", None)
        return dict(counts) if counts is not None else None

    @property
    def embedding_signature(self) -> dict:
        """The signature of the vectors this system makes; read without loading the model when it is not loaded."""
        return self.memory.embedder.signature

    @property
    def build_identity(self) -> dict:
        """What a cached state depends on beyond the docs and the signature: the engine's code, the model's files."""
        from memoria.embedder import model_files_sha256
        from memoria.version import BUILD_VERSION

        return {"engine_code": BUILD_VERSION, "model_files": model_files_sha256()}

    @property
    def config(self) -> dict:
        """What the manifest discloses about this system."""
        return {
            "name": self.name,
            "retrieval_mode": self.mode,
            "sources": list(self.sources),
            "ranking": ({"enabled": True, "mmr": self.memory.mmr_lambda < 1.0, **self.memory.ranking_settings,
                         "switched_off": [p for p in self.without if p in defaults.RANKING_SWITCHES + defaults.QUERY_SWITCHES]}
                        if self.mode in defaults.RANKED_MODES else {"enabled": False, "mmr": False}),
            "batch_size": self.batch_size,
            "extraction_threads": self.max_workers,
            "embedding_signature": self.embedding_signature,
            "vector_store": type(self.memory.vectors.index).__name__ + "(IndexFlatIP)",
            **self.memory.settings,
        }

    def reset(self) -> None:
        self.memory.reset()

    def ingest(self, docs: list[dict]) -> None:
        texts = [d["text"] for d in docs]
        metadatas = [{"external_id": d["external_id"], "label": d["label"], **d["props"]} for d in docs]
        loader = BatchLoader(self.memory)
        loader.insert_batch(
            texts, metadatas, batch_size=self.batch_size,
            parallel_extract=self.parallel_extract, max_workers=self.max_workers,
        )
        self.ingest_timings = dict(loader.timings)  # vectors go into FAISS inside the insert: index_ms holds it
        if "window" in self.sources:  # built now, so that the cached state holds them
            started = time.perf_counter()
            self.memory.build_windows(batch_size=self.batch_size)
            self.ingest_timings["encode_ms"] = self.ingest_timings.get("encode_ms", 0.0) + \
                (time.perf_counter() - started) * 1000

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

    # Optional: systems that can snapshot their state get the per-item cache.
    def snapshot(self, directory: Path) -> list[Path]:
        return list(self.memory.snapshot(directory).values())

    def restore(self, directory: Path) -> None:
        self.memory.restore(directory)

