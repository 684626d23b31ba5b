"""The report, the checks and the reducer ask a profile's declaration: a profile a new benchmark declares is
printed with its own notes, its stored metrics are re-checked by its own code, and its rules decide what is
counted."""

import pytest

from adapters.errors import ResultsError
from adapters.profiles import profile
from coordinator.results.checks import check_results
from coordinator.results.report import metrics_table, profile_lines
from coordinator.results.summary import scored_without_gold
from tests.adapters.test_profiles import TOY, TOY_NOTE, toy_profile

BLOCK = {"session": {"recall_all@5": 1.0}, "turn": None, "evaluable": {"session": 1, "turn": 0}}


def _results(chosen: str, other: str) -> dict:
    return {"scoring_profile": chosen, "metrics_by_profile": {
        chosen: {"own_corpus": True, "corpus": chosen, "all": BLOCK},
        other: {"own_corpus": False, "corpus": chosen, "all": BLOCK}}}


def test_a_new_profile_prints_its_own_note_not_longmemevals():
    official_note = profile("longmemeval-official").notes.table
    with toy_profile():
        lines = profile_lines(_results(TOY, "expected-text"))
    assert f"note: {TOY_NOTE}" in lines
    assert f"note: {official_note}" not in lines and not any("citable official" in line for line in lines)
    lines = profile_lines(_results("expected-text", "longmemeval-official"))  # LongMemEval's run keeps its notes
    assert lines[-1] == f"note: {official_note}" and "(citable official numbers" in lines[-2]


def test_the_closing_notes_are_the_chosen_profiles():
    results = {"metrics": {"all": BLOCK}, "question_count": 1, "retrieval_evaluable": 1, "abstentions_excluded": 0,
               "excluded": 0, "failed": 0, "short_rankings": 2, "scored_without_gold": 1}
    official = metrics_table({**results, "scoring_profile": "longmemeval-official"})
    assert "note: for 2 questions the system returned fewer docs" in official
    assert "of the evaluable, 1 have no has_answer user turn" in official
    with toy_profile():
        toy = metrics_table({**results, "scoring_profile": TOY})
    assert "fewer docs" not in toy and "has_answer" not in toy


def _record(stored: dict) -> dict:
    return {"question_id": "q1", "item_id": "q1", "status": "ok", "metrics": stored, "metrics_by_profile": {TOY: stored},
            "gold": {"sessions": ["s2"], "turns": []},
            "candidates": [{"metadata": {"session_id": "s1"}}, {"metadata": {"session_id": "s2"}}]}


def test_the_checks_recheck_a_new_profile_with_its_own_code():
    right = {"session": {"recall_any@1": 1.0, "recall_all@1": 1.0}, "turn": None}
    wrong = {"session": {"recall_any@1": 0.0, "recall_all@1": 1.0}, "turn": None}
    with toy_profile():
        check_results({"scoring_profile": TOY, "records": [_record(right)]})
        with pytest.raises(ResultsError, match=r"question q1: field metrics.session.recall_any@1: stored 0.0"):
            check_results({"scoring_profile": TOY, "records": [_record(wrong)]})
    with pytest.raises(ResultsError, match=f"field scoring_profile is '{TOY}', not one of expected-text"):
        check_results({"scoring_profile": TOY, "records": [_record(right)]})


def test_questions_without_gold_are_counted_where_the_profile_scores_them():
    records = [{"metrics": {"session": {}}, "gold": {"sessions": ["s"], "turns": []}}]
    assert scored_without_gold(records, "longmemeval-official") == 1
    assert scored_without_gold(records, "expected-text") == 0 and scored_without_gold(records, None) == 0
    with toy_profile(scores_without_gold=True):
        assert scored_without_gold(records, TOY) == 1
