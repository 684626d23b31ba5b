"""A run with failed items says why, once per reason, and exits non-zero: here, on the farm, and on a cluster
started to allow a user's system."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.farm_support import REPO, wait_for
from tests.helpers import write_dataset

SPY = REPO / "tests" / "adapters" / "systems" / "spy_system.py"
FAILING = REPO / "tests" / "adapters" / "systems" / "failing_at_ingest.py"


def test_a_local_run_with_failed_items_exits_non_zero_and_says_each_reason_once(tmp_path):
    system = FAILING
    data = write_dataset(tmp_path / "d.json", questions=3, seed=1, scale=0.04)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", f"{system}:Broken",
                                       "--output", str(tmp_path / "r.json")])
    assert result.exit_code == 1, result.output
    assert "3 of 3 items failed" in result.output
    assert result.output.count("the index is unavailable") == 1, result.output
    assert "  3 items: RuntimeError: the index is unavailable" in result.output
    assert (tmp_path / "r.json").is_file() and (tmp_path / "r.manifest.json").is_file()


def test_a_run_without_failures_exits_zero(tmp_path):
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.04)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", f"{SPY}:Misbehaving",
                                       "--output", str(tmp_path / "r.json")])
    assert result.exit_code == 0 and "items failed" not in result.output, result.output


@pytest.mark.server
@pytest.mark.slow
def test_a_farm_run_refused_by_its_workers_exits_non_zero_naming_the_refusal_once(redis_server, workers, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv("MEMFARM_TASK_TIME_LIMIT", "60")
    monkeypatch.setenv("MEMFARM_VISIBILITY_TIMEOUT", "65")
    workers(redis_server.url, "w1").wait_ready()
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.04)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", f"{SPY}:Misbehaving",
                                       "--output", str(tmp_path / "r.json")], env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 1, result.output
    assert "2 of 2 items failed" in result.output
    assert result.output.count("not allowed on this worker") == 1, result.output
    assert "2 items: refused by the worker: system " in result.output and "--allow-system" in result.output


@pytest.mark.server
@pytest.mark.slow
def test_cluster_up_allow_system_lets_its_workers_run_a_user_s_class(cluster, tmp_path):
    state_dir = tmp_path / "state"
    state = cluster(state_dir, "--workers", "1", "--no-flower", "--cache-dir", str(tmp_path / "cache"),
                    "--allow-system", f"{SPY}:Misbehaving")
    try:
        assert state["settings"]["allowed_systems"] == [f"{SPY}:Misbehaving"]
        wait_for(lambda: "ready." in (state_dir / "logs" / "worker1.log").read_text(errors="replace"), timeout=60,
                 what="cluster worker")
        data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.04)
        result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system",
                                           f"{SPY}:Misbehaving", "--output", str(tmp_path / "r.json")],
                                    env={"MEMFARM_BROKER": state["broker"]})
        assert result.exit_code == 0, result.output + (state_dir / "logs" / "worker1.log").read_text()[-3000:]
        assert json.loads((tmp_path / "r.json").read_text())["failed"] == 0
    finally:
        CliRunner().invoke(main, ["cluster", "down", "--state-dir", str(state_dir)])
