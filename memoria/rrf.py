"""Reciprocal Rank Fusion.

Cormack, Clarke and Buettcher, "Reciprocal Rank Fusion outperforms Condorcet
and individual Rank Learning Methods", SIGIR 2009: score(d) = sum over
rankings of 1 / (k + rank(d)), with ranks starting at 1.
"""

from __future__ import annotations

from memoria.defaults import DEFAULT_RRF_K
from memoria.ties import score_key


def reciprocal_rank_fusion(rankings: dict[str, list[int]], k: int = DEFAULT_RRF_K) -> list[dict]:
    """Fuse best-first id lists into one list, best first.

    Each entry is `{"id", "score", "contributions": {source: 1/(k+rank)}}`.
    Equal scores are ordered by id, so the order never depends on which
    source or dict happened to come first.
    """
    if k <= 0:
        raise ValueError(f"RRF k must be positive, got {k}")
    fused: dict[int, dict] = {}
    for source in sorted(rankings):
        for rank, doc_id in enumerate(rankings[source], start=1):
            entry = fused.setdefault(doc_id, {"id": doc_id, "score": 0.0, "contributions": {}})
            if source in entry["contributions"]:
                continue
            share = 1.0 / (k + rank)
            entry["contributions"][source] = share
            entry["score"] += share
    return sorted(fused.values(), key=lambda e: (-score_key(e["score"]), e["id"]))
