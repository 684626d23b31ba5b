"""`python -m devtools same-rankings`: two runs of the same questions, ranking by ranking.

`memfarm compare` says whether a change moved a metric; a change meant to move nothing (the same ranking at
less cost) is checked more strictly: every question's candidates, in order, with their scores, and the texts
each run gave the model.
"""

from __future__ import annotations

import json
from pathlib import Path

from coordinator.benches.common import write_bench


def _ranked(path: Path) -> dict[str, list[tuple]]:
    records = json.loads(path.read_text(encoding="utf-8"))["records"]
    return {r["question_id"]: [(c.get("turn_id") or c.get("id"), c.get("score")) for c in r.get("candidates") or []]
            for r in records}


def _encoded(path: Path) -> dict:
    manifest = json.loads(path.with_name(path.stem + ".manifest.json").read_text(encoding="utf-8"))
    kinds: dict[str, int] = {}
    for item in manifest.get("items", []):
        for kind, count in (item.get("stats") or {}).get("texts_encoded_by_kind", {}).items():
            kinds[kind] = kinds.get(kind, 0) + count
    return {"texts_encoded": (manifest.get("embedding_store") or {}).get("texts_encoded"), "by_kind": kinds or None}


def same_rankings(before: str | Path, after: str | Path, output: str | Path, label: str) -> str:
    before, after = Path(before), Path(after)
    a, b = _ranked(before), _ranked(after)
    if set(a) != set(b):
        raise SystemExit(f"{after}: other questions than {before} ({len(set(a) ^ set(b))} differ)")
    order_differs = sorted(q for q in a if [i for i, _ in a[q]] != [i for i, _ in b[q]])
    score_gap = max((abs(x[1] - y[1]) for q in a for x, y in zip(a[q], b[q])
                     if x[1] is not None and y[1] is not None), default=0.0)
    result = {"label": label, "before": str(before), "after": str(after), "questions": len(a),
              "identical_rankings": len(a) - len(order_differs), "rankings_that_differ": order_differs,
              "largest_score_difference": score_gap,
              "encoded_before": _encoded(before), "encoded_after": _encoded(after)}
    result["texts_encoded_after_over_before"] = (
        round(result["encoded_after"]["texts_encoded"] / result["encoded_before"]["texts_encoded"], 3)
        if result["encoded_before"]["texts_encoded"] else None)
    path = write_bench("same_rankings", result, output)
    return (f"{label}: {result['identical_rankings']} of {len(a)} rankings identical in order, largest score "
            f"difference {score_gap:.2e}; texts encoded {result['encoded_before']['texts_encoded']} before, "
            f"{result['encoded_after']['texts_encoded']} after; wrote {path}")
