"""`python -m devtools same-rankings`: a ranking that moved is named, however small the score change."""

import json

import pytest

from devtools.same_rankings import same_rankings


def _run(path, rankings, encoded, kinds=None):
    records = [{"question_id": q, "candidates": [{"turn_id": t, "score": s} for t, s in ranked]}
               for q, ranked in rankings.items()]
    path.write_text(json.dumps({"records": records}))
    items = [{"stats": {"texts_encoded_by_kind": kinds}}] if kinds else [{"stats": {}}]
    path.with_name(path.stem + ".manifest.json").write_text(
        json.dumps({"embedding_store": {"texts_encoded": encoded}, "items": items}))
    return path


def test_two_swapped_candidates_are_a_differing_ranking_and_score_gaps_are_measured(tmp_path):
    before = _run(tmp_path / "before.json", {"q1": [("D1:1", 0.9), ("D1:2", 0.5)], "q2": [("D2:1", 0.7)]}, 100)
    after = _run(tmp_path / "after.json", {"q1": [("D1:2", 0.9), ("D1:1", 0.5)], "q2": [("D2:1", 0.7000001)]}, 40,
                 {"turns": 30, "pieces": 8, "windows": 0, "questions": 2})
    line = same_rankings(before, after, tmp_path / "out.json", "a test")
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["identical_rankings"] == 1 and out["rankings_that_differ"] == ["q1"] and "1 of 2" in line
    assert out["largest_score_difference"] == pytest.approx(1e-7, abs=1e-9)
    assert out["texts_encoded_after_over_before"] == 0.4 and out["encoded_after"]["by_kind"]["pieces"] == 8
    assert out["command"] and out["load"]


def test_runs_of_other_questions_are_refused(tmp_path):
    before = _run(tmp_path / "before.json", {"q1": []}, 1)
    after = _run(tmp_path / "after.json", {"q2": []}, 1)
    with pytest.raises(SystemExit, match="other questions"):
        same_rankings(before, after, tmp_path / "out.json", "")
