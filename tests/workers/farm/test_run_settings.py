"""A run's system settings read from Redis are checked like any input: a worker writes only in its own
directories whatever a rewritten run meta says, and a wrongly typed setting is refused by name."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.helpers import write_dataset
from workers.farm.config import WorkerConfig
from workers.farm.run_settings import checked_settings


@pytest.fixture()
def staged(redis_server, tmp_path, monkeypatch):
    """A run staged for real (one item), and a ledger as a worker sees it."""
    from workers.farm import tasks
    from workers.farm.connection import connect
    from workers.farm.ledger import Ledger

    for name, value in (("_LEDGER", None), ("_SYSTEMS", {})):
        monkeypatch.setattr(tasks, name, value)
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.04)
    result = CliRunner().invoke(main, ["submit", "longmemeval", "--dataset", str(data), "--limit", "1",
                                       "--run-id", "target", "--cache-dir", str(tmp_path / "coordinator-cache")],
                                env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 0, result.output
    ledger = Ledger(connect(redis_server.url))
    return ledger, ledger.r.lrange("memfarm:target:order", 0, -1)[0].decode()


def _rewrite(ledger, **settings):
    """What a holder of the worker password can do: rewrite the run's meta in Redis."""
    meta = json.loads(ledger.r.get("memfarm:target:meta"))
    meta["system_settings"].update(settings)
    meta["embedding_store"] = True
    ledger.r.set("memfarm:target:meta", json.dumps(meta))


@pytest.mark.server
@pytest.mark.parametrize("worker_cache", [True, False], ids=["worker-with-cache-dir", "worker-without-cache-dir"])
def test_a_run_meta_naming_a_path_outside_the_worker_s_directories_is_refused(staged, tmp_path, monkeypatch,
                                                                              worker_cache):
    from workers.farm.tasks import process_item

    ledger, item_id = staged
    if worker_cache:
        monkeypatch.setenv("MEMFARM_CACHE_DIR", str(tmp_path / "worker-cache"))
    else:
        monkeypatch.delenv("MEMFARM_CACHE_DIR", raising=False)
    target = tmp_path / "site-packages" / "evil.pth"
    _rewrite(ledger, embedding_store=str(target))
    assert process_item(ledger, "target", item_id, "w1") == "refused"
    info = ledger.info("target", item_id)
    assert ledger.state("target", item_id) == "failed_final", info
    assert info["error"].startswith("refused by w1: run setting embedding_store: the path ")
    assert str(target) in info["error"] and info["error"].endswith("a run cannot choose where a worker writes")
    assert not target.exists() and not target.parent.exists()


@pytest.mark.server
def test_a_wrongly_typed_setting_is_refused_by_name(staged):
    from workers.farm.tasks import process_item

    ledger, item_id = staged
    _rewrite(ledger, batch_size="32; rm -rf /")
    assert process_item(ledger, "target", item_id, "w1") == "refused"
    assert ("run setting batch_size: expected a whole number of at least 1, got '32; rm -rf /'"
            in ledger.info("target", item_id)["error"])


def _meta(**settings):
    return {"system": "memoria", "system_settings": {"mode": "fusion", "batch_size": 8, **settings}}


@pytest.mark.parametrize("settings, words", [
    ({"mode": "everything"}, "run setting mode: choose from"),
    ({"max_workers": True}, "run setting max_workers: expected a whole number"),
    ({"max_seq_length": 4}, "run setting max_seq_length: expected a whole number of at least 8"),
    ({"without": "bm25"}, "run setting without: expected a list"),
    ({"embedder_backend": "/tmp/x.so"}, "run setting embedder_backend: choose from torch, onnx, onnx-int8"),
    ({"mmr_lambda": 7}, "run setting mmr_lambda: must be at most 1.0"),
    ({"weights": {"semantic": "1"}}, "run setting weights: signal semantic needs a finite number"),
    ({"onnx_dir": "/tmp"}, "run setting 'onnx_dir': system memoria takes no such setting"),
    ({"embedding_store": "../../x.sqlite"}, "lies outside this worker's cache dir"),
    ({"embedder": "/tmp/some-model"}, "run setting embedder: choose from minilm, mpnet, or a folder this worker was "
                                      "started with (--embedder), got '/tmp/some-model'"),
    ({"embedder": 7}, "run setting embedder: choose from minilm, mpnet"),
])
def test_each_setting_is_typed_and_bounded(settings, words, tmp_path):
    with pytest.raises(Exception) as caught:
        checked_settings(_meta(**settings), WorkerConfig(cache_dir=str(tmp_path / "cache")))
    assert words in str(caught.value)


def test_a_path_inside_the_worker_s_cache_dir_and_plain_settings_are_taken(tmp_path):
    cache = tmp_path / "cache"
    inside = str(cache / "embeddings.sqlite")
    settings = checked_settings(_meta(without=["bm25"], embedding_store=inside, mmr_lambda=0.5),
                                WorkerConfig(cache_dir=str(cache)))
    assert settings == {"mode": "fusion", "batch_size": 8, "without": ("bm25",), "embedding_store": inside,
                        "mmr_lambda": 0.5}
    none = WorkerConfig()
    assert checked_settings({"system": "my_system.py:Mine", "system_settings": {"anything": 1}}, none) == {}
    assert checked_settings({"system": "adamem", "system_settings": {"ablation": "semantic_only"}}, none) == \
        {"ablation": "semantic_only"}


def test_a_run_meta_carries_no_path_of_the_coordinator_s(tmp_path):
    from adapters.systems import make_system
    from coordinator.running.farm_run import run_meta
    from coordinator.running.spec import RunSpec

    spec = RunSpec(benchmark="longmemeval", dataset=str(write_dataset(tmp_path / "d.json", questions=2)),
                   cache_dir=str(tmp_path / "cache"))
    assert "embedding_store" in spec.system_settings(), "the local run keeps its store in its cache dir"
    meta = run_meta(spec, make_system("memoria"), broker="redis://x")
    assert "embedding_store" not in meta.system_settings and meta.embedding_store is True


def test_a_run_names_a_model_folder_only_where_the_worker_was_started_with_it(tmp_path):
    folder = str(tmp_path / "my-model")
    assert checked_settings(_meta(embedder="mpnet"), WorkerConfig())["embedder"] == "mpnet"
    with pytest.raises(Exception, match="run setting embedder"):
        checked_settings(_meta(embedder=folder), WorkerConfig())
    assert checked_settings(_meta(embedder=folder), WorkerConfig(embedder=folder))["embedder"] == folder
