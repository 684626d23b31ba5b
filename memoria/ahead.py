"""Vectors made ahead: texts a caller knows it will store later, encoded in one batch and served from here.

Memory that grows in small steps (a session at a time) would otherwise encode a few texts at each step, and
every batch the model runs has `CANONICAL_BATCH_ROWS` rows whatever it holds (`memoria.canonical_batches`),
so most of each small batch would be padding. A vector depends only on its text (never on its batch), so a
text served from here has the bits it would have had if encoded when stored: rankings are unchanged. What is
here is vectors by text only; nothing of it is stored, indexed or searchable until the text is inserted.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class VectorsAhead:
    """Text -> vector for the texts encoded ahead (one item's at a time)."""

    def __init__(self):
        self.vectors: dict[str, np.ndarray] = {}

    def add(self, texts: list[str], encode: Callable[[list[str]], np.ndarray]) -> int:
        """Encode the `texts` not held yet (each distinct one once) and hold them; returns how many were encoded."""
        distinct = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if distinct:
            self.vectors.update(zip(distinct, encode(distinct)))
        return len(distinct)

    def serve(self, texts: list[str], encode: Callable[[list[str]], np.ndarray], dimension: int) -> np.ndarray:
        """The vectors of `texts`: held ones from here, the others encoded now (through `encode`)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        fresh = dict(zip(missing, encode(missing))) if missing else {}
        out = np.zeros((len(texts), dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self.vectors[text] if text in self.vectors else fresh[text]
        return out


class AheadEmbedder:
    """An embedder that serves the texts encoded ahead from a `VectorsAhead` and encodes the rest with the one it
    wraps; everything else (its signature, its dimension) is the wrapped embedder's."""

    def __init__(self, inner):
        self.inner = inner
        self.ahead = VectorsAhead()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode(self, texts, batch_size: int = 32, **options) -> np.ndarray:
        if not self.ahead.vectors:
            return self.inner.encode(texts, batch_size=batch_size, **options)
        return self.ahead.serve(list(texts), lambda rest: self.inner.encode(rest, batch_size=batch_size, **options),
                                self.inner.dimension)

    def encode_ahead(self, texts: list[str], batch_size: int = 32) -> int:
        """Forget what was encoded ahead, then encode `texts` (each distinct one once) to be served later."""
        self.ahead = VectorsAhead()
        return self.ahead.add(list(texts), lambda rest: self.inner.encode(rest, batch_size=batch_size))
