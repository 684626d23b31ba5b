import json

import pytest
from click.testing import CliRunner

from adapters.benchmarks.longmemeval.reader import extract_questions
from coordinator.cli import main
from coordinator.results.score import export_rankings
from tests.helpers import write_dataset

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("score")
    data = write_dataset(folder / "data.json", questions=8, seed=21, scale=0.06)
    extract_questions(data, folder / "q.json")
    out = folder / "run.json"
    # the expected-text profile: its session metrics come from the turn ranking deduplicated to sessions, so a
    # session ranking exported from the run scores the same (the official profile widens k over turns instead)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--questions", str(folder / "q.json"),
                                       "--profile", "expected-text", "--output", str(out)])
    assert result.exit_code == 0, result.output
    return folder, data, json.loads(out.read_text())


@pytest.mark.parametrize("level", ["turn", "session"])
def test_scoring_a_runs_own_rankings_reproduces_its_metrics(run, level):
    folder, data, results = run
    rankings = folder / f"rankings_{level}.jsonl"
    rankings.write_text("\n".join(export_rankings(results, level)) + "\n")
    out = folder / f"scored_{level}.json"
    result = CliRunner().invoke(main, ["score", "--dataset", str(data), "--rankings", str(rankings), "--level", level,
                                       "--questions", str(folder / "q.json"), "--profile", "expected-text",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    scored = json.loads(out.read_text())
    assert scored["metrics"]["all"]["session"] == results["metrics"]["all"]["session"]
    if level == "turn":
        assert scored["metrics"]["all"]["turn"] == results["metrics"]["all"]["turn"]
        assert [r["metrics"] for r in scored["records"]] == [r["metrics"] for r in results["records"]]
    manifest = json.loads((folder / f"scored_{level}.manifest.json").read_text())
    assert manifest["rankings"]["problems"] == [] and manifest["rankings"]["missing"] == []


def test_bad_ranking_lines_are_named_and_the_rest_scored(run):
    folder, data, results = run
    lines = export_rankings(results, "session")
    first = json.loads(lines[0])
    bad = lines[:1] + ['{"question_id": "nope", "ranked": []}', "not json", lines[0]] + lines[2:]
    rankings = folder / "bad.jsonl"
    rankings.write_text("\n".join(bad) + "\n")
    out = folder / "bad_scored.json"
    result = CliRunner().invoke(main, ["score", "--dataset", str(data), "--rankings", str(rankings), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "bad.jsonl:2: unknown question_id 'nope'" in result.output
    assert "bad.jsonl:3: not JSON" in result.output
    assert f"bad.jsonl:4: duplicate question_id '{first['question_id']}'" in result.output
    missing = json.loads(lines[1])["question_id"]
    assert "1 questions have no ranking" in result.output and missing in result.output
    scored = json.loads(out.read_text())
    assert scored["question_count"] == len(results["records"])


def test_a_rankings_line_nested_50000_deep_is_named_not_a_crash(tmp_path):
    """The line is read without a RecursionError (and without parsing it at all): skipped, named, the rest scored."""
    from adapters.defaults import MAX_JSON_DEPTH

    data = write_dataset(tmp_path / "data.json", questions=2, seed=21, scale=0.04)
    first = json.loads(data.read_text())[0]
    rankings = tmp_path / "deep.jsonl"
    rankings.write_text('{"question_id": ' + "[" * 50_000 + "]" * 50_000 + ', "ranked": []}\n'
                        + json.dumps({"question_id": first["question_id"], "ranked": first["answer_session_ids"]})
                        + "\n")
    out = tmp_path / "scored.json"
    result = CliRunner().invoke(main, ["score", "--dataset", str(data), "--rankings", str(rankings), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert f"deep.jsonl:1: nested more than {MAX_JSON_DEPTH} levels deep" in result.output
    scored = json.loads(out.read_text())
    assert scored["records"][0]["metrics"]["session"]["recall_any@1"] == 1.0
