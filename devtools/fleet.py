"""A fleet of simulated small machines on this one, and a campaign of faults against a real run.

Each worker is its own machine: its own network namespace, joined by a veth
pair to the namespace that holds Redis; its own memory cgroup (cgroup v1,
1.5 GiB by default); its own cache folder. The coordinator stays in this
machine's namespace and reaches Redis over a veth pair of its own. Redis runs
as `memfarm cluster up --tls` runs it: the default user off, the cluster's
users (the coordinator as `coordinator`, workers as `worker`), TLS only with
client certificates of a CA made here, the cluster's memory cap. Every
address lives inside namespaces made here (10.213.x.y) and everything made
is removed at the end, whatever happened. Needs root, `ip` and cgroup v1.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from adapters.errors import MemfarmError
from coordinator.operations.certificates import make_certificates, tls_environment
from coordinator.operations.cluster import DEFAULT_REDIS_MAXMEMORY
from coordinator.operations.processes import Child, start_redis, start_worker, wait_ready
from coordinator.operations.redis_users import ACL_RULES, acl_config

logger = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
DEFAULT_MEMORY_LIMIT = int(1.5 * 2**30)
SUBNET = "10.213"
#: The checkout the workers run from.
REPO = Path(__file__).resolve().parent.parent


def unavailable_reason() -> str | None:
    """Why a fleet cannot be built here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces and memory cgroups)"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip`"
    if not (CGROUP_ROOT / "memory.limit_in_bytes").exists():
        return f"needs cgroup v1 memory at {CGROUP_ROOT}"
    if shutil.which("redis-server") is None:
        return "needs redis-server"
    probe = f"mfprobe{secrets.token_hex(2)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True)
    if made.returncode != 0:
        return f"cannot create a network namespace ({made.stderr.decode(errors='replace').strip()})"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise MemfarmError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


@dataclass
class Machine:
    """One simulated worker machine."""

    name: str
    namespace: str
    link: str  # the interface inside the namespace (cut it to cut the network)
    redis_address: str
    cgroup: Path
    cache_dir: Path
    log: Path
    proc: Child | None = None

    def pool_children(self) -> list[int]:
        return self.proc.children() if self.proc is not None else []

    def memory_usage(self) -> int:
        return int((self.cgroup / "memory.usage_in_bytes").read_text())

    def oom_kills(self) -> int:
        for line in (self.cgroup / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def set_memory_limit(self, limit: int) -> None:
        (self.cgroup / "memory.limit_in_bytes").write_text(str(limit))


@dataclass
class Fleet:
    """Redis in a hub namespace, N worker machines around it; `with Fleet(...) as fleet:` builds and removes it."""

    workdir: Path
    workers: int = 3
    memory_limit: int = DEFAULT_MEMORY_LIMIT
    env: dict = field(default_factory=dict)
    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    machines: list[Machine] = field(default_factory=list)

    def __post_init__(self):
        self.workdir = Path(self.workdir)
        self.users = {role: secrets.token_urlsafe(18) for role in ACL_RULES}
        self.hub = f"mf{self.tag}hub"
        self._made_namespaces: list[str] = []
        self._made_cgroups: list[Path] = []
        self.redis_proc: Child | None = None
        self.certificates: dict[str, str] | None = None
        #: MEMFARM_TLS_CA / _CERT / _KEY: what the coordinator and every worker need in their environment
        self.tls_env: dict[str, str] = {}
        self.broker = f"rediss://coordinator:{self.users['coordinator']}@{SUBNET}.0.2:6379/0"

    # -- building --------------------------------------------------------------------
    def __enter__(self) -> "Fleet":
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def _namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made_namespaces.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _pair(self, outer_ns: str | None, outer: str, inner_ns: str, inner: str, net: int) -> None:
        """A veth pair: `outer` gets .1 (in `outer_ns`, or this namespace), `inner` .2 in `inner_ns`."""
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", inner_ns)
        if outer_ns:
            _ip("link", "set", outer, "netns", outer_ns)
        prefix = ["-n", outer_ns] if outer_ns else []
        _ip(*prefix, "addr", "add", f"{SUBNET}.{net}.1/30", "dev", outer)
        _ip(*prefix, "link", "set", outer, "up")
        _ip("-n", inner_ns, "addr", "add", f"{SUBNET}.{net}.2/30", "dev", inner)
        _ip("-n", inner_ns, "link", "set", inner, "up")

    def _build(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._namespace(self.hub)
        self._pair(None, f"mf{self.tag}c", self.hub, f"mf{self.tag}cp", 0)  # this namespace <-> the hub
        # the server's certificate names every address it is reached on: the coordinator's and each machine's
        hub_addresses = [f"{SUBNET}.0.2", *(f"{SUBNET}.{n}.1" for n in range(1, self.workers + 1))]
        self.certificates = make_certificates(self.workdir / "tls", also=hub_addresses)
        self.tls_env = tls_environment(self.certificates)
        self.start_redis()
        for number in range(1, self.workers + 1):
            name = f"w{number}"
            namespace = f"mf{self.tag}{name}"
            self._namespace(namespace)
            self._pair(self.hub, f"mf{self.tag}{name}h", namespace, f"mf{self.tag}{name}", number)
            cgroup = CGROUP_ROOT / f"memfarm-fleet-{self.tag}-{name}"
            cgroup.mkdir()
            self._made_cgroups.append(cgroup)
            (cgroup / "memory.limit_in_bytes").write_text(str(self.memory_limit))
            machine = Machine(name, namespace, f"mf{self.tag}{name}", f"{SUBNET}.{number}.1", cgroup,
                              self.workdir / f"cache_{name}", self.workdir / f"{name}.log")
            self.machines.append(machine)
            self.start_worker(machine)

    def start_redis(self) -> None:
        """redis-server inside the hub namespace, on every address of it, with the cluster's users, TLS and
        memory cap, its data replayed from its append-only file on a restart."""
        self.redis_proc = start_redis(self.workdir / "redis", 6379, None, self.workdir / "redis.log",
                                      acl=acl_config(self.users), tls=self.certificates, addresses=("0.0.0.0",),
                                      maxmemory=DEFAULT_REDIS_MAXMEMORY, prefix=("ip", "netns", "exec", self.hub))

    def start_worker(self, machine: Machine) -> None:
        """`memfarm worker` inside the machine's namespace and cgroup: a shell writes its own PID into the
        cgroup, then execs `ip netns exec`, which execs the worker, so the group's leader is the worker."""
        join_cgroup = ("sh", "-c", 'echo $$ > "$0" && exec "$@"', str(machine.cgroup / "cgroup.procs"))
        machine.proc = start_worker(f"rediss://worker:{self.users['worker']}@{machine.redis_address}:6379/0",
                                    machine.name, machine.cache_dir, machine.log,
                                    dict(os.environ, **self.env, **self.tls_env),
                                    extra=("--loglevel", "INFO"), cwd=REPO,
                                    prefix=(*join_cgroup, "ip", "netns", "exec", machine.namespace))

    def wait_ready(self, machines: list[Machine] | None = None, timeout: float = 180.0) -> None:
        """Until each worker (started last) logs `ready.`; a clear error naming its log otherwise."""
        wait_ready([machine.proc for machine in machines or self.machines], timeout)

    # -- faults ----------------------------------------------------------------------
    def kill_worker(self, machine: Machine) -> None:
        machine.proc.kill_group()

    def restart_worker(self, machine: Machine) -> None:
        self.start_worker(machine)

    def cut(self, machine: Machine) -> None:
        _ip("-n", machine.namespace, "link", "set", machine.link, "down")

    def restore(self, machine: Machine) -> None:
        _ip("-n", machine.namespace, "link", "set", machine.link, "up")

    def kill_redis(self) -> None:
        self.redis_proc.kill_group()

    # -- removing --------------------------------------------------------------------
    def close(self) -> None:
        for machine in self.machines:  # a group outlives its leader: kill it even when the leader is gone
            if machine.proc is not None:
                self.kill_worker(machine)
        if self.redis_proc is not None:
            self.kill_redis()
        for namespace in reversed(self._made_namespaces):  # removing a namespace removes its veth ends
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        subprocess.run(["ip", "link", "del", f"mf{self.tag}c"], capture_output=True)
        for cgroup in self._made_cgroups:
            for _ in range(50):  # a killed process leaves its cgroup a moment later
                try:
                    cgroup.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
        self._made_namespaces, self._made_cgroups = [], []


def run_in_background(target, *args) -> tuple[threading.Thread, dict]:
    """Run `target(*args)` in a thread; the dict gets `result` or `error`."""
    box: dict = {}

    def call():
        try:
            box["result"] = target(*args)
        except BaseException as exc:  # reported to the caller, which re-raises
            box["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, box


# -- the fault campaign ---------------------------------------------------------------
@dataclass
class Fault:
    """One row of the fault table."""

    fault: str
    at_seconds: float | None = None
    machine: str | None = None
    items: list[str] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    injected: bool = False
    note: str = ""


class Campaign:
    """Injects faults one after another into a running farm run, each against an item that is running."""

    def __init__(self, fleet: Fleet, ledger, run_id: str, started: float, down_seconds: float):
        self.fleet, self.ledger, self.run_id, self.started = fleet, ledger, run_id, started
        self.down_seconds = down_seconds
        self.faults: list[Fault] = []
        self._hit: set[str] = set()  # items a fault already struck: each fault gets an item of its own

    def _now(self) -> float:
        return round(time.time() - self.started, 1)

    def _running(self, machine: Machine) -> tuple[str, int, int] | None:
        """(item, attempt, pool pid) of an item a live pool process of this machine is running now."""
        attempts = self.ledger.attempts(self.run_id)
        children = set(machine.pool_children())
        for item_id, state in self.ledger.states(self.run_id).items():
            if state != "started" or item_id in self._hit:
                continue
            holder = self.ledger.info(self.run_id, item_id).get("worker", "")
            if holder.startswith(f"{machine.name}@") and "/" in holder and int(holder.rsplit("/", 1)[1]) in children:
                return item_id, attempts.get(item_id, 0), int(holder.rsplit("/", 1)[1])
        return None

    def _target(self, fault: Fault, timeout: float = 90.0, avoid: tuple[str, ...] = ()):
        """Wait for a machine (not in `avoid`) running an item; None if the run ends first."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            for machine in self.fleet.machines:
                if machine.name in avoid or machine.proc is None or machine.proc.poll() is not None:
                    continue
                found = self._running(machine)
                if found:
                    item_id, attempt, pid = found
                    self._hit.add(item_id)
                    fault.machine, fault.items, fault.attempts = machine.name, [item_id], {item_id: attempt}
                    fault.at_seconds = self._now()
                    return machine, pid
            time.sleep(0.2)
        fault.note = "not injected: no item was running"
        return None

    def _record(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        logger.warning("fault %s at %ss on %s: %s %s", fault.fault, fault.at_seconds, fault.machine, fault.items,
                       fault.note)
        return fault

    def kill_pool_child(self) -> Fault:
        fault = Fault("SIGKILL of a pool child")
        target = self._target(fault)
        if target:
            machine, pid = target
            try:
                os.kill(pid, signal.SIGKILL)
                fault.injected = True
            except ProcessLookupError:
                fault.note = "the child ended before the signal"
        return self._record(fault)

    def kill_worker(self) -> Fault:
        fault = Fault("SIGKILL of a whole worker (restarted 3 s later)")
        target = self._target(fault)
        if target:
            machine, _ = target
            self.fleet.kill_worker(machine)
            fault.injected = True
            time.sleep(3)
            self.fleet.restart_worker(machine)
        return self._record(fault)

    def oom_pool_child(self, timeout: float = 60.0) -> Fault:
        fault = Fault("pool child OOM-killed by its cgroup")
        target = self._target(fault)
        if target:
            machine, _ = target
            before = machine.oom_kills()
            machine.set_memory_limit(machine.memory_usage() + 16 * 2**20)
            deadline = time.time() + timeout
            while machine.oom_kills() == before and time.time() < deadline:
                time.sleep(0.2)
            machine.set_memory_limit(self.fleet.memory_limit)
            fault.injected = machine.oom_kills() > before
            if not fault.injected:
                fault.note = f"not injected: the item stayed under its tightened limit for {timeout:.0f}s"
        return self._record(fault)

    def cut_network(self) -> Fault:
        fault = Fault(f"network cut for {self.down_seconds:.0f}s (over the visibility timeout)")
        target = self._target(fault)
        if target:
            machine, _ = target
            self.fleet.cut(machine)
            fault.injected = True
            time.sleep(self.down_seconds)
            self.fleet.restore(machine)
        return self._record(fault)

    def kill_redis(self, timeout: float = 90.0) -> Fault:
        fault = Fault("Redis SIGKILLed, restarted on its append-only file (cluster users, TLS)", machine="hub")
        deadline = time.time() + timeout
        while not fault.items and time.time() < deadline:
            fault.items = [i for i, s in self.ledger.states(self.run_id).items() if s == "started" and i not in self._hit]
            time.sleep(0.2)
        if not fault.items:
            fault.note = "not injected: no item was running"
            return self._record(fault)
        self._hit.update(fault.items)
        fault.at_seconds = self._now()
        self.fleet.kill_redis()
        time.sleep(1.0)
        self.fleet.start_redis()
        fault.injected = True
        return self._record(fault)

    def data_fault(self, name: str, item_id: str) -> Fault:
        """A fault carried by the item itself; no other fault picks this item, so each row has its own."""
        self._hit.add(item_id)
        fault = Fault(name, at_seconds=0.0, machine="any", items=[item_id], injected=True)
        return self._record(fault)


def recovery(ledger, run_id: str, fault: Fault, clean_item_seconds: float) -> dict:
    """How the run got over one fault: the affected items' end states, attempts, and seconds lost."""
    if not fault.injected:
        return {"recovered": "not injected", "seconds_lost": 0.0}
    ends, lost = [], 0.0
    for item_id in fault.items:
        info = ledger.info(run_id, item_id)
        state = ledger.state(run_id, item_id)
        attempts = ledger.attempts(run_id).get(item_id, 0)
        ends.append(f"{item_id[:8]}: {state} after {attempts} attempts"
                    + (f", by {info.get('worker', '').split('@')[0]}" if state == "done" else ""))
        if state == "done" and fault.at_seconds is not None:
            finished = float(info.get("finished_at") or 0) - ledger.meta(run_id)["created"]
            lost = max(lost, finished - fault.at_seconds - clean_item_seconds)
    return {"recovered": "; ".join(ends), "seconds_lost": round(max(0.0, lost), 1)}
