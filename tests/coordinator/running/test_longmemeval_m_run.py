"""A small LongMemEval-M-shaped file end to end: generated, its companion extracted, run here and on a farm of
two workers sharing vectors (with claims), under the official profile that keeps repeated sessions apart. The
records are the same, and the fleet encodes each distinct text about once."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main

pytestmark = [pytest.mark.server, pytest.mark.slow]


def _comparable(records):
    return [(r["question_id"], r["status"], r["metrics"], [c["id"] for c in r.get("candidates", [])]) for r in records]


def test_a_small_m_file_gives_the_same_records_here_and_on_the_farm(redis_server, workers, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMFARM_TASK_TIME_LIMIT", "300")
    data, questions = tmp_path / "m.json", tmp_path / "questions.json"
    made = CliRunner().invoke(main, ["synth", "longmemeval", "--shape", "m", "--questions", "4", "--sessions", "14",
                                     "--distinct-share", "0.4", "--seed", "31", "--output", str(data)])
    assert made.exit_code == 0, made.output
    raw = json.loads(data.read_text())
    assert any(len(set(q["haystack_session_ids"])) < len(q["haystack_session_ids"]) for q in raw)
    assert CliRunner().invoke(main, ["extract-questions", "--input", str(data), "--output", str(questions)]).exit_code == 0
    common = ["run", "longmemeval", "--dataset", str(data), "--questions", str(questions),
              "--scoring-profile", "longmemeval-official"]
    local = CliRunner().invoke(main, [*common, "--output", str(tmp_path / "local.json"),
                                      "--cache-dir", str(tmp_path / "local_cache")])
    assert local.exit_code == 0, local.output
    for name in ("w1", "w2"):
        workers(redis_server.url, name).wait_ready()
    farm = CliRunner().invoke(main, [*common, "--output", str(tmp_path / "farm.json"), "--shared-embeddings"],
                              env={"MEMFARM_BROKER": redis_server.url})
    assert farm.exit_code == 0, farm.output
    local_results, farm_results = (json.loads((tmp_path / f).read_text()) for f in ("local.json", "farm.json"))
    assert len(local_results["records"]) == 4
    assert _comparable(farm_results["records"]) == _comparable(local_results["records"])
    assert farm_results["metrics"] == local_results["metrics"]
    local_store, farm_store = (json.loads((tmp_path / f).read_text())["embedding_store"]
                               for f in ("local.manifest.json", "farm.manifest.json"))
    distinct = local_store["texts_encoded"]  # one process with a fresh store encodes each distinct text once
    assert distinct > 0
    assert farm_store["texts_encoded"] <= 1.2 * distinct
