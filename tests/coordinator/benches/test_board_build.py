"""`memfarm bench board`: generated runs that read as real ones, and a bench file with the build's measures."""

import json

from click.testing import CliRunner

from adapters.metrics import question_metrics
from coordinator.benches.board_build import generated_runs
from coordinator.cli import main


def test_generated_runs_are_scored_by_the_harness_and_ordered_by_skill():
    made = generated_runs(questions=40, runs=3, seed=2)
    assert [r["system"] for r, _ in made] == ["system0", "system1", "system2"]
    first = made[0][0]["records"][0]
    ranking = [c["metadata"]["turn_id"] for c in first["candidates"]]
    session_of = {c["metadata"]["turn_id"]: c["metadata"]["session_id"] for c in first["candidates"]}
    again = question_metrics(ranking, session_of, first["gold"]["sessions"], first["gold"]["turns"], (5, 10))
    assert again["session"]["recall_all@5"] == first["metrics"]["session"]["recall_all@5"]
    strict = [r["metrics"]["all"]["session"]["recall_all@5"] for r, _ in made]
    assert strict[0] > strict[-1]  # skill falls from the first run to the last


def test_the_bench_writes_the_build_measures(tmp_path):
    out = tmp_path / "board.json"
    result = CliRunner().invoke(main, ["bench", "board", "--questions", "6", "--runs", "2",
                                       "--workdir", str(tmp_path / "work"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["questions"], row["runs"], row["question_pages"]) == (6, 2, 6)
    assert row["files"] == 6 + 3 + 1 + 5 + 1 + 2  # question pages, index/questions/runs, one pair, 5 SVG, marker, css+js
    assert row["build_seconds"] > 0 and row["cpu_seconds"] > 0 and row["peak_rss_mib"] > 30
    assert "wrote" in result.output and f"{row['files']:>7}" in result.output
