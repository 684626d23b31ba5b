"""`memfarm cluster up/down`: a whole farm on one machine, without Docker.

redis-server (users with passwords, persistence on, noeviction), N workers and
Flower run as child processes in their own sessions (`processes`), with logs
under the state directory; `down` stops them by the PIDs recorded in
`cluster.json`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from adapters.errors import MemfarmError
from adapters.files import read_json
from coordinator.operations.processes import (STOP_GRACE_SECONDS, free_port, memfarm_command, process_alive, spawn,
                                              start_redis, start_worker, stop_group, write_private)

#: The keys a farm touches: its run keys, the queue and Celery's own bookkeeping (bindings, unacked
#: messages, remote-control replies). Nothing else in the server is readable by a farm user.
FARM_KEYS = "~memfarm* ~unacked* ~_kombu.* ~*.celery.pidbox*"
#: What Flower touches, and nothing more. It reads the task queue's length (the queue and its priority
#: lists, `memfarm` + kombu's two-byte separator + a digit); it writes only its own plumbing: inspect reply
#: queues (`<uuid>.reply.celery.pidbox`, a hex first character, which no farm key has), its event queue
#: and the two exchanges' binding tables (kombu refreshes and sweeps them with Lua, and checks queue
#: lengths in MULTI blocks). It subscribes to the events and publishes inspect requests on the workers'
#: control channel; workers obey no control command on it (`workers.app`), so a shutdown sent there is
#: ignored. No LPUSH to the task queue, no access to a run's keys, no CLIENT, no INFO.
MONITOR_KEYS = ("%R~memfarm %R~memfarm??[369] ~[0-9a-f]*.reply.celery.pidbox* ~celeryev.* "
                "~_kombu.binding.reply.celery.pidbox ~_kombu.binding_permanent.reply.celery.pidbox "
                "~_kombu.binding.celeryev ~_kombu.binding_permanent.celeryev ~_kombu.binding_deadlines")
MONITOR_CHANNELS = "&/0.celeryev/* &/0.celery.pidbox"
MONITOR_COMMANDS = ("-@all +hello +auth +ping +multi +exec +discard +llen +brpop +del +sadd +srem +zadd +zrem "
                    "+zrangebyscore +exists +time +evalsha +eval +script|load +script|exists +publish +subscribe "
                    "+psubscribe +unsubscribe +punsubscribe")
#: What each Redis user may do. The worker cannot flush, reconfigure, list keys or switch databases.
ACL_RULES = {
    "coordinator": f"{FARM_KEYS} &* +@all -@dangerous +info -select",  # INFO: the memory staging used
    "worker": f"{FARM_KEYS} &* +@all -@dangerous -@admin -select -scan -keys -flushall -flushdb -config",
    "monitor": f"{MONITOR_KEYS} {MONITOR_CHANNELS} {MONITOR_COMMANDS}",
}
#: The default user: off, so no client can authenticate as it (it has no password either), yet with every
#: permission. Redis 7.0 replays its append-only file as the default user and checks each MULTI/EXEC block
#: of it against that user's permissions; with none, every transaction and Lua script the farm ever wrote
#: is refused at load (`NOPERM ... ACLs rules changed`) and the ledger is gone after a restart.
DEFAULT_USER = "user default off ~* &* +@all"


def acl_config(passwords: dict[str, str]) -> str:
    """Redis config lines: the default user off, one user per role with its own password and rules."""
    lines = [DEFAULT_USER]
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


def _start(state_dir: Path, settings: dict, users: dict[str, str], certificates: dict | None) -> dict:
    logs = state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port, address, tls = settings["port"], settings["address"], settings["tls"]
    addresses = ["127.0.0.1"] + ([address] if address != "127.0.0.1" else [])
    redis_proc = start_redis(state_dir / "redis", port, None, logs / "redis.log", acl=acl_config(users),
                             tls=certificates, addresses=addresses)
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
        proc = spawn(memfarm_command("flower", "--port", str(settings["flower_port"])), logs / "flower.log",
                     name="flower", env=flower_env)
        state["pids"]["flower"] = proc.pid
        state["flower"] = {"port": settings["flower_port"], "user": user, "password": flower_password}
    write_private(state_dir / "cluster.json", json.dumps(state, indent=1))
    return state


def down(state_dir: Path, grace_seconds: float = STOP_GRACE_SECONDS) -> list[str]:
    state_file = state_dir / "cluster.json"
    if not state_file.exists():
        raise MemfarmError(f"no cluster state in {state_file}")
    pids = read_json(state_file, "cluster state", top=dict)["pids"]
    order = [n for n in pids if n != "redis"] + (["redis"] if "redis" in pids else [])
    stopped = []
    for name in order:
        if stop_group(pids[name], grace_seconds):
            stopped.append(name)
    state_file.unlink()
    return stopped
