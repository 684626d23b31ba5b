"""One pairing rule for results files: `analyze --compare`, `compare` and the board all ask `pairing`, so a pair
that differs in any one field is refused (or kept apart) by all three alike."""

import copy

import pytest

from coordinator.board.data import identity
from coordinator.results import analyze, compare, pairing
from adapters.errors import ResultsError

BASE = {"benchmark_key": "locomo", "benchmark": "LoCoMo", "dataset_checksum": "abc", "scoring_profile": "expected-text",
        "corpus": "expected-text", "records": [{"question_id": "q1"}, {"question_id": "q2"}]}
CHANGES = {"benchmark": {"benchmark_key": "realmem"}, "dataset checksum": {"dataset_checksum": "def"},
           "scoring profile": {"scoring_profile": "longmemeval-official", "corpus": "expected-text"},
           "corpus": {"corpus": "longmemeval-official"},
           "question set": {"records": [{"question_id": "q1"}, {"question_id": "q3"}]}}


def test_every_field_of_the_rule_is_changed_by_one_case():
    assert set(CHANGES) == set(pairing.PAIRING)


@pytest.mark.parametrize("field", list(CHANGES))
def test_a_pair_differing_in_one_field_is_told_apart_by_all_three(field):
    other = {**copy.deepcopy(BASE), **CHANGES[field]}
    assert [what for what, _, _ in pairing.differences(pairing.pairing_of(other), pairing.pairing_of(BASE))] == [field]
    assert pairing.differences(pairing.pairing_of(copy.deepcopy(BASE)), pairing.pairing_of(BASE)) == []
    run = {"pairing": pairing.pairing_of(BASE), "judged": False}
    assert identity(run) != identity({"pairing": pairing.pairing_of(other), "judged": False}), "the board"
    assert identity(run) == identity({"pairing": pairing.pairing_of(copy.deepcopy(BASE)), "judged": False})
    with pytest.raises(ResultsError, match=field):  # analyze --compare
        analyze.compare([BASE, other])
    if field != "question set":  # compare names a differing question set in full, question by question
        with pytest.raises(ResultsError, match=field.split()[0]):
            compare._check_identity(BASE, other)
