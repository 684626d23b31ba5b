"""A run's means and counts from its records: what a results file's header holds, computed one way.

The reducer writes a header with these functions, and the one reader of results files (`checks.check_results`)
computes it again from the file's records with the same functions and refuses a file whose header says otherwise:
every mean, denominator and ceiling a command prints (`analyze`, the board, `bench systems`) is one the records give.
"""

from __future__ import annotations

from collections import defaultdict

from adapters.benchmarks import BENCHMARKS
from adapters.metrics import average
from adapters.profiles import find_profile
from adapters.records import is_ok, metrics_of


def _support(records: list[dict]) -> dict:
    """Substring-judged records (AdaMem episodes): passed and stale counts, with the denominator."""
    judged = [r["judgement"] for r in records]
    return {"queries": len(judged), "passed": sum(j["passed"] for j in judged),
            "stale_hits": sum(1 for j in judged if j["forbidden_found"]),
            "pass_rate": (sum(j["passed"] for j in judged) / len(judged)) if judged else None}


def _block(records: list[dict], profile: str | None = None) -> dict:
    block = average(records, profile)
    judged = [r for r in records if r.get("judgement")]
    if judged:
        block["support"] = _support(judged)
    ceiling = recall_all_ceiling(records, profile)
    if ceiling:
        block["ceiling"] = ceiling
    return block


def recall_all_ceiling(records: list[dict], profile: str | None = None) -> dict | None:
    """The most recall_all@K any system could reach on these questions, per level: the share of the scored ones
    with at most K gold sessions (turns at the turn level; a question with more cannot have them all in its top
    K). From the gold alone; a level none of the questions is scored at is left out."""
    out = {}
    for level, field in (("session", "sessions"), ("turn", "turns")):
        gold = []
        for record in records:
            scored = (metrics_of(record, profile) or {}).get(level)
            if scored and isinstance(record.get("gold"), dict):
                gold.append((len(record["gold"].get(field) or []), scored))
        if gold:
            ks = sorted({int(key.partition("@")[2]) for _, scored in gold for key in scored
                         if key.startswith("recall_all@")})
            out[level] = {f"recall_all@{k}": sum(1 for count, _ in gold if count <= k) / len(gold) for k in ks}
    return out or None


def summarize(records: list[dict], group_key: str | None, profile: str | None = None) -> dict:
    """Averages over every record and per group; `profile`: under that profile (default: the chosen one)."""
    ok = [r for r in records if is_ok(r)]
    summary = {"all": _block(ok, profile)}
    for key in (group_key or "").split(","):  # a benchmark may group by several fields ("question_type,item_id")
        if not key:
            continue
        groups = defaultdict(list)
        for record in ok:
            if metrics_of(record, profile) or record.get("judgement"):
                groups[str(record.get(key, ""))].append(record)
        summary[f"by_{key}"] = {g: _block(rs, profile) for g, rs in sorted(groups.items())}
    return summary


def by_profile(records: list[dict], group_key: str | None, chosen: str | None, shared_corpus: bool = False) -> dict:
    """Every profile's averages, each saying which corpus its numbers were computed on.

    A run gives its system the chosen profile's corpus; another profile's
    numbers on that corpus are comparable between runs but are not that
    profile's own (`own_corpus: false`), so they are never to be cited as such,
    unless the benchmark's profiles all score one corpus (`shared_corpus`).
    """
    profiles = sorted({p for r in records for p in (r.get("metrics_by_profile") or {})})
    return {p: {"own_corpus": shared_corpus or p == chosen, "corpus": chosen, **summarize(records, group_key, p)}
            for p in profiles}


def shares_corpus(benchmark: str | None) -> bool:
    """Do the benchmark's profiles all score one corpus (its declaration's `shared_corpus`)?"""
    known = BENCHMARKS.get(str(benchmark))
    return bool(known and known.shared_corpus)


def scored_without_gold(records: list[dict], profile: str | None) -> int:
    """Scored questions with no gold turn: under a profile that scores them anyway (`scores_without_gold`: the
    official one, where a question none of whose user turns has `has_answer` still counts in every mean, recall_any
    0 and recall_all 1), say how many."""
    spec = find_profile(profile)
    if spec is None or not spec.scores_without_gold:
        return 0
    return sum(1 for r in records if r.get("metrics") and not (r.get("gold") or {}).get("turns"))


def counts(records: list[dict], profile: str | None) -> dict[str, int]:
    """The header's counts of evaluated questions (failed ones aside): scored, abstentions, excluded (abstentions
    aside) and scored without a gold turn under `profile`, by the names the results file gives them."""
    ok = [r for r in records if is_ok(r)]
    return {"retrieval_evaluable": sum(1 for r in ok if r.get("metrics")),
            "abstentions_excluded": sum(1 for r in ok if r.get("abstention")),
            "excluded": sum(1 for r in ok if r.get("excluded") and not r.get("abstention")),
            "scored_without_gold": scored_without_gold(ok, profile)}
