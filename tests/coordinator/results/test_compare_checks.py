"""`compare` refuses a results file that contradicts itself, naming the file, the question and the field."""

import json
import math

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.defaults import K_VALUES
from adapters.errors import ResultsError
from adapters.benchmarks.longmemeval.reader import LongMemEval
from adapters.generators.longmemeval_s import write as synth_write
from adapters.records import candidate, question_record
from coordinator.cli import main
from coordinator.results.run_files import ResultsFile
from coordinator.results.checks import check_results
from coordinator.results.compare import compare_files, paired
from coordinator.results.score import score_rankings
from coordinator.running.reducer import reduce_run
from tests.coordinator.results.test_compare import HITS_A, HITS_B, results_file
from tests.factories import remade_header, run_context


def _edit(path, change) -> str:
    data = json.loads(open(path).read())
    change(data)
    with open(path, "w") as out:
        out.write(json.dumps(data))  # json.dumps writes NaN and Infinity as the attacker's file would
    return str(path)


def _by_id(data, qid):
    return next(r for r in data["records"] if r["question_id"] == qid)


def _set_metric(qid, level, key, value):
    def change(data):
        record = _by_id(data, qid)
        record["metrics"][level][key] = value
        record["metrics_by_profile"]["expected-text"][level][key] = value
    return change


def compare(*args):
    return CliRunner().invoke(main, ["compare", *map(str, args), "--resamples", "200"])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e6, -50, True, "0.5"])
def test_a_metric_value_that_is_no_number_in_0_1_is_refused_and_no_json_is_written(tmp_path, value):
    a = results_file(tmp_path / "a.json", HITS_A)
    b = _edit(results_file(tmp_path / "b.json", HITS_B, mode="full"),
              _set_metric("c1:q1", "session", "ndcg_any@10", value))
    out = tmp_path / "cmp.json"
    result = compare(a, b, "--json", out)
    assert result.exit_code == 2, result.output
    assert "b.json: question c1:q1: field metrics.session.ndcg_any@10" in result.output
    assert not out.exists()


def test_a_repeated_question_id_is_refused(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)

    def repeat(data):
        copy = json.loads(json.dumps(_by_id(data, "c2:q1")))
        data["records"].append(copy)
        data["question_count"] += 1
    b = _edit(results_file(tmp_path / "b.json", HITS_B, mode="full"), repeat)
    result = compare(a, b)
    assert result.exit_code == 2
    assert "b.json: question c2:q1: listed twice" in result.output


def test_complete_true_over_failed_records_is_refused(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)

    def lie(data):
        data["complete"] = True
        data["failures"] = {"items": 0, "item_ids": [], "questions": 0, "question_ids": [],
                            "items_without_question_ids": []}
        data["failed"] = 0
    b = _edit(results_file(tmp_path / "b.json", HITS_B, mode="full", failed=("c2",)), lie)
    result = compare(a, b, "--count-failed-as-miss")
    assert result.exit_code == 2
    assert "b.json: field complete is True but 2 of its 5 records failed" in result.output


def test_a_header_count_that_disagrees_with_the_records_is_refused(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)
    b = _edit(results_file(tmp_path / "b.json", HITS_B, mode="full"), lambda d: d.update(question_count=10))
    result = compare(a, b)
    assert result.exit_code == 2 and "b.json: field question_count is 10 but the records make it 5" in result.output


def test_a_stored_metric_that_its_own_ranking_and_gold_contradict_is_refused(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)
    # c2:q1 is a miss in b's ranking; the file claims a hit on every metric of it
    b = results_file(tmp_path / "b.json", HITS_B, mode="full")
    for level, key in (("session", "recall_all@5"), ("session", "recall_any@5"), ("session", "ndcg_any@10"),
                       ("turn", "recall_any@10")):
        _edit(b, _set_metric("c2:q1", level, key, 1.0))
    result = compare(a, b)
    assert result.exit_code == 2
    assert "b.json: question c2:q1: field metrics.session.recall_any@5: stored 1.0, but the record's own " \
           "ranking and gold give 0.0" in result.output


def test_a_question_nulled_without_a_reason_is_refused(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)

    def null(data):
        record = _by_id(data, "c2:q1")
        record["metrics"] = None
        record["metrics_by_profile"]["expected-text"] = None
    b = _edit(results_file(tmp_path / "b.json", HITS_B, mode="full"), null)
    result = compare(a, b)
    assert result.exit_code == 2 and "question c2:q1: field metrics is null" in result.output


def test_a_single_question_with_differing_ndcg_gets_p_1_not_a_crash():
    entry = paired({"q": 0.5}, {"q": 0.75}, hit_or_miss=False, resamples=200)
    assert entry["n"] == 1 and entry["p_value"] == 1.0 and entry["ci95"] == [0.25, 0.25]
    assert entry["delta"] == pytest.approx(0.25)


def test_paired_refuses_a_value_that_is_not_finite():
    with pytest.raises(ResultsError, match="question b: a value that is not a finite number"):
        paired({"a": 0.5, "b": 0.5}, {"a": 0.75, "b": float("nan")}, hit_or_miss=False, resamples=200)


# --- the validator against the project's own metric code, on rankings and gold drawn at random ---------------

_TURNS = [f"S{s}:{t}" for s in range(4) for t in range(3)]


@st.composite
def _records(draw):
    """Records as a run makes them: a random ranking of turns, random turn and session gold."""
    count = draw(st.integers(1, 4))
    records = []
    for n in range(count):
        ranked = draw(st.permutations(_TURNS))[:draw(st.integers(0, len(_TURNS)))]
        gold_turns = draw(st.lists(st.sampled_from(_TURNS), max_size=3, unique=True))
        gold_sessions = sorted({t.split(":")[0] for t in gold_turns}) or draw(
            st.lists(st.sampled_from(["S0", "S1", "S2", "S3"]), min_size=1, max_size=2, unique=True))
        question = {"question_id": f"q{n}", "question": "?", "gold_sessions": gold_sessions,
                    "gold_turns": gold_turns, "abstention": False}
        candidates = [candidate(rank, t, session_id=t.split(":")[0], turn_id=t) for rank, t in enumerate(ranked, 1)]
        records.append(question_record(question, "c1", candidates, level="turn", k_values=K_VALUES,
                                       profile="expected-text", worker="w", attempt=1))
    return records


def _file(records) -> dict:
    return {"_path": "r.json", "scoring_profile": "expected-text", "records": records, "complete": True,
            "question_count": len(records), "failed": 0}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records())
def test_every_file_the_metric_code_writes_passes(records):
    check_results(_file(records))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records(), st.data())
def test_any_one_changed_metric_is_refused_naming_its_question_and_field(records, data):
    record = data.draw(st.sampled_from(records))
    level = data.draw(st.sampled_from([lv for lv in ("session", "turn") if record["metrics"][lv]]))
    key = data.draw(st.sampled_from(sorted(record["metrics"][level])))
    old = record["metrics"][level][key]
    new = data.draw(st.one_of(st.floats(0, 1).filter(lambda v: abs(v - old) > 1e-6),
                              st.sampled_from([math.nan, math.inf, -1e-3, 1.0001, 1e6, -50])))
    record["metrics"][level][key] = new
    record["metrics_by_profile"]["expected-text"][level][key] = new
    with pytest.raises(ResultsError) as refused:
        check_results(_file(records))
    assert f"r.json: question {record['question_id']}: field metrics.{level}.{key}" in str(refused.value)


# --- the official profile: recalls recomputed from a real scored file -----------------------------------------


@pytest.fixture(scope="module")
def official_file(tmp_path_factory):
    """A results file `memfarm score` makes under the official profile from rankings of a generated file."""
    tmp = tmp_path_factory.mktemp("official")
    data = tmp / "lme.json"
    synth_write(data, 4, seed=3, scale=0.1)
    adapter = LongMemEval(data, None, "longmemeval-official")
    adapter.scan()
    rankings = tmp / "rankings.jsonl"
    lines = []
    for n, item in enumerate(adapter.iter_items()):
        turns = [t["turn_id"] for t in item["turns"]]
        turns = turns[n::2] + turns[:n:-2]  # some rankings find the gold early, some late
        lines.append(json.dumps({"question_id": item["item_id"], "ranked": turns}))
    rankings.write_text("\n".join(lines) + "\n")
    outcomes, _ = score_rankings(adapter, str(rankings), "turn", "longmemeval-official", K_VALUES)
    context = run_context(benchmark_title="LongMemEval", dataset_path=str(data), system_config={"name": "rankings"},
                          scoring_profile="longmemeval-official", k_values=K_VALUES)
    results, _ = reduce_run(outcomes, context, elapsed_seconds=0.0, commit="c")
    path = tmp / "r.json"
    path.write_text(json.dumps(results))
    return path


def test_an_official_file_passes_and_a_changed_recall_or_ndcg_is_refused(official_file, tmp_path):
    check_results(ResultsFile.read(official_file))
    data = json.loads(official_file.read_text())
    record = next(r for r in data["records"] if r["metrics"] and r["metrics"]["turn"]["recall_any@50"] == 1.0
                  and r["metrics"]["turn"]["recall_all@1"] == 0.0)
    for key, new in (("recall_all@1", 1.0), ("ndcg_any@50", 0.0)):
        changed = json.loads(json.dumps(data))
        target = _by_id(changed, record["question_id"])
        for block in (target["metrics"], target["metrics_by_profile"]["longmemeval-official"]):
            block["turn"][key] = new
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(changed))
        with pytest.raises(ResultsError, match=f"question {record['question_id']}: field metrics.turn.{key}"):
            compare_files([ResultsFile.read(official_file), ResultsFile.read(path)], resamples=200)


def test_the_headers_count_the_questions_paired_not_only_the_files_questions(tmp_path):
    # HITS_A / HITS_B: 5 questions, one an abstention in both: every row pairs 4
    a = results_file(tmp_path / "a.json", HITS_A)
    b = results_file(tmp_path / "b.json", HITS_B, mode="full")
    result = compare(a, b)
    assert result.exit_code == 0, result.output
    assert "4 of its 5 questions paired" in result.output
    page = tmp_path / "report.html"
    assert CliRunner().invoke(main, ["analyze", a, b, "--html", str(page)]).exit_code == 0
    paired_part = page.read_text().split("id='paired'")[1]
    assert "4 of its 5 questions paired" in paired_part and "; 5 questions;" not in paired_part


def test_a_file_whose_gold_was_changed_to_fit_its_metrics_is_refused_against_the_baseline(tmp_path):
    a = results_file(tmp_path / "a.json", HITS_A)

    def regold(data):  # c2:q1 missed D1:1; claim its gold was what it ranked, and a hit
        record = _by_id(data, "c2:q1")
        from adapters.metrics import level_metrics

        record["gold"] = {"sessions": ["D9"], "turns": ["D9:1"]}
        record["metrics"] = {"session": level_metrics(["D9", "D8"], ["D9"], (5, 10)),
                             "turn": level_metrics(["D9:1", "D8:2"], ["D9:1"], (5, 10))}
        record["metrics_by_profile"]["expected-text"] = record["metrics"]
        remade_header(data)  # the header agrees with the edited records
    b = _edit(results_file(tmp_path / "b.json", HITS_B, mode="full"), regold)
    check_results(ResultsFile.read(b))  # consistent in itself ...
    result = compare(a, b)
    assert result.exit_code == 2  # ... but not with the baseline's gold
    assert "b.json: question c2:q1: field gold differs from the baseline" in result.output
