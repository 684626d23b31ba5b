"""Operating a `memfarm cluster` for real: a crashed Redis restarted under live workers, a private ledger on
disk, a memory cap, certificates renewed, and machines with credentials of their own, added and revoked."""

import json
import os
import shutil
import signal
import socket
import ssl
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from adapters.errors import MemfarmError
from coordinator.cli import main
from coordinator.operations import certificates, cluster
from coordinator.operations.processes import free_port, process_alive, start_redis
from coordinator.running.run_ledger import connect
from tests.farm_support import wait_for
from tests.helpers import write_dataset

pytestmark = [pytest.mark.server, pytest.mark.usefixtures("cluster")]  # each test starts a cluster
from tests.farm_support import cluster_up as up

FAST = {"MEMFARM_TASK_TIME_LIMIT": "60", "MEMFARM_VISIBILITY_TIMEOUT": "65"}




def down(state_dir: Path) -> None:
    if (state_dir / "cluster.json").exists():
        CliRunner().invoke(main, ["cluster", "down", "--state-dir", str(state_dir)])


def kill_redis(state: dict) -> None:
    os.kill(state["pids"]["redis"], signal.SIGKILL)
    wait_for(lambda: not process_alive(state["pids"]["redis"]), 10, what="redis-server gone")


def private_modes(directory: Path) -> dict[str, str]:
    """The permission bits of `directory` and of everything in it."""
    paths = [directory, *directory.rglob("*")]
    return {str(p.relative_to(directory)): oct(stat.S_IMODE(p.stat().st_mode)) for p in paths}


def served_certificate(port: int, tls: dict) -> dict:
    """The serial number and expiry of the certificate the server presents now (a fresh handshake)."""
    context = ssl.create_default_context(cafile=tls["MEMFARM_TLS_CA"])
    context.load_cert_chain(tls["MEMFARM_TLS_CERT"], tls["MEMFARM_TLS_KEY"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as wrapped:
            peer = wrapped.getpeercert()
    return {"serial": peer["serialNumber"].lower(),
            "not_after": datetime.fromtimestamp(ssl.cert_time_to_seconds(peer["notAfter"]), timezone.utc)}


@pytest.mark.slow
def test_after_redis_alone_crashes_restart_brings_it_back_and_live_workers_finish_a_run(tmp_path, monkeypatch):
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    state_dir = tmp_path / "state"
    state = up(state_dir, "--tls", "--workers", "1", "--flower-port", str(free_port()), "--cache-dir",
               str(tmp_path / "cache"))
    try:
        for name, path in state["tls"].items():
            monkeypatch.setenv(name, path)
        wait_for(lambda: "ready." in (state_dir / "logs" / "worker1.log").read_text(), 120, what="worker ready")
        connect(state["broker"]).set("memfarm:survivor", "yes")
        wait_for(lambda: b"survivor" in b"".join(p.read_bytes() for p in (state_dir / "redis").rglob("*.aof")), 10,
                 what="the write in the append-only file")
        kill_redis(state)

        result = CliRunner().invoke(main, ["cluster", "restart", "--state-dir", str(state_dir)])
        assert result.exit_code == 0, result.output
        assert result.output.startswith("restarted redis;"), result.output
        restarted = json.loads((state_dir / "cluster.json").read_text())
        assert restarted["pids"]["redis"] != state["pids"]["redis"] and process_alive(restarted["pids"]["redis"])
        for name in ("worker1", "flower"):  # left alone: the same processes, still running
            assert restarted["pids"][name] == state["pids"][name] and process_alive(state["pids"][name]), name
        assert restarted["brokers"] == state["brokers"] and restarted["flower"] == state["flower"]
        assert connect(state["broker"]).get("memfarm:survivor") == b"yes", "the same data, users and certificates"

        data = write_dataset(tmp_path / "d.json", questions=2, seed=3, scale=0.04)
        run = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--output", str(tmp_path / "r.json")],
                                  env={"MEMFARM_BROKER": state["broker"]})
        assert run.exit_code == 0, run.output + (state_dir / "logs" / "worker1.log").read_text()[-3000:]
        manifest = json.loads((tmp_path / "r.manifest.json").read_text())
        assert [name.split("@")[0] for name in manifest["farm"]["workers"]] == ["worker1"]
        assert len(json.loads((tmp_path / "r.json").read_text())["records"]) == 2

        everything = CliRunner().invoke(main, ["cluster", "restart", "--state-dir", str(state_dir)])
        assert everything.exit_code == 2 and "nothing to restart" in everything.output
    finally:
        down(state_dir)


def test_the_ledger_on_disk_is_its_owners_only(tmp_path):
    directory = tmp_path / "redis"
    (directory / "appendonlydir").mkdir(parents=True)  # what a server without a umask left: 0755 and 0644
    left_open = directory / "appendonlydir" / "old.aof"
    left_open.write_text("x")
    for path, mode in ((directory, 0o755), (directory / "appendonlydir", 0o755), (left_open, 0o644)):
        path.chmod(mode)
    server = start_redis(directory, free_port(), "pw", tmp_path / "redis.log")
    try:
        client = redis.Redis(port=int(server.args[server.args.index("--port") + 1]), password="pw")
        client.set("k", "v")
        wait_for(lambda: any(b"k" in p.read_bytes() for p in (directory / "appendonlydir").glob("*.incr.aof")), 10,
                 what="the write in the append-only file")
    finally:
        server.stop()
    modes = private_modes(directory)
    assert set(modes) >= {".", "appendonlydir", "appendonlydir/appendonly.aof.manifest", "appendonlydir/old.aof",
                          "redis.conf"}, modes
    assert all(mode == ("0o700" if (directory / name).is_dir() else "0o600") for name, mode in modes.items()), modes


def test_redis_runs_with_a_memory_cap_and_refuses_rather_than_evicts(tmp_path):
    state_dir = tmp_path / "state"
    state = up(state_dir, "--workers", "0", "--no-flower")
    try:
        memory = connect(state["broker"]).info("memory")
        assert (memory["maxmemory"], memory["maxmemory_policy"]) == (2 * 2**30, "noeviction")
        assert private_modes(state_dir / "redis")["."] == "0o700"
    finally:
        down(state_dir)
    state = up(state_dir, "--workers", "0", "--no-flower", "--redis-maxmemory", "64mb")
    try:
        kill_redis(state)  # the cap is a setting of the cluster: a restart keeps it
        assert CliRunner().invoke(main, ["cluster", "restart", "--state-dir", str(state_dir)]).exit_code == 0
        assert connect(state["broker"]).info("memory")["maxmemory"] == 64 * 2**20
    finally:
        down(state_dir)
    for size in ("lots", "0", "2 gb", "-1"):
        refused = CliRunner().invoke(main, ["cluster", "up", "--state-dir", str(tmp_path / "no"), "--workers", "0",
                                            "--no-flower", "--redis-maxmemory", size])
        assert refused.exit_code == 2 and f"--redis-maxmemory {size!r}" in refused.output, refused.output


def test_renewed_certificates_are_served_at_once_and_the_old_expiry_is_kept(tmp_path, monkeypatch):
    state_dir = tmp_path / "state"
    monkeypatch.setattr(certificates, "CA_DAYS", 400)  # a CA that outlives the certificates it signs, not by a year
    state = up(state_dir, "--tls", "--workers", "0", "--no-flower")
    monkeypatch.undo()
    try:
        port = state["settings"]["port"]
        for name, path in state["tls"].items():
            monkeypatch.setenv(name, path)
        first = served_certificate(port, state["tls"])
        in_a_year = datetime.now(timezone.utc) + timedelta(days=certificates.CERTIFICATE_DAYS)
        assert abs(first["not_after"] - in_a_year) < timedelta(hours=1), first
        held = connect(state["broker"])
        held.set("memfarm:before", "1")

        result = CliRunner().invoke(main, ["cluster", "renew-certs", "--state-dir", str(state_dir)])
        assert result.exit_code == 0, result.output
        renewed = json.loads((state_dir / "cluster.json").read_text())
        second = served_certificate(port, state["tls"])
        assert second["serial"] != first["serial"] and second["serial"] == renewed["certificates"]["server.crt"]["serial"]
        replaced = renewed["replaced_certificates"][-1]["certificates"]
        assert replaced["server.crt"]["serial"] == first["serial"]
        assert datetime.fromisoformat(replaced["server.crt"]["not_after"]) == first["not_after"]
        assert renewed["certificates"]["ca.crt"] == replaced["ca.crt"], "the same CA while it has a year left"
        assert held.get("memfarm:before") == b"1", "a connection made before the renewal carries on"
        assert connect(state["broker"]).get("memfarm:before") == b"1", "a new one uses the renewed client certificate"

        monkeypatch.setattr(cluster, "CERTIFICATE_DAYS", 500)  # now the CA would end before what it signs
        monkeypatch.setattr(certificates, "CERTIFICATE_DAYS", 500)  # ... and what it signs says so
        old_ca = (state_dir / "tls" / "ca.crt").read_bytes()
        old_client = tmp_path / "old"
        old_client.mkdir()
        for name in ("client.crt", "client.key"):
            (old_client / name).write_bytes((state_dir / "tls" / name).read_bytes())
        again = CliRunner().invoke(main, ["cluster", "renew-certs", "--state-dir", str(state_dir)])
        assert again.exit_code == 0 and "a new CA" in again.output, again.output
        latest = json.loads((state_dir / "cluster.json").read_text())["certificates"]
        assert datetime.fromisoformat(latest["ca.crt"]["not_after"]) > in_a_year + timedelta(days=1000)
        assert (state_dir / "tls" / "ca.crt").read_bytes() != old_ca
        for name, path in state["tls"].items():
            monkeypatch.setenv(name, path)
        assert connect(state["broker"]).get("memfarm:before") == b"1", "Redis serves a certificate of the new CA"
        monkeypatch.setenv("MEMFARM_TLS_CERT", str(old_client / "client.crt"))  # a client of the old CA is refused
        monkeypatch.setenv("MEMFARM_TLS_KEY", str(old_client / "client.key"))
        with pytest.raises(MemfarmError, match="cannot reach redis"):
            connect(state["broker"])
    finally:
        down(state_dir)


def test_a_machine_has_credentials_of_its_own_and_revoking_it_closes_its_connections(tmp_path, monkeypatch):
    state_dir = tmp_path / "state"
    state = up(state_dir, "--tls", "--workers", "0", "--no-flower")
    try:
        for name in ("a", "b"):
            result = CliRunner().invoke(main, ["cluster", "add-machine", f"gpu-{name}", "--state-dir", str(state_dir)])
            assert result.exit_code == 0, result.output
        folder = state_dir / "machines" / "gpu-a"
        kept = tmp_path / "on-gpu-a"  # what was copied to the machine, still there after its revocation
        shutil.copytree(folder, kept)
        assert private_modes(folder) == {".": "0o700", "ca.crt": "0o600", "client.crt": "0o600",
                                         "client.key": "0o600", "worker.env": "0o600"}
        env = dict(line.split("=", 1) for line in (folder / "worker.env").read_text().splitlines())
        assert env["MEMFARM_BROKER"].startswith("rediss://worker-gpu-a:")
        for name in ("MEMFARM_TLS_CA", "MEMFARM_TLS_CERT", "MEMFARM_TLS_KEY"):  # the machine's own files
            monkeypatch.setenv(name, str(kept / env[name]))
        assert (folder / "client.crt").read_bytes() != (state_dir / "tls" / "client.crt").read_bytes()
        machine = connect(env["MEMFARM_BROKER"])
        machine.set("memfarm:from-gpu-a", "1")  # a worker's rights on the farm's keys
        with pytest.raises(redis.exceptions.NoPermissionError):
            machine.execute_command("CONFIG", "GET", "*")
        duplicate = CliRunner().invoke(main, ["cluster", "add-machine", "gpu-a", "--state-dir", str(state_dir)])
        assert duplicate.exit_code == 2 and "already" in duplicate.output
        bad = CliRunner().invoke(main, ["cluster", "add-machine", "../x", "--state-dir", str(state_dir)])
        assert bad.exit_code == 2 and "machine name '../x' is not valid" in bad.output

        result = CliRunner().invoke(main, ["cluster", "revoke-machine", "gpu-a", "--state-dir", str(state_dir)])
        assert result.exit_code == 0, result.output
        with pytest.raises(redis.exceptions.ConnectionError):  # its open connection is closed at once
            machine.execute_command("GET", "memfarm:from-gpu-a")
        with pytest.raises(Exception, match="refused the credentials"):  # and it cannot log in again
            connect(env["MEMFARM_BROKER"])
        assert not folder.exists()
        revoked = json.loads((state_dir / "cluster.json").read_text())["revoked_machines"]["gpu-a"]
        assert revoked["user"] == "worker-gpu-a" and revoked["certificate"]["not_after"]

        kill_redis(state)  # a restarted Redis has the machines still added, and not the revoked one
        assert CliRunner().invoke(main, ["cluster", "restart", "--state-dir", str(state_dir)]).exit_code == 0
        with pytest.raises(Exception, match="refused the credentials"):
            connect(env["MEMFARM_BROKER"])
        other = state_dir / "machines" / "gpu-b"
        other_env = dict(line.split("=", 1) for line in (other / "worker.env").read_text().splitlines())
        for name in ("MEMFARM_TLS_CA", "MEMFARM_TLS_CERT", "MEMFARM_TLS_KEY"):
            monkeypatch.setenv(name, str(other / other_env[name]))
        assert connect(other_env["MEMFARM_BROKER"]).ping()
        missing = CliRunner().invoke(main, ["cluster", "revoke-machine", "gpu-a", "--state-dir", str(state_dir)])
        assert missing.exit_code == 2 and "its machines: gpu-b" in missing.output
    finally:
        down(state_dir)
