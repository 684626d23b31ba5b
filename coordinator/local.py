"""The embedded executor: every item on this machine, one after another, no server."""

from __future__ import annotations

import logging
import socket
import time
import traceback
from collections.abc import Callable

from workers.item import evaluate_item, failed_records

logger = logging.getLogger(__name__)


def run_items(items, system, *, top_k, k_values, profile, cache, dataset_sha256,
              on_item: Callable[[dict], None] | None = None) -> list[dict]:
    """Evaluate items in order; a crash in one item becomes its failure record, the rest go on."""
    outcomes = []
    worker = f"local@{socket.gethostname()}"
    for item in items:
        started = time.perf_counter()
        try:
            outcome = evaluate_item(item, system, top_k=top_k, k_values=k_values, profile=profile, cache=cache,
                                    dataset_sha256=dataset_sha256, worker=worker, attempt=1)
        except Exception as exc:
            logger.error("item %s failed: %s", item.get("item_id"), exc)
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
            outcome = {"item_id": item["item_id"], "records": failed_records(item, error, None, worker, 1),
                       "cache": None, "timings": {"total_ms": (time.perf_counter() - started) * 1000}, "stats": {}}
        outcomes.append(outcome)
        if on_item:
            on_item(outcome)
    return outcomes
