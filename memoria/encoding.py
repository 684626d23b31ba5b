"""What a memory encodes, and whether it must: each text the model encodes counted by kind (`Tally`), and whether a
mode reads any vector at all (`reads_vectors`; one that reads none encodes nothing)."""

from __future__ import annotations

import numpy as np

from memoria import defaults

#: What a memory encodes: its turns, their windows, their sentence pieces, and the questions it is asked.
ENCODED_KINDS = ("turns", "windows", "pieces", "questions")


def reads_vectors(mode: str, sources) -> bool:
    """Whether `mode`, submitting `sources`, reads any vector: it ranks (the ranking reads the turns' and their
    sentences' vectors) or a source searches vectors (`defaults.VECTOR_SOURCES`). One that reads none needs no
    vector encoded, for its memory or its questions."""
    return mode in defaults.RANKED_MODES or bool(set(defaults.VECTOR_SOURCES) & set(sources))


class Tally:
    """A memory's embedder that counts, under one kind, the texts the model encodes: an embedder that counts
    its own (`counts["encoded"]`, an embedding store) says how many it did not serve; any other encodes all."""

    def __init__(self, memory, kind: str):
        self.memory, self.kind = memory, kind
        self.dimension = memory.embedder.dimension

    def encode(self, texts, **options) -> np.ndarray:
        if self.memory.ahead.vectors:  # texts encoded ahead are served as they are (`memoria.ahead`)
            return self.memory.ahead.serve(list(texts), lambda rest: self._encode(rest, **options), self.dimension)
        return self._encode(texts, **options)

    def _encode(self, texts, **options) -> np.ndarray:
        embedder = self.memory.embedder
        before = getattr(embedder, "counts", {}).get("encoded")
        vectors = embedder.encode(texts, **options)
        after = getattr(embedder, "counts", {}).get("encoded")
        self.memory.encoded[self.kind] += len(texts) if before is None or after is None else after - before
        return vectors
