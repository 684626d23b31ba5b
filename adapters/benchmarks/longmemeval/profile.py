"""The `longmemeval-official` profile declared (`adapters.profiles`): LongMemEval's own scoring (`official`) of
the whole ranking, and what of it a stored record lets the checks work out again."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.benchmarks.longmemeval import official
from adapters.defaults import OFFICIAL_PROFILE
from adapters.errors import ResultsError
from adapters.profiles import Notes, Reads, Scored, ScoringProfile, agree, register_profile


def score(ranked: Sequence[dict], gold: dict, level: str, k_values) -> dict | None:
    """The official metrics of one question from its whole ranking as native ids (the official ids it carries)."""
    return official.metrics([r["official_id"] for r in ranked if r.get("official_id")], gold, level, k_values)


def recheck(stored: dict, record: Scored, where: str) -> None:
    """Under this profile, from a turn ranking: recall_any and recall_all at both levels agree with the record's
    ranking and turn gold, and an nDCG is non-zero exactly where a gold id is in the top k (its ideal counts repeats
    of the corpus that the record does not keep)."""
    if not record.own or record.level != "turn":
        return
    agree(stored, _recalls_of(record.ranking, record.gold, record.k_values), where)
    _check_ndcg(stored, where)


def _official_ids(ranking: Sequence[dict], gold_turns: set[str]) -> list[str]:
    """Official ids of a turn ranking: `<session>_<n>`, evidence turns outside the gold marked `noans`."""
    out = []
    for r in ranking:
        sid, _, index = r["turn_id"].rpartition("#")
        if not index.isdigit():
            continue
        out.append(official.turn_id(sid, int(index), r["turn_id"] in gold_turns))
    return out


def _recalls_of(ranking: Sequence[dict], gold: dict, ks) -> dict:
    """recall_any and recall_all at both levels, from the turn ranking and turn gold."""
    gold_turns = set(gold["turns"])
    ids = _official_ids(ranking, gold_turns)
    gold_ids = {official.turn_id(t.rpartition("#")[0], int(t.rpartition("#")[2]), True)
                for t in gold_turns if t.rpartition("#")[2].isdigit()}
    # ndcg values cannot be recomputed here; the recalls do not depend on the ideal or the corpus size
    turn = official.flat_metrics(ids, gold_ids, 0, ks)
    session = official.turn_to_session_metrics(ids, gold_ids, 0, len(ids), ks)
    return {"session": _recalls(session), "turn": _recalls(turn)}


def _recalls(values: dict) -> dict:
    return {k: v for k, v in values.items() if not k.startswith("ndcg")}


def _check_ndcg(block: dict, where: str) -> None:
    """An official nDCG@k is above 0 exactly where a gold id is in the top k (recall_any@k is 1)."""
    for level in ("session", "turn"):
        values = block.get(level) or {}
        for key, value in values.items():
            name, _, k = key.partition("@")
            hit = values.get(f"recall_any@{k}")
            if name == "ndcg_any" and hit is not None and (value > 0) != (hit == 1):
                raise ResultsError(f"{where}.{level}.{key}: {value!r} disagrees with recall_any@{k} {hit!r} "
                                   "(a gold id in the top k gives a positive nDCG, none gives 0)")


OFFICIAL = register_profile(ScoringProfile(
    OFFICIAL_PROFILE, "LongMemEval official", ("session", "turn"), Reads.WHOLE,
    "LongMemEval's: rel_1 + sum_{i>=2} rel_i / log2(i), session k widened to span k sessions",
    score, recheck, scores_without_gold=True,
    notes=Notes(
        table=("the expected-text profile's turn gold is the answer-session turns holding the expected text (the "
               "first answer turn), usually one turn, so its turn recall is low; the official gold is every "
               "has_answer user turn"),
        foreign=f"citable official numbers: run with --scoring-profile {OFFICIAL_PROFILE}, the default",
        short_rankings=("for {count} questions the system returned fewer docs than the corpus holds; the official "
                        "numbers count the rest as never ranked (LongMemEval's own code ranks every doc)"),
        without_gold=("{count} have no has_answer user turn: the official rules score them anyway (recall_any 0, "
                      "recall_all 1, nDCG 0)"))))
