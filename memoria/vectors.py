"""Exact inner-product search over unit vectors (cosine), via FAISS with an id map."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np

from memoria.errors import SnapshotError
from memoria.ties import best_first, score_key


class VectorIndex:
    """A FAISS `IndexIDMap2(IndexFlatIP)` keyed by the store's integer ids."""

    def __init__(self, dimension: int):
        self.dimension = dimension
        self.index = faiss.IndexIDMap2(faiss.IndexFlatIP(dimension))

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def add(self, ids: list[int], vectors: np.ndarray) -> None:
        if len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids for {len(vectors)} vectors")
        if len(ids):
            self.index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), np.asarray(ids, dtype=np.int64))

    def stored(self) -> dict[int, np.ndarray]:
        """Every stored vector by its id, read back in one call."""
        ids = faiss.vector_to_array(self.index.id_map)
        if not len(ids):
            return {}
        return dict(zip(ids.tolist(), self.index.reconstruct_batch(ids)))

    def clear(self) -> None:
        self.index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dimension))

    def search(self, vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """Best-first (id, cosine) pairs; scores equal on the tie grid ordered by id."""
        total = len(self)
        if min(limit, total) <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        fetch = min(total, limit + 1)  # one past the edge: a near tie across it is settled by the rule, not noise
        while True:
            scores, ids = self.index.search(query, fetch)
            pairs = [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]
            ranked = best_first(pairs)
            if fetch >= total or len(ranked) <= limit or score_key(pairs[-1][1]) < score_key(ranked[limit - 1][1]):
                return ranked[:limit]
            fetch = min(total, fetch * 2)

    def save(self, path: Path) -> None:
        faiss.write_index(self.index, str(path))

    @classmethod
    def load(cls, path: Path, dimension: int) -> "VectorIndex":
        try:
            index = faiss.read_index(str(path))
        except RuntimeError as exc:
            raise SnapshotError(f"{path}: unreadable FAISS index ({exc})") from exc
        if index.d != dimension:
            raise SnapshotError(f"{path}: index has dimension {index.d}, expected {dimension}")
        loaded = cls(dimension)
        loaded.index = index
        return loaded

    def read_back(self, path: Path):
        """Rows 0..n-1 as one matrix (None when empty), for an index whose ids are positions (windows, pieces):
        an id that is missing, or vectors that are not finite, would fail or mislead every later recall."""
        if not len(self):
            return None
        try:
            matrix = self.index.reconstruct_batch(np.arange(len(self), dtype=np.int64))
        except RuntimeError as exc:
            raise SnapshotError(f"{path}: rows 0..{len(self) - 1} cannot be read back by id "
                                f"({str(exc).splitlines()[0][:200]})") from exc
        if not np.isfinite(matrix).all():
            raise SnapshotError(f"{path}: vectors hold non-finite numbers")
        return matrix


def encode_reusing(texts: list[str], previous: "VectorIndex", previous_texts: list[str], embedder, dimension: int,
                   batch_size: int) -> tuple["VectorIndex", np.ndarray, int]:
    """An index of `texts` at ids 0..n-1 (windows, sentence pieces), each text's vector taken from `previous`
    (whose row k holds `previous_texts[k]`) where it was there, the rest encoded once each.
    Returns the index, its rows as a matrix, and how many texts were encoded."""
    known = {t: k for k, t in enumerate(previous_texts)} if len(previous) == len(previous_texts) else {}
    fresh = [t for t in dict.fromkeys(texts) if t not in known]
    encoded = embedder.encode(fresh, batch_size=batch_size) if fresh else np.zeros((0, dimension))
    by_text = {t: encoded[k] for k, t in enumerate(fresh)}
    matrix = np.zeros((len(texts), dimension), dtype=np.float32)
    for k, text in enumerate(texts):
        matrix[k] = by_text[text] if text in by_text else previous.index.reconstruct(known[text])
    index = VectorIndex(dimension)
    index.add(list(range(len(texts))), matrix)
    return index, matrix, len(fresh)
