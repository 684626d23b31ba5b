"""The `longmemeval-official` profile: LongMemEval's own retrieval evaluation, reproduced exactly.

The facts (from the LongMemEval repository's retrieval code, `src/retrieval`):

- Turn corpus: the user turns only, in haystack order, for every session
  occurrence (a session listed twice is there twice; empty turns stay). A turn's
  id is `<session_id>_<n>`, n the 1-based index of the turn within its session
  (assistant turns count in n). In an evidence session (id contains `answer`) a
  user turn without `has_answer` has `answer` replaced by `noans` in its id.
- Session corpus (ranking sessions directly): one document per session
  occurrence; an evidence session with no has_answer user turn is renamed `noans`.
- Gold: the corpus ids that contain `answer`.
- At k: recall_any = any gold id in the top k (0 without gold); recall_all =
  every gold id in the top k (1 without gold); ndcg_any = DCG of the top-k
  relevances over the DCG of the ideal ordering of all corpus relevances, with
  DCG = rel_1 + sum_{i>=2} rel_i / log2(i), 0 when the ideal is 0.
- Session metrics of a turn ranking: an id's session is the id without its final
  `_<n>`; k widens to the smallest k' >= k whose top k' turns hold k distinct
  sessions (or the whole corpus); recall and ndcg over the top k' positions,
  repeats counted, against the ideal over all mapped corpus relevances.
- Averages leave out question ids containing `_abs` and count every other
  question, even one without gold.

The profile is declared in `profile`. Everything a question needs for this is worked out once from the raw haystack
(`question_gold`), whatever corpus a run gives its system, so that the metrics
depend only on the ranked ids. Nothing here reaches a system: the ids carry the
gold marks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from adapters.defaults import OFFICIAL_PROFILE as PROFILE


def turn_id(session_id: str, position: int, has_answer: bool) -> str:
    """The official id of the user turn at 0-based `position` of its session."""
    doc_id = f"{session_id}_{position + 1}"
    if "answer" in session_id and not has_answer:
        doc_id = doc_id.replace("answer", "noans")
    return doc_id


def session_id(session_id_: str, turns: Sequence[dict]) -> str:
    """The official id of a session document."""
    users = [t for t in turns if isinstance(t, dict) and t.get("role") == "user"]
    if "answer" in session_id_ and not any(t.get("has_answer") for t in users):
        return session_id_.replace("answer", "noans")
    return session_id_


def session_of(doc_id: str) -> str:
    """A turn id's session: the id without its final `_<n>`."""
    return "_".join(doc_id.split("_")[:-1])


def is_gold(doc_id: str) -> bool:
    return "answer" in doc_id


def corpora(haystack: Sequence[tuple[str, list]]) -> tuple[list[str], list[str]]:
    """(turn corpus ids, session corpus ids) of a haystack given as (session id, turns) pairs."""
    turns, sessions = [], []
    for sid, session in haystack:
        sessions.append(session_id(sid, session))
        for position, turn in enumerate(session):
            if isinstance(turn, dict) and turn.get("role") == "user":
                turns.append(turn_id(sid, position, bool(turn.get("has_answer"))))
    return turns, sessions


def question_gold(question_id: str, haystack: Sequence[tuple[str, list]]) -> dict:
    """What scoring one question needs: gold ids and ideal counts of both corpora, and whether it is averaged."""
    turn_corpus, session_corpus = corpora(haystack)
    gold_turns = sorted({t for t in turn_corpus if is_gold(t)})
    gold_turn_sessions = {session_of(t) for t in gold_turns}
    return {
        "scored": "_abs" not in question_id,
        "turn": {"gold": gold_turns, "ideal": sum(1 for t in turn_corpus if is_gold(t)),
                 "ideal_session": sum(1 for t in turn_corpus if session_of(t) in gold_turn_sessions),
                 "corpus_size": len(turn_corpus),
                 "counts": _counts(t for t in turn_corpus if is_gold(t)),
                 "session_counts": _counts(session_of(t) for t in turn_corpus if session_of(t) in gold_turn_sessions)},
        "session": {"gold": sorted({s for s in session_corpus if is_gold(s)}),
                    "ideal": sum(1 for s in session_corpus if is_gold(s)), "corpus_size": len(session_corpus),
                    "counts": _counts(s for s in session_corpus if is_gold(s))},
    }


def _counts(ids) -> dict[str, int]:
    """How many corpus entries each id names (a session listed twice: its ids twice)."""
    out: dict[str, int] = {}
    for doc_id in ids:
        out[doc_id] = out.get(doc_id, 0) + 1
    return out


def dcg(relevances: Sequence[int]) -> float:
    """rel_1 + sum_{i>=2} rel_i / log2(i)."""
    return sum(rel if i == 1 else rel / math.log2(i) for i, rel in enumerate(relevances, start=1))


def relevances(ranking: Sequence[str], gold: set[str], ideal: int, counts: dict[str, int] | None = None) -> list[int]:
    """1 for each ranked gold id, but an id counts no more often than the corpus holds it (`counts`), and no more
    than `ideal` ids count in all: a ranking that names one corpus entry twice gains nothing by it (nDCG stays
    within 1)."""
    left = dict(counts) if counts is not None else None
    budget, out = ideal, []
    for doc_id in ranking:
        relevant = doc_id in gold and budget > 0 and (left is None or left.get(doc_id, 0) > 0)
        if relevant:
            budget -= 1
            if left is not None:
                left[doc_id] -= 1
        out.append(int(relevant))
    return out


def _at(ranking: Sequence[str], gold: set[str], ideal: int, k: int,
        counts: dict[str, int] | None = None) -> tuple[float, float, float]:
    top = ranking[:k]
    recalled = set(top)
    ideal_dcg = dcg([1] * min(ideal, k))
    return (float(any(g in recalled for g in gold)), float(all(g in recalled for g in gold)),
            dcg(relevances(top, gold, ideal, counts)) / ideal_dcg if ideal_dcg else 0.0)


def _named(values: dict[int, tuple[float, float, float]]) -> dict:
    out = {}
    for k, (r_any, r_all, ndcg) in values.items():
        out[f"recall_any@{k}"], out[f"recall_all@{k}"], out[f"ndcg_any@{k}"] = r_any, r_all, ndcg
    return out


def flat_metrics(ranking: Sequence[str], gold, ideal: int, k_values, counts: dict[str, int] | None = None) -> dict:
    """Metrics of a ranking over one corpus (turns, or sessions ranked directly); `counts`: corpus entries per
    gold id."""
    gold = set(gold)
    return _named({k: _at(ranking, gold, ideal, k, counts) for k in k_values})


def turn_to_session_metrics(ranking: Sequence[str], gold_turns, ideal_session: int, corpus_size: int,
                            k_values, counts: dict[str, int] | None = None) -> dict:
    """Session metrics of a turn ranking, with the widened k; `counts`: corpus turns per gold session."""
    gold = {session_of(t) for t in gold_turns}
    mapped = [session_of(t) for t in ranking]
    values = {}
    for k in k_values:
        widened = k
        while widened <= corpus_size and len(set(mapped[:widened])) < k:
            widened += 1
        values[k] = _at(mapped, gold, ideal_session, widened, counts)
    return _named(values)


def metrics(ranking: Sequence[str], gold: dict, level: str, k_values) -> dict | None:
    """`{"session": ..., "turn": ...}` of one question from official ids, best first; None when not averaged.

    `level` says what `ranking` holds: `turn` ids (turn metrics and session
    metrics through them) or `session` ids (session metrics only).
    """
    if not gold["scored"]:
        return None
    if level == "session":
        g = gold["session"]
        return {"session": flat_metrics(ranking, g["gold"], g["ideal"], k_values, g.get("counts")), "turn": None}
    g = gold["turn"]
    return {"session": turn_to_session_metrics(ranking, g["gold"], g["ideal_session"], g["corpus_size"], k_values,
                                               g.get("session_counts")),
            "turn": flat_metrics(ranking, g["gold"], g["ideal"], k_values, g.get("counts"))}

