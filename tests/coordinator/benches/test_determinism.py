"""`memfarm bench determinism`: rankings compared question by question, and the whole bench on a tiny file."""

import json

import pytest
from click.testing import CliRunner

from coordinator.benches.determinism import VARIANTS, differences
from coordinator.cli import main


def _ranked(ids, scores, metrics=None):
    return {"ids": ids, "scores": dict(zip(ids, scores)), "metrics": metrics or {"r": 1.0}}


def test_a_swap_is_reported_at_its_rank_with_the_reference_score_gap():
    reference = {"q1": _ranked([3, 1, 2], [0.9, 0.5, 0.4999]), "q2": _ranked([1, 2], [0.8, 0.7])}
    other = {"q1": _ranked([3, 2, 1], [0.9, 0.5, 0.4999]), "q2": _ranked([1, 2], [0.8, 0.7])}
    [entry] = differences(reference, other)
    assert entry["question_id"] == "q1" and entry["first_differing_rank"] == 2
    assert (entry["reference_id"], entry["other_id"]) == (1, 2)
    assert entry["score_gap"] == pytest.approx(0.0001)
    assert entry["metrics_equal"] is True


def test_equal_rankings_with_other_metrics_and_missing_questions_differ():
    reference = {"q1": _ranked([1, 2], [0.9, 0.8]), "q2": _ranked([1], [0.9])}
    other = {"q1": _ranked([1, 2], [0.9, 0.8], {"r": 0.0})}
    found = differences(reference, other)
    assert [e["question_id"] for e in found] == ["q1", "q2"]
    assert found[0]["metrics_equal"] is False and found[1] == {"question_id": "q2", "missing": True}
    assert differences(reference, reference) == []


@pytest.mark.slow
@pytest.mark.server
def test_every_variant_ranks_every_question_as_the_local_run_without_the_store(tmp_path):
    out = tmp_path / "determinism.json"
    result = CliRunner().invoke(main, ["bench", "determinism", "--questions", "3", "--scale", "0.03",
                                       "--workdir", str(tmp_path / "work"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    variants = report["datasets"]["longmemeval"]["variants"]
    assert list(variants) == [name for name, *_ in VARIANTS]
    for name, row in variants.items():
        assert row["questions"] == 3 and row["differing"] == [] and row["identical_share"] == 1.0, name
    assert "farm 3 workers, store on, items shuffled" in result.output and "wrote" in result.output
