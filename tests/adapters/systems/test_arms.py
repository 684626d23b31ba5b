"""The control arms: random (seeded by label and question) and recency (newest first), run like any system, marked
as arms, beside the ceiling the gold allows."""

import json

from click.testing import CliRunner

from adapters.systems import SYSTEMS, make_system
from coordinator.cli import main


def _docs(label, n):
    return [{"external_id": f"{label}-{i}", "label": label, "text": f"turn {i}", "props": {}} for i in range(n)]


def test_random_is_seeded_by_label_and_question_and_holds_to_the_label():
    arm = make_system("random")
    arm.reset()
    arm.ingest(_docs("a", 30) + _docs("b", 5))
    first = [h["external_id"] for h in arm.retrieve("a", "where do I live?", 10)]
    again = make_system("random")
    again.ingest(_docs("a", 30))
    assert [h["external_id"] for h in again.retrieve("a", "where do I live?", 10)] == first
    assert [h["external_id"] for h in arm.retrieve("a", "what do I eat?", 10)] != first
    assert len(first) == 10 and all(eid.startswith("a-") for eid in first)
    assert len(arm.retrieve("b", "anything", 10)) == 5


def test_recency_ranks_the_newest_doc_first_across_ingest_steps():
    arm = make_system("recency")
    arm.reset()
    arm.ingest(_docs("a", 3))
    arm.ingest([{"external_id": "a-new", "label": "a", "text": "t", "props": {}}])
    assert [h["external_id"] for h in arm.retrieve("a", "q", 3)] == ["a-new", "a-2", "a-1"]
    arm.reset()
    assert arm.retrieve("a", "q", 3) == []


def test_arms_are_declared_as_arms():
    assert SYSTEMS["random"].arm and SYSTEMS["recency"].arm and not SYSTEMS["memoria"].arm


def test_an_arm_runs_from_the_command_line_marked_with_the_ceiling_beside_it(locomo_path, tmp_path):
    out = tmp_path / "recency.json"
    result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(locomo_path), "--limit", "1",
                                       "--system", "recency", "--output", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    manifest = json.loads(out.with_name("recency.manifest.json").read_text())
    assert manifest["system"]["control_arm"] == "recency"
    scored = [r for r in results["records"] if r.get("metrics")]
    ceiling = results["metrics"]["all"]["ceiling"]["session"]
    for k in (1, 3, 5):  # recomputed from the raw gold: questions with at most k gold sessions
        assert ceiling[f"recall_all@{k}"] == sum(len(r["gold"]["sessions"]) <= k for r in scored) / len(scored)
        assert results["metrics"]["all"]["session"][f"recall_all@{k}"] <= ceiling[f"recall_all@{k}"]
    assert ceiling["recall_all@1"] < 1.0, "LoCoMo has multi-session questions"
    assert "ceiling" in result.output and "(recall_all a perfect system reaches)" in result.output
