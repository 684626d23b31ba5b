"""`analyze --csv` and `compare --csv` write the tables beside their JSON, one row a line."""

import csv
import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.helpers import write_dataset


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    data = write_dataset(folder / "d.json", questions=4, seed=2, scale=0.04)
    paths = []
    for system in ("recency", "random"):
        path = folder / f"{system}.json"
        result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", system,
                                           "--output", str(path)])
        assert result.exit_code == 0, result.output
        paths.append(str(path))
    return paths


def _read(path):
    with open(path, newline="", encoding="utf-8") as source:
        return list(csv.DictReader(source))


def test_compare_writes_each_comparison_as_a_row_beside_the_json(two_runs, tmp_path):
    result = CliRunner().invoke(main, ["compare", *two_runs, "--resamples", "200", "--permutations", "200",
                                       "--json", str(tmp_path / "c.json"), "--csv", str(tmp_path / "c.csv")])
    assert result.exit_code == 0, result.output
    table = json.loads((tmp_path / "c.json").read_text())["comparisons"]
    rows = _read(tmp_path / "c.csv")
    assert [row["metric"] for row in rows] == [c["metric"] for c in table] and rows
    for row, entry in zip(rows, table):
        assert float(row["delta"]) == pytest.approx(entry["delta"])
        assert int(row["wins"]) == entry["wins"]["count"] and int(row["losses"]) == entry["losses"]["count"]
        assert float(row["ci95_low"]) == pytest.approx(entry["ci95"][0])


def test_analyze_writes_every_metric_of_every_file(two_runs, tmp_path):
    result = CliRunner().invoke(main, ["analyze", *two_runs, "--csv", str(tmp_path / "a.csv")])
    assert result.exit_code == 0, result.output
    rows = _read(tmp_path / "a.csv")
    for path in two_runs:
        results = json.loads(open(path).read())
        whole = [r for r in rows if r["file"] == path and r["grouping"] == "all" and r["level"] == "session"
                 and r["metric"] == "recall_all" and r["k"] == "5"]
        assert len(whole) == 1 and float(whole[0]["value"]) == pytest.approx(
            results["metrics"]["all"]["session"]["recall_all@5"])
        assert any(r["file"] == path and r["grouping"] == "question_type" for r in rows)
    compared = CliRunner().invoke(main, ["analyze", "--compare", *two_runs, "--csv", str(tmp_path / "b.csv")])
    assert compared.exit_code == 0, compared.output
    assert [row["system"] for row in _read(tmp_path / "b.csv")] == ["recency", "random"]


def test_csv_is_refused_where_it_would_write_nothing(two_runs, tmp_path):
    result = CliRunner().invoke(main, ["analyze", two_runs[0], "--explain", "2", "--csv", str(tmp_path / "x.csv")])
    assert result.exit_code == 2 and "--csv writes the analysis or the --compare table" in result.output
