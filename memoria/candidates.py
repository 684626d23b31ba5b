"""What a recall makes of its sources' lists: fused by reciprocal rank, merged rank by rank, and each candidate
written out with its text, metadata, score and where every source placed it.

The engine asks the sources and ranks; these functions only turn `(id, score)` lists into what a recall returns.
"""

from __future__ import annotations

from memoria.rrf import reciprocal_rank_fusion


def fused(lists: dict[str, list[tuple[int, float]]], rrf_k: int) -> list[tuple[int, float, dict]]:
    """The lists fused by Reciprocal Rank Fusion (`memoria.rrf`), each candidate with its sources' contributions."""
    ranked = reciprocal_rank_fusion({s: [i for i, _ in pairs] for s, pairs in lists.items()}, k=rrf_k)
    return [(e["id"], e["score"], {"kind": "fusion", "rrf_k": rrf_k, "contributions": e["contributions"]})
            for e in ranked]


def round_robin(lists: dict[str, list[tuple[int, float]]], order: list[str]) -> list[tuple[int, float, dict]]:
    """Merge source lists without fusing scores: alternate ranks, first occurrence wins."""
    sources = [s for s in order if s in lists]
    merged, seen = [], set()
    depth = max((len(lists[s]) for s in sources), default=0)
    for position in range(depth):
        for source in sources:
            if position < len(lists[source]):
                doc_id, score = lists[source][position]
                if doc_id not in seen:
                    seen.add(doc_id)
                    merged.append((doc_id, score, {} if len(sources) == 1 else {"kind": "merge", "placed_by": source}))
    return merged


def materialise(store, ranked, lists) -> list[dict]:
    """Each `(id, score, extra)` of `ranked` as a recall returns it, read from `store`: rank, id, text, metadata,
    score, and diagnostics naming the rank and score each source of `lists` gave it (and `extra`, under its kind)."""
    positions = {s: {i: (r, sc) for r, (i, sc) in enumerate(pairs, start=1)} for s, pairs in lists.items()}
    rows = store.get([doc_id for doc_id, _, _ in ranked])
    results = []
    for rank_position, (doc_id, score, extra) in enumerate(ranked, start=1):
        text, metadata = rows[doc_id]
        found = {s: {"rank": pos[doc_id][0], "score": pos[doc_id][1]} for s, pos in positions.items() if doc_id in pos}
        diagnostics = {"sources": found}
        if extra:
            extra = dict(extra)
            diagnostics[extra.pop("kind")] = extra
        results.append({"rank": rank_position, "id": doc_id, "text": text, "metadata": metadata, "score": score,
                        "final_score": score, "diagnostics": diagnostics})
    return results
