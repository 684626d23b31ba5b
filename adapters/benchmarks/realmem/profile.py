"""The `realmem` profile: RealMem's own retrieval metrics, reproduced exactly.

The facts (RealMem repository, `eval/compute_auto_metrics_for_realmem.py`, commit 067c486a):

- The corpus is every session of the persona, by `session_identifier`; a query's gold is the identifiers of
  the sessions its answer's `memory_session_uuids` name.
- A ranking is of sessions, each once (the benchmark's evaluation keeps one chunk per session, at its best
  rank); at k: recall_any = any gold session in the top k; recall_all = every gold session in the top k;
  ndcg_any = DCG of the top-k relevances over the DCG of the ideal ordering of all corpus relevances, with
  DCG = rel_1 + sum_{i>=2} rel_i / log2(i) (its `dcg`: the first two positions weigh the same), 0 when the
  ideal is 0.
- Averages are plain means over the queries scored.

Recall is the farm's own (`adapters.metrics`, the same formulas); `score` puts them together, and the profile is
declared at the end (`adapters.profiles`).
Turn metrics are the farm's own (RealMem scores sessions only): the same formulas over the turn ranking against
the turns the answer's memory points came from (`adapters.benchmarks.realmem.reader`).

Where this differs from the benchmark's script, on purpose: it keys gold by query text (two queries of the
same text would share one gold; none do in the development personas) and scores a query whose gold is not in
the past; here queries are keyed by `query_id` and such a query is excluded with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from adapters.defaults import REALMEM_PROFILE
from adapters.metrics import level_metrics
from adapters.profiles import Notes, Reads, Scored, ScoringProfile, agree, register_profile


def dcg(relevances: Sequence[float], k: int) -> float:
    """RealMem's DCG of the first k relevances: rel_1 + sum over i >= 2 of rel_i / log2(i)."""
    head = list(relevances)[:k]
    if not head:
        return 0.0
    return head[0] + sum(rel / math.log2(i) for i, rel in enumerate(head[1:], start=2))


def ndcg_any(ranking: Sequence[str], gold: set[str], k: int) -> float:
    """RealMem's nDCG at k of a ranking of distinct ids; the ideal holds every gold id of the corpus first."""
    ideal = dcg([1.0] * len(gold), k)
    if ideal == 0:
        return 0.0
    return dcg([1.0 if doc in gold else 0.0 for doc in ranking[:k]], k) / ideal


def score(ranked: Sequence[dict], gold: dict, level: str, k_values) -> dict | None:
    """The `realmem` profile of one question from its kept candidates as native ids: the farm's recall, RealMem's
    nDCG; turn metrics where the question has turn gold."""
    if not gold["scored"]:
        return None

    def at(ids, wanted):
        return level_metrics(ids, wanted, k_values, ndcg=ndcg_any)

    turns = level == "turn" and gold["turns"]
    return {"session": at([r["session_id"] for r in ranked], gold["sessions"]),
            "turn": at([r["turn_id"] for r in ranked], gold["turns"]) if turns else None}


def recheck(stored: dict, record: Scored, where: str) -> None:
    """Every metric, from the record's kept candidates: RealMem's gold is the record's own under both its profiles."""
    agree(stored, score(record.ranking, {**record.gold, "scored": True}, record.level, record.k_values), where,
          partial=record.empty)


REALMEM = register_profile(ScoringProfile(
    REALMEM_PROFILE, "RealMem", ("session", "turn"), Reads.KEPT,
    "RealMem's: rel_1 + sum_{i>=2} rel_i / log2(i), the first two positions weigh the same", score, recheck,
    notes=Notes(shared=("same gold and ranking under both profiles, so recall is the same; nDCG differs only in its "
                        "discount: realmem's DCG weighs the first two positions alike (its own script), "
                        "expected-text's is the standard 1/log2(i+1)"))))
