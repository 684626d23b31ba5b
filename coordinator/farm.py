"""Farm runs: stage items in Redis, enqueue one task per item, watch, re-queue, reduce.

Messages carry only (run id, item id, attempt); the ledger holds everything
else. Nothing here waits on Celery results: the ledger is the source of truth.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter, defaultdict

from coordinator.ledger import ItemState, Ledger, redact
from coordinator.reducer import reduce_run
from memoria.errors import ResultsError
from workers.app import QUEUE, TASK_NAME
from workers.item import failed_records


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def enqueue(app, run_id: str, item_ids, attempts: dict[str, int] | None = None) -> int:
    count = 0
    for item_id in item_ids:
        app.send_task(TASK_NAME, args=[run_id, item_id, (attempts or {}).get(item_id, 0) + 1], queue=QUEUE)
        count += 1
    return count


def stage_run(ledger: Ledger, run_id: str, adapter, meta: dict, limit: int | None, on_item=None) -> list[str]:
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


def progress(ledger: Ledger, run_id: str, per_worker: bool = True) -> dict:
    """Counts per state, per worker, finished-but-final failures and an ETA."""
    meta = ledger.meta(run_id)
    states = ledger.states(run_id)
    counts = Counter(states.values())
    final = [i for i, s in states.items() if s == ItemState.FAILED.value and ledger.is_final(run_id, i)]
    workers = Counter()
    for item_id, state in states.items():
        if per_worker and state == ItemState.DONE.value:
            workers[ledger.info(run_id, item_id).get("worker", "?")] += 1
    total = meta.get("item_count", len(states))
    finished = counts.get(ItemState.DONE.value, 0) + len(final)
    elapsed = time.time() - meta["created"]
    eta = (elapsed / finished) * (total - finished) if finished else None
    return {
        "run_id": run_id, "total": total, "done": counts.get(ItemState.DONE.value, 0),
        "running": counts.get(ItemState.STARTED.value, 0), "queued": counts.get(ItemState.QUEUED.value, 0),
        "failed": counts.get(ItemState.FAILED.value, 0), "final_failures": len(final), "finished": finished,
        "workers": dict(workers), "eta_seconds": eta, "complete": total > 0 and finished >= total,
    }


def retry_failed(ledger: Ledger, app, run_id: str) -> list[str]:
    """Re-queue failed items that have attempts left (the automatic retry of a run)."""
    meta = ledger.meta(run_id)
    attempts = ledger.attempts(run_id)
    retried = []
    for item_id, state in ledger.states(run_id).items():
        if state == ItemState.FAILED.value and not ledger.is_final(run_id, item_id) \
                and attempts.get(item_id, 0) < meta["max_attempts"]:
            ledger.requeue(run_id, item_id)
            retried.append(item_id)
    enqueue(app, run_id, retried, attempts)
    return retried


def requeue(ledger: Ledger, app, run_id: str, failed: bool = False, stale: bool = False,
            stale_after: float | None = None) -> list[str]:
    """By hand: every failed item (attempts reset), and/or items started too long ago."""
    meta = ledger.meta(run_id)
    stale_after = stale_after if stale_after is not None else meta["task_time_limit"] + 60
    chosen = []
    now = time.time()
    for item_id, state in ledger.states(run_id).items():
        if failed and state == ItemState.FAILED.value:
            ledger.requeue(run_id, item_id, reset_attempts=True)
            chosen.append(item_id)
        elif stale and state == ItemState.STARTED.value:
            started = float(ledger.info(run_id, item_id).get("started_at", now))
            if now - started > stale_after:
                ledger.requeue(run_id, item_id)
                chosen.append(item_id)
    enqueue(app, run_id, chosen, ledger.attempts(run_id))
    return chosen


def resume(ledger: Ledger, app, run_id: str) -> list[str]:
    """After the coordinator died: enqueue again what is not done (done items never rerun)."""
    attempts = ledger.attempts(run_id)
    meta = ledger.meta(run_id)
    chosen = []
    for item_id, state in ledger.states(run_id).items():
        if state == ItemState.DONE.value or ledger.is_final(run_id, item_id):
            continue
        if state == ItemState.FAILED.value and attempts.get(item_id, 0) >= meta["max_attempts"]:
            continue
        if state == ItemState.FAILED.value:
            ledger.requeue(run_id, item_id)
        chosen.append(item_id)
    enqueue(app, run_id, chosen, attempts)
    return chosen


def watch(ledger: Ledger, app, run_id: str, on_progress=None, poll_seconds: float = 1.0,
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


def reduce_farm_run(ledger: Ledger, run_id: str) -> tuple[dict, dict]:
    """The results file and manifest of a finished farm run, with its farm block."""
    meta = ledger.meta(run_id)
    attempts = ledger.attempts(run_id)
    outcomes, failures, timings = [], [], []
    per_worker: dict[str, dict] = defaultdict(lambda: {"items": 0, "questions": 0, "run_ms": 0.0})
    for item_id in ledger.order(run_id):
        info = ledger.info(run_id, item_id)
        outcome = ledger.outcome(run_id, item_id)
        state = ledger.state(run_id, item_id)
        if state == ItemState.DONE.value and outcome is not None:
            if outcome.get("run_id") != run_id or outcome.get("embedding_signature") != meta["embedding_signature"]:
                raise ResultsError(f"item {item_id} was made by another run or embedding signature; refusing to reduce")
        else:
            item = ledger.load_item(run_id, item_id)
            error = info.get("error") or f"item ended in state {state!r}"
            outcome = {"item_id": item_id, "records": failed_records(item, error, item.get("field"),
                                                                     info.get("worker", ""), attempts.get(item_id, 0)),
                       "cache": None, "timings": {}, "stats": {}}
            failures.append({"item_id": item_id, "attempts": attempts.get(item_id, 0), "error": error})
        outcomes.append(outcome)
        worker = info.get("worker", "")
        queued, begun, ended = (float(info[k]) if info.get(k) else None for k in ("queued_at", "started_at", "finished_at"))
        timing = {"item_id": item_id, "worker": worker, "attempts": attempts.get(item_id, 0), "state": state,
                  "queue_wait_ms": round((begun - queued) * 1000, 1) if begun and queued else None,
                  "run_ms": round((ended - begun) * 1000, 1) if ended and begun else None}
        timings.append(timing)
        if state == ItemState.DONE.value:
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


def run_meta(context: dict, *, broker: str, code_version: str, max_attempts: int, task_time_limit: int,
             system: str, retrieval_mode: str, batch_size: int, rebuild_cache: bool, ablation: str | None = None) -> dict:
    return {
        "created": time.time(),
        "broker": redact(broker),
        "code_version": code_version,
        "max_attempts": max_attempts,
        "task_time_limit": task_time_limit,
        "system": system,
        "retrieval_mode": retrieval_mode,
        "batch_size": batch_size,
        "ablation": ablation,
        "rebuild_cache": rebuild_cache,
        "weights": (context["system_config"].get("ranking") or {}).get("weights"),
        "top_k": context["top_k"],
        "k_values": list(context["k_values"]),
        "scoring_profile": context["scoring_profile"],
        "dataset_sha256": context["dataset_sha256"],
        "embedding_signature": context["embedding_signature"],
        "context": {**context, "k_values": list(context["k_values"])},
    }
