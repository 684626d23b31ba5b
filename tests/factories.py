"""One way to make a run context and a question record in tests: the defaults here, what a test cares about
as overrides."""

from __future__ import annotations

from adapters.records import candidate, question_record
from workers.item.run_context import RunContext

#: The context a test gets unless it says otherwise: a small LongMemEval run, scored as the harness scores.
CONTEXT_DEFAULTS = {
    "benchmark": "longmemeval", "benchmark_title": "LongMemEval-S", "group_key": "question_type",
    "dataset_path": "d.json", "dataset_sha256": "x", "system_config": {"name": "scripted"},
    "embedding_signature": None, "scoring_profile": "expected-text", "top_k": 10, "k_values": (1, 5),
    "arguments": {}, "command": "test",
}


def run_context(**overrides) -> RunContext:
    """A `RunContext` read as a worker reads one (`from_dict`, every field checked), with `overrides`."""
    return RunContext.from_dict({**CONTEXT_DEFAULTS, **overrides})


def record(question_id: str = "q1", item_id: str = "c1", *, hit: bool | None = True, status: str = "ok",
           k_values=(5, 10), profile: str = "expected-text", **fields) -> dict:
    """A question's record made by the project's own record code: a hit ranks the gold turn (D1:1) first, a
    miss ranks another, `hit=None` is an abstention; a failed one (`status`) holds an error and no metrics.
    `fields` are set on the record last."""
    if status != "ok":
        made = {"question_id": question_id, "item_id": item_id, "status": status, "error": "boom", "metrics": None}
        return {**made, **fields}
    question = {"question_id": question_id, "question": "q?", "question_type": "t", "gold_sessions": ["D1"],
                "gold_turns": ["D1:1"], "abstention": hit is None}
    ranked = [("D1", "D1:1")] if hit else [("D9", "D9:1")]
    candidates = [candidate(rank, turn, session_id=session, turn_id=turn)
                  for rank, (session, turn) in enumerate(ranked + [("D8", "D8:2")], start=1)]
    made = question_record(question, item_id, candidates, level="turn", k_values=k_values, profile=profile,
                           worker="test", attempt=1)
    return {**made, **fields}


def remade_header(results: dict) -> dict:
    """`results` (a results file's JSON whose records a test edited) with its counts and means made again from its
    records, as the reducer makes them: the reader recomputes them, so an edit that leaves them stale is refused
    before anything the test means to show."""
    from coordinator.results import summary

    group_key = ",".join(key[3:] for key in results["metrics"] if key.startswith("by_"))
    results.update(summary.counts(results["records"], results["scoring_profile"]))
    results["metrics"] = summary.summarize(results["records"], group_key)
    results["metrics_by_profile"] = summary.by_profile(results["records"], group_key, results["scoring_profile"],
                                                       summary.shares_corpus(results.get("benchmark_key")))
    return results
