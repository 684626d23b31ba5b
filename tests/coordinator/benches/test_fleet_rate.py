"""`memfarm bench fleet-rate`: a generated file through real one-thread workers, and one worker alone, each
mode cold."""

import json

import pytest

from coordinator.benches.coldrun import PEER_RATE
from coordinator.benches.fleet_rate import run_fleet_bench


def test_the_file_runs_on_every_worker_and_its_slice_on_one_each_cold_with_rates_from_their_own_seconds(
        tmp_path, workers, embedder):
    """`workers` and `embedder` mark what the bench starts by itself: a redis-server, real workers, the model."""
    workdir, output = tmp_path / "bench", tmp_path / "fleet.json"
    run_fleet_bench(4, 0.02, 1, modes=("fusion",), workers=2, workdir=workdir, output=output)
    written = json.loads(output.read_text())
    fleet, alone = written["rows"]
    assert (fleet["run"], fleet["workers"], fleet["questions"]) == ("fleet", 2, 4)
    assert (alone["run"], alone["workers"], alone["questions"]) == ("one worker", 1, 1)
    for row in (fleet, alone):
        assert row["complete"] is True and row["failed_items"] == 0 and row["torch_threads"] == 1
        assert row["answered"] == row["questions"] and row["cores"] == row["workers"] and row["code_commit"]
        # full-scale questions per core-hour: answered, times the scale, over wall seconds and cores
        rate = row["answered"] * 0.02 * 3600 / row["wall_s"] / row["cores"]
        assert abs(row["questions_per_core_hour"] - rate) <= 0.01 * rate + 1
        assert abs(row["questions_per_hour_all_workers"] - rate * row["cores"]) <= 0.01 * rate * row["cores"] + 2
        assert row["x_peer_rate"] == pytest.approx(row["questions_per_core_hour"] / PEER_RATE["questions_per_core_hour"],
                                                   abs=0.01)
    # every run on workers of its own, and the fleet's questions shared out between both of its workers
    assert set(fleet["items_by_worker"]) == {"fleet_fusion0", "fleet_fusion1"}
    assert sum(fleet["items_by_worker"].values()) == 4 and alone["items_by_worker"] == {"one_fusion0": 1}


def test_an_unknown_mode_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="unknown mode.*dense"):
        run_fleet_bench(4, 0.02, 1, modes=("fusion", "dense"), workdir=tmp_path / "bench", output=tmp_path / "f.json")
    assert not (tmp_path / "bench").exists() and not (tmp_path / "f.json").exists()


def test_a_run_that_fails_is_a_row_that_says_so_with_no_rate_and_its_workers_are_stopped(tmp_path, monkeypatch):
    from coordinator.benches import fleet_rate

    stopped = []
    monkeypatch.setattr(fleet_rate, "start_workers", lambda *args: ["w"])
    monkeypatch.setattr(fleet_rate, "stop_workers", stopped.append)

    def fails(*args, **kwargs):
        raise RuntimeError("memfarm run longmemeval failed (exit 2):\nno worker answered")

    monkeypatch.setattr(fleet_rate, "measure_memfarm", fails)
    row = fleet_rate._run("redis://x", tmp_path, "fleet_fusion", 2, 2, "fusion", tmp_path / "d.json",
                          tmp_path / "q.json", 1.0)
    assert row["error"].endswith("no worker answered") and row["questions_per_core_hour"] is None
    assert row["x_peer_rate"] is None and stopped == [["w"]]
    assert "FAILED: no worker answered" in fleet_rate.table([{"run": "fleet", **row}])


def test_no_mode_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="none given"):
        run_fleet_bench(4, 0.02, 1, modes=(), workdir=tmp_path / "bench", output=tmp_path / "f.json")
    assert not (tmp_path / "bench").exists()


def test_a_bench_stopped_with_sigterm_in_its_run_leaves_no_run_worker_or_redis_server_behind(tmp_path, workers, embedder):
    import os
    import signal
    import subprocess
    import sys
    import time

    workdir = tmp_path / "bench"
    bench = subprocess.Popen([sys.executable, "-m", "coordinator.cli", "bench", "fleet-rate", "--questions", "2",
                              "--scale", "0.02", "--one-worker-questions", "0", "--modes", "fusion", "--workdir",
                              str(workdir), "--output", str(tmp_path / "f.json")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def started_here(what: str = "") -> list[int]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:  # a worker names its folder on its command line; the Redis server runs in its own folder
                line = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
                line += " " + os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if str(workdir) in line and what in line and int(pid) != bench.pid:
                found.append(int(pid))
        return found

    try:
        deadline = time.monotonic() + 120
        while not started_here("run longmemeval"):  # the workers are up and the run has begun
            assert bench.poll() is None and time.monotonic() < deadline, "the bench never started its run"
            time.sleep(0.2)
        os.kill(bench.pid, signal.SIGTERM)
        assert bench.wait(timeout=60) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 30
        while started_here() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert started_here() == [], "the run, the workers and the Redis server were stopped with the bench"
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
        for pid in started_here():
            os.kill(pid, signal.SIGKILL)
