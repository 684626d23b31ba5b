"""`memfarm cluster up/down`: a whole farm on one machine, without Docker.

redis-server (password on, persistence on, noeviction), N workers and Flower
run as child processes in their own sessions, with logs under the state
directory; `down` stops them by the PIDs recorded in `cluster.json`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from adapters.errors import MemfarmError


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: The keys a farm touches: its run keys, the queue and Celery's own bookkeeping (bindings, unacked
#: messages, remote-control replies). Nothing else in the server is readable by a farm user.
FARM_KEYS = "~memfarm* ~unacked* ~_kombu.* ~*.celery.pidbox*"
#: What each Redis user may do. The worker cannot flush, reconfigure, list keys or switch databases.
ACL_RULES = {
    "coordinator": f"{FARM_KEYS} &* +@all -@dangerous -select",
    "worker": f"{FARM_KEYS} &* +@all -@dangerous -@admin -select -scan -keys -flushall -flushdb -config",
    "monitor": f"{FARM_KEYS} &* -@all +@read +@connection +@pubsub +@list +@set +info -keys",
}


def acl_config(passwords: dict[str, str]) -> str:
    """Redis config lines: the default user off, one user per role with its own password and rules."""
    lines = ["user default off"]
    lines += [f"user {role} on >{passwords[role]} {ACL_RULES[role]}" for role in ACL_RULES]
    return "\n".join(lines) + "\n"


def make_certificates(directory: Path) -> dict[str, str]:
    """A private CA, a server certificate for 127.0.0.1 / localhost and a client certificate, made with
    openssl into `directory` (keys 0600). Returns their paths."""
    if shutil.which("openssl") is None:
        raise MemfarmError("--tls needs openssl on PATH (apt-get install openssl)")
    directory.mkdir(parents=True, exist_ok=True)
    old_umask = os.umask(0o077)
    try:
        def openssl(*args):
            proc = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True)
            if proc.returncode != 0:
                raise MemfarmError(f"openssl {args[0]} failed: {proc.stderr.strip()[-300:]}")

        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "30",
                "-subj", "/CN=memoria-farm cluster CA")
        (directory / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        for name, extension in (("server", ["-extfile", "server.ext"]), ("client", [])):
            openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                    "-subj", f"/CN=memoria-farm {name}")
            openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                    "-out", f"{name}.crt", "-days", "30", *extension)
    finally:
        os.umask(old_umask)
    return {name: str((directory / name).resolve()) for name in
            ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")}


def tls_environment(certificates: dict[str, str]) -> dict[str, str]:
    """What a client of a --tls cluster needs in its environment (coordinator, workers, Flower)."""
    return {"MEMFARM_TLS_CA": certificates["ca.crt"], "MEMFARM_TLS_CERT": certificates["client.crt"],
            "MEMFARM_TLS_KEY": certificates["client.key"]}


def start_redis(directory: Path, port: int, password: str | None, log: Path,
                users: dict[str, str] | None = None, tls: dict[str, str] | None = None) -> subprocess.Popen:
    """A real redis-server bound to localhost; returns once it answers.

    `password` protects the default user; `users` ({role: password}) switches the default user off
    and creates the coordinator / worker / monitor users of `ACL_RULES` instead. With `tls` (from
    `make_certificates`) it speaks TLS only, and asks every client for a certificate of its CA."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise MemfarmError("redis-server not found on PATH (apt-get install redis-server)")
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "redis.conf"  # passwords in a file made 0600, never on a command line
    text = acl_config(users) if users else (f"requirepass {password}\n" if password else "")
    if tls:
        text += (f"port 0\ntls-port {port}\ntls-cert-file {tls['server.crt']}\ntls-key-file {tls['server.key']}\n"
                 f"tls-ca-cert-file {tls['ca.crt']}\ntls-auth-clients yes\n")
    write_private(config, text)
    listen = [] if tls else ["--port", str(port)]
    args = [binary, str(config), *listen, "--bind", "127.0.0.1", "--dir", str(directory),
            "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction", "--save", ""]
    proc = subprocess.Popen(args, stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise MemfarmError(f"redis-server exited at start; see {log}")
            time.sleep(0.05)
    proc.kill()
    raise MemfarmError(f"redis-server did not answer on port {port}; see {log}")


def write_private(path: Path, text: str) -> Path:
    """Create (or replace) a file readable by its owner only, from its first byte."""
    path = Path(path)
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def memfarm_process(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    """`memfarm ARGS` as a child in its own session (so its whole group can be stopped), output to `log`."""
    return subprocess.Popen([sys.executable, "-m", "coordinator.cli", *args], stdout=open(log, "ab"),
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def start_worker(broker: str, name: str, cache_dir: str | Path, log: Path, env: dict | None = None,
                 torch_threads: int | None = None) -> subprocess.Popen:
    """One `memfarm worker` process named `name@host`, caching under `cache_dir`; the broker URL (and its
    password) goes through the environment, not the command line."""
    args = ["worker", "--cache-dir", str(cache_dir), "--name", f"{name}@%h"]
    if torch_threads:
        args += ["--torch-threads", str(torch_threads)]
    return memfarm_process(args, log, dict(env or os.environ, MEMFARM_BROKER=broker))


def wait_ready(logs: list[Path], timeout: float = 120.0) -> None:
    """Until every worker log says `ready.`; a clear error naming the logs otherwise."""
    deadline = time.time() + timeout
    while not all("ready." in log.read_text(errors="replace") for log in logs):
        if time.time() > deadline:
            raise MemfarmError(f"workers not ready after {timeout:.0f}s; see {', '.join(map(str, logs))}")
        time.sleep(0.2)


def up(state_dir: Path, workers: int, redis_port: int | None, flower_port: int | None, cache_dir: str,
       tls: bool = False) -> dict:
    state_file = state_dir / "cluster.json"
    if state_file.exists():
        raise MemfarmError(f"a cluster is already up ({state_file}); run `memfarm cluster down` first")
    logs = state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port = redis_port or free_port()
    users = {role: secrets.token_urlsafe(18) for role in ACL_RULES}
    certificates = make_certificates(state_dir / "tls") if tls else None
    redis_proc = start_redis(state_dir / "redis", port, None, logs / "redis.log", users=users, tls=certificates)
    scheme = "rediss" if tls else "redis"
    urls = {role: f"{scheme}://{role}:{users[role]}@127.0.0.1:{port}/0" for role in ACL_RULES}
    broker = urls["coordinator"]
    env = dict(os.environ, MEMFARM_BROKER=broker, **(tls_environment(certificates) if tls else {}))
    state = {"broker": broker, "brokers": urls, "pids": {"redis": redis_proc.pid}, "started": time.time()}
    if tls:
        state["tls"] = tls_environment(certificates)
    for number in range(1, workers + 1):
        proc = start_worker(urls["worker"], f"worker{number}", f"{cache_dir}/worker{number}",
                            logs / f"worker{number}.log", env)
        state["pids"][f"worker{number}"] = proc.pid
    if flower_port:
        user = os.environ.get("MEMFARM_FLOWER_USER", "memfarm")
        flower_password = os.environ.get("MEMFARM_FLOWER_PASSWORD") or secrets.token_urlsafe(12)
        flower_env = dict(env, MEMFARM_BROKER=urls["monitor"], MEMFARM_FLOWER_USER=user,
                          MEMFARM_FLOWER_PASSWORD=flower_password)
        proc = memfarm_process(["flower", "--port", str(flower_port)], logs / "flower.log", flower_env)
        state["pids"]["flower"] = proc.pid
        state["flower"] = {"port": flower_port, "user": user, "password": flower_password}
    write_private(state_file, json.dumps(state, indent=1))
    return state


def down(state_dir: Path, grace_seconds: float = 10.0) -> list[str]:
    state_file = state_dir / "cluster.json"
    if not state_file.exists():
        raise MemfarmError(f"no cluster state in {state_file}")
    pids = json.loads(state_file.read_text())["pids"]
    order = [n for n in pids if n != "redis"] + (["redis"] if "redis" in pids else [])
    stopped = []
    for name in order:
        if _stop_group(pids[name], grace_seconds):
            stopped.append(name)
    state_file.unlink()
    return stopped


def _stop_group(pid: int, grace_seconds: float) -> bool:
    """SIGTERM the process group, then SIGKILL whatever is left after the grace period."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.time() + grace_seconds
    while time.time() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        _reap(pid)
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
