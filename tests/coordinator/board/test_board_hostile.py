"""`memfarm board` against hostile input: judged results files that lie about their pass rates, question ids
that would hash alike, a FIFO among the results, an --output that is a link, and the repository's own
published figure files."""

import copy
import json
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.errors import ResultsError
from coordinator.benches.board_build import generated_runs
from coordinator.board import data as board_data, files as board_files, run_view
from coordinator.board.build import build_board
from coordinator.cli import main
from coordinator.running.reducer import write_results
from tests.factories import run_context

RESAMPLES = 200


def _judged_run(query_ids=("a", "b")) -> tuple[dict, dict]:
    """A run of substring-judged queries (AdaMem episodes) as the reducer writes it."""
    from adapters.records import judged_record, outcome
    from coordinator.running.reducer import reduce_run

    retrieved = [{"id": 1, "content": "I moved to Lisbon in March", "score": 0.9, "contributions": {}},
                 {"id": 2, "content": "I lived in Porto", "score": 0.5, "contributions": {}}]
    queries = [{"id": qid, "query": "Where do I live?", "expected_substrings": ["Lisbon"],
                "forbidden_substrings": ["Porto"] if number == 0 else []} for number, qid in enumerate(query_ids)]
    records = [judged_record(q, "episode-1", retrieved, runtime_ms=1.0, worker="w", attempt=1) for q in queries]
    context = run_context(benchmark="adamem-jsonl", benchmark_title="AdaMem episodes", group_key=None,
                          dataset_path="episodes.jsonl", dataset_sha256="e" * 64,
                          system_config={"name": "adamem", "retrieval_mode": "full"}, scoring_profile=None,
                          top_k=None)
    return reduce_run([outcome("episode-1", records)], context, elapsed_seconds=1.0,
                      commit="c")


def _edited(path: Path, edit) -> Path:
    """The results file at `path` with `edit(data)` applied, written back as Python's json writes it (NaN
    included, as a hand or another tool could)."""
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return path


def test_a_genuine_judged_run_passes_the_results_check(tmp_path):
    path = write_results(*_judged_run(), tmp_path / "episodes.json")[0]
    run = run_view.load_run(path)
    assert run["judged"] and run["support"] == {"queries": 2, "passed": 1, "stale_hits": 1, "pass_rate": 0.5}


def _support(field, value):
    return lambda data: data["metrics"]["all"]["support"].__setitem__(field, value)


def _judgement(field, value):
    return lambda data: data["records"][1]["judgement"].__setitem__(field, value)


@pytest.mark.parametrize("edit, where", [
    (_support("pass_rate", float("nan")), "field metrics.all.support.pass_rate: nan"),
    (_support("pass_rate", 7.5), "field metrics.all.support.pass_rate: 7.5"),
    (_support("pass_rate", "0.5"), "field metrics.all.support.pass_rate: '0.5'"),
    (_support("queries", -3), "field metrics.all.support.queries: -3 is not a count"),
    (lambda d: d["metrics"]["all"]["support"].update(passed=2, pass_rate=1.0),
     "field metrics.all.support is {'queries': 2, 'passed': 2"),
    (_judgement("passed", False), "question episode-1:b: field judgement.passed: False contradicts"),
    (_judgement("missing", "Lisbon"), "question episode-1:b: field judgement.missing: not a list of texts"),
    (lambda d: d["metrics"]["all"].__setitem__("session", {"recall_any@5": float("inf")}),
     "field metrics.all.session.recall_any@5: inf is not a number in [0, 1]"),
])
def test_a_judged_run_that_lies_is_refused_in_one_line_naming_file_record_and_field(tmp_path, edit, where):
    path = _edited(write_results(*_judged_run(), tmp_path / "episodes.json")[0], edit)
    with pytest.raises(ResultsError) as caught:
        run_view.load_run(path)
    assert str(caught.value).startswith(f"{path}: ") and where in str(caught.value)
    result = CliRunner().invoke(main, ["board", str(path), "--output", str(tmp_path / "board")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.count("\n") == 1 and where in result.output, result.output
    assert not (tmp_path / "board").exists()


def test_compare_refuses_the_same_lie(tmp_path):
    first = write_results(*_judged_run(), tmp_path / "one.json")[0]
    second = _edited(write_results(*_judged_run(), tmp_path / "two.json")[0], _support("pass_rate", 7.5))
    result = CliRunner().invoke(main, ["compare", str(first), str(second)])
    assert result.exit_code == 2 and "field metrics.all.support.pass_rate: 7.5" in result.output


def test_question_ids_joined_by_a_newline_do_not_pair_with_the_ids_they_join(tmp_path):
    apart = write_results(*_judged_run(("a", "b")), tmp_path / "apart.json")[0]
    # one query whose id holds the newline: episode-1:a\nepisode-1:b, the other's two ids joined
    joined = write_results(*_judged_run(("a\nepisode-1:b",)), tmp_path / "joined.json")[0]
    runs = [run_view.load_run(apart), run_view.load_run(joined)]
    assert "\n".join(sorted(runs[0]["question_ids"])) == runs[1]["question_ids"][0]
    groups = board_data.group_runs(runs)
    assert len(groups) == 2
    build_board([apart, joined], tmp_path / "board", resamples=RESAMPLES)


@pytest.fixture(scope="module")
def made():
    return generated_runs(questions=12, runs=2, seed=5)


def test_a_fifo_among_the_results_is_skipped_and_said_never_waited_on(tmp_path, made):
    folder = tmp_path / "runs"
    for number, (results, manifest) in enumerate(copy.deepcopy(made)):
        write_results(results, manifest, folder / f"run{number}.json")
    fifo = folder / "trap.json"
    os.mkfifo(fifo)
    found = []
    scan = threading.Thread(target=lambda: found.append(board_files.find_results([folder])), daemon=True)
    scan.start()
    scan.join(30)
    if scan.is_alive():  # it opened the FIFO for reading: a writer that closes at once lets it go
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        scan.join(10)
        pytest.fail("the board waited for a writer on a FIFO named *.json")
    files, skipped = found[0]
    assert len(files) == 2 and f"{fifo}: not a regular file, not read" in skipped
    result = CliRunner().invoke(main, ["board", str(folder), "--output", str(tmp_path / "board"),
                                       "--resamples", str(RESAMPLES)])
    assert result.exit_code == 0, result.output
    assert f"skipped {fifo}: not a regular file, not read" in result.output
    assert "(skipped, not results files: 2 JSON files)" in result.output  # the two manifests
    with pytest.raises(ResultsError, match="trap.json: neither a regular file nor a folder"):
        board_files.find_results([fifo])


def test_an_output_that_is_a_link_is_refused_in_one_line_and_its_target_left_alone(tmp_path, made):
    paths = [write_results(results, manifest, tmp_path / f"run{n}.json")[0]
             for n, (results, manifest) in enumerate(copy.deepcopy(made))]
    target = tmp_path / "earlier"
    build_board(paths, target, resamples=RESAMPLES)
    before = sorted(p.relative_to(target) for p in target.rglob("*"))
    for link, to in ((tmp_path / "link", target), (tmp_path / "dangling", tmp_path / "nowhere")):
        link.symlink_to(to)
        result = CliRunner().invoke(main, ["board", *map(str, paths), "--output", str(link),
                                           "--resamples", str(RESAMPLES)])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert result.output == f"error: {link}: is a symbolic link; name the board's folder itself as --output\n"
        assert link.is_symlink()
    assert sorted(p.relative_to(target) for p in target.rglob("*")) == before
    assert not (tmp_path / "nowhere").exists()


def test_the_repositorys_own_published_figures_are_left_out_of_a_folder_scan(tmp_path, monkeypatch):
    published = tmp_path / "results" / "published"
    published.mkdir(parents=True)
    (published / "figure.json").write_text(json.dumps({"command": "memfarm bench x", "rows": []}))
    (tmp_path / "results" / "notes.json").write_text("{}")
    monkeypatch.setattr(board_files, "OWN_PUBLISHED", published)
    assert board_files.find_results([tmp_path / "results"]) == ([], [str(tmp_path / "results" / "notes.json")])
    # named itself, the folder is searched and its files said to be skipped
    assert board_files.find_results([published]) == ([], [str(published / "figure.json")])


def test_the_real_published_folder_is_not_announced(monkeypatch):
    root = Path(__file__).resolve().parents[3]
    assert board_files.OWN_PUBLISHED == root / "results" / "published"
    _, skipped = board_files.find_results([root / "results"])
    assert not [s for s in skipped if "/published/" in s]
