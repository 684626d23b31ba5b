"""The M-shaped generator against the published M file's measured facts: about 476 sessions a question of
about 10.3 turns, repeated session ids with identical content on different dates in 449 of 500 histories,
sessions shared across questions at a chosen rate, evidence anywhere in the history; and a file streamed."""

import json
import statistics
from collections import defaultdict

import pytest
from click.testing import CliRunner

from adapters.generators import longmemeval_m as M
from adapters.jsonstream import iter_array
from adapters.generators.longmemeval_s import DISTINCT_SESSION_SHARE
from coordinator.cli import main


@pytest.fixture(scope="module")
def small_m():
    """60 questions of 40 sessions: the structure at a size a test can afford."""
    return M.generate(60, seed=3, sessions=40)


def test_full_size_questions_hold_about_476_sessions_of_s_length():
    questions = M.generate(3, seed=1)
    counts = [len(q["haystack_sessions"]) for q in questions]
    assert all(abs(c - M.SESSIONS_PER_QUESTION) <= 12 for c in counts), counts
    turns = [len(s) for q in questions for s in q["haystack_sessions"]]
    assert abs(statistics.mean(turns) - 10.3) < 0.6
    for q in questions:
        assert len(q["haystack_dates"]) == len(q["haystack_session_ids"]) == len(q["haystack_sessions"])
        assert q["haystack_dates"] == sorted(q["haystack_dates"]) or q["haystack_dates"][-1] > q["question_date"]


def test_repeated_ids_have_identical_content_on_different_dates_in_449_of_500_histories(small_m):
    with_repeats = 0
    for q in small_m:
        occurrences = defaultdict(list)
        for sid, session, date in zip(q["haystack_session_ids"], q["haystack_sessions"], q["haystack_dates"]):
            occurrences[sid].append((json.dumps(session), date))
        repeated = {sid: occ for sid, occ in occurrences.items() if len(occ) > 1}
        with_repeats += bool(repeated)
        for sid, occ in repeated.items():
            assert len({content for content, _ in occ}) == 1, f"{sid}: repeated with other content"
            assert len({date for _, date in occ}) == len(occ), f"{sid}: repeated on the same date"
            assert "answer" not in sid
    assert with_repeats == round(M.REPEATED_ID_HISTORIES * len(small_m))


def test_sessions_repeat_across_questions_at_the_asked_sharing_with_one_content_per_id(small_m):
    content, occurrences = {}, 0
    for q in small_m:
        for sid, session in dict(zip(q["haystack_session_ids"], q["haystack_sessions"])).items():
            occurrences += 1
            assert content.setdefault(sid, session) == session, f"{sid}: two contents in the file"
    assert abs(len(content) / occurrences - DISTINCT_SESSION_SHARE) < 0.05
    shared = M.generate(60, seed=3, sessions=40, distinct_share=0.3)
    ids = [sid for q in shared for sid in dict.fromkeys(q["haystack_session_ids"])]
    assert abs(len(set(ids)) / len(ids) - 0.3) < 0.05


def test_evidence_sessions_lie_across_the_whole_history(small_m):
    positions = []
    for q in small_m:
        ids = q["haystack_session_ids"]
        positions += [i / (len(ids) - 1) for i, sid in enumerate(ids) if sid in q["answer_session_ids"]]
        assert all(e in ids for e in q["answer_session_ids"])
    assert len(positions) > 80
    deciles = {min(9, int(p * 10)) for p in positions}
    assert deciles == set(range(10))
    assert 0.4 < statistics.mean(positions) < 0.6


def test_a_seed_gives_one_file_and_bad_sizes_are_refused():
    assert M.generate(4, seed=9, sessions=20) == M.generate(4, seed=9, sessions=20)
    assert M.generate(4, seed=9, sessions=20) != M.generate(4, seed=10, sessions=20)
    with pytest.raises(ValueError, match="sessions"):
        M.generate(2, sessions=3)
    with pytest.raises(ValueError, match="distinct_share"):
        M.generate(2, sessions=20, distinct_share=1.0)


def test_the_cli_writes_an_m_file_that_streams_back_equal(tmp_path):
    out = tmp_path / "m.json"
    result = CliRunner().invoke(main, ["synth", "longmemeval", "--shape", "m", "--questions", "5", "--sessions", "30",
                                       "--distinct-share", "0.5", "--seed", "4", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert list(iter_array(out)) == M.generate(5, seed=4, sessions=30, distinct_share=0.5)
    assert json.loads(out.read_text()) == M.generate(5, seed=4, sessions=30, distinct_share=0.5)
    refused = CliRunner().invoke(main, ["synth", "longmemeval", "--shape", "m", "--scale", "0.5", "--questions", "2",
                                        "--output", str(tmp_path / "x.json")])
    assert refused.exit_code != 0 and "--scale is for --shape s" in refused.output
