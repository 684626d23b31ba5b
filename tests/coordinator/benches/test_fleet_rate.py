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
        rate = row["questions"] * 3600 / row["wall_s"] / row["workers"]
        assert abs(row["questions_per_core_hour"] - rate) <= 0.01 * rate + 1
        assert abs(row["questions_per_machine_hour"] - rate * row["workers"]) <= 0.01 * rate * row["workers"] + 2
        assert row["x_peer_rate"] == pytest.approx(row["questions_per_core_hour"] / PEER_RATE["questions_per_core_hour"],
                                                   abs=0.01)
    # every run on workers of its own, and the fleet's questions shared out between both of its workers
    assert set(fleet["items_by_worker"]) == {"fleet_fusion0", "fleet_fusion1"}
    assert sum(fleet["items_by_worker"].values()) == 4 and alone["items_by_worker"] == {"one_fusion0": 1}


def test_an_unknown_mode_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="unknown mode.*dense"):
        run_fleet_bench(4, 0.02, 1, modes=("fusion", "dense"), workdir=tmp_path / "bench", output=tmp_path / "f.json")
    assert not (tmp_path / "bench").exists() and not (tmp_path / "f.json").exists()
