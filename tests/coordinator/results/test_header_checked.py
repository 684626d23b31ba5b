"""What a results file's header says is what its records give (issue 61): a forged mean, denominator or ceiling,
a malformed tuning block and a file that chooses which of its questions are compared are each refused in one line
by every command that reads results files (analyze, compare, the board), and analyze says a run was tuned on its
data as the run does."""

import json

import pytest
from click.testing import CliRunner

from adapters.errors import ResultsError
from adapters.files import write_json
from adapters.records import candidate, question_record
from coordinator.cli import main
from coordinator.results.run_files import ResultsFile
from coordinator.running.reducer import reduce_run
from tests.factories import run_context

#: Nine scored questions, five hits: session recall_all@5 is 5/9 (0.556); q9 is an abstention.
HITS = {f"c{1 + n // 5}:q{n}": int(n < 5) for n in range(9)}
HITS["c2:q9"] = None


def _record(qid: str, item: str, hit, excluded: bool = False) -> dict:
    """A record made by the project's own code: a hit ranks the gold turn first, a miss ranks another."""
    question = {"question_id": qid, "question": "q?", "question_type": "t", "category": item,
                "gold_sessions": ["D1"], "gold_turns": ["D1:1"], "abstention": hit is None,
                **({"excluded": "no resolvable evidence"} if excluded else {})}
    ranked = [("D1", "D1:1")] if hit else [("D9", "D9:1")]
    candidates = [candidate(rank, turn, session_id=session, turn_id=turn) for rank, (session, turn) in
                  enumerate(ranked + [("D8", "D8:2")], start=1)]
    return question_record(question, item, candidates, level="turn", k_values=(5, 10), profile="expected-text",
                           worker="test", attempt=1)


def _made(path, hits=HITS, *, excluded=(), mode="fusion") -> dict:
    """A LoCoMo-shaped results file made by the reducer, grouped by category; `excluded` questions marked so."""
    by_item: dict[str, list] = {}
    for qid, hit in hits.items():
        item = qid.split(":")[0]
        by_item.setdefault(item, []).append(_record(qid, item, hit, excluded=qid in excluded))
    context = run_context(benchmark="locomo", benchmark_title="LoCoMo", dataset_sha256="abc", group_key="category",
                          system_config={"name": "memoria", "retrieval_mode": mode}, scoring_profile="expected-text",
                          top_k=5, k_values=(5, 10))
    results, _ = reduce_run([{"item_id": i, "records": rs} for i, rs in by_item.items()], context,
                            elapsed_seconds=0.0, commit="c")
    write_json(path, results)
    return results


def _forged(path, edit) -> str:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return str(path)


def _run(*args) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def _set(*keys, value):
    def edit(data):
        block = data
        for key in keys[:-1]:
            block = block[key]
        block[keys[-1]] = value
    return edit


def test_a_forged_headline_is_refused_by_analyze_compare_and_board_alike(tmp_path):
    """The attack: records giving 0.556 under a header saying 0.990 were printed by analyze as `0.990: 18/18`."""
    _made(tmp_path / "a.json")
    _made(tmp_path / "b.json", mode="dense")
    assert ResultsFile.read(tmp_path / "a.json")["metrics"]["all"]["session"]["recall_all@5"] == pytest.approx(5 / 9)
    forged = _forged(tmp_path / "a.json", _set("metrics", "all", "session", "recall_all@5", value=0.99))
    said = f"{forged}: field metrics.all.session.recall_all@5 is 0.99 but the records make it 0.5555"
    for args in (["analyze", forged], ["analyze", "--html", tmp_path / "r.html", forged],
                 ["compare", tmp_path / "b.json", forged], ["analyze", "--compare", tmp_path / "b.json", forged],
                 ["board", tmp_path / "b.json", forged, "--output", tmp_path / "board", "--resamples", 100]):
        code, output = _run(*args)
        assert code == 2 and said in output, (args, output)
        assert len(output.strip().splitlines()) == 1, output
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "board" / "index.html").exists()


@pytest.mark.parametrize("edit, field", [
    (_set("metrics", "by_category", "c2", "session", "recall_any@5", value=1.0),
     "field metrics.by_category.c2.session.recall_any@5 is 1.0 but the records make it 0.0"),
    (_set("metrics", "all", "evaluable", "session", value=18), "field metrics.all.evaluable.session is 18"),
    (_set("metrics", "by_category", "c2", "evaluable", value={"session": 4}), "field metrics.by_category.c2.evaluable"),
    (_set("metrics", "by_category", "c3", value={"session": {}, "turn": {}, "evaluable": {"session": 0, "turn": 0}}),
     "field metrics.by_category.c3 is {"),
    (_set("metrics", "headline", value=0.99), "field metrics.headline is 0.99 but the records give no such field"),
    (lambda data: data["metrics"]["all"].pop("evaluable"), "field metrics.all.evaluable is missing"),
    (_set("metrics_by_profile", "expected-text", "all", "turn", "recall_any@10", value=0.99),
     "field metrics_by_profile.expected-text.all.turn.recall_any@10 is 0.99 but the records make it 0.5555"),
    (_set("metrics_by_profile", "expected-text", "by_category", "c2", "turn", "recall_all@5", value=1.0),
     "field metrics_by_profile.expected-text.by_category.c2.turn.recall_all@5 is 1.0 but the records make it 0.0"),
    (_set("metrics_by_profile", "expected-text", "own_corpus", value=False),
     "field metrics_by_profile.expected-text.own_corpus is False but the records make it True"),
    (_set("retrieval_evaluable", value=10), "field retrieval_evaluable is 10 but the records make it 9"),
    (_set("abstentions_excluded", value=0), "field abstentions_excluded is 0 but the records make it 1"),
    (_set("excluded", value=2), "field excluded is 2 but the records make it 0"),
])
def test_every_mean_and_denominator_of_the_header_is_recomputed(tmp_path, edit, field):
    _made(tmp_path / "a.json")
    forged = _forged(tmp_path / "a.json", edit)
    with pytest.raises(ResultsError) as refused:
        ResultsFile.read(forged)
    assert f"{forged}: {field}" in str(refused.value)


@pytest.mark.parametrize("value", [7.5, float("nan"), 0.5, "1", None])
def test_a_forged_ceiling_is_refused(tmp_path, value):
    """The board printed 7.500 and nan: the ceiling is recomputed from the file's own gold (one gold session a
    question here: every question can be found whole, so it is 1.0 at every K)."""
    results = _made(tmp_path / "a.json")
    assert results["metrics"]["all"]["ceiling"]["session"]["recall_all@5"] == 1.0
    forged = _forged(tmp_path / "a.json", _set("metrics", "all", "ceiling", "session", "recall_all@5", value=value))
    code, output = _run("board", forged, "--output", tmp_path / "board", "--resamples", 100)
    assert code == 2 and f"{forged}: field metrics.all.ceiling.session.recall_all@5 is " in output, output
    assert "but the records make it 1.0" in output and len(output.strip().splitlines()) == 1


def test_excluded_misses_cannot_choose_which_questions_are_compared(tmp_path):
    """The attack: b marks its misses excluded (null metrics, a consistent header) and ties a winner; the dataset,
    not the run, decides which questions are excluded, so compare, analyze --compare (even forced) and the board
    refuse the pair naming the questions."""
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    _made(a, {**HITS, "c1:q1": 1})
    _made(b, {**HITS, "c1:q1": 0, "c2:q5": 0}, excluded=("c1:q1", "c2:q5"), mode="dense")
    ResultsFile.read(b)  # the file alone is what its records say
    for args in (["compare", a, b], ["analyze", "--compare", a, b], ["analyze", "--compare", "--force", a, b],
                 ["board", a, b, "--output", tmp_path / "board", "--resamples", 100]):
        code, output = _run(*args)
        assert code == 2, (args, output)
        assert f"{b}: 2 question(s) decided otherwise than in {a}" in output, output
        assert "question c1:q1 is excluded here, neither abstention nor excluded there" in output
        assert "question c2:q5 is excluded" in output and len(output.strip().splitlines()) == 1


def test_an_abstention_marked_on_one_side_only_is_refused(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _made(a)
    _made(b, {**HITS, "c1:q2": None}, mode="dense")
    code, output = _run("compare", a, b)
    assert code == 2 and "question c1:q2 is an abstention here, neither abstention nor excluded there" in output


@pytest.mark.parametrize("tuning, said", [
    ({"tuned_on_this_data": True, "tuned_on": None}, "field tuning.weights_file is missing"),
    ([1, 2], "field tuning is list, not an object or null"),
    ("w.json", "field tuning is str, not an object or null"),
    ({"weights_file": 3, "tuned_on_this_data": True}, "field tuning.weights_file is 3, not a text"),
    ({"weights_file": "w.json", "tuned_on_this_data": "yes"}, "field tuning.tuned_on_this_data is 'yes', not true"),
    ({"weights_file": "w.json", "tuned_on_this_data": True, "tuned_on": [1]},
     "field tuning.tuned_on is [1], not an object or null"),
    ({"weights_file": "w.json", "tuned_on_this_data": True, "label": 5}, "field tuning.label is 5, not a text or null"),
    ({"weights_file": "w.json", "tuned_on_this_data": True, "items_tuned_on": "Ann"},
     "field tuning.items_tuned_on is 'Ann', not a list of texts"),
    ({"weights_file": "w.json", "tuned_on_this_data": True, "items_tuned_on": [1]},
     "field tuning.items_tuned_on is [1], not a list of texts"),
])
def test_a_malformed_tuning_block_is_one_line_in_compare_and_board(tmp_path, tuning, said):
    """It gave `KeyError: 'weights_file'` and an `AttributeError` on a list in compare, and failed a whole board."""
    _made(tmp_path / "a.json")
    _made(tmp_path / "b.json", mode="dense")
    forged = _forged(tmp_path / "b.json", _set("tuning", value=tuning))
    for args in (["compare", tmp_path / "a.json", forged], ["analyze", forged],
                 ["board", tmp_path / "a.json", forged, "--output", tmp_path / "board", "--resamples", 100]):
        code, output = _run(*args)
        assert code == 2 and f"{forged}: {said}" in output, (args, output)
        assert len(output.strip().splitlines()) == 1 and "Traceback" not in output


def test_analyze_says_a_run_was_tuned_on_its_data_as_the_run_does(tmp_path):
    from coordinator.results.optimize import TUNED_LABEL
    from coordinator.results.report import tuning_lines

    plain = tmp_path / "plain.json"
    _made(plain)
    _made(tmp_path / "tuned.json")
    tuned = _forged(tmp_path / "tuned.json", _set("tuning", value={
        "weights_file": "realmem.weights.json", "tuned_on": {"dataset_checksum": "abc"}, "tuned_on_this_data": True,
        "label": TUNED_LABEL}))
    line = tuning_lines(json.loads(open(tuned).read()))[0]  # the line the run prints under its table
    assert TUNED_LABEL.upper() in line
    code, output = _run("analyze", tuned, "--html", tmp_path / "r.html")
    assert code == 0 and line in output.splitlines()
    assert line in (tmp_path / "r.html").read_text()
    code, output = _run("analyze", plain)
    assert code == 0 and TUNED_LABEL.upper() not in output
