"""The processes of a farm on one machine: a redis-server on a port of its own, `memfarm` processes (workers,
Flower), each in a process group of its own, awaited until ready, and stopped group and all.

`memfarm cluster`, the benches, the fleet campaign and the tests start their processes here, so that every
one of them has the same guarantees: a password reaches a server through a 0600 file or the environment,
never a command line; readiness is a line the process writes to its log, never a guessed delay; a stop
leaves no pool child or forked helper behind.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from adapters.errors import MemfarmError

logger = logging.getLogger(__name__)

#: Seconds a redis-server has to load its data and accept connections.
REDIS_READY_SECONDS = 15.0
#: Seconds workers have to connect and log that they are ready (model checks included).
WORKER_READY_SECONDS = 120.0
#: Seconds a process group has after SIGTERM before it gets SIGKILL.
STOP_GRACE_SECONDS = 10.0
#: Seconds a group has to be gone after SIGKILL (the kernel's part only: nothing can delay it long).
KILL_WAIT_SECONDS = 10.0
#: What a redis-server logs once its data is loaded and it takes commands.
REDIS_READY_LINE = "Ready to accept connections"
#: What a `memfarm worker` logs once it consumes the queue (Celery's `celery@host ready.`).
WORKER_READY_LINE = "ready."
#: How often a wait looks at its condition again.
POLL_SECONDS = 0.05


class Child(subprocess.Popen):
    """A process `spawn` started in a session (so a process group) of its own, its output appended to `log`.

    `ready_line` is the line it writes once it serves; only output of this start counts, so a log kept
    across restarts never makes a new process look ready.
    """

    name: str
    log: Path
    log_offset: int
    ready_line: str | None

    def output(self) -> str:
        """What this process has written to its log so far."""
        with open(self.log, "rb") as handle:
            handle.seek(self.log_offset)
            return handle.read().decode(errors="replace")

    def is_ready(self) -> bool:
        """Whether it wrote its ready line; a clear error naming its log when it exited first."""
        if self.ready_line is None:
            raise MemfarmError(f"{self.name} has no ready line to wait for")
        if self.ready_line in self.output():
            return True
        if self.poll() is not None:
            raise MemfarmError(f"{self.name} exited (status {self.returncode}) before it was ready; see {self.log}")
        return False

    def wait_ready(self, timeout: float = WORKER_READY_SECONDS) -> "Child":
        wait_ready([self], timeout)
        return self

    def children(self) -> list[int]:
        """The PIDs of its direct children (a worker's pool processes)."""
        try:
            return [int(p) for p in Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()]
        except OSError:
            return []

    def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> bool:
        """SIGTERM its whole group, SIGKILL what is left after `grace_seconds`; returns once none of it runs."""
        return stop_group(self.pid, grace_seconds, self)

    def kill_group(self) -> None:
        """SIGKILL its whole group at once (a crash, not a shutdown); returns once none of it runs."""
        if not _wait_gone(self.pid, 0, self) and _signal_group(self.pid, signal.SIGKILL):
            _wait_gone(self.pid, KILL_WAIT_SECONDS, self)


def memfarm_command(*args: str) -> list[str]:
    """`memfarm ARGS` run by this interpreter, whether or not the `memfarm` script is on PATH."""
    return [sys.executable, "-m", "coordinator.cli", *args]


def spawn(command: Sequence[str], log: Path, *, name: str | None = None, env: dict | None = None,
          cwd: str | Path | None = None, prefix: Sequence[str] = (), ready_line: str | None = None,
          umask: int = -1) -> Child:
    """Start `prefix + command` in a session of its own (so its whole group can be stopped), its output
    appended to `log`; with `umask` (e.g. 0o077) the files it creates are its owner's only.

    `prefix` runs the command somewhere else, and must end by exec-ing it so that the group's leader is
    the process that runs (e.g. `ip netns exec NS`, or a shell that joins a cgroup and then execs)."""
    log = Path(log)
    # logs name hosts, ports and paths of a farm: a folder made for them, and each log, are the owner's only
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    offset = log.stat().st_size if log.exists() else 0
    with open(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as output:
        child = Child([*prefix, *command], stdout=output, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                      start_new_session=True, umask=umask)
    child.name = name or Path(command[0]).name
    child.log, child.log_offset, child.ready_line = log, offset, ready_line
    return child


def start_worker(broker: str, name: str, cache_dir: str | Path, log: Path, env: dict | None = None,
                 torch_threads: int | None = None, *, extra: Sequence[str] = (), cwd: str | Path | None = None,
                 prefix: Sequence[str] = ()) -> Child:
    """One `memfarm worker` named `name@host`, caching under `cache_dir`; returns at once (`wait_ready`
    awaits it). The broker URL, and so its password, goes through the environment, not the command line."""
    args = ["worker", "--cache-dir", str(cache_dir), "--name", f"{name}@%h"]
    if torch_threads:
        args += ["--torch-threads", str(torch_threads)]
    return spawn(memfarm_command(*args, *extra), log, name=f"worker {name}", cwd=cwd, prefix=prefix,
                 env=dict(env or os.environ, MEMFARM_BROKER=broker), ready_line=WORKER_READY_LINE)


def wait_ready(children: Iterable[Child], timeout: float = WORKER_READY_SECONDS) -> None:
    """Until every process has written its ready line; a clear error naming the log of the one that exited
    or is still not ready after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    for child in children:
        while not child.is_ready():
            if time.monotonic() > deadline:
                raise MemfarmError(f"{child.name} not ready after {timeout:.0f}s; see {child.log}")
            time.sleep(POLL_SECONDS)


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_private(path: Path, text: str) -> Path:
    """Create (or replace) a file readable by its owner only, from its first byte."""
    path = Path(path)
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def start_redis(directory: Path, port: int, password: str | None, log: Path, *, acl: str | None = None,
                tls: dict[str, str] | None = None, addresses: Sequence[str] = ("127.0.0.1",),
                maxmemory: str | None = None, prefix: Sequence[str] = (),
                timeout: float = REDIS_READY_SECONDS) -> Child:
    """A redis-server listening on `addresses`, its data (append-only file on, no eviction) and its config
    in `directory`; returns once it has loaded its data and takes commands.

    `password` protects the default user; `acl` (user lines, e.g. `redis_users.acl_config`) replaces it. With
    `tls` (the paths `certificates.make_certificates` returns) it speaks TLS only, and asks every client for a
    certificate of its CA. Passwords go into `directory/redis.conf`, made 0600, never on a command line.
    `maxmemory` (Redis's notation, e.g. `2gb`) caps its memory: full, it refuses writes (noeviction)
    rather than evict the ledger. The ledger is readable by no other local user: `directory` is 0700
    and the server runs with a umask of 077, so its append-only files are 0600."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise MemfarmError("redis-server not found on PATH (apt-get install redis-server)")
    directory = Path(directory)
    _make_private_directory(directory)
    text = acl if acl else (f"requirepass {password}\n" if password else "")
    if maxmemory:
        text += f"maxmemory {maxmemory}\n"
    if tls:
        text += (f"port 0\ntls-port {port}\ntls-cert-file {tls['server.crt']}\ntls-key-file {tls['server.key']}\n"
                 f"tls-ca-cert-file {tls['ca.crt']}\ntls-auth-clients yes\n")
    config = write_private(directory / "redis.conf", text)
    listen = [] if tls else ["--port", str(port)]
    command = [binary, str(config), *listen, "--bind", *addresses, "--dir", str(directory), "--appendonly", "yes",
               "--appendfsync", "everysec", "--maxmemory-policy", "noeviction", "--save", ""]
    child = spawn(command, log, name=f"redis-server on port {port}", prefix=prefix, ready_line=REDIS_READY_LINE,
                  umask=0o077)
    try:
        wait_ready([child], timeout)
    except MemfarmError:
        child.kill_group()
        raise
    return child


def _make_private_directory(directory: Path) -> None:
    """`directory` and everything in it its owner's only: also the files of a server that ran without a
    umask, so that a restart closes what such a run left open."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for root, folders, files in os.walk(directory):
        os.chmod(root, 0o700)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o600)


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    _reap(pid)
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def group_members(group: int) -> list[int]:
    """The PIDs of the processes of group `group` that still run (zombies left out)."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                fields = stat.read().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
            members.append(int(entry.name))
    return members


def stop_group(group: int, grace_seconds: float = STOP_GRACE_SECONDS, leader: subprocess.Popen | None = None) -> bool:
    """SIGTERM process group `group`, SIGKILL whatever of it is left after `grace_seconds`, and return once
    none of it runs; False when no such group was there to stop.

    `leader` is the group's leader where this process started it (it is reaped through it); without it,
    as for `memfarm cluster down`, the leader is reaped here when it is this process's child."""
    if _wait_gone(group, 0, leader) or not _signal_group(group, signal.SIGTERM):
        return False
    if not _wait_gone(group, grace_seconds, leader):
        logger.warning("process group %s still ran %.0fs after SIGTERM; sending SIGKILL", group, grace_seconds)
        _signal_group(group, signal.SIGKILL)
        _wait_gone(group, KILL_WAIT_SECONDS, leader)
    return True


def _signal_group(group: int, signal_number: int) -> bool:
    try:
        os.killpg(group, signal_number)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(group: int, timeout: float, leader: subprocess.Popen | None) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        running = group_members(group)
        if leader is not None:  # after the look at the group, so that a leader that just died is reaped too
            leader.poll()
        else:
            _reap(group)
        if not running:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_SECONDS)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
