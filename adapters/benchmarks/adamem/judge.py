"""An AdaMem episode judged: does the top_k of each query hold every expected string and no forbidden one.

Each query also carries the six measures of `adapters.benchmarks.adamem.measures` (an optional `answer` is the
gold answer for answer support, else the expected strings are; forbidden strings name stale facts).
"""

from __future__ import annotations

import time

from adapters.benchmarks.adamem.measures import entry_recall, query_measures, timed_context, write_amplification
from adapters.defaults import K_VALUES
from adapters.records import judged_record, outcome


def evaluate_episode(item: dict, memory, worker: str = "local", attempt: int = 1) -> dict:
    """Observe every observation, run every query; the item's outcome with one judged record per query."""
    episode = item["episode"]
    started = time.perf_counter()
    memory.observe_many(episode["observations"])
    build_ms = (time.perf_counter() - started) * 1000
    records = []
    for query in episode["queries"]:
        top_k = int(query.get("top_k", 5))
        t0 = time.perf_counter()
        retrieved = memory.retrieve(query["query"], now=query.get("now"), top_k=top_k)
        runtime_ms = (time.perf_counter() - t0) * 1000
        record = judged_record(query, item["item_id"], retrieved, runtime_ms=runtime_ms, worker=worker, attempt=attempt)
        record["measures"] = _episode_measures(memory, query, retrieved, top_k, runtime_ms)
        records.append(record)
    return outcome(item["item_id"], records, stats={"observations": len(episode["observations"]),
                                                    "write": write_amplification(memory)},
                   timings={"build_or_restore_ms": round(build_ms, 3),
                            "total_ms": round((time.perf_counter() - started) * 1000, 3)})


def _episode_measures(memory, query: dict, retrieved: list[dict], top_k: int, runtime_ms: float) -> dict:
    """A query's six measures: the gold answer is its `answer` if it has one, else its expected substrings;
    gold entries (for recall) are those holding an expected substring."""
    expected = query.get("expected_substrings", [])
    block, context_ms = timed_context(memory, query["query"], now=query.get("now"), top_k=top_k)
    gold = [e.id for e in memory.entries if any(s in e.content for s in expected)]
    return query_measures(answers=[query["answer"]] if query.get("answer") else expected, block=block,
                          context_ms=context_ms, retrieve_ms=runtime_ms,
                          forbidden=query.get("forbidden_substrings", []), texts=[r["content"] for r in retrieved],
                          recall=entry_recall([r["id"] for r in retrieved], gold, K_VALUES))
