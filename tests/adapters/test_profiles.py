"""Scoring profiles are declarations in one registry: the metric code computes every registered profile a question
carries gold for, each reading what it declares, and an older name of a profile reads as that profile."""

from contextlib import contextmanager

import pytest

from adapters.errors import MemfarmError
from adapters.metrics import profile_metrics
from adapters.profiles import (PROFILE_ALIASES, PROFILES, Notes, Reads, ScoringProfile, agree, profile,
                               profile_name, register_profile, unregister_profile)

TOY = "toy-profile"
TOY_NOTE = "the toy profile counts the gold ids it was shown"


def _count(ranking, gold, level, k_values):
    """How many of the ranking's sessions are gold, and how long the ranking it read was: enough to tell what a
    profile was given."""
    hits = sum(1 for r in ranking if r["session_id"] in gold["sessions"])
    return {"session": {"recall_any@1": float(hits > 0), "recall_all@1": float(len(ranking) > 1)}, "turn": None}


def _recheck(stored, record, where):
    agree(stored, _count(record.ranking, record.gold, record.level, record.k_values), where)


@contextmanager
def toy_profile(reads=Reads.WHOLE, **more):
    """A profile declared by a test (as a new benchmark's folder would), taken out again afterwards."""
    declared = register_profile(ScoringProfile(TOY, "toy", ("session",), reads, "none", _count, _recheck,
                                               notes=Notes(table=TOY_NOTE), **more))
    try:
        yield declared
    finally:
        unregister_profile(TOY)


RANKED = [{"session_id": "s1", "turn_id": "s1#0"}, {"session_id": "s2", "turn_id": "s2#0"},
          {"session_id": "s3", "turn_id": "s3#0"}]
QUESTION = {"gold_sessions": ["s3"], "gold_turns": [], "gold_by_profile": {TOY: {"sessions": ["s3"]}}}


def test_the_built_in_profiles_are_declared_with_what_they_read():
    assert list(PROFILES) == ["expected-text", "longmemeval-official", "realmem"]
    assert profile("longmemeval-official").reads is Reads.WHOLE and profile("longmemeval-official").scores_without_gold
    assert profile("expected-text").reads is Reads.KEPT and not profile("expected-text").scores_without_gold
    assert profile("realmem").reads is Reads.KEPT


def test_an_older_name_reads_as_its_profile_and_an_unknown_one_is_refused():
    assert dict(PROFILE_ALIASES) == {"memoria": "expected-text"}
    assert profile("memoria") is profile("expected-text") and profile_name("memoria") == "expected-text"
    assert profile_name("nonsense") == "nonsense"
    with pytest.raises(MemfarmError, match="unknown scoring profile 'nonsense'; choose from expected-text"):
        profile("nonsense")


def test_a_profile_registered_in_a_test_is_computed_on_what_it_reads():
    with toy_profile(Reads.WHOLE):
        whole = profile_metrics(QUESTION, RANKED, level="turn", k_values=(1,), depth=1)
    with toy_profile(Reads.KEPT):
        kept = profile_metrics(QUESTION, RANKED, level="turn", k_values=(1,), depth=1)
    assert whole[TOY]["session"] == {"recall_any@1": 1.0, "recall_all@1": 1.0}  # s3, third, was read
    assert kept[TOY]["session"] == {"recall_any@1": 0.0, "recall_all@1": 0.0}  # only the kept candidate was
    # the expected-text profile reads the kept head whatever another profile reads
    assert whole["expected-text"] == kept["expected-text"]
    assert TOY not in profile_metrics(QUESTION, RANKED, level="turn", k_values=(1,), depth=1)


def test_a_question_without_a_profiles_gold_is_not_scored_under_it():
    with toy_profile():
        out = profile_metrics({"gold_sessions": ["s1"]}, RANKED, level="turn", k_values=(1,), depth=3)
    assert set(out) == {"expected-text"}


def test_a_profile_of_a_name_taken_is_refused():
    with toy_profile(), pytest.raises(MemfarmError, match="declared twice"):
        register_profile(ScoringProfile(TOY, "another", ("session",), Reads.KEPT, "none", _count, _recheck))
    with pytest.raises(MemfarmError, match="'memoria' is declared twice"):
        register_profile(ScoringProfile("other", "other", ("session",), Reads.KEPT, "none", _count, _recheck,
                                        aliases=("memoria",)))


def test_the_depth_a_system_is_asked_for_is_the_profiles():
    assert profile("longmemeval-official").depth(50, 400) == 400 and profile("longmemeval-official").depth(50, 3) == 50
    assert profile("expected-text").depth(50, 400) == 50
