"""`memfarm cluster`: a whole farm on one machine, without Docker, and the hub of farms on many.

redis-server (users with passwords, persistence on, a memory cap, noeviction), N workers and
Flower run as child processes in their own sessions (`processes`), with logs
under the state directory; `down` stops them by the PIDs recorded in
`cluster.json`, `restart` starts again those of them that are dead. Each other
machine can have a Redis user and client certificate of its own (`add-machine`),
taken away again with `revoke-machine`; `renew-certs` issues new certificates.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from adapters.errors import MemfarmError
from adapters.files import read_json
from coordinator.operations.certificates import (CERTIFICATE_DAYS, TLS_FILES, certificate_expiry, issue_certificate,
                                                 make_ca, make_certificates, tls_environment)
from coordinator.operations.processes import (STOP_GRACE_SECONDS, free_port, memfarm_command, process_alive, spawn,
                                              start_redis, start_worker, stop_group, write_private)
from coordinator.operations.redis_users import ACL_RULES, ADMIN_RULES, ADMIN_USER, acl_config

#: A machine's name (`add-machine NAME`): its Redis user is `worker-NAME`, its files `machines/NAME/`.
MACHINE_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
#: Redis's memory cap unless `cluster up --redis-maxmemory` says otherwise. Full, Redis refuses writes
#: (noeviction) instead of evicting the ledger: a run stops with an error, and loses nothing.
DEFAULT_REDIS_MAXMEMORY = "2gb"
MAXMEMORY = re.compile(r"([0-9]+)(?:b|k|kb|m|mb|g|gb)?")


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
       tls: bool = False, address: str = "127.0.0.1", maxmemory: str = DEFAULT_REDIS_MAXMEMORY,
       allowed: Sequence[str] = ()) -> dict:
    """Start the farm; `allowed`: systems besides the built-in ones its workers may run (`worker --allow-system`),
    kept in its state so that `restart` starts them the same way."""
    address = check_bind_address(address)
    maxmemory = check_maxmemory(maxmemory)
    state_file = state_dir / "cluster.json"
    if state_file.exists():
        raise MemfarmError(f"a cluster is already up ({state_file}); run `memfarm cluster down` first "
                           "(or `memfarm cluster restart` to start what of it is dead)")
    settings = {"port": redis_port or free_port(), "address": address, "tls": tls, "workers": workers,
                "flower_port": flower_port, "cache_dir": cache_dir, "maxmemory": maxmemory,
                "allowed_systems": list(allowed)}
    state = {"settings": settings, "users": {role: secrets.token_urlsafe(18) for role in ACL_RULES},
             "admin": secrets.token_urlsafe(18), "machines": {}, "pids": {}, "started": time.time()}
    if tls:
        make_certificates(state_dir / "tls", address)
        state["certificates"] = _expiries(state_dir)
    _describe(state_dir, state)
    _start_redis(state_dir, state)
    for number in range(1, workers + 1):
        _start_worker(state_dir, state, number)
    if flower_port:
        _start_flower(state_dir, state)
    _write_state(state_dir, state)
    return state


def restart(state_dir: Path) -> tuple[dict, list[str]]:
    """Start again whatever of the cluster is dead, and leave alone what lives: after a reboot everything,
    after a crash of Redis alone only Redis. Redis comes back on the same port, users, passwords and
    certificates, on its own append-only file, so workers (here and elsewhere), Flower and runs in flight
    reconnect and carry on. Returns the state and the names of the processes started."""
    state = _read_state(state_dir)
    if "settings" not in state:
        raise MemfarmError(f"{state_dir / 'cluster.json'} was written by an older version; "
                           "`memfarm cluster down` and up again")
    dead = [name for name, pid in state["pids"].items() if not process_alive(pid)]
    if not dead:
        raise MemfarmError(f"the cluster is still running ({', '.join(state['pids'])}); nothing to restart")
    state.setdefault("machines", {})
    _describe(state_dir, state)
    if "redis" in dead:
        state.setdefault("admin", secrets.token_urlsafe(18))  # a server started by an older version had none
        _start_redis(state_dir, state)
    for name in dead:
        if name.startswith("worker"):
            _start_worker(state_dir, state, int(name.removeprefix("worker")))
    if "flower" in dead:
        _start_flower(state_dir, state)
    _write_state(state_dir, state)
    return state, dead


def server_acl(state: dict) -> str:
    """The server's users: the roles' (`acl_config`), the admin the `cluster` commands change it with, and a
    worker user per machine added with `add-machine`."""
    lines = [f"user {ADMIN_USER} on >{state['admin']} {ADMIN_RULES}"]
    lines += [f"user {machine['user']} on >{machine['password']} {ACL_RULES['worker']}"
              for machine in state["machines"].values()]
    return acl_config(state["users"]) + "\n".join(lines) + "\n"


def _describe(state_dir: Path, state: dict) -> None:
    """The URLs and the environment of the cluster's clients, from its settings and users."""
    settings, users = state["settings"], state["users"]
    port, address = settings["port"], settings["address"]
    scheme = "rediss" if settings["tls"] else "redis"
    urls = {role: f"{scheme}://{role}:{users[role]}@127.0.0.1:{port}/0" for role in ACL_RULES}
    if address != "127.0.0.1":  # what workers on other machines use
        urls["remote_worker"] = f"{scheme}://worker:{users['worker']}@{address}:{port}/0"
    state["broker"], state["brokers"] = urls["coordinator"], urls
    if settings["tls"]:
        state["tls"] = tls_environment(_certificate_paths(state_dir))


def _client_env(state: dict) -> dict:
    return dict(os.environ, MEMFARM_BROKER=state["broker"], **state.get("tls", {}))


def _start_redis(state_dir: Path, state: dict) -> None:
    settings = state["settings"]
    address = settings["address"]
    proc = start_redis(state_dir / "redis", settings["port"], None, state_dir / "logs" / "redis.log",
                       acl=server_acl(state), tls=_certificate_paths(state_dir) if settings["tls"] else None,
                       addresses=["127.0.0.1"] + ([address] if address != "127.0.0.1" else []),
                       maxmemory=settings.get("maxmemory", DEFAULT_REDIS_MAXMEMORY))
    state["pids"]["redis"] = proc.pid


def _start_worker(state_dir: Path, state: dict, number: int) -> None:
    proc = start_worker(state["brokers"]["worker"], f"worker{number}", f"{state['settings']['cache_dir']}/worker{number}",
                        state_dir / "logs" / f"worker{number}.log", _client_env(state),
                        extra=[part for name in state["settings"].get("allowed_systems") or ()
                               for part in ("--allow-system", name)])
    state["pids"][f"worker{number}"] = proc.pid


def _start_flower(state_dir: Path, state: dict) -> None:
    known = state.get("flower", {})
    user = known.get("user") or os.environ.get("MEMFARM_FLOWER_USER", "memfarm")
    password = known.get("password") or os.environ.get("MEMFARM_FLOWER_PASSWORD") or secrets.token_urlsafe(12)
    port = state["settings"]["flower_port"]
    env = dict(_client_env(state), MEMFARM_BROKER=state["brokers"]["monitor"], MEMFARM_FLOWER_USER=user,
               MEMFARM_FLOWER_PASSWORD=password)
    proc = spawn(memfarm_command("flower", "--port", str(port)), state_dir / "logs" / "flower.log", name="flower",
                 env=env)
    state["pids"]["flower"] = proc.pid
    state["flower"] = {"port": port, "user": user, "password": password}


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


# -- machines and certificates ------------------------------------------------------------------------
def add_machine(state_dir: Path, name: str) -> Path:
    """A worker machine of its own: a Redis user `worker-NAME` (the worker's rules, its own password) and,
    on a --tls cluster, a client certificate of its own, written with the CA and a `worker.env` into
    `machines/NAME/` to copy to that machine. Takes effect at once on a running Redis."""
    name = check_machine_name(name)
    state = _read_state(state_dir)
    if name in state.get("machines", {}):
        raise MemfarmError(f"machine {name} is already in {state_dir / 'cluster.json'}; "
                           "`memfarm cluster revoke-machine` it first to give it new credentials")
    machine = {"user": f"worker-{name}", "password": secrets.token_urlsafe(18), "added": _now()}
    with _admin(state_dir, state) as admin:
        if admin is not None:
            admin.execute_command("ACL", "SETUSER", machine["user"], "reset", "on", f">{machine['password']}",
                                  *ACL_RULES["worker"].split())
    folder = state_dir / "machines" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700, parents=True)
    settings = state["settings"]
    scheme = "rediss" if settings["tls"] else "redis"
    env = [f"MEMFARM_BROKER={scheme}://{machine['user']}:{machine['password']}@{settings['address']}:"
           f"{settings['port']}/0"]
    if settings["tls"]:
        write_private(folder / "ca.crt", (state_dir / "tls" / "ca.crt").read_text())
        issue_certificate(state_dir / "tls", folder, "client", f"memoria-farm machine {name}")
        machine["certificate"] = certificate_expiry(folder / "client.crt")
        env += ["MEMFARM_TLS_CA=ca.crt", "MEMFARM_TLS_CERT=client.crt", "MEMFARM_TLS_KEY=client.key"]
    write_private(folder / "worker.env", "\n".join(env) + "\n")
    state.setdefault("machines", {})[name] = machine
    _write_state(state_dir, state)
    return folder


def revoke_machine(state_dir: Path, name: str) -> dict:
    """Take a machine's access away: its Redis user is deleted (which closes its connections at once) and
    its folder removed. Its client certificate stays valid until it expires (Redis checks no revocation
    list), but without a user a certificate only completes the TLS handshake. Returns what was revoked."""
    state = _read_state(state_dir)
    machines = state.get("machines", {})
    if name not in machines:
        raise MemfarmError(f"no machine {name!r} in {state_dir / 'cluster.json'} "
                           f"(its machines: {', '.join(sorted(machines)) or 'none'})")
    machine = machines.pop(name)
    with _admin(state_dir, state) as admin:
        if admin is not None:
            admin.execute_command("ACL", "DELUSER", machine["user"])
    shutil.rmtree(state_dir / "machines" / name, ignore_errors=True)
    revoked = {"user": machine["user"], "added": machine["added"], "revoked": _now(),
               "certificate": machine.get("certificate")}
    state.setdefault("revoked_machines", {})[name] = revoked
    _write_state(state_dir, state)
    return revoked


def renew_certificates(state_dir: Path, new_ca: bool = False) -> dict:
    """New server and client certificates (the hub's and each added machine's) from the cluster's CA, and
    a new CA first when `new_ca` or when the CA would expire before them. A running Redis loads them at
    once; the old certificates' expiry is kept in `cluster.json` under `replaced_certificates`. Returns
    {"new_ca": bool, "certificates": the new expiries}."""
    from datetime import datetime, timedelta, timezone

    state = _read_state(state_dir)
    if not state["settings"]["tls"]:
        raise MemfarmError(f"the cluster in {state_dir} runs without TLS: there are no certificates to renew")
    tls = state_dir / "tls"
    old = _expiries(state_dir, state)
    ca_end = datetime.fromisoformat(old["ca.crt"]["not_after"])
    new_ca = new_ca or ca_end < datetime.now(timezone.utc) + timedelta(days=CERTIFICATE_DAYS)
    with _admin(state_dir, state) as admin:
        if admin is not None:
            admin.ping()  # the handshake with the files the server knows, before any of them is replaced
        if new_ca:
            make_ca(tls)
        issue_certificate(tls, tls, "server", "memoria-farm server", extension="server.ext")
        issue_certificate(tls, tls, "client", "memoria-farm client")
        for name, machine in state.get("machines", {}).items():
            folder = state_dir / "machines" / name
            if new_ca:
                write_private(folder / "ca.crt", (tls / "ca.crt").read_text())
            issue_certificate(tls, folder, "client", f"memoria-farm machine {name}")
            machine["certificate"] = certificate_expiry(folder / "client.crt")
        if admin is not None:  # setting a file, even to the same path, makes Redis read it again
            paths = _certificate_paths(state_dir)
            files = ["tls-cert-file", paths["server.crt"], "tls-key-file", paths["server.key"]]
            if new_ca:
                files += ["tls-ca-cert-file", paths["ca.crt"]]
            admin.execute_command("CONFIG", "SET", *files)
    state.setdefault("replaced_certificates", []).append({"replaced": _now(), "certificates": old})
    state["certificates"] = _expiries(state_dir)
    _write_state(state_dir, state)
    return {"new_ca": new_ca, "certificates": state["certificates"]}


def check_machine_name(name: str) -> str:
    if not MACHINE_NAME.fullmatch(name):
        raise MemfarmError(f"machine name {name!r} is not valid: 1 to 32 lower-case letters, digits or '-', "
                           "starting with a letter or digit")
    return name


def check_maxmemory(value: str) -> str:
    """Redis's notation for a memory size (`2gb`, `512mb`, bytes); 0 is refused (it means no limit)."""
    match = MAXMEMORY.fullmatch(value.strip().lower())
    if not match or int(match.group(1)) == 0:
        raise MemfarmError(f"--redis-maxmemory {value!r} is not a size Redis reads (e.g. 2gb, 512mb, 1000000000)")
    return value.strip().lower()


def _expiries(state_dir: Path, state: dict | None = None) -> dict:
    tls = state_dir / "tls"
    expiries = {name: certificate_expiry(tls / name) for name in ("ca.crt", "server.crt", "client.crt")}
    for name in (state or {}).get("machines", {}):
        expiries[f"machines/{name}/client.crt"] = certificate_expiry(state_dir / "machines" / name / "client.crt")
    return expiries


def _certificate_paths(state_dir: Path) -> dict[str, str]:
    return {name: str((state_dir / "tls" / name).resolve()) for name in TLS_FILES}


@contextmanager
def _admin(state_dir: Path, state: dict):
    """A connection as the admin user to the cluster's Redis, or None when Redis is not running (the
    change then reaches it through its config when `cluster restart` starts it)."""
    import redis

    if "redis" not in state["pids"] or not process_alive(state["pids"]["redis"]):
        yield None
        return
    if "admin" not in state:
        raise MemfarmError(f"the Redis of {state_dir} has no admin user (it was started by an older version): "
                           "`memfarm cluster down` and up again")
    settings = state["settings"]
    tls = {}
    if settings["tls"]:
        paths = _certificate_paths(state_dir)
        tls = {"ssl": True, "ssl_cert_reqs": "required", "ssl_ca_certs": paths["ca.crt"],
               "ssl_certfile": paths["client.crt"], "ssl_keyfile": paths["client.key"]}
    client = redis.Redis(host="127.0.0.1", port=settings["port"], username=ADMIN_USER, password=state["admin"],
                         socket_connect_timeout=5, socket_timeout=10, **tls)
    try:
        yield client
    except redis.exceptions.RedisError as exc:
        raise MemfarmError(f"the Redis of {state_dir} (port {settings['port']}) refused the change: {exc}") from exc
    finally:
        client.close()


def _read_state(state_dir: Path) -> dict:
    state_file = state_dir / "cluster.json"
    if not state_file.exists():
        raise MemfarmError(f"no cluster state in {state_file}; start one with `memfarm cluster up`")
    return read_json(state_file, "cluster state", top=dict)


def _write_state(state_dir: Path, state: dict) -> None:
    write_private(state_dir / "cluster.json", json.dumps(state, indent=1))


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")
