"""Under the official profile a question without a has_answer user turn is scored (LongMemEval's rules); the
closing table says how many such questions its means hold."""

import json

from adapters.benchmarks.longmemeval.reader import LongMemEval
from coordinator.results.report import metrics_table
from coordinator.results.score import score_rankings
from coordinator.running.reducer import reduce_run
from tests.adapters.benchmarks.longmemeval.test_reader import _raw
from tests.factories import run_context


def _results(tmp_path, profile):
    assistant_only = _raw(question_id="asst01")
    for turn in assistant_only["haystack_sessions"][1]:
        turn.pop("has_answer", None)
    assistant_only["haystack_sessions"][1][1]["has_answer"] = True  # the evidence is the assistant's turn
    data = tmp_path / "d.json"
    data.write_text(json.dumps([_raw(), _raw(question_id="bb22cc33"), assistant_only]))
    adapter = LongMemEval(data, None, profile)
    adapter.scan()
    rankings = tmp_path / "r.jsonl"
    rankings.write_text("".join(json.dumps({"question_id": i["item_id"], "ranked": [t["turn_id"] for t in i["turns"]]})
                                + "\n" for i in adapter.iter_items()))
    outcomes, _ = score_rankings(adapter, str(rankings), "turn", profile, (1, 5, 10))
    context = run_context(benchmark_title="LongMemEval", dataset_path=str(data), system_config={"name": "rankings"},
                          scoring_profile=profile, k_values=(1, 5, 10))
    return reduce_run(outcomes, context, elapsed_seconds=0.0, commit="c")


def test_the_closing_table_counts_the_questions_scored_without_a_has_answer_user_turn(tmp_path):
    results, manifest = _results(tmp_path, "longmemeval-official")
    without = next(r for r in results["records"] if r["question_id"] == "asst01")
    assert without["metrics"]["turn"]["recall_all@1"] == 1.0 and without["metrics"]["turn"]["recall_any@10"] == 0.0
    assert results["retrieval_evaluable"] == 3 and results["scored_without_gold"] == 1
    assert manifest["evaluation"]["scored_without_gold"] == 1
    assert "of the evaluable, 1 have no has_answer user turn" in metrics_table(results)


def test_under_expected_text_no_such_line(tmp_path):
    results, _ = _results(tmp_path, "expected-text")
    assert results["scored_without_gold"] == 0 and "have no has_answer user turn" not in metrics_table(results)
