"""`memfarm bench embedders` end to end, kept small: MiniLM, one LoCoMo conversation, one mode, one length."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.helpers import independent_session_metrics

pytestmark = pytest.mark.slow


def test_the_bench_writes_speed_quality_and_cost_per_model(locomo_path, tmp_path):
    out = tmp_path / "embedders.json"
    result = CliRunner().invoke(main, ["bench", "embedders", "--embedder", "minilm", "--locomo", str(locomo_path),
                                       "--conversations", "1", "--mode", "dense", "--lengths", "16",
                                       "--texts-per-length", "4", "--rounds", "1", "--workdir", str(tmp_path / "wd"),
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert (row["embedder"], row["backend"]) == ("minilm", "torch")
    assert row["signature"]["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert set(row["speed"]) == {"16 tokens", "as generated"} and row["speed"]["16 tokens"]["mean_tokens"] == 16.0
    assert row["speed"]["as generated"]["mean_tokens"] > 16.0, "texts as generated are longer, and counted whole"
    assert all(r["texts_per_second"] > 0 for r in row["speed"].values())
    cost = row["cost_500_longmemeval_s_questions"]["machine_hours_one_2_core_machine"]
    per_question = data["distinct_texts_per_full_scale_question"]
    assert cost == round(500 * per_question / row["speed"]["as generated"]["texts_per_second"] / 3600, 2)
    dense = row["locomo"]["dense"]
    assert dense["peak_rss_mib"] > 100 and dense["evaluable"] > 0
    # the quality figures are the run's own results file, recomputed here from its records
    records = json.loads((tmp_path / "wd" / "locomo_minilm_torch_dense.json").read_text())["records"]
    evaluable = [r for r in records if r["status"] == "ok" and r["expected_ids"] and not r["abstention"]]
    assert len(evaluable) == dense["evaluable"]
    recall = sum(independent_session_metrics(r, 5)["recall_any@5"] for r in evaluable) / len(evaluable)
    assert dense["session_recall_any@5"] == round(recall, 4)
    assert "minilm  torch" in result.output and "h/500q" in result.output
