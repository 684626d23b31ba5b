"""The farm against a real redis-server and real `memfarm worker` processes."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import zlib

import pytest
from click.testing import CliRunner

from adapters.benchmarks.longmemeval.reader import extract_questions
from coordinator.cli import main
from coordinator.running.farm_run import reduce_farm_run, watch
from coordinator.running.run_ledger import RunLedger, connect
from tests.farm_support import REPO, wait_for
from tests.helpers import write_dataset
from workers.farm.app import make_app

pytestmark = [pytest.mark.server, pytest.mark.slow]

#: Short limits so a lost worker's message comes back quickly in tests.
FAST = {"MEMFARM_TASK_TIME_LIMIT": 60, "MEMFARM_VISIBILITY_TIMEOUT": 65}


@pytest.fixture(autouse=True)
def _fast_limits(monkeypatch):
    for key, value in FAST.items():
        monkeypatch.setenv(key, str(value))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("farm")
    path = write_dataset(folder / "data.json", questions=12, seed=8, scale=0.04)
    extract_questions(path, folder / "questions.json")
    big = write_dataset(folder / "big.json", questions=3, seed=9, scale=0.3)
    return {"small": path, "questions": folder / "questions.json", "big": big, "folder": folder}


@pytest.fixture(scope="module")
def local_results(data):
    out = data["folder"] / "local.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data["small"]),
                                       "--questions", str(data["questions"]), "--output", str(out),
                                       "--cache-dir", str(data["folder"] / "local_cache")])  # with its embedding store
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def _comparable(records):
    return [(r["question_id"], r["status"], r["metrics"], [c["id"] for c in r.get("candidates", [])]) for r in records]


def _submit(broker, dataset, *extra):
    result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(dataset), *extra], env={"MEMFARM_BROKER": broker})
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()[-1]


def _one_record_per_question(results, dataset):
    ids = [q["question_id"] for q in json.loads(dataset.read_text())]
    assert sorted(r["question_id"] for r in results["records"]) == sorted(ids)


def test_two_workers_give_the_local_records(redis_server, workers, data, local_results, tmp_path, chromium):
    for name in ("w1", "w2"):
        workers(redis_server.url, name).wait_ready()
    out = tmp_path / "farm.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data["small"]), "--questions",
                                       str(data["questions"]), "--output", str(out),
                                       "--cache-dir", str(tmp_path / "unused")], env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 0, result.output
    # off a terminal: one line per change of the counts, each with an ETA; the warning once
    progress = [line for line in result.stderr.splitlines() if line.startswith("run ") and "finished:" in line]
    assert len(progress) >= 3 and all(" ETA " in line for line in progress)
    assert len(progress) == len(set(progress)), "a line is printed only when something changed"
    assert progress[-1].split(": ", 1)[1].startswith("12/12 finished: done 12  running 0  queued 0")
    assert result.stderr.count("--cache-dir is not used by a farm run") == 1
    farm = json.loads(out.read_text())
    assert _comparable(farm["records"]) == _comparable(local_results["records"])
    assert farm["metrics"] == local_results["metrics"]
    manifest = json.loads((tmp_path / "farm.manifest.json").read_text())
    block = manifest["farm"]
    assert sum(w["items"] for w in block["workers"].values()) == 12
    assert len(block["workers"]) == 2, "both workers should have taken items"
    assert all(t["queue_wait_ms"] is not None and t["run_ms"] is not None for t in block["items"])
    assert manifest["embedding_store"]["texts_encoded"] > 0, "the workers encoded through their embedding stores"
    assert "s3cret" not in json.dumps(manifest)
    # the HTML report's farm section, as a browser renders it
    page = tmp_path / "farm.html"
    report = CliRunner().invoke(main, ["analyze", str(out), "--html", str(page)])
    assert report.exit_code == 0, report.output
    shot = tmp_path / "farm_report.png"
    dom = chromium(page, shot, height=5200)  # tall enough to hold the farm section
    assert "id=\"farm-0\"" in dom and "Farm run " in dom
    assert "alt=\"farm_workers_0\"" in dom and "alt=\"farm_timeline_0\"" in dom
    assert all(name in dom for name in block["workers"]) and "Retries (" in dom and "Failures (0)" in dom
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000


def test_a_killed_pool_process_reruns_its_item_once(redis_server, workers, data, tmp_path):
    worker = workers(redis_server.url, "w1").wait_ready()
    ledger = RunLedger(connect(redis_server.url))
    run_id = _submit(redis_server.url, data["big"])
    victim = wait_for(lambda: next((i for i, s in ledger.states(run_id).items() if s == "started"), None),
                      what="an item to start")
    inspect = make_app(redis_server.url).control.inspect(timeout=1)

    def holder():  # the pool process the worker has handed the victim's task to (celery: "accepted")
        active = inspect.active() or {}
        return next((task["worker_pid"] for tasks in active.values() for task in tasks
                     if victim in task.get("args", ()) and task.get("worker_pid")), None)

    pid = wait_for(holder, what=f"a pool process to hold item {victim}")
    assert pid in worker.children()
    os.kill(pid, signal.SIGKILL)
    state = watch(ledger, make_app(redis_server.url), run_id, timeout=240)
    assert state["done"] == 3
    assert ledger.attempts(run_id)[victim] == 2
    results, _ = reduce_farm_run(ledger, run_id)
    _one_record_per_question(results, data["big"])


def test_a_killed_worker_hands_its_item_to_another(redis_server, workers, data):
    first = workers(redis_server.url, "w1").wait_ready()
    ledger = RunLedger(connect(redis_server.url))
    run_id = _submit(redis_server.url, data["big"])
    victim = wait_for(lambda: next((i for i, s in ledger.states(run_id).items() if s == "started"), None),
                      what="an item to start")
    first.kill_all()
    workers(redis_server.url, "w2").wait_ready()
    state = watch(ledger, make_app(redis_server.url), run_id, timeout=240)
    assert state["done"] == 3
    assert ledger.info(run_id, victim)["worker"].startswith("w2@")
    results, _ = reduce_farm_run(ledger, run_id)
    _one_record_per_question(results, data["big"])


def test_a_poison_item_fails_for_good_then_requeue_runs_it(redis_server, workers, data, tmp_path):
    ledger = RunLedger(connect(redis_server.url))
    run_id = _submit(redis_server.url, data["small"], "--max-attempts", "2", "--limit", "4")
    poison = ledger.order(run_id)[1]
    key = f"memfarm:{run_id}:item:{poison}"
    good_payload = ledger.r.get(key)
    broken = ledger.load_item(run_id, poison)  # whole, as a worker sees it: turns joined from the staged sessions
    broken["turns"][0]["text"] = 12345  # the engine rejects a non-string text, every time
    ledger.r.set(key, zlib.compress(json.dumps(broken).encode()))
    workers(redis_server.url, "w1").wait_ready()
    app = make_app(redis_server.url)
    state = watch(ledger, app, run_id, timeout=180)
    assert state["done"] == 3 and state["final_failures"] == 1
    assert ledger.attempts(run_id)[poison] == 2
    assert "InvalidTextError" in ledger.info(run_id, poison)["error"]
    result = CliRunner().invoke(main, ["reduce", run_id, "--output", str(tmp_path / "r.json")], env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "r.manifest.json").read_text())
    assert [f["item_id"] for f in manifest["farm"]["failures"]] == [poison]
    assert "InvalidTextError" in manifest["failures"][0]["error"]

    ledger.r.set(key, good_payload)
    result = CliRunner().invoke(main, ["requeue", run_id, "--failed"], env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 0 and "requeued 1" in result.output
    state = watch(ledger, app, run_id, timeout=180)
    assert state["done"] == 4 and state["failed"] == 0


def test_resume_after_the_coordinator_died(redis_server, workers, data, tmp_path):
    workers(redis_server.url, "w1").wait_ready()
    ledger = RunLedger(connect(redis_server.url))
    coordinator = subprocess.Popen(
        [sys.executable, "-m", "coordinator.cli", "run", "longmemeval", "--dataset", str(data["small"]),
         "--run-id", "dying-run", "--output", str(tmp_path / "never.json")],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO), MEMFARM_BROKER=redis_server.url), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: ledger.r.exists("memfarm:dying-run:meta") and
             sum(s == "done" for s in ledger.states("dying-run").values()) >= 2, what="two items done")
    coordinator.kill()
    coordinator.wait()
    done_before = {i: ledger.info("dying-run", i)["finished_at"]
                   for i, s in ledger.states("dying-run").items() if s == "done"}
    out = tmp_path / "resumed.json"
    result = CliRunner().invoke(main, ["resume", "dying-run", "--output", str(out)], env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 0, result.output
    for item_id, finished in done_before.items():
        assert ledger.info("dying-run", item_id)["finished_at"] == finished, f"{item_id} ran again"
        assert ledger.attempts("dying-run")[item_id] == 1
    _one_record_per_question(json.loads(out.read_text()), data["small"])


def test_the_same_item_twice_leaves_one_record(redis_server, data, monkeypatch):
    monkeypatch.setenv("MEMFARM_BROKER", redis_server.url)
    from workers.farm.tasks import process_item

    ledger = RunLedger(connect(redis_server.url))
    run_id = _submit(redis_server.url, data["small"], "--limit", "2")
    item_id = ledger.order(run_id)[0]
    assert process_item(ledger, run_id, item_id, "inline") == "done"
    first = ledger.outcome(run_id, item_id)
    assert process_item(ledger, run_id, item_id, "inline") == "already done"
    assert not ledger.requeue(run_id, item_id), "a done item is never queued again"
    assert process_item(ledger, run_id, item_id, "inline") == "already done"
    assert process_item(ledger, run_id, "never-staged", "inline") == "unknown"
    assert process_item(ledger, "no-such-run", item_id, "inline") == "unknown run"
    assert ledger.attempts(run_id)[item_id] == 1, "a done item is never run again"
    assert ledger.outcome(run_id, item_id) == first, "its outcome is the first run's, never overwritten"
    assert len(first["records"]) == 1


@pytest.mark.parametrize("setting, shown", [
    ({"MEMFARM_MAX_SEQ_LENGTH": 128}, "'max_seq_length': 128"),
    ({"MEMFARM_EMBEDDER_BACKEND": "onnx"}, "'backend': 'onnxruntime/fp32-fused'"),
])
def test_a_worker_with_another_signature_refuses(redis_server, workers, data, setting, shown):
    workers(redis_server.url, "odd", **setting).wait_ready()
    ledger = RunLedger(connect(redis_server.url))
    run_id = _submit(redis_server.url, data["small"], "--limit", "2")
    state = watch(ledger, make_app(redis_server.url), run_id, timeout=120)
    assert state["final_failures"] == 2 and state["done"] == 0
    error = ledger.info(run_id, ledger.order(run_id)[0])["error"]
    assert "refused by odd@" in error and "embedding signature" in error and shown in error


def test_the_farm_runs_the_system_it_was_given(redis_server, workers, data, tmp_path):
    """--system with --broker is honoured: the worker rebuilds adamem with the run's ablation."""
    args = ["run", "longmemeval", "--dataset", str(data["small"]), "--questions", str(data["questions"]),
            "--system", "adamem", "--ablation", "semantic_only", "--limit", "3"]
    local = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "local.json")])
    assert local.exit_code == 0, local.output
    workers(redis_server.url, "w1").wait_ready()
    farm = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "farm.json")], env={"MEMFARM_BROKER": redis_server.url})
    assert farm.exit_code == 0, farm.output
    local_results, farm_results = (json.loads((tmp_path / f).read_text()) for f in ("local.json", "farm.json"))
    assert farm_results["system"] == "adamem" and farm_results["retrieval_mode"] == "adamem:semantic_only"
    assert _comparable(farm_results["records"]) == _comparable(local_results["records"])
    assert json.loads((tmp_path / "farm.manifest.json").read_text())["system"]["ablation"] == "semantic_only"


def test_wrong_redis_password_is_one_clear_line(redis_server):
    wrong = redis_server.url.replace("s3cret-test-pass", "nope")
    result = CliRunner().invoke(main, ["status", "any-run"], env={"MEMFARM_BROKER": wrong})
    assert result.exit_code == 2
    assert "refused the credentials" in result.output and "nope" not in result.output
    missing = redis_server.url.replace(":s3cret-test-pass@", "")
    result = CliRunner().invoke(main, ["status", "any-run", "--broker", missing])
    assert result.exit_code == 2 and "needs a password" in result.output


def test_flower_answers_with_credentials_and_refuses_without(redis_server, tmp_path):
    import base64
    import urllib.error
    import urllib.request

    from coordinator.operations.processes import free_port

    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO), MEMFARM_FLOWER_USER="admin", MEMFARM_FLOWER_PASSWORD="pw-123",
               MEMFARM_BROKER=redis_server.url)
    log = tmp_path / "flower.log"
    flower = subprocess.Popen([sys.executable, "-m", "coordinator.cli", "flower",
                               "--port", str(port)], cwd=REPO, env=env, stdout=open(log, "ab"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api/workers"
    try:
        def status(auth):
            request = urllib.request.Request(url)
            if auth:
                request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
            try:
                return urllib.request.urlopen(request, timeout=5).status
            except urllib.error.HTTPError as exc:
                return exc.code
            except OSError:
                return None

        assert wait_for(lambda: status("admin:pw-123"), timeout=60, what=f"flower ({log})") == 200
        assert status(None) == 401
        assert status("admin:wrong") == 401
    finally:
        os.killpg(flower.pid, signal.SIGKILL)
        flower.wait()


def test_flower_refuses_to_start_without_credentials(monkeypatch):
    monkeypatch.delenv("MEMFARM_FLOWER_USER", raising=False)
    monkeypatch.delenv("MEMFARM_FLOWER_PASSWORD", raising=False)
    result = CliRunner().invoke(main, ["flower", "--broker", "redis://127.0.0.1:1/0"])
    assert result.exit_code == 2 and "MEMFARM_FLOWER_USER" in result.output


def test_cluster_up_and_down(tmp_path):
    state_dir = tmp_path / "state"
    result = CliRunner().invoke(main, ["cluster", "up", "--workers", "1", "--no-flower", "--state-dir", str(state_dir),
                                       "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    state = json.loads((state_dir / "cluster.json").read_text())
    broker = state["broker"]
    assert oct((state_dir / "cluster.json").stat().st_mode)[-3:] == "600"
    wait_for(lambda: "ready." in (state_dir / "logs" / "worker1.log").read_text(errors="replace"), timeout=60,
             what="cluster worker")
    assert connect(broker).ping()
    result = CliRunner().invoke(main, ["cluster", "down", "--state-dir", str(state_dir)])
    assert result.exit_code == 0 and "stopped 2" in result.output
    for pid in state["pids"].values():
        wait_for(lambda: not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2],
                 timeout=20, what=f"pid {pid} to stop")


def test_full_mode_with_weights_runs_the_same_on_the_farm(redis_server, workers, data, tmp_path):
    weights = tmp_path / "weights.json"
    weights.write_text(json.dumps({"weights": {"semantic": 0.7, "token": 0.2, "phrase": 0.1}}))
    common = ["run", "longmemeval", "--dataset", str(data["small"]), "--questions", str(data["questions"]),
              "--retrieval-mode", "full", "--weights", str(weights), "--limit", "3"]
    # here with the embedding store, there without: a vector does not depend on which texts shared its batch
    local = CliRunner().invoke(main, [*common, "--output", str(tmp_path / "local.json"), "--cache-dir",
                                      str(tmp_path / "local_cache")])
    assert local.exit_code == 0, local.output
    workers(redis_server.url, "w1").wait_ready()
    farm = CliRunner().invoke(main, [*common, "--output", str(tmp_path / "farm.json"), "--no-embedding-store"],
                              env={"MEMFARM_BROKER": redis_server.url})
    assert farm.exit_code == 0, farm.output
    local_manifest = json.loads((tmp_path / "local.manifest.json").read_text())
    assert local_manifest["embedding_store"]["texts_encoded"] > 0
    manifest = json.loads((tmp_path / "farm.manifest.json").read_text())
    assert manifest["embedding_store"]["texts_encoded"] == 0, "the run said no store: the worker used none"
    local_results = json.loads((tmp_path / "local.json").read_text())
    farm_results = json.loads((tmp_path / "farm.json").read_text())
    assert _comparable(farm_results["records"]) == _comparable(local_results["records"])
    used = farm_results["settings_system"]["ranking"]["weights"]
    assert used == {"semantic": 0.7, "token": 0.2, "phrase": 0.1}
    first = farm_results["records"][0]["candidates"][0]["diagnostics"]["ranking"]
    assert first["contributions"]["semantic"] == pytest.approx(0.7 * first["signals"]["semantic"])


def _inflated(path, target, index, copies):
    """The dataset with question `index`'s haystack repeated `copies` times under new session ids, each copy's
    texts marked with its number: no store, cache or batching can collapse them into one encoding."""
    data = json.loads(path.read_text())
    question = data[index]
    ids, sessions, dates = [], [], []
    for copy in range(copies):
        for sid, session, date in zip(question["haystack_session_ids"], question["haystack_sessions"],
                                      question.get("haystack_dates") or [""] * len(question["haystack_sessions"])):
            ids.append(sid if copy == 0 else f"copy{copy}_{sid}")
            sessions.append(session if copy == 0 else [dict(turn, content=f"{turn['content']} ({copy})")
                                                       for turn in session])
            dates.append(date)
    question.update(haystack_session_ids=ids, haystack_sessions=sessions, haystack_dates=dates)
    target.write_text(json.dumps(data))
    return target


def test_an_item_over_the_time_limit_fails_for_good_and_the_run_ends(redis_server, workers, data, tmp_path,
                                                                     monkeypatch):
    limits = {"MEMFARM_TASK_TIME_LIMIT": "25", "MEMFARM_VISIBILITY_TIMEOUT": "30"}
    for key, value in limits.items():
        monkeypatch.setenv(key, value)
    slow = _inflated(data["small"], tmp_path / "slow.json", 1, 120)
    workers(redis_server.url, "w1", **limits).wait_ready()
    ledger = RunLedger(connect(redis_server.url))
    # every text of the haystack encoded cold, as the limit assumes: the store stays off here
    run_id = _submit(redis_server.url, slow, "--limit", "3", "--max-attempts", "2", "--no-embedding-store")
    state = watch(ledger, make_app(redis_server.url), run_id, timeout=300)
    slow_id = ledger.order(run_id)[1]
    assert state["complete"] and state["done"] == 2 and state["final_failures"] == 1
    assert ledger.state(run_id, slow_id) == "failed_final" and ledger.attempts(run_id)[slow_id] == 2
    assert "TimeLimit" in ledger.info(run_id, slow_id)["error"] or "lost" in ledger.info(run_id, slow_id)["error"]


def test_pool_processes_replaced_by_the_memory_cap_keep_working(redis_server, workers, data):
    """A cap far below the model's footprint replaces the pool process after every item."""
    workers(redis_server.url, "capped", MEMFARM_MAX_MEMORY_PER_CHILD=100_000).wait_ready()
    ledger = RunLedger(connect(redis_server.url))
    run_id = _submit(redis_server.url, data["small"], "--limit", "4")
    state = watch(ledger, make_app(redis_server.url), run_id, timeout=300)
    assert state["done"] == 4
    processes = {ledger.info(run_id, i)["worker"] for i in ledger.order(run_id)}
    assert len(processes) >= 3, f"expected a new pool process per item, saw {processes}"


def test_a_data_error_the_adapter_does_not_anticipate_fails_one_record(redis_server, workers, data, tmp_path):
    raw = json.loads(data["small"].read_text())[:5]
    raw[2]["answer_session_ids"] = 5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    local = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(bad), "--output", str(tmp_path / "l.json")])
    assert local.exit_code == 1, local.output  # results written, the failed item said and the status non-zero
    workers(redis_server.url, "w1").wait_ready()
    farm = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(bad), "--output", str(tmp_path / "f.json")],
                              env={"MEMFARM_BROKER": redis_server.url})
    assert farm.exit_code == 1, farm.output
    for name in ("l.json", "f.json"):
        results = json.loads((tmp_path / name).read_text())
        assert [r["status"] for r in results["records"]] == ["ok", "ok", "failed", "ok", "ok"]
        failed = results["records"][2]
        assert failed["question_id"] == raw[2]["question_id"] and failed["field"] == "answer_session_ids"


def test_redis_killed_and_restarted_mid_run_loses_nothing(redis_server, workers, data):
    workers(redis_server.url, "w1").wait_ready()
    ledger = RunLedger(connect(redis_server.url))
    run_id = _submit(redis_server.url, data["small"], "--limit", "6")
    wait_for(lambda: sum(s == "done" for s in ledger.states(run_id).values()) >= 2, what="two items done")
    redis_server.restart(down_seconds=2)
    state = watch(RunLedger(connect(redis_server.url)), make_app(redis_server.url), run_id, timeout=300)
    assert state["done"] == 6
    results, _ = reduce_farm_run(ledger, run_id)
    assert len(results["records"]) == 6 and all(r["status"] == "ok" for r in results["records"])


def test_runs_lists_forget_removes_and_reduce_sets_the_expiry(redis_server, workers, data, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMFARM_RUN_TTL_SECONDS", "600")
    worker = workers(redis_server.url, "w1").wait_ready()
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data["small"]), "--limit", "2",
                                       "--run-id", "kept", "--output", str(out)], env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 0, result.output
    ledger = RunLedger(connect(redis_server.url))
    assert all(0 < ledger.r.ttl(k) <= 600 for k in ledger.run_keys("kept"))
    worker.stop()  # no worker left to take it: "busy" stays in progress for as long as the test needs
    _submit(redis_server.url, data["small"], "--limit", "2", "--run-id", "busy")
    listing = CliRunner().invoke(main, ["runs"], env={"MEMFARM_BROKER": redis_server.url})
    assert listing.exit_code == 0 and "kept" in listing.output and "reduced" in listing.output, listing.output
    refused = CliRunner().invoke(main, ["forget", "busy"], env={"MEMFARM_BROKER": redis_server.url})
    assert refused.exit_code == 2 and "still in progress" in refused.output
    forced = CliRunner().invoke(main, ["forget", "busy", "--force"], env={"MEMFARM_BROKER": redis_server.url})
    assert forced.exit_code == 0 and ledger.run_keys("busy") == [] and ledger.run_keys("kept")


def test_resume_sends_nothing_for_items_still_waiting_and_heals_a_lost_message(redis_server, data):
    from coordinator.running.farm_run import heal_orphans, resume

    ledger = RunLedger(connect(redis_server.url))
    app = make_app(redis_server.url)
    run_id = _submit(redis_server.url, data["small"], "--limit", "3")
    staged = ledger.order(run_id)
    assert ledger.waiting_messages(run_id) == set(staged), "every staged item's message is in the queue"
    assert resume(ledger, app, run_id) == [] and ledger.r.llen("memfarm") == 3, "nothing is sent twice"
    ledger.r.delete("memfarm")  # the broker lost its queue (a restart without the last second)
    assert ledger.waiting_messages(run_id) == set()
    assert heal_orphans(ledger, app, run_id, older_than=3600) == [], "too recent to call lost"
    assert sorted(heal_orphans(ledger, app, run_id, older_than=0.0)) == sorted(staged)
    assert ledger.waiting_messages(run_id) == set(staged)


def test_shared_embeddings_let_a_fresh_worker_encode_nothing_another_encoded(redis_server, workers, data, tmp_path):
    """Worker w1 runs the file; w2, with an empty cache and store of its own, runs it again and fetches every
    vector from the farm's Redis: it encodes only the sample it checks them by, and the numbers are the same."""
    def run(name):
        out = tmp_path / f"{name}.json"
        result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data["small"]), "--questions",
                                           str(data["questions"]), "--output", str(out),
                                           "--shared-embeddings"], env={"MEMFARM_BROKER": redis_server.url})
        assert result.exit_code == 0, result.output
        assert re.search(r"staged \d+ session occurrences as \d+ distinct .*; redis holds [\d.]+ MiB", result.output)
        return json.loads(out.read_text()), json.loads((tmp_path / f"{name}.manifest.json").read_text())

    first = workers(redis_server.url, "w1").wait_ready()
    results_1, manifest_1 = run("first")
    first.stop()
    assert manifest_1["embedding_store"]["texts_encoded"] > 0
    workers(redis_server.url, "w2").wait_ready()
    results_2, manifest_2 = run("second")
    store = manifest_2["embedding_store"]
    assert store["texts_encoded"] == store["texts_verified"] > 0 and store["texts_forged"] == 0
    assert store["texts_from_shared"] > store["texts_verified"], "most vectors are taken, not encoded again"
    assert set(manifest_2["farm"]["workers"]) == {f"w2@{socket.gethostname()}"}, "only the fresh worker ran"
    assert _comparable(results_2["records"]) == _comparable(results_1["records"])


def test_shared_embeddings_is_a_farm_setting():
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", __file__, "--shared-embeddings"])
    assert result.exit_code != 0 and "--shared-embeddings" in result.output and "farm setting" in result.output
