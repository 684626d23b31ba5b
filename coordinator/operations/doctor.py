"""`memfarm doctor`: check a machine before a long run, so that nothing is found out by failing items.

Each check gives OK, WARN or FAIL with one line of detail and, where it is not
OK, the fix. `memfarm worker` runs the same checks at start (all but the full
model load, which it replaces by reading the packaged model's files) and
refuses to start on a FAIL.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from coordinator.operations.datasets import KNOWN_DATASETS  # the published LongMemEval files: size and SHA-256

OK, WARN, FAIL = "OK", "WARN", "FAIL"
#: Free space under the cache directory below which a run is refused (FAIL) or warned about (WARN).
CACHE_FAIL_BYTES = 512 * 2**20
CACHE_WARN_BYTES = 5 * 2**30
#: Besides these, the package that ships the default model (`memoria.model_files.PACKAGED`).
PACKAGES = ("torch", "sentence-transformers", "faiss-cpu", "rank-bm25", "celery", "redis", "flower", "click")


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name:<14} {self.detail}"
        return text + (f"\n      fix: {self.fix}" if self.fix and self.status != OK else "")


def python_check() -> Check:
    version = sys.version_info
    if version < (3, 11):
        return Check("python", FAIL, f"{sys.version.split()[0]}", "use Python 3.11 or newer")
    return Check("python", OK, f"{sys.version.split()[0]} ({sys.executable})")


def packages_check() -> Check:
    from memoria.defaults import DEFAULT_EMBEDDER
    from memoria.model_files import PACKAGED

    found, missing = [], []
    for name in PACKAGES + (PACKAGED[DEFAULT_EMBEDDER].package,):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        return Check("packages", FAIL, f"missing: {', '.join(missing)}", "make setup (or pip install -e .)")
    return Check("packages", OK, "; ".join(found))


def torch_check(load: bool = True) -> Check:
    """The torch build (CPU or CUDA) and its threads; without `load`, from the installed metadata only (a
    worker checks before it forks, and must not start torch's thread pools in the parent)."""
    fix_cpu = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    if not load:
        try:
            version = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            return Check("torch", FAIL, "not installed", "pip install torch==2.13.0 (a CPU build) first")
        cuda = "+cu" in version or any((d.metadata["Name"] or "").startswith("nvidia-")
                                       for d in importlib.metadata.distributions())
        if cuda:
            return Check("torch", WARN, f"{version}, a CUDA build (several GB) on a CPU farm", fix_cpu)
        return Check("torch", OK, f"{version} CPU build")
    try:
        import torch
    except ImportError as exc:
        return Check("torch", FAIL, f"cannot import torch ({exc})", "pip install torch==2.13.0 (a CPU build) first")
    threads = torch.get_num_threads()
    if torch.version.cuda:
        return Check("torch", WARN, f"{torch.__version__}, a CUDA {torch.version.cuda} build (several GB) on a "
                                    f"CPU farm; {threads} threads", fix_cpu)
    busy = busy_cores(threads)
    if busy:
        return Check("torch", WARN, f"{torch.__version__} CPU build, {threads} threads; {busy}",
                     "memfarm run --threads 1 (or MEMFARM_THREADS=1) while the machine is shared")
    return Check("torch", OK, f"{torch.__version__} CPU build, {threads} threads")


def busy_cores(threads: int, load: float | None = None, cores: int | None = None) -> str | None:
    """Why `threads` would oversubscribe this machine now (a load average at or above its cores), or None."""
    try:
        load = os.getloadavg()[0] if load is None else load
    except OSError:  # not every system reports a load
        return None
    cores = cores or os.cpu_count() or 1
    if threads > 1 and load >= cores:
        return (f"load {load:.1f} on {cores} cores: {threads} threads a run share them with the rest, "
                "and oversubscribed threads slow a run several times over")
    return None


def model_check(load: bool, max_seq_length: int | None = None, embedder: str | None = None) -> Check:
    """The chosen model (`--embedder`): its files checked against their pinned hashes (a folder's hashed),
    loaded offline (or, for a quick check, its config read), its dimension and signature."""
    from memoria.defaults import DEFAULT_EMBEDDER
    from memoria.embedder import Embedder
    from memoria.model_files import PACKAGED, packaged_signature, resolve

    name = embedder or DEFAULT_EMBEDDER
    try:
        model = resolve(embedder)
        signature = Embedder.shared(max_seq_length, embedder).signature if load else packaged_signature(
            max_seq_length, embedder)
    except Exception as exc:  # any reason the model cannot be had offline is a FAIL with that reason
        return Check("model", FAIL, f"cannot {'load' if load else 'read'} the model {name}: {exc}",
                     PACKAGED[name].install if name in PACKAGED else "give --embedder a sentence-transformers folder")
    pinned = PACKAGED[model.name].files if model.name in PACKAGED else None
    files = f"{len(pinned)} files match their pinned SHA-256" if pinned else "a local folder (no pinned hashes)"
    how = "loaded offline" if load else "config read (not loaded)"
    return Check("model", OK, f"{signature['model_id']} ({name}) {how}: {signature['dimension']}-d, "
                              f"max_seq_length {signature['max_seq_length']}, backend {signature.get('backend')}; "
                              f"{files}; files sha256 {signature['model_files'][:12]} in {model.root}")


def redis_checks(broker: str, worker: bool = False) -> list[Check]:
    """Reachable with these credentials (TLS where the URL says so), persistence, the queue's length, and
    the task messages workers dropped unread. `worker`: the checks a worker makes of its own user at start."""
    import redis

    from adapters.errors import MemfarmError
    from workers.farm.app import QUEUE
    from adapters.redaction import redact
    from workers.farm.connection import connect
    from workers.farm.transport import DROPPED_KEY

    where = redact(broker)
    try:
        client = connect(broker)
    except MemfarmError as exc:
        fix = ("check the password in the broker URL" if "password" in str(exc) or "credentials" in str(exc)
               else "start redis-server there, or fix the host and port in the broker URL")
        return [Check("redis", FAIL, str(exc), fix)]
    checks = [Check("redis", OK, f"{where} reachable{' over TLS' if broker.startswith('rediss://') else ''}"),
              persistence_check(client, worker)]
    try:
        checks.append(Check("queue", OK, f"{client.llen(QUEUE)} messages waiting in '{QUEUE}'"))
    except redis.exceptions.ResponseError as exc:
        checks.append(Check("queue", WARN, f"cannot read the queue length ({exc})"))
    if worker:  # what other workers dropped is the hub's to hear about, not each worker's at its start
        return checks
    try:
        dropped = int(client.hget(DROPPED_KEY, "total") or 0)
    except (redis.exceptions.ResponseError, ValueError):
        dropped = 0  # not this user's to read, or not a count: the workers' own logs say more
    if dropped:
        checks.append(Check("messages", WARN, f"workers dropped {dropped} task messages that were not the farm's "
                                              f"(counts by field in {DROPPED_KEY})",
                            "someone with a Redis password pushes onto the queue, or a machine runs other code: "
                            "see the workers' logs, revoke a machine's password (memfarm cluster revoke-machine)"))
    return checks


def persistence_check(client, worker: bool = False) -> Check:
    """Whether the server keeps the ledger across a restart: INFO (which the coordinator's user may read)
    says whether the append-only file is on; CONFIG (which no farm user may read) adds the snapshot schedule
    where it is readable. A worker's user may read neither, and needs not: the hub's doctor checks it."""
    import redis

    try:
        aof = str(client.info("persistence").get("aof_enabled"))
    except redis.exceptions.ResponseError as exc:
        try:
            aof = "1" if client.config_get("appendonly").get("appendonly") == "yes" else "0"
        except redis.exceptions.ResponseError:
            if worker:
                return Check("persistence", OK, "not this worker's to read (its user may read no server settings); "
                                                "`memfarm doctor` with the coordinator's URL checks it")
            return Check("persistence", WARN, f"cannot read it with these credentials ({exc})",
                         "run `memfarm doctor` with the coordinator's broker URL (its user may read INFO; a "
                         "worker's may not, by design), or ask the redis admin that appendonly is on")
    if aof == "1":
        return Check("persistence", OK, "appendonly yes")
    try:
        save = client.config_get("save").get("save")
    except redis.exceptions.ResponseError:
        save = None
    if save:
        return Check("persistence", WARN, f"snapshots only (save {save}): a restart loses recent writes",
                     "redis-server --appendonly yes (memfarm cluster up does this)")
    return Check("persistence", WARN, "append-only file off: a restarted redis forgets what it wrote since its last "
                                      "snapshot, if it takes any", "redis-server --appendonly yes")


def disk_check(cache_dir: str | Path) -> Check:
    """Free space under the cache directory, and that a file can be written there."""
    path = Path(cache_dir)
    probe_dir = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    free = shutil.disk_usage(probe_dir).free
    detail = f"{free / 2**30:.1f} GiB free under {path}"
    if free < CACHE_FAIL_BYTES:
        return Check("cache disk", FAIL, detail, f"free space or give --cache-dir on a disk with at least "
                                                 f"{CACHE_WARN_BYTES // 2**30} GiB")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".doctor-") as probe:
            probe.write(b"x" * 65536)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        return Check("cache disk", FAIL, f"cannot write under {path}: {exc.strerror or exc}",
                     "fix the permissions or give --cache-dir elsewhere")
    if free < CACHE_WARN_BYTES:
        return Check("cache disk", WARN, detail, "a full LongMemEval-S cache needs a few GiB")
    return Check("cache disk", OK, detail)


def dataset_check(path: str | Path) -> Check:
    """The dataset's size and SHA-256, and whether it is the published file its name or size says it may be."""
    from adapters.files import file_sha256

    path = Path(path)
    if path.is_dir():
        return folder_check(path)
    if not path.is_file():
        return Check("dataset", FAIL, f"{path}: no such file or folder", "give the path of the downloaded file")
    size = path.stat().st_size
    candidates = [known for known in KNOWN_DATASETS if size == known[2] or path.name == known[1]]
    if not candidates:
        return Check("dataset", OK, f"{path.name}: {size:,} bytes (the size of no published file: not hashed)")
    digest = file_sha256(path)
    detail = f"{path.name}: {size:,} bytes, sha256 {digest[:8]}...{digest[-4:]}"
    for title, _, known_size, known_digest in candidates:
        if size == known_size and digest == known_digest:
            return Check("dataset", OK, f"{detail}: the published {title} file")
    for title, name, known_size, known_digest in candidates:
        if path.name == name:
            return Check("dataset", WARN, f"{detail}: not the published {title} file ({known_size:,} bytes, "
                                          f"sha256 {known_digest[:8]}...{known_digest[-4:]}); its numbers do not "
                                          "stand beside published ones",
                         "download the file again from the LongMemEval release")
    return Check("dataset", OK, f"{detail}: the size of a published file, not its content")


def folder_check(path: Path) -> Check:
    """A folder of dataset files (RealMem's personas, BEAM's chats), as `run` takes one: each JSON file under it
    named by checksum, in one line (`memfarm datasets verify` lists each)."""
    from adapters.errors import MemfarmError
    from coordinator.operations.datasets import summary, verify

    try:
        verdicts = verify(path)
    except MemfarmError as exc:
        return Check("dataset", FAIL, str(exc), "give the folder of the downloaded files")
    return Check("dataset", OK, f"{path.name}/: {summary(verdicts)} (memfarm datasets verify {path} names each)")


def chromium_check() -> Check:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return Check("chromium", OK, f"{found} (HTML report checks)")
    return Check("chromium", WARN, "not found: the HTML report test cannot run here",
                 "tools/system-packages chromium (as root), or apt-get install chromium")


def run_checks(*, broker: str | None, cache_dir: str | Path, load_model: bool = True,
               max_seq_length: int | None = None, browser: bool = True, dataset: str | None = None,
               embedder: str | None = None, worker: bool = False) -> list[Check]:
    """The checks in order; `worker`: those a worker makes at start, with its own Redis user."""
    checks = [python_check(), packages_check(), torch_check(load_model),
              model_check(load_model, max_seq_length, embedder)]
    checks += redis_checks(broker, worker) if broker else [Check("redis", WARN, "no --broker given: not checked",
                                                         "memfarm doctor --broker redis://...")]
    checks.append(disk_check(cache_dir))
    if dataset:
        checks.append(dataset_check(dataset))
    if browser:
        checks.append(chromium_check())
    return checks


def failed(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.status == FAIL]
