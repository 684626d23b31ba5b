"""Farm runs: stage items in Redis, enqueue one task per item, watch, re-queue, reduce.

Messages carry only (run id, item id); the ledger holds everything else.
Nothing here waits on Celery results: the ledger is the source of truth.
The watch loop never hangs: an attempt whose lease lapsed (its process died
or lost the network) or that ran past the hard limit is declared lost and
queued again under the attempt cap, and a queued item whose message vanished
(a broker restart) is enqueued again.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter, defaultdict
from dataclasses import replace

import redis

from adapters.errors import ResultsError
from adapters.records import failure_outcome
from adapters.systems.contract import model_files_of
from coordinator.running.run_ledger import (DEFAULT_RUN_TTL_SECONDS, ItemState, LedgerValueError, RunLedger,
                                            check_run_id, redact)
from coordinator.running.reducer import reduce_run
from coordinator.running.spec import RunSpec
from workers.farm.app import TASK_NAME, task_time_limit
from workers.farm.ledger import DEFAULT_LOST_GRACE_SECONDS, REFUSED_BY, stale_after
from workers.ledger_values import shown
from workers.farm.run_meta import RunMeta
from workers.farm.task_message import send_options
from workers.version import CODE_VERSION

logger = logging.getLogger(__name__)

DONE, FAILED, FAILED_FINAL = ItemState.DONE.value, ItemState.FAILED.value, ItemState.FAILED_FINAL.value
STARTED, QUEUED = ItemState.STARTED.value, ItemState.QUEUED.value
#: A queued item whose message is nowhere to be seen for this long is enqueued again.
ORPHAN_AFTER_SECONDS = 20.0


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def enqueue(ledger: RunLedger, app, run_id: str, item_ids) -> int:
    """One task message per item, each noted in the ledger as sent."""
    count = 0
    for item_id in item_ids:
        app.send_task(TASK_NAME, args=[run_id, item_id], **send_options(run_id, item_id))  # Flower: run/item
        ledger.mark_enqueued(run_id, item_id)
        count += 1
    return count


def run_meta(spec: RunSpec, system, *, broker: str) -> RunMeta:
    """Everything a worker needs to rebuild the run's system and check it may take the run's items."""
    return RunMeta(
        created=time.time(), broker=redact(broker), code_version=CODE_VERSION, max_attempts=spec.max_attempts,
        embedding_store=spec.embedding_store, shared_embeddings=spec.shared_embeddings,
        task_time_limit=task_time_limit(), lost_grace_seconds=DEFAULT_LOST_GRACE_SECONDS,
        system=spec.system_name,
        # where a worker keeps its store is the worker's own (workers.farm.run_settings): the run only says whether
        system_settings={k: v for k, v in spec.system_settings().items() if k != "embedding_store"},
        model_files=model_files_of(system),
        context=spec.system_context(system, cache_used=False))


def submit(ledger: RunLedger, app, spec: RunSpec, broker: str, on_start=None, on_item=None) -> tuple[str, list[str]]:
    """Stage the spec's items (the dataset streamed once) and enqueue one task per item."""
    run_id = check_run_id(spec.run_id or new_run_id())
    adapter = spec.open_dataset()
    total = len(adapter.scan())
    expected = min(total, spec.limit) if spec.limit else total
    if on_start:
        on_start(expected)
    system = spec.make_system()  # the signature is read from the packaged config: no model is loaded
    meta = replace(run_meta(spec, system, broker=broker), item_count=expected, staging_done=False)
    ledger.create_run(run_id, meta.to_dict())
    staged = stage_run(ledger, app, run_id, adapter, spec.limit, on_item)
    return run_id, staged


def stage_run(ledger: RunLedger, app, run_id: str, adapter, limit: int | None, on_item=None) -> list[str]:
    """Stream the dataset once; each item goes to Redis compressed, in order, and is enqueued at once.

    The expected item count is in the run's metadata before the first item is
    staged; `staging_done` is set after the last, so a run whose staging was
    cut off is never taken for complete. Items staged before are skipped.
    """
    staged = []
    for item in adapter.iter_items(limit=limit):
        if ledger.stage(run_id, item):
            enqueue(ledger, app, run_id, [item["item_id"]])
            staged.append(item["item_id"])
        if on_item:
            on_item(item["item_id"])
    ledger.update_meta(run_id, staging_done=True, staged_at=time.time(),
                       staging={**ledger.staging_stats, "redis_used_memory": redis_used_memory(ledger.r)})
    return staged


def redis_used_memory(client) -> int | None:
    """Bytes the Redis server holds (INFO memory), or None where this user may not ask (a farm's ACL)."""
    try:
        return int(client.info("memory")["used_memory"])
    except redis.RedisError:
        return None


#: The recent window the ETA is measured over: the last finished items, at most this many.
ETA_WINDOW_ITEMS = 20


def progress(ledger: RunLedger, run_id: str, per_worker: bool = True, now: float | None = None) -> dict:
    """Counts per state, final failures and an ETA; with `per_worker`, also per-worker counts and rates,
    the slowest running items and an ETA from recent throughput (one more round trip)."""
    now = time.time() if now is None else now
    meta = ledger.meta(run_id)
    states = ledger.states(run_id)
    counts = Counter(states.values())
    staging_done = meta.get("staging_done", True)
    total = len(states) if staging_done else max(meta.get("item_count", 0), len(states))
    final = counts.get(FAILED_FINAL, 0)
    finished = counts.get(DONE, 0) + final
    elapsed = now - meta["created"]
    eta = (elapsed / finished) * (total - finished) if finished else None
    state = {
        "run_id": run_id, "total": total, "done": counts.get(DONE, 0),
        "running": counts.get(STARTED, 0), "queued": counts.get(QUEUED, 0),
        "failed": counts.get(FAILED, 0) + final, "final_failures": final, "finished": finished,
        "eta_seconds": eta, "staging_done": staging_done,
        "complete": staging_done and total > 0 and finished >= total,
    }
    if per_worker:
        state.update(_detail(ledger, run_id, states, total - finished, now, eta))
    return state


def _detail(ledger: RunLedger, run_id: str, states: dict[str, str], remaining: int, now: float, eta) -> dict:
    watched = [i for i, s in states.items() if s in (DONE, STARTED, FAILED_FINAL)]
    infos = ledger.infos(run_id, watched)
    workers: dict[str, dict] = {}
    for item_id, info in infos.items():
        if states[item_id] != DONE:
            continue
        entry = workers.setdefault(info.get("worker", "?"), {"done": 0, "first": None, "last": None})
        entry["done"] += 1
        started, ended = float(info.get("started_at") or 0), float(info.get("finished_at") or 0)
        entry["first"] = started if entry["first"] is None else min(entry["first"], started)
        entry["last"] = ended if entry["last"] is None else max(entry["last"], ended)
    rates = {name: {"done": w["done"],
                    "per_minute": 60 * w["done"] / (w["last"] - w["first"]) if w["last"] > w["first"] else None}
             for name, w in sorted(workers.items())}
    running = sorted(((now - float(info.get("started_at") or now), item_id, info.get("worker", "?"))
                      for item_id, info in infos.items() if states[item_id] == STARTED), reverse=True)
    ends = sorted(float(info["finished_at"]) for i, info in infos.items()
                  if states[i] in (DONE, FAILED_FINAL) and info.get("finished_at"))[-ETA_WINDOW_ITEMS:]
    # items per second over the recent window: up to now while items remain (a stalled run slows), up to the last
    # end once none does, so a finished run keeps the rate it ran at however long after it is asked
    until = now if remaining else (ends[-1] if ends else now)
    recent = None
    if len(ends) >= 2 and until > ends[0]:
        recent = (len(ends) - 1) / (until - ends[0])
    return {"worker_rates": rates,
            "slowest": [{"item_id": i, "worker": w, "age_seconds": round(age, 1)} for age, i, w in running[:3]],
            "throughput_per_minute": recent * 60 if recent else None,
            "eta_seconds": remaining / recent if recent else eta}


def retry_failed(ledger: RunLedger, app, run_id: str) -> list[str]:
    """Re-queue failed items that have attempts left (the automatic retry of a run); an item's attempts count
    from the last time its budget was reset by hand."""
    meta = ledger.meta(run_id)
    attempts = ledger.attempts(run_id)
    failed = [item_id for item_id, state in ledger.states(run_id).items() if state == FAILED]
    infos = ledger.infos(run_id, failed)
    retried = []
    for item_id in failed:
        used = attempts.get(item_id, 0) - int(float(infos[item_id].get("attempt_base") or 0))
        if used < meta["max_attempts"] and ledger.requeue(run_id, item_id):
            retried.append(item_id)
    enqueue(ledger, app, run_id, retried)
    return retried


def recover_lost(ledger: RunLedger, app, run_id: str) -> dict[str, str]:
    """Declare lost every started attempt whose lease lapsed or that ran past the hard limit (plus grace);
    each is queued again under the attempt cap, or failed for good at it. Returns {item: verdict}."""
    meta = ledger.meta(run_id)
    attempts = ledger.attempts(run_id)
    limit = stale_after(meta)
    verdicts = {}
    for item_id, state in ledger.states(run_id).items():
        if state != STARTED:
            continue
        started = float(ledger.info(run_id, item_id).get("started_at") or 0)
        expired = not ledger.has_lease(run_id, item_id)
        if not expired and time.time() - started < limit:
            continue
        why = ("its lease lapsed (the process died or lost the network)" if expired
               else f"it ran longer than the hard limit plus grace ({limit:.0f}s)")
        verdict = ledger.declare_lost(run_id, item_id, attempts.get(item_id, 0), max_attempts=meta["max_attempts"],
                                      stale_after=limit, reason=f"attempt {attempts.get(item_id, 0)} lost: {why}")
        if verdict != "skip":
            verdicts[item_id] = verdict
            logger.info("run %s: item %s %s (%s)", run_id, item_id, verdict, why)
    enqueue(ledger, app, run_id, [i for i, v in verdicts.items() if v == "requeued"])
    return verdicts


def heal_orphans(ledger: RunLedger, app, run_id: str, older_than: float = ORPHAN_AFTER_SECONDS) -> list[str]:
    """Enqueue again queued items whose message is neither waiting nor delivered (lost with a broker
    restart, or never sent because the coordinator died). A duplicate message is harmless: `begin` lets
    only one attempt start."""
    waiting = ledger.waiting_messages(run_id)
    now = time.time()
    orphans = []
    for item_id, state in ledger.states(run_id).items():
        if state != QUEUED or item_id in waiting:
            continue
        info = ledger.info(run_id, item_id)
        sent = float(info.get("enqueued_at") or 0)
        if now - max(sent, float(info.get("queued_at") or 0)) > older_than:
            orphans.append(item_id)
    enqueue(ledger, app, run_id, orphans)
    return orphans


def requeue(ledger: RunLedger, app, run_id: str, failed: bool = False, stale: bool = False,
            stale_after: float | None = None, refused: bool = False) -> tuple[list[str], dict[str, str]]:
    """By hand: every failed item (attempts reset), and/or items started too long ago. An item a worker refused
    for what it is (the systems it may run, its code, its model) goes back only where `refused` says the workers
    were changed: the same workers would refuse it again. Returns the items requeued and, by item, the refusals
    left out."""
    meta = ledger.meta(run_id)
    stale_after = stale_after if stale_after is not None else meta["task_time_limit"] + 60
    chosen, left_out = [], {}
    now = time.time()
    for item_id, state in ledger.states(run_id).items():
        if (failed or refused) and state in (FAILED, FAILED_FINAL):
            error = str(ledger.info(run_id, item_id).get("error") or "")
            refusal = error.startswith(REFUSED_BY)
            if refusal and not refused:
                left_out[item_id] = error
                continue
            if not refusal and not failed:
                continue
            if ledger.requeue(run_id, item_id, from_states=(FAILED, FAILED_FINAL), reset_attempts=True):
                chosen.append(item_id)
        elif stale and state == STARTED:
            started = float(ledger.info(run_id, item_id).get("started_at", now))
            if now - started > stale_after and ledger.requeue(run_id, item_id, from_states=(STARTED,)):
                chosen.append(item_id)
    enqueue(ledger, app, run_id, chosen)
    return chosen, left_out


def resume(ledger: RunLedger, app, run_id: str) -> list[str]:
    """After the coordinator died: finish staging if it was cut off, then enqueue only what is neither
    done, nor waiting in the queue, nor running within its limit. Done items never rerun."""
    meta = ledger.meta(run_id)
    chosen = []
    if not meta.get("staging_done", True):
        context = RunMeta.from_dict(ledger.meta(run_id, "context"), f"run {run_id}").run_context()
        spec = RunSpec.from_arguments(context.arguments)
        if spec.dataset_sha256() != context.dataset_sha256:
            raise ResultsError(f"run {run_id}: its dataset {spec.dataset} changed since staging began; "
                               "cannot finish staging")
        chosen += stage_run(ledger, app, run_id, spec.open_dataset(), spec.limit)
    chosen += retry_failed(ledger, app, run_id)
    chosen += [i for i, v in recover_lost(ledger, app, run_id).items() if v == "requeued"]
    chosen += heal_orphans(ledger, app, run_id, older_than=0.0)
    return chosen


def lost_message(item_id: str, verdict: str) -> str:
    return f"item {item_id}: attempt lost, {'queued again' if verdict == 'requeued' else 'failed for good'}"


def watch(ledger: RunLedger, app, run_id: str, on_progress=None, poll_seconds: float = 1.0,
          timeout: float | None = None, detail: bool = False, on_warning=None) -> dict:
    """Follow the ledger until every item is done or finally failed, retrying failures.

    Workers push an event when an item ends, so the loop wakes at once; the
    timeout only bounds how long it waits when nothing happens. `detail` adds
    per-worker rates and the slowest items to each state; `on_warning` gets
    what a person should hear about (a lost attempt, an unreachable broker),
    by default the log.
    """
    warn = on_warning or logger.warning
    expected = ledger.meta(run_id).get("item_count")
    started = time.time()
    last_heal = started
    while True:
        try:
            retry_failed(ledger, app, run_id)
            for item_id, verdict in recover_lost(ledger, app, run_id).items():
                warn(lost_message(item_id, verdict))
            if time.time() - last_heal > ORPHAN_AFTER_SECONDS:
                heal_orphans(ledger, app, run_id)
                last_heal = time.time()
            state = progress(ledger, run_id, per_worker=detail)
            if on_progress:
                on_progress(state)
            if state["staging_done"] and expected and state["total"] < expected:
                raise ResultsError(vanished_message(run_id, expected - state["total"], expected))
            if state["complete"]:
                return state
            ledger.wait_event(run_id, timeout=poll_seconds)
        except redis.exceptions.ConnectionError as exc:  # a restarting broker: wait for it, bounded below
            logger.debug("run %s: redis unreachable (%s)", run_id, exc)
            warn(f"run {run_id}: redis unreachable; retrying until it is back")
            time.sleep(min(5.0, poll_seconds * 2))
        if timeout is not None and time.time() - started > timeout:
            raise TimeoutError(f"run {run_id} not complete after {timeout}s")


def vanished_message(run_id: str, missing: int, staged: int, examples=()) -> str:
    """Why a run whose staged items are gone from Redis fails: its results would silently lack them."""
    named = f" ({', '.join(map(shown, examples[:5]))}{', ...' if len(examples) > 5 else ''})" if examples else ""
    return (f"run {run_id}: {missing} of its {staged} staged items are gone from Redis{named}; the server lost "
            "data (a restart that could not load its append-only file?); submit the run again")


def reduce_farm_run(ledger: RunLedger, run_id: str) -> tuple[dict, dict]:
    """The results file and manifest of a finished farm run, with its farm block."""
    run = RunMeta.from_dict(ledger.meta(run_id, "context", "broker", "code_version"), f"run {run_id}")
    signature = run.run_context().embedding_signature
    attempts = ledger.attempts(run_id)
    order = ledger.order(run_id)
    staged = set(order) | set(ledger.states(run_id))
    expected = max(len(staged), run.item_count or 0) if run.staging_done else len(staged)
    if len(order) < expected:
        raise ResultsError(vanished_message(run_id, expected - len(order), expected, sorted(staged - set(order))))
    outcomes, failures, timings = [], [], []
    per_worker: dict[str, dict] = defaultdict(lambda: {"items": 0, "questions": 0, "run_ms": 0.0})
    for item_id in order:
        info = ledger.info(run_id, item_id)
        state = ledger.state(run_id, item_id)
        outcome = unreadable = None
        if state == DONE:
            try:
                outcome = ledger.outcome(run_id, item_id)
            except LedgerValueError as error:  # planted or damaged: this item fails, the run is still reduced
                unreadable = f"its outcome cannot be read: {error}"
        if state == DONE and outcome is not None:
            if outcome.get("run_id") != run_id or outcome.get("embedding_signature") != signature:
                raise ResultsError(f"item {shown(item_id)} was made by another run or embedding signature; "
                                   "refusing to reduce")
        else:
            item = ledger.load_item(run_id, item_id)
            error = unreadable or info.get("error") or f"item ended in state {state!r}"
            outcome = failure_outcome(item, error, item.get("field"), info.get("worker", ""), attempts.get(item_id, 0))
            failures.append({"item_id": item_id, "attempts": attempts.get(item_id, 0), "error": error})
        outcomes.append(outcome)
        process = info.get("worker", "")
        worker = process.split("/")[0]  # per machine; the pool process stays in the item's timing
        queued, begun, ended = (float(info[k]) if info.get(k) else None for k in ("queued_at", "started_at", "finished_at"))
        timing = {"item_id": item_id, "worker": process, "attempts": attempts.get(item_id, 0), "state": state,
                  "queue_wait_ms": round((begun - queued) * 1000, 1) if begun and queued else None,
                  "run_ms": round((ended - begun) * 1000, 1) if ended and begun else None,
                  # seconds since the run was created, for the report's timeline
                  **{f"{name}_s": round(at - run.created, 3) if at else None
                     for name, at in (("queued", queued), ("started", begun), ("finished", ended))}}
        timings.append(timing)
        if state == DONE:
            per_worker[worker]["items"] += 1
            per_worker[worker]["questions"] += len(outcome["records"])
            per_worker[worker]["run_ms"] += timing["run_ms"] or 0.0
    lost = {i: int(float(ledger.info(run_id, i).get("lost") or 0)) for i in order}
    farm = {"run_id": run_id, "broker": run.broker, "code_version": run.code_version,
            "max_attempts": run.max_attempts, "workers": dict(per_worker), "attempts": attempts,
            "failures": failures, "items": timings, "lost_attempts": {i: n for i, n in lost.items() if n}}
    return reduce_run(outcomes, run.run_context(), elapsed_seconds=time.time() - run.created, farm=farm)


def run_ttl_seconds() -> int:
    import os

    return int(os.environ.get("MEMFARM_RUN_TTL_SECONDS", DEFAULT_RUN_TTL_SECONDS))


def expire_reduced(ledger: RunLedger, run_id: str) -> int:
    """After a run is reduced its keys expire (MEMFARM_RUN_TTL_SECONDS, a few days by default)."""
    seconds = run_ttl_seconds()
    ledger.update_meta(run_id, reduced_at=time.time(), expires_in=seconds)
    return ledger.expire(run_id, seconds)


def run_summaries(ledger: RunLedger) -> list[dict]:
    """Every run in this redis: its state, counts and age (for `memfarm runs`)."""
    rows = []
    for run_id in ledger.runs():
        try:
            meta = ledger.meta(run_id)
            state = progress(ledger, run_id, per_worker=False)
        except LedgerValueError as error:  # named in its row; the other runs are still listed
            rows.append({"run_id": run_id, "state": "damaged", "error": str(error), "ttl_seconds": ledger.ttl(run_id)})
            continue
        phase = ("reduced" if meta.get("reduced_at") else "complete" if state["complete"]
                 else "staging" if not state["staging_done"] else "running")
        rows.append({"run_id": run_id, "state": phase, "benchmark": (meta.get("context") or {}).get("benchmark", "?"),
                     "system": meta.get("system", "?"), "total": state["total"], "done": state["done"],
                     "running": state["running"], "queued": state["queued"], "failed": state["failed"],
                     "age_seconds": time.time() - meta["created"], "ttl_seconds": ledger.ttl(run_id)})
    return rows
