"""Systems behind HTTP on a farm of real `memfarm worker` processes, a real redis-server and real servers."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from coordinator.running.farm_run import watch
from coordinator.running.run_ledger import RunLedger, connect
from tests.farm_support import wait_for
from tests.helpers import write_dataset
from tests.http_support import TOKEN, reference_server, wire_server
from workers.farm.app import make_app

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture()
def one_conversation(tmp_path, locomo_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(json.loads(locomo_path.read_text())[:1]))
    return path


def _comparable(records):
    return [(r["question_id"], r["status"], r["metrics"], [c["id"] for c in r.get("candidates", [])]) for r in records]


def _cmdlines(pids):
    lines = []
    for pid in pids:
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            pass
    return lines


def _files_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_a_locomo_conversation_through_the_reference_server_here_and_on_the_farm(
        redis_server, workers, one_conversation, tmp_path, monkeypatch):
    server = reference_server(tmp_path, token=TOKEN)
    try:
        args = ["run", "locomo", "--dataset", str(one_conversation), "--system", server.url]
        refused = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "refused.json")])
        assert refused.exit_code == 2 and "info: HTTP 401: missing or wrong bearer token" in refused.output

        monkeypatch.setenv("MEMFARM_SYSTEM_TOKEN", TOKEN)
        local = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "local.json")])
        assert local.exit_code == 0, local.output
        worker = workers(redis_server.url, "w1", "--allow-system", server.url).wait_ready()
        farm = CliRunner().invoke(main, [*args, "--output", str(tmp_path / "farm.json")],
                                  env={"MEMFARM_BROKER": redis_server.url})
        assert farm.exit_code == 0, farm.output
        worker_pids = [worker.proc.pid, *worker.children()]
        processes = _cmdlines([*worker_pids, server.proc.pid])
    finally:
        server.stop()
    results = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in ("local", "farm")}
    assert _comparable(results["farm"]["records"]) == _comparable(results["local"]["records"])
    assert results["farm"]["metrics"] == results["local"]["metrics"]
    assert results["local"]["system"] == "memfarm-reference-lexical" and results["local"]["question_count"] == 199
    assert all(r["status"] == "ok" for r in results["farm"]["records"])
    manifest = json.loads((tmp_path / "farm.manifest.json").read_text())
    assert manifest["system"]["info"]["config"]["ranking"] == "bm25" and manifest["system"]["url"] == server.url
    assert manifest["system"]["token"] is True
    # the token: in no results file, manifest, log, ledger (redis's append-only file) or command line
    written = b"".join((tmp_path / f).read_bytes() for f in ("local.json", "local.manifest.json", "farm.json",
                                                             "farm.manifest.json", "w1.log", "reference.log"))
    assert len(processes) >= 3 and any("--allow-system" in line for line in processes)
    for text in (written, _files_under(tmp_path / "redis"), local.output.encode(), farm.output.encode(),
                 " ".join(processes).encode()):
        assert TOKEN.encode() not in text


def test_a_worker_not_allowed_the_server_refuses_before_any_call(redis_server, workers, tmp_path):
    server = wire_server(tmp_path, "good")
    other = wire_server(tmp_path, "slow")  # the server this worker may call: never the run's
    try:
        workers(redis_server.url, "w1", "--allow-system", other.url).wait_ready()
        data = write_dataset(tmp_path / "d.json", questions=2, seed=4, scale=0.03)
        submitted = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(data), "--system", server.url],
                                       env={"MEMFARM_BROKER": redis_server.url})
        assert submitted.exit_code == 0, submitted.output
        run_id = submitted.output.strip().splitlines()[-1]
        ledger = RunLedger(connect(redis_server.url))
        state = watch(ledger, make_app(redis_server.url), run_id, timeout=120)
        assert state["final_failures"] == 2 and state["done"] == 0
        for item_id in ledger.order(run_id):
            error = ledger.info(run_id, item_id)["error"]
            assert "refused by w1@" in error and f"may not call {server.url} (start it with --allow-system" in error
        assert [c["call"] for c in server.requests()] == ["info"]  # the coordinator's, before staging
        assert other.requests() == []
    finally:
        server.stop()
        other.stop()


def test_a_server_dying_mid_run_fails_its_item_which_runs_again_once_it_is_back(redis_server, workers, tmp_path):
    server = wire_server(tmp_path, "dies", "--die-after", "2")
    port = server.port
    try:
        workers(redis_server.url, "w1", "--allow-system", server.url, MEMFARM_SYSTEM_RETRIES=1).wait_ready()
        data = write_dataset(tmp_path / "d.json", questions=3, seed=5, scale=0.03)
        submitted = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(data), "--system", server.url],
                                       env={"MEMFARM_BROKER": redis_server.url})
        assert submitted.exit_code == 0, submitted.output
        run_id = submitted.output.strip().splitlines()[-1]
        ledger = RunLedger(connect(redis_server.url))
        wait_for(lambda: not server.alive(), timeout=120, what="the server to die in its third retrieve")
        failed = wait_for(lambda: [i for i, s in ledger.states(run_id).items() if s == "failed"], timeout=120,
                          what="the item it was answering to fail")
        error = ledger.info(run_id, failed[0])["error"]
        assert "HttpSystemError" in error and "retrieve: no answer" in error
        server.stop()
        before = len(server.requests())  # the same log file goes on
        server = wire_server(tmp_path, "dies", "--die-after", "1000", port=port)  # back, the same, knowing nothing
        state = watch(ledger, make_app(redis_server.url), run_id, timeout=120)
        assert state["done"] == 3 and state["final_failures"] == 0
        assert ledger.attempts(run_id)[failed[0]] == 2
        # still the server the run was staged against; the failed attempt's label freed; the item from scratch
        calls = server.requests()[before:]
        assert [c["call"] for c in calls] == ["info", "reset", "reset", "ingest", "retrieve"]
        assert calls[1]["label"] != calls[2]["label"] == calls[3]["label"] == calls[4]["label"]
    finally:
        server.stop()
