"""A run's name as a person reads it."""

import pytest

from coordinator.results.labels import run_label


@pytest.mark.parametrize("system, mode, label", [
    ("memoria", "full", "memoria/full"),
    ("bm25s", "bm25s:lucene", "bm25s/lucene"),          # an outside system's SYSTEM:MODE says its name once
    ("my-memory", None, "my-memory"),                   # a user's class declares no mode
    ("my-memory", "my-memory", "my-memory"),            # older files stood the name in for the mode
    ("qdrant", "qdrant:", "qdrant"),
    (None, "full", "system/full"),
])
def test_a_run_is_named_by_its_system_and_a_mode_only_where_the_mode_adds_something(system, mode, label):
    assert run_label(system, mode) == label


def test_a_users_class_is_run_under_its_name_and_no_mode_stands_in_for_one(tmp_path):
    from click.testing import CliRunner

    from coordinator.cli import main
    from coordinator.results.run_files import ResultsFile
    from tests.helpers import write_dataset

    data = write_dataset(tmp_path / "lme.json", questions=2, seed=3, scale=0.02)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system",
                                       "tests.adapters.systems.scripted_system:Scripted", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "longmemeval: 2 items (scripted)" in result.output
    results = ResultsFile.read(out)
    assert results["system"] == "scripted" and results["retrieval_mode"] is None
    assert results["settings_system"]["class"].endswith("scripted_system.Scripted")
    analysis = CliRunner().invoke(main, ["analyze", str(out)])
    assert analysis.exit_code == 0 and "| system scripted | profile" in analysis.output and "None" not in analysis.output


def test_compare_and_the_board_name_runs_the_same_way():
    from coordinator.board.run_view import mode_text
    from coordinator.results.compare import _labels

    files = [{"system": "bm25s", "retrieval_mode": "bm25s:lucene", "_path": "a.json"},
             {"system": "scripted", "retrieval_mode": None, "_path": "b.json"},
             {"system": "memoria", "retrieval_mode": "full", "_path": "c.json"}]
    assert _labels(files) == ["bm25s/lucene", "scripted", "memoria/full"]
    assert [run_label(f["system"], mode_text(f["system"], f["retrieval_mode"])) for f in files] == _labels(files)
