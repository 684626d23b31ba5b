"""Runs retrieval sources concurrently under a policy and a time budget.

Policies: `all` waits for every source (up to the budget), `first_k` returns
once k sources completed, `deadline` returns at the budget with whatever is
done. Whatever happens, the diagnostics say which sources were submitted,
completed, still pending or failed, how long each queued and ran, and why
the wait ended. A source that raises never sinks the recall.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from memoria import defaults

POLICIES = ("all", "first_k", "deadline")


class SourceScheduler:
    def __init__(self, max_workers: int = 5):
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="memoria-source")

    def run(self, sources: dict, policy: str = "all", budget_ms: float = defaults.DEFAULT_SOURCE_BUDGET_MS,
            first_k: int = 1) -> tuple[dict, dict]:
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
        pending = set(futures)
        deadline = submitted_at + budget_ms / 1000.0
        finish_reason = "all_completed"
        while pending:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                finish_reason = "deadline" if policy == "deadline" else "budget_exhausted"
                break
            if policy == "deadline":
                done, pending = wait(pending, timeout=remaining)
                continue
            done, pending = wait(pending, timeout=remaining, return_when=FIRST_COMPLETED)
            completed = sum(1 for f in futures if f.done() and f.exception() is None)
            if policy == "first_k" and completed >= first_k and pending:
                finish_reason = "first_k_reached"
                break
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
