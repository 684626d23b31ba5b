"""A worker's own configuration: the MEMFARM_* variables it was started with, read once.

A farm worker reads its configuration when it starts (Celery's `worker_init`, in the main process
before the pool forks, so every pool process holds the same one), never inside a task. A process
that never started as a worker (a test, a script calling `process_item`) reads the variables at each
call instead, so what it sets is what it gets. The run's own settings come from Redis and are checked
apart (`workers.farm.run_settings`); this object is what the worker itself decided.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from adapters.threads import THREADS_VARIABLE


#: Where `memfarm worker` (and `cluster up`'s workers) cache items unless told otherwise (--cache-dir).
DEFAULT_CACHE_DIR = "cache/worker"
#: The variable each of a worker's own settings is passed in: `memfarm worker` reads its options from them and
#: writes them for its pool's processes, which read them here.
ENVIRON = {"cache_dir": "MEMFARM_CACHE_DIR", "max_seq_length": "MEMFARM_MAX_SEQ_LENGTH",
           "embedder_backend": "MEMFARM_EMBEDDER_BACKEND", "embedder": "MEMFARM_EMBEDDER",
           "torch_threads": THREADS_VARIABLE, "allowed_systems": "MEMFARM_ALLOWED_SYSTEMS"}


@dataclass(frozen=True)
class WorkerConfig:
    #: Where this worker caches items and keeps its embedding store (--cache-dir); None: no cache.
    cache_dir: str | None = None
    #: This worker's own embedder window, backend and model (None: the run's); the signature check decides.
    max_seq_length: int | None = None
    embedder_backend: str | None = None
    embedder: str | None = None
    #: Torch threads of each pool process (--torch-threads).
    torch_threads: int = 1
    #: Systems named at the worker's start (--allow-system), besides the built-in ones.
    allowed_systems: tuple[str, ...] = ()
    #: The shared vectors' share checked, bound in MiB and claims, as given: checked where they are used, so that
    #: a wrong value fails the items that would share, naming the variable.
    shared_verify: str | None = None
    shared_mib: str | None = None
    shared_claims: bool = True

    @classmethod
    def from_environ(cls, environ=None) -> "WorkerConfig":
        env = os.environ if environ is None else environ
        window = env.get(ENVIRON["max_seq_length"])
        return cls(cache_dir=env.get(ENVIRON["cache_dir"]) or None,
                   max_seq_length=int(window) if window else None,
                   embedder_backend=env.get(ENVIRON["embedder_backend"]) or None,
                   embedder=env.get(ENVIRON["embedder"]) or None,
                   torch_threads=int(env.get(ENVIRON["torch_threads"], "1")),
                   allowed_systems=tuple(str(n) for n in json.loads(env.get(ENVIRON["allowed_systems"]) or "[]")),
                   shared_verify=env.get("MEMFARM_SHARED_EMBEDDINGS_VERIFY") or None,
                   shared_mib=env.get("MEMFARM_SHARED_EMBEDDINGS_MIB") or None,
                   shared_claims=env.get("MEMFARM_SHARED_EMBEDDINGS_CLAIMS", "1") != "0")


_STARTED: WorkerConfig | None = None


def start(config: WorkerConfig | None = None) -> WorkerConfig:
    """Fix this process's configuration (the worker's start): `config`, or the environment's as it is now."""
    global _STARTED
    _STARTED = config or WorkerConfig.from_environ()
    return _STARTED


def worker_config() -> WorkerConfig:
    """The configuration fixed at the worker's start, or the environment's now where none was."""
    return _STARTED if _STARTED is not None else WorkerConfig.from_environ()
