"""Farm runs: stage items in Redis, enqueue one task per item, watch, re-queue, reduce.

Messages carry only (run id, item id); the ledger holds everything else.
Nothing here waits on Celery results: the ledger is the source of truth.
"""

from __future__ import annotations

import os
import secrets
import time
from collections import Counter, defaultdict

from adapters.errors import ResultsError
from adapters.records import failure_outcome
from coordinator.ledger import ItemState, RunLedger, redact
from coordinator.reducer import reduce_run
from coordinator.spec import RunSpec
from workers.app import DEFAULT_TASK_TIME_LIMIT, QUEUE, TASK_NAME
from workers.version import CODE_VERSION

DONE, FAILED, FAILED_FINAL = ItemState.DONE.value, ItemState.FAILED.value, ItemState.FAILED_FINAL.value


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def enqueue(app, run_id: str, item_ids) -> int:
    count = 0
    for item_id in item_ids:
        app.send_task(TASK_NAME, args=[run_id, item_id], queue=QUEUE)
        count += 1
    return count


def run_meta(spec: RunSpec, system, *, broker: str) -> dict:
    """Everything a worker needs to rebuild the run's system and check it may take the run's items."""
    context = spec.system_context(system, cache_used=False)
    return {
        "created": time.time(),
        "broker": redact(broker),
        "code_version": CODE_VERSION,
        "max_attempts": spec.max_attempts,
        "task_time_limit": int(os.environ.get("MEMFARM_TASK_TIME_LIMIT", DEFAULT_TASK_TIME_LIMIT)),
        "system": spec.system_name,
        "system_settings": spec.system_settings(),
        "retrieval_mode": context["system_config"].get("retrieval_mode"),
        "rebuild_cache": spec.rebuild_cache,
        "top_k": spec.top_k,
        "k_values": list(context["k_values"]),
        "scoring_profile": spec.scoring_profile,
        "dataset_sha256": context["dataset_sha256"],
        "embedding_signature": context["embedding_signature"],
        "context": {**context, "k_values": list(context["k_values"])},
    }


def submit(ledger: RunLedger, app, spec: RunSpec, broker: str, on_start=None, on_item=None) -> tuple[str, list[str]]:
    """Stage the spec's items (the dataset streamed once) and enqueue one task per item."""
    adapter = spec.open_dataset()
    total = len(adapter.scan())
    if on_start:
        on_start(min(total, spec.limit) if spec.limit else total)
    system = spec.make_system()  # the signature is read from the packaged config: no model is loaded
    run_id = spec.run_id or new_run_id()
    staged = stage_run(ledger, run_id, adapter, run_meta(spec, system, broker=broker), spec.limit, on_item)
    enqueue(app, run_id, staged)
    return run_id, staged


def stage_run(ledger: RunLedger, run_id: str, adapter, meta: dict, limit: int | None, on_item=None) -> list[str]:
    """Stream the dataset once; each item goes to Redis compressed, in order."""
    ledger.create_run(run_id, meta)
    staged = []
    for item in adapter.iter_items(limit=limit):
        ledger.stage(run_id, item)
        staged.append(item["item_id"])
        if on_item:
            on_item(item["item_id"])
    ledger.update_meta(run_id, item_count=len(staged), staged_at=time.time())
    return staged


def progress(ledger: RunLedger, run_id: str, per_worker: bool = True) -> dict:
    """Counts per state, per worker, final failures and an ETA."""
    meta = ledger.meta(run_id)
    states = ledger.states(run_id)
    counts = Counter(states.values())
    workers = Counter()
    for item_id, state in states.items():
        if per_worker and state == DONE:
            workers[ledger.info(run_id, item_id).get("worker", "?")] += 1
    total = meta.get("item_count", len(states))
    final = counts.get(FAILED_FINAL, 0)
    finished = counts.get(DONE, 0) + final
    elapsed = time.time() - meta["created"]
    eta = (elapsed / finished) * (total - finished) if finished else None
    return {
        "run_id": run_id, "total": total, "done": counts.get(DONE, 0),
        "running": counts.get(ItemState.STARTED.value, 0), "queued": counts.get(ItemState.QUEUED.value, 0),
        "failed": counts.get(FAILED, 0) + final, "final_failures": final, "finished": finished,
        "workers": dict(workers), "eta_seconds": eta, "complete": total > 0 and finished >= total,
    }


def retry_failed(ledger: RunLedger, app, run_id: str) -> list[str]:
    """Re-queue failed items that have attempts left (the automatic retry of a run)."""
    meta = ledger.meta(run_id)
    attempts = ledger.attempts(run_id)
    retried = []
    for item_id, state in ledger.states(run_id).items():
        if state == FAILED and attempts.get(item_id, 0) < meta["max_attempts"]:
            ledger.requeue(run_id, item_id)
            retried.append(item_id)
    enqueue(app, run_id, retried)
    return retried


def requeue(ledger: RunLedger, app, run_id: str, failed: bool = False, stale: bool = False,
            stale_after: float | None = None) -> list[str]:
    """By hand: every failed item (attempts reset), and/or items started too long ago."""
    meta = ledger.meta(run_id)
    stale_after = stale_after if stale_after is not None else meta["task_time_limit"] + 60
    chosen = []
    now = time.time()
    for item_id, state in ledger.states(run_id).items():
        if failed and state in (FAILED, FAILED_FINAL):
            ledger.requeue(run_id, item_id, reset_attempts=True)
            chosen.append(item_id)
        elif stale and state == ItemState.STARTED.value:
            started = float(ledger.info(run_id, item_id).get("started_at", now))
            if now - started > stale_after:
                ledger.requeue(run_id, item_id)
                chosen.append(item_id)
    enqueue(app, run_id, chosen)
    return chosen


def resume(ledger: RunLedger, app, run_id: str) -> list[str]:
    """After the coordinator died: enqueue again what is not done (done items never rerun)."""
    attempts = ledger.attempts(run_id)
    meta = ledger.meta(run_id)
    chosen = []
    for item_id, state in ledger.states(run_id).items():
        if state in (DONE, FAILED_FINAL):
            continue
        if state == FAILED and attempts.get(item_id, 0) >= meta["max_attempts"]:
            continue
        if state == FAILED:
            ledger.requeue(run_id, item_id)
        chosen.append(item_id)
    enqueue(app, run_id, chosen)
    return chosen


def watch(ledger: RunLedger, app, run_id: str, on_progress=None, poll_seconds: float = 1.0,
          timeout: float | None = None) -> dict:
    """Follow the ledger until every item is done or finally failed, retrying failures.

    Workers push an event when an item ends, so the loop wakes at once; the
    timeout only bounds how long it waits when nothing happens.
    """
    started = time.time()
    while True:
        retry_failed(ledger, app, run_id)
        state = progress(ledger, run_id, per_worker=False)
        if on_progress:
            on_progress(state)
        if state["complete"]:
            return state
        if timeout is not None and time.time() - started > timeout:
            raise TimeoutError(f"run {run_id} not complete after {timeout}s: {state}")
        ledger.wait_event(run_id, timeout=poll_seconds)


def reduce_farm_run(ledger: RunLedger, run_id: str) -> tuple[dict, dict]:
    """The results file and manifest of a finished farm run, with its farm block."""
    meta = ledger.meta(run_id)
    attempts = ledger.attempts(run_id)
    outcomes, failures, timings = [], [], []
    per_worker: dict[str, dict] = defaultdict(lambda: {"items": 0, "questions": 0, "run_ms": 0.0})
    for item_id in ledger.order(run_id):
        info = ledger.info(run_id, item_id)
        outcome = ledger.outcome(run_id, item_id)
        state = ledger.state(run_id, item_id)
        if state == DONE and outcome is not None:
            if outcome.get("run_id") != run_id or outcome.get("embedding_signature") != meta["embedding_signature"]:
                raise ResultsError(f"item {item_id} was made by another run or embedding signature; refusing to reduce")
        else:
            item = ledger.load_item(run_id, item_id)
            error = info.get("error") or f"item ended in state {state!r}"
            outcome = failure_outcome(item, error, item.get("field"), info.get("worker", ""), attempts.get(item_id, 0))
            failures.append({"item_id": item_id, "attempts": attempts.get(item_id, 0), "error": error})
        outcomes.append(outcome)
        worker = info.get("worker", "")
        queued, begun, ended = (float(info[k]) if info.get(k) else None for k in ("queued_at", "started_at", "finished_at"))
        timing = {"item_id": item_id, "worker": worker, "attempts": attempts.get(item_id, 0), "state": state,
                  "queue_wait_ms": round((begun - queued) * 1000, 1) if begun and queued else None,
                  "run_ms": round((ended - begun) * 1000, 1) if ended and begun else None}
        timings.append(timing)
        if state == DONE:
            per_worker[worker]["items"] += 1
            per_worker[worker]["questions"] += len(outcome["records"])
            per_worker[worker]["run_ms"] += timing["run_ms"] or 0.0
    context = dict(meta["context"])
    context.update(
        elapsed_seconds=time.time() - meta["created"],
        farm={"run_id": run_id, "broker": meta["broker"], "code_version": meta["code_version"],
              "max_attempts": meta["max_attempts"], "workers": dict(per_worker), "attempts": attempts,
              "failures": failures, "items": timings},
    )
    return reduce_run(outcomes, context)
