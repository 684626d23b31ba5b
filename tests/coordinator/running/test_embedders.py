"""`--embedder mpnet` end to end: locally and on the farm with real workers, the model named in the results file
and manifest; a worker with MiniLM refuses an mpnet run naming both; a cache written with one model is never
read for the other. Kept small: one real LoCoMo conversation, trimmed to its first two sessions."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from coordinator.running.farm_run import watch
from coordinator.running.run_ledger import RunLedger, connect
from memoria.model_files import ModelFilesError, resolve
from tests.helpers import skip_outside_ci
from workers.farm.app import make_app

pytestmark = [pytest.mark.slow]

MPNET = "sentence-transformers/all-mpnet-base-v2"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def trimmed(locomo_path, tmp_path_factory):
    """The first LoCoMo conversation, its first two sessions, and the questions whose evidence lies in them."""
    try:
        resolve("mpnet")
    except ModelFilesError as exc:
        if "is not installed" in str(exc):
            skip_outside_ci(f"the mpnet extra is not installed ({exc})")
        raise
    sample = json.loads(locomo_path.read_text())[0]
    conversation = {k: v for k, v in sample["conversation"].items()
                    if k in ("speaker_a", "speaker_b") or k.split("_")[1] in ("1", "2")}
    qa = [q for q in sample["qa"] if q.get("evidence") and q.get("category") != 5
          and all(e.split(":")[0] in ("D1", "D2") for e in q["evidence"])][:6]
    path = tmp_path_factory.mktemp("embedders") / "locomo_trimmed.json"
    path.write_text(json.dumps([{"sample_id": sample["sample_id"], "conversation": conversation, "qa": qa}]))
    assert len(qa) >= 3
    return path


def _run(*args, env=None):
    result = CliRunner().invoke(main, ["run", "locomo", *args], env=env)
    assert result.exit_code == 0, result.output
    return result


def _comparable(records):
    return [(r["question_id"], r["status"], r["metrics"], [c["id"] for c in r.get("candidates", [])]) for r in records]


@pytest.mark.server
def test_an_mpnet_run_locally_and_on_the_farm(trimmed, redis_server, workers, tmp_path):
    local, farm = tmp_path / "local.json", tmp_path / "farm.json"
    _run("--dataset", str(trimmed), "--embedder", "mpnet", "--output", str(local))
    workers(redis_server.url, "w1").wait_ready()
    _run("--dataset", str(trimmed), "--embedder", "mpnet", "--output", str(farm),
         env={"MEMFARM_BROKER": redis_server.url})
    for path in (local, farm):
        results = json.loads(path.read_text())
        manifest = json.loads(path.with_suffix(".manifest.json").read_text())
        assert results["embedder"] == MPNET and results["embedding_dimension"] == 768
        assert results["failed"] == 0 and results["question_count"] >= 3
        signature = manifest["system"]["embedding_signature"]
        assert signature["model_id"] == MPNET and signature["model_files"] == resolve("mpnet").files_sha256
        assert manifest["arguments"]["embedder"] == "mpnet"
    local_records, farm_records = (json.loads(p.read_text())["records"] for p in (local, farm))
    assert _comparable(farm_records) == _comparable(local_records)


@pytest.mark.server
def test_a_minilm_worker_refuses_an_mpnet_run_naming_both(trimmed, redis_server, workers):
    workers(redis_server.url, "mini", MEMFARM_EMBEDDER="minilm").wait_ready()
    result = CliRunner().invoke(main, ["submit", "locomo", "--dataset", str(trimmed), "--embedder", "mpnet"],
                                env={"MEMFARM_BROKER": redis_server.url})
    assert result.exit_code == 0, result.output
    run_id = result.output.strip().splitlines()[-1]
    ledger = RunLedger(connect(redis_server.url))
    state = watch(ledger, make_app(redis_server.url), run_id, timeout=300)
    assert state["done"] == 0 and state["final_failures"] == 1
    error = ledger.info(run_id, ledger.order(run_id)[0])["error"]
    assert "refused by mini@" in error
    assert f"embedding model of this worker is {MINILM} (384-d); the run wants {MPNET} (768-d)" in error


def test_an_item_cache_written_with_one_model_is_never_read_for_the_other(trimmed, tmp_path):
    cache = tmp_path / "cache"
    outputs = {}
    for name, embedder in (("minilm", "minilm"), ("mpnet", "mpnet"), ("minilm-again", "minilm")):
        outputs[name] = tmp_path / f"{name}.json"
        _run("--dataset", str(trimmed), "--embedder", embedder, "--cache-dir", str(cache), "--output",
             str(outputs[name]))
    caches = {name: json.loads(path.with_suffix(".manifest.json").read_text())["cache"]
              for name, path in outputs.items()}
    stores = {name: json.loads(path.read_text())["embedding_store"] for name, path in outputs.items()}
    assert caches["minilm"]["hits"] == 0 and caches["minilm"]["misses"] == 1
    assert caches["mpnet"]["hits"] == 0 and caches["mpnet"]["misses"] == 1, "MiniLM's entry is not mpnet's"
    assert stores["mpnet"]["texts_served"] == 0 and stores["mpnet"]["texts_encoded"] > 0
    # one entry per item: mpnet's replaced MiniLM's, so MiniLM rebuilds it, its vectors still in the store
    assert caches["minilm-again"]["hits"] == 0
    assert "embedding signature" in json.dumps(caches["minilm-again"]["rebuild_reasons"])
    assert stores["minilm-again"]["texts_encoded"] == 0
    assert stores["minilm-again"]["texts_served"] == stores["minilm"]["texts_encoded"]
    assert caches["mpnet"]["signature"]["model_id"] == MPNET and caches["minilm"]["signature"]["model_id"] == MINILM
