"""The metric a group of the board is led by: its benchmark's declared headline (`Benchmark.headline`).

A leaderboard is ordered by it, every pair is judged on it, the leader is named by it, and every text that names it
says it as the benchmark does: session recall_all@5 (the strict metric, every gold session in the top 5) unless the
benchmark declares another; BEAM's, message recall_any@10, since its batches are so few that batch-level metrics
are near 1.0 for every system. Runs of a benchmark not declared here are led by the default.
"""

from __future__ import annotations

from adapters.benchmarks import BENCHMARKS
from adapters.benchmarks.contract import DEFAULT_HEADLINE, plural
from coordinator.results import compare

#: How a leaderboard's header names a metric, shortly.
_SHORT = {"recall_all": "all", "recall_any": "any", "ndcg_any": "nDCG"}


def _meaning(name: str, unit: str, k: int) -> str:
    return {"recall_all": f"every gold {unit} in the top {k}",
            "recall_any": f"any gold {unit} in the top {k}"}.get(name, f"nDCG of the gold {plural(unit)} in the top {k}")


def headline_of(benchmark: str | None) -> dict:
    """The headline metric of a group of runs of `benchmark` (a results file's key) and how the board says it:
    `metric` (`LEVEL:NAME@K`), its `level`, `name` and `k`, `hit_or_miss` (McNemar's test, else the sign-flip
    test), `words` (`session recall_all@5`; `message recall_any@10 (BEAM's messages)`), `named` (the same without
    its parenthesis), `header` (`all@5`), `meaning` (every gold session in the top 5),
    `role` (the strict metric, or the benchmark's headline metric), `kind` (a strict mean, or a headline mean),
    `unit` (what its level's ids are called, `unit_plural` many of them) and `units` (what the benchmark calls its sessions and its turns)."""
    declared = BENCHMARKS.get(str(benchmark))
    metric = declared.headline if declared is not None else DEFAULT_HEADLINE
    level, name, k = compare.parse_metric(metric)
    units = declared.unit_names if declared is not None else ("session", "turn")
    unit = units[0 if level == "session" else 1]
    words = declared.headline_words() if declared is not None else f"{level} {name}@{k}"
    default, short = metric == DEFAULT_HEADLINE, f"{_SHORT.get(name, name)}@{k}"
    return {"metric": metric, "level": level, "name": name, "k": k, "hit_or_miss": name in compare.HIT_OR_MISS,
            "words": words, "named": f"{unit} {name}@{k}", "unit": unit, "unit_plural": plural(unit), "units": units,
            "kind": "strict" if default else "headline", "meaning": _meaning(name, unit, k),
            "header": short if unit == "session" else f"{unit} {short}",
            "role": "the strict metric" if default else f"{declared.title}'s headline metric",
            "test": "exact McNemar" if name in compare.HIT_OR_MISS else "paired sign-flip"}


def value_of(record: dict, headline: dict):
    """The headline's value on one question of a results file, None where the record has none."""
    block = (record.get("metrics") or {}).get(headline["level"])
    return block.get(f'{headline["name"]}@{headline["k"]}') if isinstance(block, dict) else None
