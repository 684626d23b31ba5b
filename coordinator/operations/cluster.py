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
from adapters.files import read_json


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: The keys a farm touches: its run keys, the queue and Celery's own bookkeeping (bindings, unacked
#: messages, remote-control replies). Nothing else in the server is readable by a farm user.
FARM_KEYS = "~memfarm* ~unacked* ~_kombu.* ~*.celery.pidbox*"
#: What each Redis user may do. The worker cannot flush, reconfigure, list keys or switch databases.
ACL_RULES = {
    "coordinator": f"{FARM_KEYS} &* +@all -@dangerous +info -select",  # INFO: the memory staging used
    "worker": f"{FARM_KEYS} &* +@all -@dangerous -@admin -select -scan -keys -flushall -flushdb -config",
    "monitor": f"{FARM_KEYS} &* -@all +@read +@connection +@pubsub +@list +@set +info -keys",
}


def acl_config(passwords: dict[str, str]) -> str:
    """Redis config lines: the default user off, one user per role with its own password and rules."""
    lines = ["user default off"]
    lines += [f"user {role} on >{passwords[role]} {ACL_RULES[role]}" for role in ACL_RULES]
    return "\n".join(lines) + "\n"


def make_certificates(directory: Path, address: str = "127.0.0.1") -> dict[str, str]:
    """A private CA, a server certificate for 127.0.0.1 / localhost (and `address`, the interface Redis
    listens on for other machines) and a client certificate, made with openssl into `directory` (keys
    0600). Returns their paths."""
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
        names = "IP:127.0.0.1,DNS:localhost" + (f",IP:{address}" if address != "127.0.0.1" else "")
        (directory / "server.ext").write_text(f"subjectAltName={names}\n")
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
                users: dict[str, str] | None = None, tls: dict[str, str] | None = None,
                address: str = "127.0.0.1") -> subprocess.Popen:
    """A real redis-server bound to localhost (and to `address`, for other machines); returns once it answers.

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
    bind = ["127.0.0.1"] + ([address] if address != "127.0.0.1" else [])
    args = [binary, str(config), *listen, "--bind", *bind, "--dir", str(directory),
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


def check_bind_address(address: str) -> str:
    """An address of one interface of this machine; never every interface at once."""
    import ipaddress

    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise MemfarmError(f"--bind {address!r} is not an IP address (give the private interface's address)") from None
    if ip.is_unspecified:
        raise MemfarmError(f"--bind {address} would listen on every interface; give the private interface's address")
    return str(ip)


def up(state_dir: Path, workers: int, redis_port: int | None, flower_port: int | None, cache_dir: str,
       tls: bool = False, address: str = "127.0.0.1") -> dict:
    address = check_bind_address(address)
    state_file = state_dir / "cluster.json"
    if state_file.exists():
        raise MemfarmError(f"a cluster is already up ({state_file}); run `memfarm cluster down` first "
                           "(or `memfarm cluster restart` after a reboot)")
    settings = {"port": redis_port or free_port(), "address": address, "tls": tls, "workers": workers,
                "flower_port": flower_port, "cache_dir": cache_dir}
    users = {role: secrets.token_urlsafe(18) for role in ACL_RULES}
    certificates = make_certificates(state_dir / "tls", address) if tls else None
    return _start(state_dir, settings, users, certificates)


def restart(state_dir: Path) -> dict:
    """After a reboot (or any death of its processes): start the same cluster again, with the same port,
    users, passwords and certificates, on Redis's own append-only file, so that workers elsewhere and
    runs in flight carry on. Refuses while any of its processes is alive."""
    state_file = state_dir / "cluster.json"
    if not state_file.exists():
        raise MemfarmError(f"no cluster state in {state_file}; start one with `memfarm cluster up`")
    state = read_json(state_file, "cluster state", top=dict)
    alive = [name for name, pid in state["pids"].items() if process_alive(pid)]
    if alive:
        raise MemfarmError(f"the cluster is still running ({', '.join(alive)}); `memfarm cluster down` first")
    if "settings" not in state:
        raise MemfarmError(f"{state_file} was written by an older version; `memfarm cluster down` and up again")
    tls_dir = state_dir / "tls"
    certificates = ({name: str((tls_dir / name).resolve()) for name in
                     ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")}
                    if state["settings"]["tls"] else None)
    return _start(state_dir, state["settings"], state["users"], certificates)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    _reap(pid)
    try:
        with open(f"/proc/{pid}/stat") as stat:  # a zombie left by a dead parent is not alive
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _start(state_dir: Path, settings: dict, users: dict[str, str], certificates: dict | None) -> dict:
    logs = state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port, address, tls = settings["port"], settings["address"], settings["tls"]
    redis_proc = start_redis(state_dir / "redis", port, None, logs / "redis.log", users=users, tls=certificates,
                             address=address)
    scheme = "rediss" if tls else "redis"
    urls = {role: f"{scheme}://{role}:{users[role]}@127.0.0.1:{port}/0" for role in ACL_RULES}
    if address != "127.0.0.1":  # what workers on other machines use
        urls["remote_worker"] = f"{scheme}://worker:{users['worker']}@{address}:{port}/0"
    broker = urls["coordinator"]
    tls_env = tls_environment(certificates) if tls else {}
    env = dict(os.environ, MEMFARM_BROKER=broker, **tls_env)
    state = {"broker": broker, "brokers": urls, "pids": {"redis": redis_proc.pid}, "started": time.time(),
             "settings": settings, "users": users}
    if tls:
        state["tls"] = tls_env
    cache_dir = settings["cache_dir"]
    for number in range(1, settings["workers"] + 1):
        proc = start_worker(urls["worker"], f"worker{number}", f"{cache_dir}/worker{number}",
                            logs / f"worker{number}.log", env)
        state["pids"][f"worker{number}"] = proc.pid
    if settings["flower_port"]:
        user = os.environ.get("MEMFARM_FLOWER_USER", "memfarm")
        flower_password = os.environ.get("MEMFARM_FLOWER_PASSWORD") or secrets.token_urlsafe(12)
        flower_env = dict(env, MEMFARM_BROKER=urls["monitor"], MEMFARM_FLOWER_USER=user,
                          MEMFARM_FLOWER_PASSWORD=flower_password)
        proc = memfarm_process(["flower", "--port", str(settings["flower_port"])], logs / "flower.log", flower_env)
        state["pids"]["flower"] = proc.pid
        state["flower"] = {"port": settings["flower_port"], "user": user, "password": flower_password}
    write_private(state_dir / "cluster.json", json.dumps(state, indent=1))
    return state


def down(state_dir: Path, grace_seconds: float = 10.0) -> list[str]:
    state_file = state_dir / "cluster.json"
    if not state_file.exists():
        raise MemfarmError(f"no cluster state in {state_file}")
    pids = read_json(state_file, "cluster state", top=dict)["pids"]
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
