"""What any system's answer may put in a results file: a flood fails its item once, with a count; a few strays are
dropped and named; a number that is not finite is written as null."""

import itertools
import json
import logging

import pytest

from adapters.errors import MemfarmError
from adapters.files import write_json
from adapters.hits import MAX_REJECTED_HITS, SystemOutputError, clean_hits
from workers.item.evaluate import evaluate_item

KNOWN = {f"item-1-{n:06d}" for n in range(10)}


def _hits(ids, score=1.0):
    return [{"external_id": i, "score": score} for i in ids]


def test_a_flood_of_hits_fails_once_with_its_count_and_logs_no_line_per_hit(caplog):
    ghosts = _hits(f"ghost-{n}" for n in range(200_000))
    with caplog.at_level(logging.WARNING), pytest.raises(SystemOutputError) as caught:
        clean_hits(ghosts, KNOWN, 10)
    assert "returned 200,000 hits for 10 asked (the item has 10 docs)" in str(caught.value)
    assert caught.value.field == "hits" and len(caplog.records) == 0


def test_more_strays_than_the_bound_within_the_count_fail_with_their_count():
    answer = _hits(sorted(KNOWN)[:5]) + _hits(f"ghost-{n}" for n in range(MAX_REJECTED_HITS + 1))
    with pytest.raises(SystemOutputError, match=f"{MAX_REJECTED_HITS + 1} of {len(answer)} hits were ids never"):
        clean_hits(answer, KNOWN, 10)


def test_a_few_strays_are_dropped_named_and_logged_in_one_line(caplog):
    answer = _hits(["ghost", sorted(KNOWN)[0], sorted(KNOWN)[0], *sorted(KNOWN)[1:]])
    with caplog.at_level(logging.WARNING):
        kept, problems = clean_hits(answer, KNOWN, 5)
    assert [h["external_id"] for h in kept] == sorted(KNOWN)[:5]
    assert problems == ["hit 0: unknown id 'ghost' dropped", f"hit 2: duplicate id '{sorted(KNOWN)[0]}' dropped",
                        "10 hits for top_k=5: truncated"]
    assert len([r for r in caplog.records if "system output rejected" in r.getMessage()]) == 1


def test_an_answer_that_never_ends_is_read_no_further_than_the_bound():
    endless = ({"external_id": "ghost", "score": 1.0} for _ in itertools.count())
    with pytest.raises(SystemOutputError, match=r"returned 31 hits for 10 asked"):
        clean_hits(endless, KNOWN, 10)


def test_a_number_that_is_not_finite_is_written_as_null_and_said(tmp_path):
    answer = [{"external_id": i, "score": float("nan"), "diagnostics": {"parts": [float("inf"), 1.0]}}
              for i in sorted(KNOWN)[:2]]
    kept, problems = clean_hits(answer, KNOWN, 5)
    assert kept[0]["score"] is None and kept[0]["diagnostics"]["parts"] == [None, 1.0]
    assert problems == ["4 numbers of the hits were not finite, written as null, e.g. hits[0].score nan"]
    json.loads((write_json(tmp_path / "kept.json", kept)).read_text(),
               parse_constant=lambda name: pytest.fail(f"{name} written"))


def test_a_flooding_system_fails_its_item_and_keeps_the_flood_out_of_its_records():
    class Flooding:
        name = "flooding"

        def reset(self):
            pass

        def ingest(self, docs):
            pass

        def retrieve(self, label, query, top_k):
            return _hits(f"ghost-{n}" for n in range(100_000))

    item = {"item_id": "i1", "benchmark": "locomo", "turns": [{"text": "a turn", "session_id": "s1", "turn_id": "t1", "props": {}}],
            "questions": [{"question_id": "q1", "question": "what?", "gold_sessions": ["s1"]}]}
    with pytest.raises(SystemOutputError, match="returned 100,000 hits for 10 asked"):
        evaluate_item(item, Flooding(), top_k=10)


def test_the_json_writer_refuses_a_number_that_is_not_finite_naming_where(tmp_path):
    target = tmp_path / "results.json"
    for bad in (float("inf"), float("nan"), float("-inf")):
        with pytest.raises(MemfarmError, match=r"records\[1\]\.score = .*: not a finite number"):
            write_json(target, {"records": [{"score": 1.0}, {"score": bad}]})
    assert not target.exists()
