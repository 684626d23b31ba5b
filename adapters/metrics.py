"""Retrieval metrics at session and turn level; one code path for runs and `memfarm score`.

All functions take a best-first ranking of ids and a set of gold ids.
NDCG uses binary relevance and the standard DCG (sum rel_i / log2(i + 1));
this is the `expected-text` profile, every benchmark's, declared here. Other profiles
are declared beside their benchmarks (`adapters.profiles`); `profile_metrics`
computes every profile a question carries gold for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from adapters.defaults import EXPECTED_TEXT_PROFILE, K_VALUES, METRIC_NAMES
from adapters.profiles import PROFILES, Reads, Scored, ScoringProfile, agree, register_profile

__all__ = ["METRIC_NAMES", "average", "level_metrics", "profile_metrics", "question_metrics", "sessions_of"]


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


def _discount(position: int) -> float:
    """Weight of a relevant item at 1-based `position`."""
    return 1.0 / math.log2(position + 1)


def ndcg_any(ranking: Sequence[str], gold: set[str], k: int) -> float:
    if not gold:
        return 0.0
    dcg = sum(_discount(i) for i, doc in enumerate(ranking[:k], start=1) if doc in gold)
    ideal = sum(_discount(i) for i in range(1, min(len(gold), k) + 1))
    return dcg / ideal


def level_metrics(ranking: Sequence[str], gold: Iterable[str], k_values=K_VALUES, ndcg=ndcg_any) -> dict:
    """`{"recall_any@k": ..., "recall_all@k": ..., "ndcg_any@k": ...}` for every k; `ndcg` is the nDCG of a
    profile with a DCG of its own (RealMem's)."""
    gold = set(gold)
    ranking = dedupe(ranking)
    out = {}
    for k in k_values:
        out[f"recall_any@{k}"] = recall_any(ranking, gold, k)
        out[f"recall_all@{k}"] = recall_all(ranking, gold, k)
        out[f"ndcg_any@{k}"] = ndcg(ranking, gold, k)
    return out


def question_metrics(
    turn_ranking: Sequence[str],
    session_of: dict[str, str],
    gold_sessions: Iterable[str],
    gold_turns: Iterable[str],
    k_values=K_VALUES,
) -> dict:
    """Session and turn metrics of one question; turn metrics are None without turn gold."""
    gold_turns = set(gold_turns)
    return {
        "session": level_metrics(sessions_of(turn_ranking, session_of), gold_sessions, k_values),
        "turn": level_metrics(turn_ranking, gold_turns, k_values) if gold_turns else None,
    }


def expected_text_gold(question: dict) -> dict:
    """The expected-text profile's gold of a question (adapters without per-profile gold set the top-level fields)."""
    gold = (question.get("gold_by_profile") or {}).get(EXPECTED_TEXT_PROFILE)
    if gold is not None:
        return gold
    return {"sessions": question.get("gold_sessions", []), "turns": question.get("gold_turns", []),
            "scored": not question.get("abstention") and not question.get("excluded")}


def expected_text_metrics(head: Sequence[dict], gold: dict, level: str, k_values) -> dict | None:
    """The expected-text profile of one question from the kept candidates as native ids; None where not scored."""
    if not gold["scored"]:
        return None
    if level == "turn":
        return question_metrics([r["turn_id"] for r in head], {r["turn_id"]: r["session_id"] for r in head},
                                gold["sessions"], gold["turns"], k_values)
    return {"session": level_metrics([r["session_id"] for r in head], gold["sessions"], k_values), "turn": None}


def _recheck_expected_text(stored: dict, record: Scored, where: str) -> None:
    """Session metrics always; turn metrics only where the record's turn gold is this profile's (under another
    profile it is that one's)."""
    head, ks = record.ranking, record.k_values
    if record.level == "turn":
        session_ranking = sessions_of([r["turn_id"] for r in head], {r["turn_id"]: r["session_id"] for r in head})
    else:
        session_ranking = [r["session_id"] for r in head]
    recomputed = {"session": level_metrics(session_ranking, record.gold["sessions"], ks)}
    if record.level == "session":
        recomputed["turn"] = None
    elif record.own:
        turns = record.gold["turns"]
        recomputed["turn"] = level_metrics([r["turn_id"] for r in head], turns, ks) if turns else None
    # an empty ranking may have been of sessions, whose turn metrics are null: null is not refused there
    agree(stored, recomputed, where, partial=record.empty)


EXPECTED_TEXT = register_profile(ScoringProfile(
    EXPECTED_TEXT_PROFILE, "expected text", ("session", "turn"), Reads.KEPT, "standard: rel_i / log2(i + 1)",
    expected_text_metrics, _recheck_expected_text, gold_of=expected_text_gold, aliases=("memoria",)))


def profile_metrics(question: dict, ranked: Sequence[dict], *, level: str, k_values, depth: int) -> dict:
    """`{profile: {"session": ..., "turn": ...} | None}` for every profile the question carries gold for.

    `ranked` is the whole ranking, best first, as native ids (`session_id`,
    `turn_id`, `official_id`); its first `depth` entries are the candidates a
    results file keeps, and each profile reads what it declares (`Reads`).
    """
    out = {}
    for spec in PROFILES.values():
        gold = spec.gold(question)
        if gold is not None:
            out[spec.name] = spec.score(spec.read(ranked, depth), gold, level, k_values)
    return out


def average(records: Iterable[dict], profile: str | None = None) -> dict:
    """Mean of every metric over the records that have it, with the denominators.

    `profile`: read the record's metrics under that profile (default: the run's chosen one).
    """
    sums: dict[str, dict[str, float]] = {"session": {}, "turn": {}}
    counts = {"session": 0, "turn": 0}
    for record in records:
        metrics = record.get("metrics") if profile is None else (record.get("metrics_by_profile") or {}).get(profile)
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
