"""Retrieval metrics at session and turn level; one code path for runs and `memfarm score`.

All functions take a best-first ranking of ids and a set of gold ids.
NDCG uses binary relevance. The `memoria` profile uses the standard DCG
(sum rel_i / log2(i + 1)); the `longmemeval` profile uses the DCG variant of
the LongMemEval repository (rel_1 + sum_{i>=2} rel_i / log2(i)).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from adapters.defaults import K_VALUES, METRIC_NAMES

__all__ = ["METRIC_NAMES", "average", "level_metrics", "question_metrics", "sessions_of"]


def dedupe(ranking: Iterable[str]) -> list[str]:
    """Keep each id at its first position."""
    return list(dict.fromkeys(ranking))


def sessions_of(turn_ranking: Sequence[str], session_of: dict[str, str]) -> list[str]:
    """Map a turn ranking to sessions, de-duplicated by first occurrence."""
    return dedupe(session_of[t] for t in turn_ranking)


def recall_any(ranking: Sequence[str], gold: set[str], k: int) -> float:
    return float(any(doc in gold for doc in ranking[:k]))


def recall_all(ranking: Sequence[str], gold: set[str], k: int) -> float:
    return float(bool(gold) and gold.issubset(ranking[:k]))


def _discount(position: int, profile: str) -> float:
    """Weight of a relevant item at 1-based `position`."""
    if profile == "longmemeval":
        return 1.0 if position == 1 else 1.0 / math.log2(position)
    return 1.0 / math.log2(position + 1)


def ndcg_any(ranking: Sequence[str], gold: set[str], k: int, profile: str = "memoria") -> float:
    if not gold:
        return 0.0
    dcg = sum(_discount(i, profile) for i, doc in enumerate(ranking[:k], start=1) if doc in gold)
    ideal = sum(_discount(i, profile) for i in range(1, min(len(gold), k) + 1))
    return dcg / ideal


def level_metrics(ranking: Sequence[str], gold: Iterable[str], k_values=K_VALUES, profile="memoria") -> dict:
    """`{"recall_any@k": ..., "recall_all@k": ..., "ndcg_any@k": ...}` for every k."""
    gold = set(gold)
    ranking = dedupe(ranking)
    out = {}
    for k in k_values:
        out[f"recall_any@{k}"] = recall_any(ranking, gold, k)
        out[f"recall_all@{k}"] = recall_all(ranking, gold, k)
        out[f"ndcg_any@{k}"] = ndcg_any(ranking, gold, k, profile)
    return out


def question_metrics(
    turn_ranking: Sequence[str],
    session_of: dict[str, str],
    gold_sessions: Iterable[str],
    gold_turns: Iterable[str],
    k_values=K_VALUES,
    profile: str = "memoria",
) -> dict:
    """Session and turn metrics of one question; turn metrics are None without turn gold."""
    gold_turns = set(gold_turns)
    return {
        "session": level_metrics(sessions_of(turn_ranking, session_of), gold_sessions, k_values, profile),
        "turn": level_metrics(turn_ranking, gold_turns, k_values, profile) if gold_turns else None,
    }


def average(records: Iterable[dict]) -> dict:
    """Mean of every metric over the records that have it, with the denominators."""
    sums: dict[str, dict[str, float]] = {"session": {}, "turn": {}}
    counts = {"session": 0, "turn": 0}
    for record in records:
        metrics = record.get("metrics")
        if not metrics:
            continue
        for level in ("session", "turn"):
            values = metrics.get(level)
            if values is None:
                continue
            counts[level] += 1
            for name, value in values.items():
                sums[level][name] = sums[level].get(name, 0.0) + value
    return {
        level: {name: total / counts[level] for name, total in sums[level].items()} for level in ("session", "turn")
    } | {"evaluable": counts}
