"""The one task of the farm: evaluate one staged item and write its outcome to the ledger."""

from __future__ import annotations

import json
import logging
import os
import traceback
from pathlib import Path

from celery.signals import worker_init, worker_process_init, worker_process_shutdown

from adapters.defaults import EMBEDDING_STORE_FILE
from adapters.errors import MemfarmError
from adapters.systems.contract import model_files_of, remote_of, signature_of, vector_sharing_of
from adapters.systems.http_client import is_http_system, origin
from adapters.terminal import printable
from workers.farm.app import TASK_NAME, app, broker_url, lease_seconds
from workers.farm.config import start, worker_config
from workers.farm.connection import connect
from workers.farm.ledger import Ledger, OutcomeTooLarge, refused_by, stale_after
from workers.ledger_values import shown
from workers.farm.run_meta import RunMeta
from workers.farm.run_settings import checked_settings
from workers.item.cache import ItemCache
from workers.item.evaluate import close_after_use, crashes_as_errors, evaluate_item
from workers.version import CODE_VERSION
from memoria.model_files import ModelFilesError

logger = logging.getLogger(__name__)
_SYSTEMS: dict[tuple, object] = {}
_LEDGER: Ledger | None = None
_SHARED = None  # the farm's shared vectors (workers.farm.shared_vectors), made once per process


@worker_init.connect
def _read_configuration(**_):
    """The worker's configuration, read once in the main process: the pool's processes inherit it."""
    start()


@worker_process_init.connect
def _init_process(**_):
    """Pool processes: the torch thread count asked for. The model loads on the first item, not here:
    a replacement process must come up within Celery's process-up timeout, whatever the load."""
    from adapters.threads import use_threads

    use_threads(worker_config().torch_threads, keep_omp=True)


@worker_process_shutdown.connect
def _close_systems(**_):
    """Pool processes end with os._exit, past every atexit hook: the systems they built release their handles
    and scratch folders here."""
    close_systems()


def close_systems() -> None:
    """Close every system this process built; one that fails to close is logged, the others still close."""
    while _SYSTEMS:
        close_after_use(_SYSTEMS.popitem()[1])


def _ledger() -> Ledger:
    global _LEDGER
    if _LEDGER is None:
        _LEDGER = Ledger(connect(broker_url()), lease_seconds=lease_seconds())
    return _LEDGER


def _system(meta: dict):
    """The run's system, built once per process and setting from the run's metadata (checked first).

    A worker started with its own embedder window uses it, whatever the run says: the
    signature check then refuses the run's items rather than mixing vectors. The embedding
    store is always this worker's own, in its cache dir, and only if the run wants one."""
    from adapters.systems import SYSTEMS

    config = worker_config()
    cache_dir = config.cache_dir
    settings = checked_settings(meta, config)
    settings.pop("embedding_store", None)
    if config.max_seq_length is not None:
        settings["max_seq_length"] = config.max_seq_length
    if config.embedder_backend:  # the worker's own backend: the signature check decides
        settings["embedder_backend"] = config.embedder_backend
    if config.embedder:  # the worker's own model: the signature check decides
        settings["embedder"] = config.embedder
    info = SYSTEMS.get(meta["system"])
    if meta.get("embedding_store") and cache_dir and info and "embedding_store" in info.settings:
        settings["embedding_store"] = str(Path(cache_dir) / EMBEDDING_STORE_FILE)  # this machine's, shared by its pool
    key = (meta["system"], json.dumps(settings, sort_keys=True))
    if key not in _SYSTEMS:
        from adapters.systems import make_system

        _SYSTEMS[key] = make_system(meta["system"], **settings)
    system = _SYSTEMS[key]
    sharing = vector_sharing_of(system)
    if sharing is not None:  # the run decides whether the farm shares vectors
        sharing.share_vectors(_shared_vectors() if meta.get("shared_embeddings") else None, _verify_share())
    return system


def _verify_share() -> float:
    """The share of fetched vectors this worker encodes again to check them (MEMFARM_SHARED_EMBEDDINGS_VERIFY,
    0 to 1; 0 trusts every vector anyone with a worker credential wrote)."""
    from memoria.embedding_store import SHARED_VERIFY_SHARE

    value = worker_config().shared_verify
    try:
        share = float(value) if value else SHARED_VERIFY_SHARE
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise MemfarmError(f"MEMFARM_SHARED_EMBEDDINGS_VERIFY={value!r} is not a share between 0 and 1")
    return share


def _shared_vectors():
    global _SHARED
    if _SHARED is None:
        from workers.farm.shared_vectors import DEFAULT_MAX_BYTES, RedisVectors

        config = worker_config()
        mib = config.shared_mib
        try:
            max_bytes = int(float(mib) * 2**20) if mib else DEFAULT_MAX_BYTES
        except (ValueError, OverflowError):
            raise MemfarmError(f"MEMFARM_SHARED_EMBEDDINGS_MIB={mib!r} is not a number of MiB") from None
        _SHARED = RedisVectors(_ledger().r, max_bytes=max_bytes, claims=config.shared_claims)
    return _SHARED


def allowed_systems() -> set[str]:
    """The systems this worker may run: the built-in ones and those named at its start (--allow-system)."""
    from adapters.systems import SYSTEMS

    return set(SYSTEMS) | set(worker_config().allowed_systems)


def refusal_before_import(meta: dict) -> str | None:
    """Why this worker refuses the run's items without importing anything the run names, or None."""
    if meta.get("code_version") != CODE_VERSION:
        return f"code version {CODE_VERSION} of this worker differs from the run's {meta.get('code_version')}"
    if is_http_system(meta.get("system")):
        refusal = _server_refusal(meta["system"])
        if refusal:
            return refusal
    elif meta.get("system") not in allowed_systems():
        from adapters.systems import SYSTEMS

        return (f"system {meta.get('system')!r} is not allowed on this worker (built in: {', '.join(SYSTEMS)}; "
                "start the worker with --allow-system to allow another)")
    try:
        checked_settings(meta, worker_config())
    except MemfarmError as exc:
        return str(exc)
    return None


def _server_refusal(url: str) -> str | None:
    """Why this worker may not call the server a run names, or None: its scheme, host and port must be those of
    a URL given at the worker's start (--allow-system), so whoever writes to Redis cannot aim it elsewhere."""
    try:
        wanted = origin(url)
    except MemfarmError as exc:
        return str(exc)
    allowed = {origin(name) for name in allowed_systems() if is_http_system(name)}
    if wanted in allowed:
        return None
    scheme, host, port = wanted
    return (f"system {printable(url)!r}: this worker may not call {scheme}://{host}:{port} (start it with "
            f"--allow-system {scheme}://{host}:{port} to allow that server)")


def incompatibility(run: RunMeta, system) -> str | None:
    """Why this worker must refuse the run's items once the system is built, or None."""
    mine = signature_of(system)
    wanted = run.run_context().embedding_signature
    if (isinstance(mine, dict) and isinstance(wanted, dict) and mine.get("model_id") and wanted.get("model_id")
            and mine["model_id"] != wanted["model_id"]):
        return (f"embedding model of this worker is {mine.get('model_id')} ({mine.get('dimension')}-d); the run wants "
                f"{wanted.get('model_id')} ({wanted.get('dimension')}-d): start a worker with the run's --embedder")
    if mine != wanted:
        return f"embedding signature of this worker {mine} differs from the run's {wanted}"
    remote = remote_of(system)  # a server: still the one the run was staged against?
    if remote is not None:
        reason = remote.changed_since(run.run_context().system_config.get("info"))
        if reason:
            return reason
    files = model_files_of(system)
    if run.model_files and files and files != run.model_files:  # same name, other weights
        return (f"model files of this worker (sha256 {files[:12]}) differ from the run's "
                f"({run.model_files[:12]}): "
                "install the same model packages everywhere")
    return None


class ItemFailed(Exception):
    """An attempt that failed or was refused, raised so that Celery (and Flower) count the task a failure. The
    ledger has recorded it first and stays the source of truth: the message is acknowledged all the same
    (Celery acknowledges a late-acked task that raises), so a refusing worker does not take it again and
    again; the coordinator decides whether the item is queued again."""


@app.task(name=TASK_NAME, bind=True)
def evaluate_item_task(self, run_id: str, item_id: str) -> str:
    ledger = _ledger()
    said = process_item(ledger, run_id, item_id, self.request.hostname or "worker")
    if said in ("refused", "failed"):
        error = (ledger.info(run_id, item_id).get("error") or said).splitlines()[0]
        raise ItemFailed(f"item {shown(item_id)} of run {shown(run_id)} {said}: {error}")
    return said


def process_item(ledger: Ledger, run_id: str, item_id: str, worker: str) -> str:
    """Begin an attempt, evaluate, finish or fail it; returns what happened, in one word or two."""
    try:
        meta = ledger.meta(run_id)
    except MemfarmError:
        logger.warning("message for run %s, which is not in this redis (forgotten?), ignored", shown(run_id))
        return "unknown run"
    verdict, attempt = ledger.begin(run_id, item_id, f"{worker}/{os.getpid()}", stale_after=stale_after(meta),
                                    max_attempts=meta["max_attempts"])
    if verdict == "finished":
        return "already done"
    if verdict != "begun":
        return verdict.replace("_", " ")
    with ledger.hold(run_id, item_id, attempt):
        try:
            # a damaged context fails this attempt, as any other error does
            run = RunMeta.from_dict(meta, f"run {shown(run_id)}'s metadata")
            refusal = refusal_before_import(meta)
            if refusal:
                ledger.fail(run_id, item_id, attempt, refused_by(worker, refusal), final=True)
                return "refused"
            with crashes_as_errors():  # a vendor's panic while building fails the attempt, as when asking
                system = _system(meta)
            refusal = incompatibility(run, system)
            if refusal:
                ledger.fail(run_id, item_id, attempt, refused_by(worker, refusal), final=True)
                return "refused"
            item = ledger.load_item(run_id, item_id)
            cache_dir = worker_config().cache_dir
            context = run.run_context()
            outcome = evaluate_item(
                item, system, top_k=context.top_k, k_values=context.k_values, profile=context.scoring_profile,
                cache=ItemCache(cache_dir, rebuild=context.rebuild_cache) if cache_dir else None,
                dataset_sha256=context.dataset_sha256, worker=worker, attempt=attempt,
            )
            outcome.update(run_id=run_id, embedding_signature=signature_of(system),
                           code_version=CODE_VERSION)
            return "done" if ledger.finish(run_id, item_id, attempt, outcome) else "superseded"
        except OutcomeTooLarge as exc:  # every attempt would make the same outcome: failed once, for good
            logger.error("item %s of run %s failed: %s", item_id, run_id, exc)
            ledger.fail(run_id, item_id, attempt, str(exc), final=True)
            return "failed"
        except ModelFilesError as exc:  # this machine's model is not the one checked: no attempt here can help
            logger.error("item %s of run %s refused: %s", item_id, run_id, exc)
            ledger.fail(run_id, item_id, attempt, refused_by(worker, exc), final=True)
            return "refused"
        except Exception as exc:
            logger.exception("item %s of run %s failed", item_id, run_id)
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
            ledger.fail(run_id, item_id, attempt, error, max_attempts=meta["max_attempts"])
            return "failed"
