"""Security by default, against real processes: allow-listed code, no password at rest or on a command line."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.errors import MemfarmError
from coordinator.cli import main
from coordinator.operations.processes import process_alive as alive
from coordinator.running.farm_run import watch
from coordinator.running.run_ledger import RunLedger, connect
from tests.farm_support import PASSWORD, REPO, wait_for
from tests.helpers import write_dataset
from workers.farm.app import make_app

pytestmark = [pytest.mark.server, pytest.mark.slow]
FAST = {"MEMFARM_TASK_TIME_LIMIT": "60", "MEMFARM_VISIBILITY_TIMEOUT": "65"}


@pytest.fixture()
def farm(monkeypatch, redis_server, workers):
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)

    def worker(name, *extra):
        return workers(redis_server.url, name, *extra).wait_ready()

    return redis_server, worker


def test_a_run_naming_code_the_worker_was_not_given_is_refused_before_import(farm, tmp_path):
    server, worker = farm
    marker = tmp_path / "evil-ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('imported')\nclass Evil:\n    name = 'evil'\n")
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.04)
    ledger = RunLedger(connect(server.url))
    runs = {}
    for run_id, system in (("evil-file", f"{evil}:Evil"), ("evil-module", "os:getpid")):
        result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(data), "--run-id", run_id],
                                    env={"MEMFARM_BROKER": server.url})
        assert result.exit_code == 0, result.output
        meta = ledger.meta(run_id)
        meta["system"] = system  # what anyone with write access to Redis could do
        ledger.r.set(ledger._key(run_id, "meta"), json.dumps(meta))
        runs[run_id] = system
    worker("w1")
    app = make_app(server.url)
    for run_id, system in runs.items():
        state = watch(ledger, app, run_id, timeout=120)
        assert state["final_failures"] == 2 and state["done"] == 0
        error = ledger.info(run_id, ledger.order(run_id)[0])["error"]
        assert "not allowed on this worker" in error and system in error
    assert not marker.exists(), "the worker imported code it was never allowed to run"


def test_an_allowed_user_system_runs_on_the_farm(farm, tmp_path):
    server, worker = farm
    spy = REPO / "tests" / "adapters" / "systems" / "spy_system.py"
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.04)
    worker("allowing", "--allow-system", f"{spy}:Misbehaving")
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data),
                                       "--system", f"{spy}:Misbehaving", "--output", str(tmp_path / "r.json")],
                                env={"MEMFARM_BROKER": server.url})
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["system"] == "misbehaving" and results["failed"] == 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        path = Path(f"/proc/{current}/task/{current}/children")
        if path.exists():
            todo += [int(p) for p in path.read_text().split()]
    return found


def _command_lines_over_the_run(roots: list[int], done, timeout: float = 300) -> dict[int, set[str]]:
    """Every command line each process under `roots` shows, read from /proc again and again until `done()`:
    a process that starts late, lives briefly or changes its command line (exec) is seen too."""
    seen: dict[int, set[str]] = {}
    deadline = time.monotonic() + timeout
    while True:
        for pid in {pid for root in roots for pid in _tree(root)}:
            command_line = _cmdline(pid)
            if command_line:
                seen.setdefault(pid, set()).add(command_line)
        if done(seen):
            return seen
        if time.monotonic() > deadline:
            raise TimeoutError(f"the run did not end within {timeout} s; command lines seen: {seen}")
        time.sleep(0.05)


def test_no_password_in_any_file_key_log_or_command_line(farm, tmp_path, monkeypatch):
    server, worker = farm
    monkeypatch.chdir(tmp_path)
    data = write_dataset(tmp_path / "d.json", questions=3, seed=4, scale=0.04)
    w = worker("w1")
    for _ in range(2):
        args = ["-v", "run", "longmemeval", "--dataset", str(data)]
        monkeypatch.setattr(sys, "argv", ["memfarm", *args])  # the command line every results file records
        result = CliRunner().invoke(main, args, env={"MEMFARM_BROKER": server.url})
        assert result.exit_code == 0, result.output
        assert PASSWORD not in result.output
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--output", "results/local.json"])
    assert result.exit_code == 0, result.output
    env = dict(os.environ, PYTHONPATH=str(REPO), MEMFARM_BROKER=server.url, MEMFARM_FLOWER_USER="u",
               MEMFARM_FLOWER_PASSWORD="flower-secret-9")
    from coordinator.operations.processes import free_port

    flower = subprocess.Popen([sys.executable, "-m", "coordinator.cli", "flower", "--port", str(free_port())],
                              cwd=REPO, env=env,
                              stdout=open(tmp_path / "flower.log", "ab"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    coordinator = subprocess.Popen([sys.executable, "-m", "coordinator.cli", "run", "longmemeval", "--dataset",
                                    str(data), "--output", str(tmp_path / "results" / "sub.json")], cwd=REPO,
                                   env=dict(os.environ, PYTHONPATH=str(REPO), MEMFARM_BROKER=server.url),
                                   stdout=open(tmp_path / "coordinator.log", "ab"), stderr=subprocess.STDOUT)
    try:
        def ended(seen):  # the coordinator has exited, and Flower was seen after its exec into celery
            lines = [line for lines in seen.values() for line in lines]
            return coordinator.poll() is not None and any(" -m celery -A " in line and " flower " in line
                                                          for line in lines)

        seen = _command_lines_over_the_run([server.proc.pid, w.proc.pid, flower.pid, coordinator.pid], ended)
        assert coordinator.wait() == 0, (tmp_path / "coordinator.log").read_text()
        lines = [line for lines in seen.values() for line in lines]
        for command_line in lines:
            assert PASSWORD not in command_line and "flower-secret-9" not in command_line, command_line
        assert any("redis-server" in line for line in lines) and any(" run longmemeval " in line for line in lines)
        assert set(w.children()) & set(seen), "the worker's pool processes were read too"
    finally:
        os.killpg(flower.pid, signal.SIGKILL)
        flower.wait()
        if coordinator.poll() is None:
            coordinator.kill()
    files = list((tmp_path / "results").rglob("*.json")) + list(tmp_path.glob("*.log")) + [tmp_path / "redis.log"]
    assert len([f for f in files if f.suffix == ".json"]) >= 8
    for path in files:
        assert PASSWORD not in path.read_text(errors="replace"), path
    client = connect(server.url)
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        values = {"string": lambda: [client.get(key)], "hash": lambda: list(client.hgetall(key).values()),
                  "list": lambda: client.lrange(key, 0, -1), "set": lambda: list(client.smembers(key)),
                  "zset": lambda: [m for m, _ in client.zrange(key, 0, -1, withscores=True)]}[kind]()
        blob = b" ".join(v if isinstance(v, bytes) else str(v).encode() for v in values)
        assert PASSWORD.encode() not in blob, key


def test_flower_without_auth_only_on_loopback(monkeypatch):
    monkeypatch.setenv("MEMFARM_BROKER", "redis://127.0.0.1:1/0")
    result = CliRunner().invoke(main, ["flower", "--no-auth", "--address", "0.0.0.0"])
    assert result.exit_code == 2 and "loopback" in result.output
    result = CliRunner().invoke(main, ["flower", "--no-auth", "--address", "192.168.1.10"])
    assert result.exit_code == 2


def test_cluster_users_have_least_privilege_and_a_farm_run_works_with_them(tmp_path, monkeypatch):
    import redis

    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    state_dir = tmp_path / "state"
    result = CliRunner().invoke(main, ["cluster", "up", "--workers", "1", "--no-flower", "--state-dir", str(state_dir),
                                       "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    try:
        state = json.loads((state_dir / "cluster.json").read_text())
        assert set(state["brokers"]) == {"coordinator", "worker", "monitor"}
        data = write_dataset(tmp_path / "d.json", questions=2, seed=3, scale=0.04)
        run = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data),
                                        "--output", str(tmp_path / "r.json")], env={"MEMFARM_BROKER": state["broker"]})
        assert run.exit_code == 0, run.output + (state_dir / "logs" / "worker1.log").read_text()[-3000:]
        worker = redis.Redis.from_url(state["brokers"]["worker"])
        with pytest.raises(redis.exceptions.NoPermissionError):  # even the coordinator keeps to the farm's keys
            redis.Redis.from_url(state["broker"]).set("outside:secret", "x")
        for command in (("FLUSHALL",), ("CONFIG", "GET", "*"), ("KEYS", "*"), ("GET", "outside:secret"),
                        ("SELECT", "1")):
            with pytest.raises(redis.exceptions.NoPermissionError):
                worker.execute_command(*command)
        assert worker.exists(f"memfarm:{json.loads((tmp_path / 'r.manifest.json').read_text())['farm']['run_id']}:meta")
        port = state["broker"].rsplit(":", 1)[1].split("/")[0]
        # the default user is off: the server answers, and refuses; a server that is not there fails otherwise
        with pytest.raises(redis.exceptions.AuthenticationError, match="(?i)authenticat"):
            redis.Redis(port=int(port)).ping()
    finally:
        CliRunner().invoke(main, ["cluster", "down", "--state-dir", str(state_dir)])


def test_a_tls_cluster_refuses_plain_clients_and_runs_over_rediss(tmp_path, monkeypatch):
    import redis

    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    state_dir = tmp_path / "state"
    result = CliRunner().invoke(main, ["cluster", "up", "--tls", "--workers", "1", "--no-flower", "--state-dir",
                                       str(state_dir), "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    try:
        state = json.loads((state_dir / "cluster.json").read_text())
        assert state["broker"].startswith("rediss://")
        for name, path in state["tls"].items():
            monkeypatch.setenv(name, path)
        plain = state["brokers"]["coordinator"].replace("rediss://", "redis://")
        with pytest.raises(redis.exceptions.ConnectionError):
            redis.Redis.from_url(plain, socket_connect_timeout=3, socket_timeout=3).ping()
        monkeypatch.delenv("MEMFARM_TLS_CERT")  # half a client identity: said, never a TypeError from ssl
        with pytest.raises(MemfarmError, match="MEMFARM_TLS_CERT is not set"):
            connect(state["broker"])
        monkeypatch.delenv("MEMFARM_TLS_KEY")  # no client certificate: the server refuses the handshake
        with pytest.raises(MemfarmError, match="cannot reach redis"):
            connect(state["broker"])
        for name in ("MEMFARM_TLS_CERT", "MEMFARM_TLS_KEY"):
            monkeypatch.setenv(name, state["tls"][name])
        data = write_dataset(tmp_path / "d.json", questions=2, seed=3, scale=0.04)
        run = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data),
                                        "--output", str(tmp_path / "r.json")], env={"MEMFARM_BROKER": state["broker"]})
        assert run.exit_code == 0, run.output + (state_dir / "logs" / "worker1.log").read_text()[-3000:]
        manifest = json.loads((tmp_path / "r.manifest.json").read_text())
        assert manifest["farm"]["broker"].startswith("rediss://coordinator:***@")
        assert manifest["embedding_store"]["texts_encoded"] > 0, "the worker encodes through its machine's store"
        assert (tmp_path / "cache" / "worker1" / "embeddings.sqlite").is_file()
        assert sum(w["items"] for w in manifest["farm"]["workers"].values()) == 2
    finally:
        CliRunner().invoke(main, ["cluster", "down", "--state-dir", str(state_dir)])


def test_a_hub_for_other_machines_listens_on_the_given_address_over_tls(tmp_path, monkeypatch):
    state_dir = tmp_path / "state"
    refused = CliRunner().invoke(main, ["cluster", "up", "--workers", "0", "--no-flower", "--bind", "0.0.0.0",
                                        "--state-dir", str(state_dir)])
    assert refused.exit_code == 2 and "every interface" in refused.output
    result = CliRunner().invoke(main, ["cluster", "up", "--tls", "--workers", "0", "--no-flower", "--bind",
                                       "127.0.0.2", "--state-dir", str(state_dir)])
    assert result.exit_code == 0, result.output
    try:
        state = json.loads((state_dir / "cluster.json").read_text())
        assert set(state["pids"]) == {"redis"}, "a hub runs no worker of its own"
        remote = state["brokers"]["remote_worker"]
        assert remote.startswith("rediss://worker:") and "@127.0.0.2:" in remote
        for name, path in state["tls"].items():
            monkeypatch.setenv(name, path)
        assert connect(remote).ping(), "the server certificate names the bound address"
        doctor = CliRunner().invoke(main, ["doctor", "--quick", "--cache-dir", str(tmp_path)], env={"MEMFARM_BROKER": remote})
        assert "OK    redis" in doctor.output and "over TLS" in doctor.output
        # the hub's machine reboots: `cluster restart` brings back the same Redis, users, certificates and data
        connect(state["broker"]).set("memfarm:survivor", "yes")
        busy = CliRunner().invoke(main, ["cluster", "restart", "--state-dir", str(state_dir)])
        assert busy.exit_code == 2 and "still running (redis)" in busy.output
        time.sleep(1.5)  # appendfsync everysec: what is a second old is on disk
        os.kill(state["pids"]["redis"], signal.SIGKILL)
        wait_for(lambda: not alive(state["pids"]["redis"]), 10)
        again = CliRunner().invoke(main, ["cluster", "restart", "--state-dir", str(state_dir)])
        assert again.exit_code == 0, again.output
        assert connect(remote).ping() and connect(state["broker"]).get("memfarm:survivor") == b"yes"
        assert json.loads((state_dir / "cluster.json").read_text())["brokers"] == state["brokers"]
    finally:
        CliRunner().invoke(main, ["cluster", "down", "--state-dir", str(state_dir)])
