"""A run with failed items says so: at the top of its results file and in its closing table."""

from coordinator.results.report import metrics_table
from coordinator.running.reducer import reduce_run
from tests.factories import run_context

LOCOMO = {"benchmark": "locomo", "benchmark_title": "LoCoMo"}
LONGMEMEVAL = {"benchmark": "longmemeval", "benchmark_title": "LongMemEval-S"}


def _record(qid, item, hit, *, status="ok"):
    if status != "ok":
        return {"question_id": qid, "item_id": item, "status": status, "error": "boom", "metrics": None}
    metrics = {"session": {"recall_any@5": float(hit)}, "turn": None}
    return {"question_id": qid, "item_id": item, "status": "ok", "question_type": "t", "metrics": metrics,
            "metrics_by_profile": {"expected-text": metrics}}


def _reduce(outcomes, benchmark=LOCOMO):
    context = run_context(**benchmark, system_config={"name": "memoria", "retrieval_mode": "fusion"}, top_k=5,
                          k_values=(5, 10))
    return reduce_run(outcomes, context, elapsed_seconds=0.0, commit="c")[0]


def _item(item, questions, status="ok"):
    return {"item_id": item, "records": [_record(f"{item}:q{i}", item, 1, status=status) for i in range(questions)]}


def test_a_run_without_failures_is_complete():
    results = _reduce([_item("c1", 2), _item("c2", 1)])
    assert list(results)[1:3] == ["complete", "failures"]  # at the top, after the format
    assert results["complete"] is True
    assert results["failures"] == {"items": 0, "item_ids": [], "questions": 0, "question_ids": [],
                                   "items_without_question_ids": []}
    assert "INCOMPLETE" not in metrics_table(results)


def test_a_run_with_a_failed_item_names_it_and_its_questions():
    results = _reduce([_item("c1", 2), _item("c2", 3, status="failed"), _item("c3", 1)])
    assert results["complete"] is False
    assert results["failures"] == {"items": 1, "item_ids": ["c2"], "questions": 3,
                                   "question_ids": ["c2:q0", "c2:q1", "c2:q2"], "items_without_question_ids": []}
    table = metrics_table(results).splitlines()
    assert [line for line in table if "INCOMPLETE" in line] == \
        ["INCOMPLETE: 1 items failed (c2; 3 questions); every mean above leaves them out"]


def test_a_conversation_failed_before_its_questions_were_read_has_no_question_ids():
    unread = {"item_id": "c2", "records": [_record("c2", "c2", None, status="failed")]}
    results = _reduce([_item("c1", 1), unread])
    assert results["complete"] is False
    assert results["failures"]["items_without_question_ids"] == ["c2"]
    assert results["failures"]["question_ids"] == [] and results["failures"]["questions"] == 0
    assert "and the questions of 1 unread items" in metrics_table(results)


def test_a_longmemeval_item_is_its_question_so_its_id_is_known():
    failed = {"item_id": "q7", "records": [_record("q7", "q7", None, status="failed")]}
    ok = {"item_id": "q1", "records": [_record("q1", "q1", 1)]}
    results = _reduce([ok, failed], LONGMEMEVAL)
    assert results["failures"]["question_ids"] == ["q7"]
    assert results["failures"]["items_without_question_ids"] == []
