"""A generated LongMemEval-S file is marked, and its results are titled as generated: in the results file, under
the closing table and so on the board; a file without the mark is titled LongMemEval-S."""

import json

from click.testing import CliRunner

from adapters.benchmarks.longmemeval.reader import GENERATED_FIELD
from coordinator.cli import main
from tests.helpers import write_dataset


def _unmarked(data: list[dict]) -> list[dict]:
    return [{key: value for key, value in question.items() if key != GENERATED_FIELD} for question in data]


def _run(tmp_path, mutate=None):
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.04, mutate=mutate)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "recency",
                                       "--output", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / "r.json").read_text()), result.output


def test_the_generator_marks_every_question(tmp_path):
    from adapters.generators.longmemeval_s import write

    write(tmp_path / "g.json", 3, seed=2, scale=0.04)
    assert all(GENERATED_FIELD in question for question in json.loads((tmp_path / "g.json").read_text()))


def test_a_generated_file_s_results_are_titled_generated(tmp_path):
    results, output = _run(tmp_path)
    assert results["benchmark"] == "LongMemEval-S (generated)" and results["benchmark_key"] == "longmemeval"
    assert "benchmark: LongMemEval-S (generated): not the published LongMemEval-S file" in output


def test_a_file_without_the_mark_is_titled_longmemeval_s(tmp_path):
    results, output = _run(tmp_path, mutate=_unmarked)
    assert results["benchmark"] == "LongMemEval-S"
    assert "(generated)" not in output
