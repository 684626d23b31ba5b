"""The ranking pipeline of the `full` mode: weighted signals, MMR, a finalizer.

Every signal maps a candidate to a value in [0, 1];
the final score is the weighted sum, and each candidate's diagnostics list
every signal's value and contribution, so the final score is their sum.
MMR then may reorder the top of the list for diversity, and says how much.
"""

from __future__ import annotations

import numpy as np

from memoria import defaults


def _min_max(scores: dict[int, float], ids) -> dict[int, float]:
    values = [scores.get(i, 0.0) for i in ids]
    low, high = min(values, default=0.0), max(values, default=0.0)
    if high <= low:
        return {i: (1.0 if scores.get(i, 0.0) > 0 else 0.0) for i in ids}
    return {i: (scores.get(i, low) - low) / (high - low) for i in ids}


def _by_max(scores: dict[int, float], ids) -> dict[int, float]:
    top = max((scores.get(i, 0.0) for i in ids), default=0.0)
    return {i: (scores.get(i, 0.0) / top if top > 0 else 0.0) for i in ids}


class RankingContext:
    """What signals may read: the query's vector, the sources' lists, the derived view, the vectors."""

    def __init__(self, query_vector, lists: dict[str, list[tuple[int, float]]], view, vectors, total_ids: list[int]):
        self.query_vector = query_vector
        self.lists = {name: dict(pairs) for name, pairs in lists.items()}
        self.view = view
        self.vectors = vectors
        self.first_id = total_ids[0] if total_ids else 0
        self.last_id = total_ids[-1] if total_ids else 0
        self._vector_cache: dict[int, np.ndarray] = {}

    def vector(self, memory_id: int):
        if memory_id not in self._vector_cache:
            try:
                self._vector_cache[memory_id] = self.vectors.index.reconstruct(int(memory_id))
            except RuntimeError:  # stored without an embedding
                self._vector_cache[memory_id] = None
        return self._vector_cache[memory_id]


def _semantic(ctx: RankingContext, ids):
    if ctx.query_vector is None:
        return {i: 0.0 for i in ids}
    raw = {}
    for i in ids:
        vector = ctx.vector(i)
        raw[i] = float(np.dot(vector, ctx.query_vector)) if vector is not None else 0.0
    return _min_max(raw, ids)


def _recency(ctx: RankingContext, ids):
    span = max(1, ctx.last_id - ctx.first_id)
    return {i: (i - ctx.first_id) / span for i in ids}


SIGNALS = {
    "semantic": _semantic,
    "token": lambda ctx, ids: _min_max(ctx.lists.get("bm25", {}), ids),
    "phrase": lambda ctx, ids: _by_max(ctx.lists.get("phrase", {}), ids),
    "graph": lambda ctx, ids: _by_max(ctx.lists.get("graph", {}), ids),
    "attribute_boost": lambda ctx, ids: _by_max(ctx.lists.get("attribute", {}), ids),
    "importance": lambda ctx, ids: {i: ctx.view.importance.get(i, 0.0) for i in ids},
    "recency": _recency,
}


def rank(ctx: RankingContext, weights: dict[str, float], limit: int,
         mmr_lambda: float = defaults.DEFAULT_MMR_LAMBDA, mmr_window: int = defaults.DEFAULT_MMR_WINDOW):
    """Best-first `(id, final_score, diagnostics)` and the ranking's own diagnostics."""
    unknown = set(weights) - set(SIGNALS)
    if unknown:
        raise ValueError(f"unknown ranking signals {sorted(unknown)}; known: {sorted(SIGNALS)}")
    pool = sorted({i for pairs in ctx.lists.values() for i in pairs})
    values = {name: SIGNALS[name](ctx, pool) for name in SIGNALS}
    scored = []
    for memory_id in pool:
        signal_values = {name: values[name][memory_id] for name in SIGNALS}
        contributions = {name: weights.get(name, 0.0) * signal_values[name] for name in SIGNALS}
        scored.append((memory_id, sum(contributions.values()), {"signals": signal_values,
                                                                "contributions": contributions}))
    scored.sort(key=lambda e: (-e[1], e[0]))
    reordered, mmr = _mmr(ctx, scored, mmr_lambda, mmr_window)
    final = reordered[:limit]
    diagnostics = {"pool": len(pool), "weights": dict(weights), "mmr": {**mmr, "lambda": mmr_lambda,
                                                                       "window": mmr_window}}
    return final, diagnostics


def _mmr(ctx: RankingContext, scored, mmr_lambda: float, window: int):
    """Maximal Marginal Relevance (Carbonell and Goldstein, 1998) over the top `window` candidates."""
    head, tail = scored[:window], scored[window:]
    if mmr_lambda >= 1.0 or len(head) < 2:
        return scored, {"applied": False, "moved": 0, "max_shift": 0}
    top = head[0][1] or 1.0
    remaining, selected = list(head), []
    while remaining:
        best, best_value = None, None
        for entry in remaining:
            similarity = max((_similarity(ctx, entry[0], chosen[0]) for chosen in selected), default=0.0)
            value = mmr_lambda * (entry[1] / top) - (1 - mmr_lambda) * similarity
            if best_value is None or value > best_value + 1e-12:
                best, best_value = entry, value
        best[2]["mmr_score"] = best_value
        selected.append(best)
        remaining.remove(best)
    before = {e[0]: position for position, e in enumerate(head)}
    shifts = [abs(position - before[e[0]]) for position, e in enumerate(selected)]
    return selected + tail, {"applied": True, "moved": sum(1 for s in shifts if s), "max_shift": max(shifts)}


def _similarity(ctx: RankingContext, a: int, b: int) -> float:
    va, vb = ctx.vector(a), ctx.vector(b)
    return float(np.dot(va, vb)) if va is not None and vb is not None else 0.0
