"""Small helpers shared by tests: generated datasets and independent metric checks."""

import json
import math
from pathlib import Path

from adapters.longmemeval_synth import generate


def write_dataset(path: Path, questions=8, seed=3, scale=0.06, mutate=None) -> Path:
    data = generate(questions, seed=seed, scale=scale)
    if mutate:
        data = mutate(data)
    path.write_text(json.dumps(data))
    return path


def independent_session_metrics(record: dict, k: int) -> dict:
    """Recompute session metrics from a record's retrieved ids, without the product's code."""
    ranking = []
    for candidate in record["candidates"]:
        sid = candidate["metadata"]["session_id"]
        if sid not in ranking:
            ranking.append(sid)
    gold = set(record["expected_ids"])
    top = ranking[:k]
    dcg = sum(1 / math.log2(i + 2) for i, s in enumerate(top) if s in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return {
        f"recall_any@{k}": float(any(s in gold for s in top)),
        f"recall_all@{k}": float(all(s in top for s in gold)),
        f"ndcg_any@{k}": dcg / ideal,
    }
