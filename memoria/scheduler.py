"""Runs retrieval sources concurrently under a policy and a time budget.

Both policies wait for the sources until they are all done or the budget
ends. They differ in what an overrun means: under `all` a source still
running at the budget is a fault (finish reason `budget_exhausted`); under
`deadline` cutting it off is the plan (finish reason `deadline`). Whatever
happens, the diagnostics say which sources were submitted, completed, still
pending or failed, how long each queued and ran, and why the wait ended. A
source that raises never sinks the recall.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait

from memoria import defaults

POLICIES = ("all", "deadline")


class SourceScheduler:
    """A small thread pool that runs one recall's sources side by side and reports on each.

    Sources share the pool across recalls of one memory state; a source still
    running when the budget ends keeps its thread until it returns, but its
    result is not used.
    """

    def __init__(self, max_workers: int = 5):
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="memoria-source")

    def run(self, sources: dict, policy: str = "all",
            budget_ms: float = defaults.DEFAULT_SOURCE_BUDGET_MS) -> tuple[dict, dict]:
        """Run `{name: callable}`; returns (results by completed source, diagnostics)."""
        if policy not in POLICIES:
            raise ValueError(f"unknown scheduler policy {policy!r}; choose from {POLICIES}")
        submitted_at = time.perf_counter()
        timings: dict[str, dict] = {name: {} for name in sources}

        def timed(name, fn):
            began = time.perf_counter()
            timings[name]["queue_ms"] = round((began - submitted_at) * 1000, 3)
            try:
                return fn()
            finally:
                timings[name]["run_ms"] = round((time.perf_counter() - began) * 1000, 3)

        futures = {self._pool.submit(timed, name, fn): name for name, fn in sources.items()}
        _, pending = wait(futures, timeout=budget_ms / 1000.0)
        finish_reason = "all_completed"
        if pending:
            finish_reason = "deadline" if policy == "deadline" else "budget_exhausted"
        results, failed, completed_names = {}, {}, []
        for future, name in futures.items():
            if not future.done():
                continue
            error = future.exception()
            if error is None:
                results[name] = future.result()
                completed_names.append(name)
            else:
                failed[name] = f"{type(error).__name__}: {error}"
        pending_names = [futures[f] for f in futures if not f.done()]
        if failed and finish_reason == "all_completed":
            finish_reason = "completed_with_failures"
        diagnostics = {
            "policy": policy,
            "budget_ms": budget_ms,
            "sources_submitted": list(sources),
            "sources_completed": [n for n in sources if n in completed_names],
            "sources_pending": [n for n in sources if n in pending_names],
            "sources_failed": failed,
            "source_queue_ms": {n: t.get("queue_ms") for n, t in timings.items() if "queue_ms" in t},
            "source_ms": {n: t["run_ms"] for n, t in timings.items() if "run_ms" in t},
            "wait_ms": round((time.perf_counter() - submitted_at) * 1000, 3),
            "finish_reason": finish_reason,
        }
        return results, diagnostics
