"""`cluster up`'s Redis users against a real redis-server: the ledger survives a crash of Redis, a run whose
items vanished fails, and Flower's monitor user sees everything and can do nothing else."""

import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import redis
from click.testing import CliRunner

from adapters.errors import ResultsError
from coordinator.cli import main
from coordinator.operations.processes import free_port
from coordinator.operations.processes import process_alive as alive
from coordinator.running.farm_run import reduce_farm_run, watch
from coordinator.running.run_ledger import RunLedger, connect
from tests.farm_support import wait_for
from tests.helpers import write_dataset
from workers.farm.app import make_app
from workers.farm.ledger import Ledger

from tests.farm_support import cluster_up

pytestmark = [pytest.mark.server, pytest.mark.usefixtures("cluster")]  # each test starts a cluster
FAST = {"MEMFARM_TASK_TIME_LIMIT": "60", "MEMFARM_VISIBILITY_TIMEOUT": "65"}


def _cluster_up(tmp_path, *args) -> dict:
    return cluster_up(tmp_path / "state", "--cache-dir", str(tmp_path / "cache"), *args)


def _cluster_down(tmp_path):
    CliRunner().invoke(main, ["cluster", "down", "--state-dir", str(tmp_path / "state")])


def _submit(monkeypatch, broker, dataset, *extra) -> str:
    monkeypatch.setenv("MEMFARM_BROKER", broker)
    result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(dataset), *extra])
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()[-1]


def _contents(client, run_id: str) -> dict:
    """Every key of the run with its type and value, as Redis holds them."""
    read = {"string": client.get, "hash": client.hgetall, "list": lambda k: client.lrange(k, 0, -1),
            "set": client.smembers, "zset": lambda k: client.zrange(k, 0, -1, withscores=True)}
    contents = {}
    for key in client.scan_iter(match=f"memfarm:{run_id}:*", count=1000):
        kind = client.type(key).decode()
        contents[key] = (kind, read[kind](key))
    return contents


def test_the_ledger_survives_a_crash_of_redis_under_the_cluster_users(tmp_path, monkeypatch):
    """Staging (MULTI/EXEC pipelines) and every transition (Lua) reach the append-only file as MULTI/EXEC
    blocks; Redis 7.0 checks them against the default user when it loads the file."""
    state = _cluster_up(tmp_path, "--workers", "0", "--no-flower")
    try:
        data = write_dataset(tmp_path / "d.json", questions=3, seed=5, scale=0.04)
        run_id = _submit(monkeypatch, state["broker"], data)
        coordinator = RunLedger(connect(state["broker"]))
        worker = Ledger(connect(state["brokers"]["worker"]))
        first, second, _ = coordinator.order(run_id)
        assert worker.begin(run_id, first, "w1", stale_after=600, max_attempts=3) == ("begun", 1)
        assert worker.finish(run_id, first, 1, {"item_id": first, "records": []})
        assert worker.begin(run_id, second, "w1", stale_after=600, max_attempts=3) == ("begun", 1)
        assert worker.fail(run_id, second, 1, "a failure to retry")
        assert coordinator.requeue(run_id, second)
        before = _contents(coordinator.r, run_id)
        assert before[f"memfarm:{run_id}:order".encode()][1] == [i.encode() for i in (first, second, _)]
        # Killed, not stopped: what the server wrote for each command it answered is all there is. The
        # append-only file has it (written before the reply), whether or not it was fsynced yet.
        os.kill(state["pids"]["redis"], signal.SIGKILL)
        wait_for(lambda: not alive(state["pids"]["redis"]), 10, what="redis-server to die")
        again = CliRunner().invoke(main, ["cluster", "restart", "--state-dir", str(tmp_path / "state")])
        assert again.exit_code == 0, again.output
        log = (tmp_path / "state" / "logs" / "redis.log").read_text()
        assert "NOPERM" not in log, log[-2000:]
        assert _contents(RunLedger(connect(state["broker"])).r, run_id) == before
        assert coordinator.state(run_id, first) == "done" and coordinator.state(run_id, second) == "queued"

        # the default user lets the file load, and nobody in
        port = int(state["broker"].rsplit(":", 1)[1].split("/")[0])

        def anonymous():  # RESP2: a client that sends nothing on connecting, as redis-cli does; one try each
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            return redis.Redis(port=port, socket_timeout=5, protocol=2, retry=Retry(NoBackoff(), 0))

        with pytest.raises(redis.exceptions.RedisError, match="NOAUTH|Authentication required"):
            anonymous().set("memfarm:x", "y")
        for guess in ["", "default", "nopass", state["users"]["coordinator"], "0" * 64]:
            with pytest.raises(redis.exceptions.RedisError, match="WRONGPASS|invalid username-password"):
                anonymous().execute_command("AUTH", "default", guess)
            with pytest.raises(redis.exceptions.RedisError, match="WRONGPASS|invalid username-password"):
                anonymous().execute_command("HELLO", "3", "AUTH", "default", guess)
    finally:
        _cluster_down(tmp_path)


def test_a_run_whose_items_vanished_from_redis_fails(redis_server, tmp_path, monkeypatch):
    """What a Redis that loaded its plain commands but not its transactions leaves: each item's state (HSETNX)
    without its payload, its place in the order or any outcome. The workers fail each one "never staged"."""
    data = write_dataset(tmp_path / "d.json", questions=3, seed=5, scale=0.04)
    run_id = _submit(monkeypatch, redis_server.url, data)
    ledger = RunLedger(connect(redis_server.url))
    items = ledger.order(run_id)
    ledger.r.delete(f"memfarm:{run_id}:order", *(f"memfarm:{run_id}:item:{i}" for i in items))
    for item_id in items:
        ledger.r.hset(f"memfarm:{run_id}:state", item_id, "failed_final")
    app = make_app(redis_server.url)
    with pytest.raises(ResultsError, match=f"run {run_id}: 3 of its 3 staged items are gone from Redis") as caught:
        reduce_farm_run(ledger, run_id)
    assert all(item_id in str(caught.value) for item_id in items)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["reduce", run_id, "--output", str(out)])
    assert result.exit_code != 0 and "staged items are gone from Redis" in result.output, result.output
    assert not out.exists(), "no results file of 0 questions"

    ledger.r.delete(f"memfarm:{run_id}:state")  # and where the states went too, the watch says so at once
    with pytest.raises(ResultsError, match="3 of its 3 staged items are gone"):
        watch(ledger, app, run_id, timeout=30)


def _flower_get(port: int, path: str, auth: str) -> tuple[int | None, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return None, ""


def _chromium_page(url: str, screenshot) -> str:
    """The DOM of `url` once its scripts ran (the tasks table is filled by a request of its own), and a
    screenshot of it."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.fail("chromium is not installed (tools/system-packages installs it)")
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000"]
    dom = subprocess.run(args + ["--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    subprocess.run(args + [f"--screenshot={screenshot}", "--window-size=1600,1000", url], capture_output=True,
                   timeout=120)
    return dom


def _request_answer_in(control, exchange: str, routing_key: str) -> None:
    """A ping whose answer is to go to `routing_key` of `exchange`, as any publisher on the control channel
    may ask."""
    mailbox = control.mailbox
    with control.app.connection_for_write() as connection:
        bound = mailbox(connection)
        body = {"method": "ping", "arguments": {}, "destination": None, "pattern": None, "matcher": None,
                "ticket": "forged", "reply_to": {"exchange": exchange, "routing_key": routing_key}}
        control.app.amqp.Producer(connection.default_channel).publish(
            body, exchange=bound.exchange, declare=[bound.exchange], routing_key="", serializer="json")


@pytest.mark.slow
@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_flower_sees_a_cluster_run_and_its_monitor_user_can_do_nothing_else(tmp_path, monkeypatch, tls, chromium):
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MEMFARM_FLOWER_USER", "watcher")
    monkeypatch.setenv("MEMFARM_FLOWER_PASSWORD", "flower-pw-1")
    flower_port = free_port()
    state = _cluster_up(tmp_path, "--workers", "1", "--flower-port", str(flower_port), *(["--tls"] if tls else []))
    logs = tmp_path / "state" / "logs"
    try:
        for name, path in state.get("tls", {}).items():
            monkeypatch.setenv(name, path)
        wait_for(lambda: "ready." in (logs / "worker1.log").read_text(errors="replace"), 120, what="worker1")
        auth = "watcher:flower-pw-1"

        def hears_worker1():  # events are not kept: Flower shows the tasks that ran while it listened
            status, body = _flower_get(flower_port, "/api/workers?status=1", auth)
            return status == 200 and any(name.startswith("worker1@") for name in json.loads(body))

        wait_for(hears_worker1, 60, what=f"Flower to hear worker1's events ({logs / 'flower.log'})")
        data = write_dataset(tmp_path / "d.json", questions=2, seed=3, scale=0.04)
        monkeypatch.setenv("MEMFARM_BROKER", state["broker"])
        run = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--output",
                                        str(tmp_path / "r.json")])
        assert run.exit_code == 0, run.output + (logs / "worker1.log").read_text()[-3000:]
        run_id = json.loads((tmp_path / "r.manifest.json").read_text())["farm"]["run_id"]
        items = RunLedger(connect(state["broker"])).order(run_id)

        def workers():
            status, body = _flower_get(flower_port, "/api/workers?refresh=1", auth)
            return body if status == 200 and "worker1@" in body else None

        listed = wait_for(workers, 60, what=f"Flower to list worker1 ({logs / 'flower.log'})")
        assert '"registered"' in listed and "memfarm.evaluate_item" in listed, "inspect answers reach Flower"
        assert not any(password in listed for password in state["users"].values())

        def tasks():
            status, body = _flower_get(flower_port, "/api/tasks", auth)
            found = json.loads(body) if status == 200 else {}
            ours = [t for t in found.values() if run_id in (t.get("args") or "") and t.get("state") == "SUCCESS"]
            return ours if len(ours) == len(items) else None

        ours = wait_for(tasks, 60, what="Flower to list the run's tasks")
        assert sorted(i for t in ours for i in items if i in t["args"]) == sorted(items)
        screenshot = tmp_path / "flower-tasks.png"
        dom = _chromium_page(f"http://{auth}@127.0.0.1:{flower_port}/tasks", screenshot)
        assert f"Showing 1 to {len(items)} of {len(items)} tasks" in dom, dom[-3000:]
        for task in ours:  # the page's rows: name, id, state and worker of each of the run's tasks
            row = dom[dom.index(f'title="{task["uuid"]}"') - 600:][:1500]
            # named by its run and item (the message's shadow name), never by the bare task name
            assert f"evaluate_item {run_id}/" in row and "SUCCESS" in row and "worker1@" in row, row
        assert screenshot.stat().st_size > 10_000, "a page was drawn"

        from workers.farm.app import make_monitor_app

        monitor_url = state["brokers"]["monitor"]
        monitor = connect(monitor_url)
        refused = [("LPUSH", "memfarm", "not json"), ("LREM", f"memfarm:{run_id}:order", "0", items[0]),
                   ("GET", f"memfarm:{run_id}:meta"), ("DEL", "_kombu.binding.memfarm"), ("SET", "unacked_mutex", "x"),
                   ("CLIENT", "PAUSE", "60000"), ("CLIENT", "KILL", "USER", "worker"), ("CLIENT", "LIST"),
                   ("CONFIG", "SET", "appendonly", "no"), ("FLUSHALL",), ("INFO",)]
        for command in refused:
            with pytest.raises(redis.exceptions.NoPermissionError):
                monitor.execute_command(*command)
        assert monitor.llen("memfarm") == 0, "Flower may read the queue's length"
        control = make_monitor_app(monitor_url).control
        answers = control.broadcast("shutdown", reply=True, timeout=5)
        assert answers and all("error" in a[name] and "shutdown" in a[name]["error"] for a in answers for name in a)
        assert alive(state["pids"]["worker1"])
        # A request names where its answer goes: never a farm key, not even through a binding the asker made.
        order_key = f"memfarm:{run_id}:order"
        forged = "0f0f0f0f-0000-4000-8000-000000000000"
        monitor.sadd("_kombu.binding.reply.celery.pidbox", f"{forged}\x06\x16\x06\x16{order_key}")
        _request_answer_in(control, "", order_key)
        _request_answer_in(control, "reply.celery.pidbox", forged)
        # answers come in the order the worker took the requests: once this one is in, so would theirs be
        assert any(name.startswith("worker1@") for name in control.inspect(timeout=5).ping() or {})
        assert RunLedger(connect(state["broker"])).order(run_id) == items
        flower_log = (logs / "flower.log").read_text(errors="replace")
        for symptom in ("NOPERM", "NoPermission", "permission", "Failed to capture events"):
            assert symptom not in flower_log, flower_log[-3000:]
    finally:
        _cluster_down(tmp_path)
