"""What a run failed to evaluate, counted one way for the reducer that writes it and the checks that re-count it."""

from __future__ import annotations

from adapters.benchmarks import BENCHMARKS
from adapters.records import is_ok


def failure_summary(records: list[dict], benchmark_key: str | None) -> dict:
    """What a run failed to evaluate: the failed items and questions, by id.

    A failed item whose questions were never read (a malformed LoCoMo
    conversation) leaves one record named after the item itself; where an item
    holds several questions (the benchmark's unit is not a question), that id
    is no question's, so the item is listed in `items_without_question_ids`
    and its questions stay unknown rather than guessed.
    """
    failed = [r for r in records if not is_ok(r)]
    benchmark = BENCHMARKS.get(str(benchmark_key))
    per_question_items = benchmark is not None and benchmark.question_per_item
    unknown = sorted({r["item_id"] for r in failed if r.get("question_id") == r.get("item_id")
                      and not per_question_items})
    return {"items": len({r.get("item_id") for r in failed}),
            "item_ids": sorted({str(r.get("item_id")) for r in failed}),
            "questions": sum(1 for r in failed if r.get("item_id") not in unknown),
            "question_ids": [r["question_id"] for r in failed if r.get("item_id") not in unknown],
            "items_without_question_ids": unknown}
