"""The evaluation core: the one place where records and item outcomes are built.

Every path that produces numbers (local runs, farm tasks, `memfarm score`,
AdaMem episodes, benches) builds its records here, so a results file reads the
same whoever made it. Three kinds of record:

- scored (`status: ok`, `metrics` set): a question with gold, ranked and scored;
- excluded (`status: ok`, `metrics: null`): an abstention, or a question that
  cannot be scored (the reason is in `abstention_reason` / `excluded`);
- failed (`status: failed`): the item could not be evaluated; `error` and
  `field` say why, and the question counts in no average.

An outcome is one item's records plus how the item was built (cache, timings, stats).
"""

from __future__ import annotations

from adapters.metrics import profile_metrics

#: Question fields copied into the record when present.
_QUESTION_EXTRAS = ("question_type", "category", "abstention_reason", "excluded", "details")
#: A record's statuses. Every record built here names one; a record that names none is read as `OK`, here
#: and nowhere else (`status_of`).
OK, FAILED = "ok", "failed"
STATUSES = (OK, FAILED)


def status_of(record: dict) -> str:
    """A record's status, `OK` where it names none: the one default, which every reader of records asks."""
    return record.get("status", OK)


def is_ok(record: dict) -> bool:
    """Was the record's question evaluated (scored or excluded), rather than failed?"""
    return status_of(record) == OK


def metrics_of(record: dict, profile: str | None = None) -> dict | None:
    """The record's metrics under `profile`; None: under the profile the run chose (`metrics`)."""
    return record.get("metrics") if profile is None else (record.get("metrics_by_profile") or {}).get(profile)


class QuestionRecord(dict):
    """One question's record as a results file holds it: the plain JSON object, with what every reader asks of
    it (its id, its status, its metrics under a profile) read one way."""

    @property
    def question_id(self) -> str:
        return self["question_id"]

    @property
    def status(self) -> str:
        return status_of(self)

    @property
    def ok(self) -> bool:
        return is_ok(self)

    def metrics_under(self, profile: str | None = None) -> dict | None:
        return metrics_of(self, profile)


def outcome(item_id: str, records: list[dict], *, cache: dict | None = None, timings: dict | None = None,
            stats: dict | None = None) -> dict:
    return {"item_id": item_id, "records": records, "cache": cache, "timings": timings or {}, "stats": stats or {}}


def candidate(rank: int, doc_id: str, *, session_id: str, turn_id: str | None = None, official_id: str | None = None,
              text: str = "", props: dict | None = None, score=None, final_score=None,
              diagnostics: dict | None = None) -> dict:
    """One ranked candidate with the native ids mapped back by the runner."""
    ids = {"session_id": session_id, "turn_id": turn_id, **({"official_id": official_id} if official_id else {})}
    return {"rank": rank, "id": doc_id, "text": text,
            "metadata": {**(props or {}), **ids},
            "score": score, "final_score": final_score, "diagnostics": diagnostics or {}}


def expected_rank(candidates: list[dict], gold_turns, gold_sessions) -> int | None:
    """Rank of the first gold turn; of the first gold session where there is no turn gold or no turn ids."""
    gold_turns, gold_sessions = set(gold_turns), set(gold_sessions)
    by_turn = bool(gold_turns) and any(c["metadata"].get("turn_id") for c in candidates)
    key, gold = ("turn_id", gold_turns) if by_turn else ("session_id", gold_sessions)
    return next((c["rank"] for c in candidates if c["metadata"].get(key) in gold), None)


def question_record(question: dict, item_id: str, candidates: list[dict], *, level: str, k_values, profile: str,
                    ranking: list[dict] | None = None, runtime_ms: float | None = None,
                    diagnostics: dict | None = None, worker: str, attempt: int) -> dict:
    """A question's record from its ranked candidates; `level` says what the candidates are (turn or session).

    `ranking` is the whole ranking as native ids when it is deeper than the
    candidates kept (the official profile reads past the top k); metrics are
    computed under every profile, and `metrics` is the chosen one's.
    """
    gold_turns, gold_sessions = question.get("gold_turns", []), question.get("gold_sessions", [])
    by_profile = profile_metrics(question, ranking if ranking is not None else [c["metadata"] for c in candidates],
                                 level=level, k_values=k_values, depth=len(candidates))
    metrics = by_profile.get(profile)
    rank = expected_rank(candidates, gold_turns, gold_sessions)
    record = {
        "question_id": question["question_id"],
        "item_id": item_id,
        "status": OK,
        "query": question["question"],
        "expected": question.get("expected", ""),
        "expected_ids": question.get("expected_ids", []),
        "gold": {"sessions": sorted(set(gold_sessions)), "turns": sorted(set(gold_turns))},
        "expected_rank": rank,
        "retrieved": rank is not None,
        "candidates": candidates,
        "runtime_ms": None if runtime_ms is None else round(runtime_ms, 3),
        "diagnostics": diagnostics or {},
        "metrics": metrics,
        "metrics_by_profile": by_profile,
        "abstention": bool(question.get("abstention")),
        "worker": worker,
        "attempt": attempt,
    }
    if ranking is not None and len(ranking) > len(candidates) and level == "turn":
        record["ranking"] = [r["turn_id"] for r in ranking]  # the whole ranking scored, for `memfarm rankings`
    for key in _QUESTION_EXTRAS:
        if key in question:
            record[key] = question[key]
    return record


def judged_record(query: dict, item_id: str, retrieved: list[dict], *, runtime_ms: float, worker: str,
                  attempt: int) -> dict:
    """A query judged by substrings: does the retrieved text hold every expected string and no forbidden one."""
    text = "\n".join(r["content"] for r in retrieved)
    missing = [s for s in query.get("expected_substrings", []) if s not in text]
    forbidden = [s for s in query.get("forbidden_substrings", []) if s in text]
    return {
        "question_id": f"{item_id}:{query.get('id')}",
        "item_id": item_id,
        "status": OK,
        "query": query["query"],
        "expected": query.get("expected_substrings", []),
        "forbidden": query.get("forbidden_substrings", []),
        "judgement": {"passed": not missing and not forbidden, "missing": missing, "forbidden_found": forbidden},
        "candidates": [{"rank": rank, "id": str(r["id"]), "text": r["content"], "score": r["score"],
                        "final_score": r["score"], "diagnostics": {"contributions": r["contributions"]},
                        "metadata": {"label": r.get("label"), "active": r.get("active")}}
                       for rank, r in enumerate(retrieved, start=1)],
        "runtime_ms": round(runtime_ms, 3),
        "metrics": None,
        "abstention": False,
        "worker": worker,
        "attempt": attempt,
        **({"question_type": query["category"]} if query.get("category") else {}),
    }


def failed_records(item: dict, error: str, field: str | None, worker: str, attempt: int) -> list[dict]:
    """One failed record per question of the item (one for the item itself when its questions are unknown)."""
    questions = item.get("questions") or [{"question_id": item["item_id"]}]
    return [{
        "question_id": q["question_id"], "item_id": item["item_id"], "status": FAILED, "error": error,
        "field": field, "metrics": None, "abstention": False, "worker": worker, "attempt": attempt,
    } for q in questions]


def failure_outcome(item: dict, error: str, field: str | None, worker: str, attempt: int,
                    timings: dict | None = None) -> dict:
    return outcome(item["item_id"], failed_records(item, error, field, worker, attempt), timings=timings)
