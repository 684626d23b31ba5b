"""RunSpec: one spec from the options, and no option silently ignored."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from adapters.errors import MemfarmError
from coordinator.cli import main
from coordinator.running.spec import RunSpec
from tests.helpers import write_dataset

from tests.conftest import REPO


@pytest.mark.parametrize("spec, message", [
    (RunSpec("longmemeval", dataset="d.json", max_attempts=5, explicit=frozenset({"max_attempts"})), "farm setting"),
    (RunSpec("longmemeval", dataset="d.json", run_id="x", explicit=frozenset({"run_id"})), "farm setting"),
    (RunSpec("longmemeval", dataset="d.json", system="adamem", retrieval_mode="full",
             explicit=frozenset({"retrieval_mode"})), "no retrieval modes"),
    (RunSpec("longmemeval", dataset="d.json", ablation="full", explicit=frozenset({"ablation"})), "not a setting of memoria"),
    (RunSpec("locomo", dataset="d.json", questions="q.json", explicit=frozenset({"questions"})), "companion file"),
    (RunSpec("adamem-jsonl", dataset="d.jsonl", system="memoria", explicit=frozenset({"system"})), "must be adamem"),
    (RunSpec("adamem-synthetic", dataset="d.json", explicit=frozenset({"dataset"})), "built in"),
    (RunSpec("longmemeval", dataset="d.json", system="x.py:Mine", batch_size=8, explicit=frozenset({"batch_size"})),
     "built with no arguments"),
    (RunSpec("longmemeval"), "--dataset is required"),
    (RunSpec("longmemeval", dataset="d.json", rebuild_cache=True, explicit=frozenset({"rebuild_cache"})),
     "needs --cache-dir"),
    (RunSpec("locomo", dataset="d.json", retrieval_mode="fusion", without=("session",)),
     r"--without: mode fusion has no sources or ranking parts \['session'\] to leave out; it has fusion$"),
    (RunSpec("locomo", dataset="d.json", retrieval_mode="full", without=("bm25", "speaker_names")), r"\['speaker_names'\]"),
    (RunSpec("locomo", dataset="d.json", system="adamem", without=("bm25",)), "--without is not a setting of adamem"),
    (RunSpec("longmemeval", dataset="d.json", system="mem0", max_seq_length=64,
             explicit=frozenset({"max_seq_length"})), "not a setting of mem0"),
])
def test_settings_that_would_be_ignored_are_refused(spec, message):
    with pytest.raises(MemfarmError, match=message):
        spec.check(farm=False)


def test_shared_embeddings_need_the_store_they_share():
    spec = RunSpec("longmemeval", dataset="d.json", shared_embeddings=True, embedding_store=False,
                   explicit=frozenset({"shared_embeddings", "embedding_store"}))
    with pytest.raises(MemfarmError, match="drop --no-embedding-store"):
        spec.check(farm=True)
    with pytest.raises(MemfarmError, match="farm setting"):
        spec.check(farm=False)
    assert RunSpec("longmemeval", dataset="d.json", questions="q.json", shared_embeddings=True,
                   explicit=frozenset({"shared_embeddings"})).check(farm=True) == []


def test_defaults_given_by_nobody_are_not_refused_and_warnings_say_what_is_unused():
    assert RunSpec("longmemeval", dataset="d.json", questions="q.json").check(farm=False) == []
    warnings = RunSpec("longmemeval", dataset="d.json", questions="q.json", cache_dir="c",
                       explicit=frozenset({"cache_dir"})).check(farm=True)
    assert warnings == ["--cache-dir is not used by a farm run: each worker caches in its own --cache-dir"]
    assert "cannot snapshot" in RunSpec("locomo", dataset="d.json", system="adamem", cache_dir="c").check(farm=False)[0]


def test_the_settings_a_system_is_built_with():
    spec = RunSpec("longmemeval", dataset="d.json", retrieval_mode="dense", batch_size=8, extraction_threads=2)
    assert spec.system_settings() == {"mode": "dense", "batch_size": 8, "max_workers": 2}
    assert RunSpec("locomo", dataset="d", system="adamem", ablation="semantic_only").system_settings() == {
        "ablation": "semantic_only"}
    assert [s.ablation for s in RunSpec("adamem-synthetic").ablations()][-1] == "full"
    assert RunSpec("adamem-synthetic", ablation="full").ablations()[0].ablation == "full"
    each = RunSpec("adamem-synthetic", output="out/x.json", run_id="r").ablations()
    assert len({s.output for s in each}) == len({s.run_id for s in each}) == len(each) == 7
    assert each[-1].output == "out/x.full.json" and each[-1].run_id == "r.full"
    assert RunSpec("longmemeval", dataset="d", max_seq_length=64).system_settings()["max_seq_length"] == 64
    off = RunSpec("locomo", dataset="d", retrieval_mode="full", without=("speaker_strip", "bm25"))
    assert off.check(farm=False) == [] and off.system_settings()["without"] == ("speaker_strip", "bm25")
    assert off.make_system().config["ranking"]["switched_off"] == ["speaker_strip"]
    assert "without" not in RunSpec("locomo", dataset="d", retrieval_mode="full").system_settings()


def test_a_cli_refusal_is_one_line_and_exit_2(tmp_path):
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.05)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--run-id", "mine"])
    assert result.exit_code == 2 and "--run-id is a farm setting" in result.output
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--step-size", "0.5"])
    assert result.exit_code == 2 and "only means something with --optimize" in result.output
    result = CliRunner().invoke(main, ["score", "--benchmark", "locomo", "--dataset", str(data), "--rankings",
                                       str(data), "--questions", str(data)])
    assert result.exit_code == 2 and "companion file" in result.output


@pytest.mark.server
def test_submit_reads_the_embedding_signature_without_loading_the_model(redis_server, tmp_path):
    """A staged run's metadata carries the real model's signature, yet the coordinator never imports torch."""
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.05)
    code = ("import sys, json; from click.testing import CliRunner; from coordinator.cli import main;"
            "r = CliRunner().invoke(main, ['submit', 'longmemeval', '--dataset', sys.argv[1],"
            " '--run-id', 'sig']); print(json.dumps([r.exit_code, 'torch' in sys.modules,"
            " 'sentence_transformers' in sys.modules]))")
    proc = subprocess.run([sys.executable, "-c", code, str(data)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO), MEMFARM_BROKER=redis_server.url))
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [0, False, False], proc.stderr
    from coordinator.running.run_ledger import RunLedger, connect

    meta = RunLedger(connect(redis_server.url)).meta("sig")
    from memoria.embedder import Embedder

    assert meta["context"]["embedding_signature"] == Embedder.shared().signature
    assert meta["system_settings"]["mode"] == "fusion"


@pytest.mark.slow  # the real model
def test_without_on_the_command_line_reaches_the_system_and_the_results_say_so(tmp_path, embedder):
    data = write_dataset(tmp_path / "d.json", questions=2, seed=3, scale=0.05)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--retrieval-mode", "full",
                                       "--without", "speaker_strip", "--without", "session", "--without", "graph",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    system = json.loads(out.read_text())["settings_system"]
    assert system["ranking"]["switched_off"] == ["speaker_strip", "session"]
    assert system["ranking"]["speaker_strip"] is False and system["ranking"]["weights"]["session"] == 0.0
    assert "graph" not in system["sources"] and "bm25" in system["sources"]
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--retrieval-mode", "bm25",
                                       "--without", "bm25", "--output", str(tmp_path / "none.json")])
    assert result.exit_code == 2 and "--without: mode bm25 without bm25 has no source left to ask" in result.output
    assert not (tmp_path / "none.json").exists()


def test_windows_count_as_a_source_only_where_they_weigh_something(tmp_path):
    others = ("faiss", "bm25", "graph", "phrase", "attribute")
    with pytest.raises(MemfarmError, match="no source left to ask"):
        RunSpec("locomo", dataset="d.json", retrieval_mode="full", without=others).check(farm=False)
    weights = tmp_path / "w.json"  # written by an editor that puts a byte order mark first
    weights.write_bytes(b"\xef\xbb\xbf" + json.dumps({"semantic": 1.0, "window": 0.2}).encode())
    spec = RunSpec("locomo", dataset="d.json", retrieval_mode="full", without=others, weights_file=str(weights))
    assert spec.check(farm=False) == [] and spec.make_system().sources == ("window",)


def test_full_ranking_settings_from_the_command_line_are_checked_and_reach_the_system(tmp_path):
    weights = tmp_path / "w.json"
    weights.write_text(json.dumps({"semantic": 1.0, "window": 0.2}))
    spec = RunSpec("locomo", dataset="d.json", retrieval_mode="full", weights_file=str(weights), memoria_settings={
        "window_size": 3, "window_overlap": 1, "session_top_n": 2, "feedback_turns": 2, "feedback_terms": 4})
    assert spec.check(farm=False) == []
    config = spec.make_system().config
    assert config["windows"]["size"] == 3 and config["windows"]["overlap"] == 1
    assert config["ranking"]["session_top_n"] == 2 and config["ranking"]["feedback"] == {"turns": 2, "terms": 4}
    with pytest.raises(MemfarmError, match="--session-top-n sets the ranking of --retrieval-mode full, not fusion"):
        RunSpec("locomo", dataset="d.json", retrieval_mode="fusion", memoria_settings={"session_top_n": 2}).check(
            farm=False)
    with pytest.raises(MemfarmError, match="--feedback-terms is not a setting of adamem"):
        RunSpec("locomo", dataset="d.json", system="adamem", memoria_settings={"feedback_terms": 3}).check(farm=False)
    with pytest.raises(MemfarmError, match="--window-overlap: window size 6 with overlap 6"):
        RunSpec("locomo", dataset="d.json", retrieval_mode="full", memoria_settings={"window_overlap": 6}).check(
            farm=False)
    unused = RunSpec("locomo", dataset="d.json", retrieval_mode="full", memoria_settings={"window_size": 3}).check(
        farm=False)
    assert unused == ["--window-size is not used: windows weigh 0 unless --weights gives `window` a weight, and "
                      "windows weighing nothing are not built"]
    result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(weights), "--retrieval-mode", "dense",
                                       "--session-top-n", "2"])
    assert result.exit_code == 2 and "--session-top-n sets the ranking of --retrieval-mode full" in result.output
