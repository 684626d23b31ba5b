import json
import random

import pytest
from click.testing import CliRunner

from adapters.longmemeval import LongMemEval, extract_questions
from adapters.systems.memoria_system import MemoriaSystem
from coordinator.cli import main
from workers.cache import ItemCache
from workers.item import evaluate_item
from tests.helpers import independent_session_metrics, write_dataset

pytestmark = pytest.mark.slow

RESULT_KEYS = {"benchmark", "question_count", "retrieval_evaluable", "abstentions_excluded", "records",
               "dataset_checksum", "embedder", "embedding_dimension", "commit", "retrieval_mode", "settings",
               "command", "elapsed_seconds"}
RECORD_KEYS = {"query", "expected", "expected_ids", "expected_rank", "retrieved", "candidates", "runtime_ms",
               "diagnostics", "metrics", "abstention", "question_id", "question_type", "item_id", "worker", "attempt"}
MANIFEST_KEYS = {"dataset", "arguments", "commit", "vector_store", "retrieval", "ranking", "cache", "evaluation",
                 "settings"}


def _run(*args):
    result = CliRunner().invoke(main, ["run", "longmemeval", *map(str, args)])
    return result


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lme")
    data = write_dataset(folder / "data.json", questions=10, seed=3)
    extract_questions(data, folder / "questions.json")
    return folder


@pytest.fixture(scope="module")
def first_run(dataset):
    out = dataset / "out.json"
    result = _run("--dataset", dataset / "data.json", "--questions", dataset / "questions.json",
                  "--cache-dir", dataset / "cache", "--output", out)
    assert result.exit_code == 0, result.output
    return result, json.loads(out.read_text()), json.loads((dataset / "out.manifest.json").read_text())


def test_results_and_manifest_carry_every_key(first_run):
    result, results, manifest = first_run
    assert RESULT_KEYS <= set(results)
    assert MANIFEST_KEYS <= set(manifest)
    assert results["question_count"] == 10
    assert results["retrieval_evaluable"] + results["abstentions_excluded"] == 10
    for record in results["records"]:
        assert RECORD_KEYS <= set(record)
        for candidate in record["candidates"]:
            assert {"rank", "id", "text", "metadata", "score", "final_score", "diagnostics"} <= set(candidate)
            assert {"session_id", "turn_id"} <= set(candidate["metadata"])
    assert manifest["cache"]["misses"] == 10 and manifest["cache"]["signature"]["dimension"] == 384
    assert manifest["evaluation"]["k_values"] == [1, 3, 5, 10, 30, 50]
    assert "recall_any" in result.output and "abstentions" in result.output


def test_metrics_match_an_independent_recomputation(first_run):
    _, results, _ = first_run
    evaluable = [r for r in results["records"] if r["metrics"]]
    assert evaluable
    for k in (1, 3, 5, 10):
        for record in evaluable:
            mine = independent_session_metrics(record, k)
            for name, value in mine.items():
                assert record["metrics"]["session"][name] == pytest.approx(value), (record["question_id"], name)
        mean = sum(r["metrics"]["session"][f"recall_any@{k}"] for r in evaluable) / len(evaluable)
        assert results["metrics"]["all"]["session"][f"recall_any@{k}"] == pytest.approx(mean)
    assert all(r["metrics"] is None for r in results["records"] if r["abstention"])


def test_second_run_hits_the_cache_with_identical_records(dataset, first_run):
    out = dataset / "again.json"
    result = _run("--dataset", dataset / "data.json", "--questions", dataset / "questions.json",
                  "--cache-dir", dataset / "cache", "--output", out)
    assert result.exit_code == 0, result.output
    again = json.loads(out.read_text())
    manifest = json.loads((dataset / "again.manifest.json").read_text())
    assert manifest["cache"]["hits"] == 10 and manifest["cache"]["misses"] == 0
    strip = lambda rs: [(r["question_id"], r["metrics"], [c["id"] for c in r["candidates"]]) for r in rs]
    assert strip(again["records"]) == strip(first_run[1]["records"])


def test_renaming_every_session_id_changes_no_metric(tmp_path, first_run, dataset):
    rng = random.Random(99)

    def rename(data):
        for q in data:
            mapping = {}
            for sid in q["haystack_session_ids"] + q["answer_session_ids"]:
                if sid not in mapping:
                    mapping[sid] = "".join(rng.choice("qwertyuiopzxcv") for _ in range(12)) + ("_abs" if "_abs" in sid else "")
            q["haystack_session_ids"] = [mapping[s] for s in q["haystack_session_ids"]]
            q["answer_session_ids"] = [mapping[s] for s in q["answer_session_ids"]]
        return data

    renamed = write_dataset(tmp_path / "renamed.json", questions=10, seed=3, mutate=rename)
    extract_questions(renamed, tmp_path / "q.json")
    out = tmp_path / "out.json"
    result = _run("--dataset", renamed, "--questions", tmp_path / "q.json", "--output", out)
    assert result.exit_code == 0, result.output
    renamed_metrics = [r["metrics"] for r in json.loads(out.read_text())["records"]]
    assert renamed_metrics == [r["metrics"] for r in first_run[1]["records"]]


def test_bad_question_is_recorded_and_the_rest_complete(tmp_path):
    def drop(data):
        del data[1]["haystack_sessions"]
        return data

    path = write_dataset(tmp_path / "bad.json", questions=3, seed=4, mutate=drop)
    bad_id = json.loads(path.read_text())[1]["question_id"]
    out = tmp_path / "out.json"
    result = _run("--dataset", path, "--output", out)
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    manifest = json.loads((tmp_path / "out.manifest.json").read_text())
    assert results["failed"] == 1 and results["question_count"] == 3
    failure = manifest["failures"][0]
    assert failure["question_id"] == bad_id and failure["field"] == "haystack_sessions"
    assert sum(1 for r in results["records"] if r["status"] == "ok") == 2


@pytest.mark.parametrize("content, words", [("not json at all", "expected a JSON array"),
                                              ('{"question_id": "x"}', "found a JSON object")])
def test_unusable_dataset_exits_non_zero_with_one_line(tmp_path, content, words):
    path = tmp_path / "broken.json"
    path.write_text(content)
    result = _run("--dataset", path)
    assert result.exit_code == 2
    assert words in result.output and "broken.json" in result.output


def test_duplicate_ids_are_refused_up_front(tmp_path):
    def dup(data):
        data[2]["question_id"] = data[0]["question_id"]
        return data

    path = write_dataset(tmp_path / "dup.json", questions=3, seed=4, mutate=dup)
    result = _run("--dataset", path)
    assert result.exit_code == 2 and "positions 0 and 2" in result.output


# -- the validated cache -----------------------------------------------------------
class OtherModel(MemoriaSystem):
    @property
    def embedding_signature(self):
        return {**super().embedding_signature, "model_id": "some/other-model"}


@pytest.fixture()
def cached_item(tmp_path, dataset):
    item = next(LongMemEval(dataset / "data.json").iter_items())
    cache = ItemCache(tmp_path / "cache")
    system = MemoriaSystem(mode="fusion")
    first = evaluate_item(item, system, cache=cache)
    assert first["cache"] == {"hit": False, "reason": "no cache entry"}
    return item, cache, first


def _ranked(outcome):
    return [[(c["id"], c["score"]) for c in r["candidates"]] for r in outcome["records"]]


def test_cache_hit_restores_identical_rankings(cached_item):
    item, cache, first = cached_item
    again = evaluate_item(item, MemoriaSystem(mode="fusion"), cache=cache)
    assert again["cache"]["hit"] and _ranked(again) == _ranked(first)


def test_cache_rebuilds_when_the_item_changes(cached_item):
    item, cache, _ = cached_item
    item["turns"][0]["text"] += " (edited)"
    outcome = evaluate_item(item, MemoriaSystem(mode="fusion"), cache=cache)
    assert outcome["cache"] == {"hit": False, "reason": "item content changed"}


def test_cache_rebuilds_when_the_embedding_signature_changes(cached_item):
    item, cache, _ = cached_item
    outcome = evaluate_item(item, OtherModel(mode="fusion"), cache=cache)
    assert outcome["cache"] == {"hit": False, "reason": "embedding signature changed"}


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_cache_rebuilds_a_damaged_artifact(cached_item, damage):
    item, cache, first = cached_item
    folder, _ = cache.paths(item["item_id"], "memoria")
    target = folder / "vectors.faiss"
    blob = bytearray(target.read_bytes())
    if damage == "truncate":
        target.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":
        blob[len(blob) // 2] ^= 0x01
        target.write_bytes(bytes(blob))
    else:
        target.unlink()
    outcome = evaluate_item(item, MemoriaSystem(mode="fusion"), cache=cache)
    assert not outcome["cache"]["hit"] and "vectors.faiss" in outcome["cache"]["reason"]
    assert _ranked(outcome) == _ranked(first)
    assert evaluate_item(item, MemoriaSystem(mode="fusion"), cache=cache)["cache"]["hit"]


def test_cache_rebuilds_a_corrupt_manifest(cached_item):
    item, cache, _ = cached_item
    _, manifest = cache.paths(item["item_id"], "memoria")
    manifest.write_text("{ broken")
    outcome = evaluate_item(item, MemoriaSystem(mode="fusion"), cache=cache)
    assert not outcome["cache"]["hit"] and "manifest unreadable" in outcome["cache"]["reason"]


def test_rebuild_flag_ignores_a_valid_cache(cached_item):
    item, cache, _ = cached_item
    outcome = evaluate_item(item, MemoriaSystem(mode="fusion"), cache=ItemCache(cache.directory, rebuild=True))
    assert outcome["cache"] == {"hit": False, "reason": "--rebuild-cache"}
