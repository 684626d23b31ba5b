"""The embedded executor: every item on this machine, one after another, no server."""

from __future__ import annotations

import logging
import socket
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from adapters.records import failure_outcome
from adapters.systems.contract import snapshots_of
from coordinator.running.reducer import reduce_run
from coordinator.running.spec import RunSpec
from workers.item.cache import ItemCache
from workers.item.evaluate import close_after_use, evaluate_item
from workers.item.run_context import RunContext

logger = logging.getLogger(__name__)


def run_items(items, system, *, top_k, k_values, profile, cache, dataset_sha256,
              on_item: Callable[[dict], None] | None = None,
              on_question: Callable[[str, int, int], None] | None = None) -> list[dict]:
    """Evaluate items in order; a crash in one item (a vendor's panic too: `evaluate_item` makes it an error)
    becomes its failure record, the rest go on."""
    outcomes = []
    worker = f"local@{socket.gethostname()}"
    for item in items:
        started = time.perf_counter()
        try:
            asked = (lambda done, total, item_id=item.get("item_id", ""): on_question(item_id, done, total)
                     ) if on_question else None
            outcome = evaluate_item(item, system, top_k=top_k, k_values=k_values, profile=profile, cache=cache,
                                    dataset_sha256=dataset_sha256, worker=worker, attempt=1, on_question=asked)
        except Exception as exc:
            logger.error("item %s failed: %s", item.get("item_id"), exc)
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
            outcome = failure_outcome(item, error, getattr(exc, "field", None), worker, 1,
                                      timings={"total_ms": round((time.perf_counter() - started) * 1000, 3)})
        outcomes.append(outcome)
        if on_item:
            on_item(outcome)
    return outcomes


def reset_peak_rss() -> bool:
    """Start this process's peak-RSS count afresh (Linux: 5 written to clear_refs), so that a run measures its own
    peak, not that of an earlier run in the same process (a bench runs several). True when the count now starts
    from the present (read back: the peak no longer stands above what the process holds); some kernels and
    sandboxes refuse the write or ignore it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    status = _status_kib()
    took = "VmHWM" in status and "VmRSS" in status and status["VmHWM"] - status["VmRSS"] < _RESET_SLACK_KIB
    if not took:
        logger.debug("cannot reset the peak RSS count; the peak is the process's lifetime peak")
    return took


_RESET_SLACK_KIB = 32 * 1024  # what other threads may add between the reset and its reading back


def _status_kib() -> dict[str, int]:
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {}
    fields = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name in ("VmHWM", "VmRSS") and value.strip().endswith("kB"):
            fields[name] = int(value.split()[0])
    return fields


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory since `reset_peak_rss` (VmHWM), else its lifetime peak."""
    hwm = _status_kib().get("VmHWM")
    if hwm is not None:
        return hwm * 1024
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


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
        context = RunContext.from_dict(spec.system_context(system, cache_used=can_cache))
        if on_start:
            on_start(total, system)
        outcomes = run_items(adapter.iter_items(limit=spec.limit), system, top_k=spec.top_k,
                             k_values=context.k_values, profile=spec.scoring_profile, cache=cache,
                             dataset_sha256=context.dataset_sha256,
                             on_item=on_item, on_question=on_question)
    finally:  # the system's handles and scratch go with the run, not with the process (a bench runs several)
        close_after_use(system)
    return reduce_run(outcomes, context, elapsed_seconds=time.perf_counter() - started,
                      peak_rss_bytes=peak_rss_bytes())
