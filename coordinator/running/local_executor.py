"""The embedded executor: every item on this machine, one after another, no server."""

from __future__ import annotations

import logging
import socket
import time
import traceback
from collections.abc import Callable

from adapters.records import failure_outcome
from adapters.systems.contract import snapshots_of
from coordinator.running.reducer import reduce_run
from coordinator.running.spec import RunSpec
from workers.item.cache import ItemCache
from workers.farm.ledger import outcome_json
from workers.item.evaluate import close_after_use, evaluate_item
from workers.item.peak_memory import peak_rss_bytes, reset_peak_rss
from workers.item.run_context import RunContext

logger = logging.getLogger(__name__)


def run_items(items, system, context: RunContext, *, cache,
              on_item: Callable[[dict], None] | None = None,
              on_question: Callable[[str, int, int], None] | None = None) -> list[dict]:
    """Evaluate items in order, as `context` says (its top_k, K values, scoring profile, dataset), as a farm
    worker does; a crash in one item (a vendor's panic too: `evaluate_item` makes it an error) becomes its
    failure record, the rest go on."""
    outcomes = []
    worker = f"local@{socket.gethostname()}"
    for item in items:
        started = time.perf_counter()
        try:
            asked = (lambda done, total, item_id=item.get("item_id", ""): on_question(item_id, done, total)
                     ) if on_question else None
            outcome = evaluate_item(item, system, top_k=context.top_k, k_values=context.k_values,
                                    profile=context.scoring_profile, cache=cache,
                                    dataset_sha256=context.dataset_sha256, worker=worker, attempt=1,
                                    on_question=asked)
            outcome_json(str(item.get("item_id")), outcome)  # the farm's bound on an outcome, held here too
        except Exception as exc:
            logger.error("item %s failed: %s", item.get("item_id"), exc)
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
            outcome = failure_outcome(item, error, getattr(exc, "field", None), worker, 1,
                                      timings={"total_ms": round((time.perf_counter() - started) * 1000, 3)})
        outcomes.append(outcome)
        if on_item:
            on_item(outcome)
    return outcomes


def run_local(spec: RunSpec, on_start: Callable[[int, object], None] | None = None,
              on_item: Callable[[dict], None] | None = None,
              on_question: Callable[[str, int, int], None] | None = None) -> tuple[dict, dict]:
    """Evaluate a whole spec here; returns (results, manifest) from the reducer, nothing written yet."""
    started = time.perf_counter()
    reset_peak_rss()
    adapter = spec.open_dataset()
    ids = adapter.scan()
    total = min(len(ids), spec.limit) if spec.limit else len(ids)
    system = spec.make_system()
    try:
        can_cache = spec.cache_dir is not None and snapshots_of(system) is not None
        cache = ItemCache(spec.cache_dir, rebuild=spec.rebuild_cache) if can_cache else None
        context = spec.system_context(system, cache_used=can_cache)
        if on_start:
            on_start(total, system)
        outcomes = run_items(adapter.iter_items(limit=spec.limit), system, context, cache=cache,
                             on_item=on_item, on_question=on_question)
    finally:  # the system's handles and scratch go with the run, not with the process (a bench runs several)
        close_after_use(system)
    # each item starts the count afresh (what one item costs a worker): the run's peak is the largest of theirs
    peaks = [o["stats"]["peak_rss_bytes"] for o in outcomes if (o.get("stats") or {}).get("peak_rss_bytes")]
    ended = peak_rss_bytes()
    return reduce_run(outcomes, context, elapsed_seconds=time.perf_counter() - started,
                      peak_rss_bytes=max([*peaks, ended]) if ended is not None else None)
