"""`memfarm score`: anyone's rankings, scored with exactly the code the runs use.

A rankings file is JSON lines: `{"question_id": ..., "ranked": [id, ...]}`,
best first, with session ids (`--level session`) or turn ids (`--level turn`;
LongMemEval turn ids are `<session_id>#<turn_index>` with a 0-based index, or
the official `<session_id>_<n>`; LoCoMo's are `dia_id`s). Ids the corpus does
not hold are dropped and counted; so is a repeat beyond the corpus's own count.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from pathlib import Path

from adapters.errors import ResultsError
from adapters.jsonstream import iter_json_lines
from adapters.records import candidate, failure_outcome, outcome, question_record

logger = logging.getLogger(__name__)


def read_rankings(path: str | Path, known: set[str]) -> tuple[dict[str, list[str]], list[str]]:
    """(rankings by question id, problems naming their line); bad lines are skipped, not fatal."""
    rankings, problems = {}, []
    for number, entry, problem in iter_json_lines(path, ResultsError):
        if problem:
            problems.append(problem)
            continue
        qid = entry.get("question_id") if isinstance(entry, dict) else None
        ranked = entry.get("ranked", entry.get("ranking")) if isinstance(entry, dict) else None
        if qid is None or not isinstance(ranked, list):
            problems.append(f"{path}:{number}: needs question_id and a list 'ranked'")
        elif str(qid) not in known:
            problems.append(f"{path}:{number}: unknown question_id {qid!r} skipped")
        elif str(qid) in rankings:
            problems.append(f"{path}:{number}: duplicate question_id {qid!r} skipped (the first line counts)")
        elif not all(isinstance(x, str) for x in ranked):
            problems.append(f"{path}:{number}: 'ranked' must hold id strings only; line skipped")
        else:
            rankings[str(qid)] = [str(x) for x in ranked]
    for problem in problems:
        logger.info(problem)  # the command prints them once
    return rankings, problems


def accepted_ids(item: dict, level: str) -> tuple[dict[str, list[int]], list[dict]]:
    """(every accepted spelling of a ranked id -> the corpus positions it may stand for, each position's ids).

    Turns: `<session_id>#<i>` (0-based index within the session), and for
    LongMemEval also the official `<session_id>_<n>` and its `noans` form.
    Sessions: the session id, and the official `noans` form of an evidence session.
    A position is one entry of the corpus: a session listed twice is two
    positions, and an official id names the listing it came from.
    """
    lookup: dict[str, list[int]] = defaultdict(list)
    entries: list[dict] = []
    exact: dict[str, list[int]] = defaultdict(list)  # positions a form names as their own official id

    def add(ids: dict, forms) -> None:
        position = len(entries)
        entries.append(ids)
        if ids.get("official_id"):
            exact[ids["official_id"]].append(position)
        for form in dict.fromkeys(f for f in forms if f):
            lookup[form].append(position)

    if level == "turn":
        for turn in item["turns"]:
            ids = {"session_id": turn["session_id"], "turn_id": turn["turn_id"]}
            forms = [turn["turn_id"]]
            if turn.get("official_id"):
                ids["official_id"] = turn["official_id"]
                forms += [turn["official_id"], f"{turn['session_id']}_{turn['props']['turn_index'] + 1}"]
            add(ids, forms)
        return _exact_first(lookup, exact), entries
    sessions = item.get("sessions") or [{"session_id": sid} for sid in dict.fromkeys(t["session_id"]
                                                                                      for t in item["turns"])]
    for session in sessions:
        official = session.get("official_id")
        add({"session_id": session["session_id"], "turn_id": None, **({"official_id": official} if official else {})},
            [official, session["session_id"]])
    return _exact_first(lookup, exact), entries


def _exact_first(lookup: dict[str, list[int]], exact: dict[str, list[int]]) -> dict[str, list[int]]:
    """For each form, the positions whose official id it is come first: `answer_s_1` names the has_answer
    turn of a session listed twice before it names the other listing's turn by its raw `_<n>` spelling."""
    return {form: exact.get(form, []) + [p for p in positions if p not in exact.get(form, [])]
            for form, positions in lookup.items()}


def resolve(ranked: list[str], lookup: dict[str, list[int]], entries: list[dict]) -> tuple[list[dict], list[str]]:
    """The ranking as native ids, each corpus position used at most once; (kept, the ids dropped)."""
    used: set[int] = set()
    kept, dropped = [], []
    for doc_id in ranked:
        position = next((p for p in lookup.get(doc_id, ()) if p not in used), None)
        if position is None:
            dropped.append(doc_id)
            continue
        used.add(position)
        kept.append(entries[position])
    return kept, dropped


def score_rankings(adapter, rankings_path, level: str, profile: str, k_values) -> tuple[list[dict], dict]:
    """Item outcomes (as a run makes them) for a rankings file, and what was wrong with it.

    An item the dataset's validation refused is a failed record, as in a run.
    """
    if level not in ("session", "turn"):
        raise ResultsError(f"level must be session or turn, not {level!r}")
    items = list(adapter.iter_items())
    known = {q["question_id"] for item in items for q in (item.get("questions") or [{"question_id": item["item_id"]}])}
    rankings, problems = read_rankings(rankings_path, known)
    outcomes, missing, dropped_all = [], [], []
    for item in items:
        if item.get("error"):
            outcomes.append(failure_outcome(item, item["error"], item.get("field"), "score", 1))
            continue
        lookup, entries = accepted_ids(item, level)
        records = []
        for question in item["questions"]:
            qid = question["question_id"]
            if qid not in rankings:
                missing.append(qid)
            ranked, dropped = resolve(rankings.get(qid, []), lookup, entries)
            dropped_all += [(qid, d) for d in dropped]
            candidates = [candidate(rank, ids["turn_id"] if level == "turn" else ids["session_id"], **ids)
                          for rank, ids in enumerate(ranked, start=1)]
            records.append(question_record(
                question, item["item_id"], candidates, level=level, k_values=k_values, profile=profile,
                ranking=ranked, worker="score", attempt=1,
                diagnostics={"source": "rankings file", "missing": qid not in rankings, "dropped_ids": len(dropped)}))
        outcomes.append(outcome(item["item_id"], records))
    report = {"problems": problems, "missing": missing, "dropped_ids": len(dropped_all),
              "dropped_examples": [f"{q}: {d}" for q, d in dropped_all[:5]], "scored": len(rankings)}
    return outcomes, report


def export_rankings(results: dict, level: str) -> list[str]:
    """JSON lines of a run's own rankings, for `memfarm score` (and for checking it)."""
    lines = []
    for record in results["records"]:
        if record.get("status", "ok") != "ok":
            continue
        key = "turn_id" if level == "turn" else "session_id"
        ids = [c["metadata"][key] for c in record.get("candidates", [])]
        if record.get("ranking"):  # the whole ranking the run scored (the official profile reads past top k)
            ids = record["ranking"] if level == "turn" else [t.rpartition("#")[0] for t in record["ranking"]]
        if level == "session":  # a session's turns become one entry; a turn of a session listed twice stays twice
            ids = list(dict.fromkeys(ids))
        lines.append(json.dumps({"question_id": record["question_id"], "ranked": ids}))
    return lines
