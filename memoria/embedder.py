"""The sentence embedder: all-MiniLM-L6-v2 by default, or another model (`memoria.model_files`), loaded offline.

The model is loaded once per process and setting (`Embedder.shared()`), never
fetched: its files come from a package (checked against pinned hashes) or a local
folder, and the hub is switched off before sentence-transformers is imported.
`packaged_signature()` says what the vectors would be without loading torch at all.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from memoria import defaults
from memoria.canonical_batches import encode_sentence_transformer
from memoria.model_files import (BACKENDS, backend_label, check_modules, check_unchanged,
                                  embedder_key, offline_environment, packaged_signature, resolve, signature)
from memoria.onnx_backend import OnnxEmbedder

logger = logging.getLogger(__name__)

_LOCK = threading.Lock()
_SHARED: dict[tuple, "Embedder"] = {}


class Embedder:
    """Unit-length float32 sentence vectors with a signature that keys caches.

    `max_seq_length` shortens the model's window (in tokens); it changes the
    vectors, so it is part of the signature. `embedder` names the model (`memoria.model_files.resolve`).
    """

    def __init__(self, device: str = "cpu", max_seq_length: int | None = None, embedder: str | None = None):
        offline_environment()
        from sentence_transformers import SentenceTransformer

        self.embedder = embedder_key(embedder)
        model = resolve(self.embedder)  # every file checked before the first load
        check_modules(model.root)  # again just before the load: modules.json may have changed since the check
        self.model = SentenceTransformer(str(model.root), device=device, local_files_only=True,
                                         trust_remote_code=False)
        check_unchanged(self.embedder)  # the model's files may have changed since their check, before this load
        get_dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dimension = int(get_dimension())
        if max_seq_length:
            self.model.max_seq_length = int(max_seq_length)
        self.max_seq_length = int(self.model.max_seq_length)
        logger.info("loaded %s (%d-d) from %s", model.model_id, self.dimension, model.root)

    @classmethod
    def shared(cls, max_seq_length: int | None = None, embedder: str | None = None) -> "Embedder":
        """The process-wide instance for this setting; the model loads on first use only."""
        key = (max_seq_length, embedder_key(embedder))
        with _LOCK:
            if key not in _SHARED:
                _SHARED[key] = cls(max_seq_length=max_seq_length, embedder=key[1])
            return _SHARED[key]

    @property
    def signature(self) -> dict:
        """What must match for two vectors to be comparable."""
        return signature(self.dimension, self.max_seq_length, embedder=self.embedder)

    def encode(self, texts: list[str], batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> np.ndarray:
        """Embed texts; returns a (len(texts), dimension) float32 array, each row whatever its batch."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = encode_sentence_transformer(self.model, texts, batch_size, self.max_seq_length, self.dimension)
        return np.ascontiguousarray(vectors, dtype=np.float32)


class LazyEmbedder:
    """Stands for `Embedder.shared(max_seq_length)` (or the ONNX embedder of `backend`): the model loads on
    the first encode, and `signature` and `dimension` are read from the model's config without loading it."""

    def __init__(self, max_seq_length: int | None = None, backend: str = defaults.DEFAULT_EMBEDDER_BACKEND,
                 onnx_dir: str | Path | None = None, threads: int | None = None, embedder: str | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"unknown embedder backend {backend!r}; choose from {', '.join(BACKENDS)}")
        if backend != "torch" and not onnx_dir:
            raise ValueError(f"the {backend} backend needs a folder for its exported model (onnx_dir)")
        self.max_seq_length = max_seq_length
        self.backend, self.onnx_dir, self.threads = backend, onnx_dir, threads
        self.embedder = embedder_key(embedder)
        self._signature = {**packaged_signature(max_seq_length, self.embedder),
                           "backend": backend_label(backend, self.embedder)}
        self.dimension = self._signature["dimension"]

    @property
    def loaded(self):
        if self.backend == "torch":
            return Embedder.shared(self.max_seq_length, self.embedder)
        folder = Path(self.onnx_dir)  # one export folder per model: two models never overwrite each other's
        if self.embedder != defaults.DEFAULT_EMBEDDER:
            folder = folder / resolve(self.embedder).files_sha256[:16]
        return OnnxEmbedder.shared(folder, self.backend, self.max_seq_length, self.threads, self.embedder)

    @property
    def signature(self) -> dict:
        return dict(self._signature)

    def encode(self, texts: list[str], batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> np.ndarray:
        return self.loaded.encode(texts, batch_size=batch_size)
