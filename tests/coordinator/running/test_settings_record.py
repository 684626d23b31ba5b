"""Memoria's settings as a run records them: results files, manifests and the run metadata farm workers read."""

import json

from coordinator.running.farm_run import run_meta
from coordinator.running.spec import RunSpec
from tests.helpers import write_dataset

#: `arguments` and `system_settings` of a run of `--retrieval-mode full --without speaker_strip --window-size 3
#: --window-overlap 1 --feedback-terms 4`, as the results files and run metadata already written hold them.
WRITTEN_ARGUMENTS = {
    "benchmark": "longmemeval", "dataset": "d.json", "questions": None, "retrieval_mode": "full", "system": "memoria",
    "limit": None, "cache_dir": None, "rebuild_cache": False, "output": None,
    "scoring_profile": "longmemeval-official", "batch_size": 32, "extraction_threads": 4, "top_k": 50,
    "max_attempts": 3, "run_id": None, "weights_file": None, "without": ["speaker_strip"], "window_size": 3,
    "window_overlap": 1, "session_top_n": None, "feedback_turns": None, "feedback_terms": 4, "ablation": None,
    "max_seq_length": None, "embedding_store": True, "shared_embeddings": False, "embedder_backend": "torch",
    "command": "memfarm run longmemeval", "extra_settings": {}}
WRITTEN_SYSTEM_SETTINGS = {"mode": "full", "batch_size": 32, "max_workers": 4, "without": ["speaker_strip"],
                           "window_size": 3, "window_overlap": 1, "feedback_terms": 4}


def test_arguments_already_written_read_back_into_the_same_spec_and_record():
    spec = RunSpec.from_arguments(WRITTEN_ARGUMENTS)
    assert spec.memoria_settings == {"window_size": 3, "window_overlap": 1, "feedback_terms": 4}
    again = spec.arguments()
    # the same keys, in the same order; a file written before `--embedder` existed reads back as MiniLM's, one
    # written before `--max-pieces` or `--sentence-head` with the default (None: not given)
    written = dict(WRITTEN_ARGUMENTS)
    command_at = list(written).index("command")
    written = dict([*list(written.items())[:command_at], ("embedder", "minilm"), *list(written.items())[command_at:]])
    pieces_at = list(written).index("session_top_n")
    written = dict([*list(written.items())[:pieces_at], ("max_pieces", None), ("sentence_head", None),
                    *list(written.items())[pieces_at:]])
    assert list(again) == list(written)
    assert json.loads(json.dumps(again)) == written
    assert json.loads(json.dumps(spec.system_settings())) == WRITTEN_SYSTEM_SETTINGS


def test_settings_round_trip_through_the_run_metadata_a_worker_builds_its_system_from(tmp_path, monkeypatch):
    from workers.farm import tasks

    for name in ("MEMFARM_CACHE_DIR", "MEMFARM_MAX_SEQ_LENGTH", "MEMFARM_EMBEDDER_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tasks, "_SYSTEMS", {})
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.05)
    given = {"window_size": 3, "window_overlap": 2, "session_top_n": 2, "feedback_turns": 2, "feedback_terms": 4}
    spec = RunSpec("longmemeval", dataset=str(data), retrieval_mode="full", without=("speaker_strip", "date"),
                   memoria_settings=given, extra_settings={"mmr_lambda": 1.0, "weights": {"semantic": 1.0,
                                                                                          "window": 0.2}})
    system = spec.make_system()
    meta = json.loads(json.dumps(run_meta(spec, system, broker="redis://localhost:1/0").to_dict()))
    assert meta["system_settings"] == {"mode": "full", "batch_size": 32, "max_workers": 4,
                                       "without": ["speaker_strip", "date"], **given, "mmr_lambda": 1.0,
                                       "weights": {"semantic": 1.0, "window": 0.2}}
    rebuilt = tasks._system(meta)
    assert rebuilt.settings == system.settings and rebuilt.config["ranking"] == system.config["ranking"]
    assert {name: getattr(rebuilt.settings, name) for name in given} == given
    assert (rebuilt.settings.speaker_strip, rebuilt.settings.mmr_lambda) == (False, 1.0)
    assert rebuilt.settings.weights == {"semantic": 1.0, "window": 0.2, "date": 0.0}
    recorded = meta["context"]["arguments"]
    assert RunSpec.from_arguments(recorded).memoria_settings == given
    assert json.loads(json.dumps(RunSpec.from_arguments(recorded).arguments())) == recorded
