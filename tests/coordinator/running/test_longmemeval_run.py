import json
import random

import pytest
from click.testing import CliRunner

from adapters.benchmarks.longmemeval.reader import LongMemEval, extract_questions
from adapters.systems.memoria_system import MemoriaSystem
from coordinator.cli import main
from workers.item.cache import ItemCache
from workers.item.evaluate import evaluate_item
from tests.helpers import independent_session_metrics, independent_turn_metrics, write_dataset

pytestmark = pytest.mark.slow

RESULT_KEYS = {"benchmark", "question_count", "retrieval_evaluable", "abstentions_excluded", "records",
               "dataset_checksum", "embedder", "embedding_dimension", "commit", "retrieval_mode", "settings",
               "command", "elapsed_seconds"}
RECORD_KEYS = {"query", "expected", "expected_ids", "expected_rank", "retrieved", "candidates", "runtime_ms",
               "diagnostics", "metrics", "abstention", "question_id", "question_type", "item_id", "worker", "attempt"}
MANIFEST_KEYS = {"dataset", "arguments", "commit", "vector_store", "retrieval", "ranking", "cache", "evaluation",
                 "settings"}


def _run(*args):
    """A run under the expected-text profile (every turn indexed), the profile these tests recompute;
    the official profile, the default, has its own end-to-end tests (tests/adapters/benchmarks/longmemeval/test_official.py)."""
    result = CliRunner().invoke(main, ["run", "longmemeval", "--profile", "expected-text", *map(str, args)])
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
    # without the embedding store: the store's own test compares a run with it to this one, exactly
    result = _run("--dataset", dataset / "data.json", "--questions", dataset / "questions.json",
                  "--cache-dir", dataset / "cache", "--no-embedding-store", "--output", out)
    assert result.exit_code == 0, result.output
    return result, json.loads(out.read_text()), json.loads((dataset / "out.manifest.json").read_text())


def test_a_local_run_records_the_peak_memory_of_its_process_and_of_each_item(first_run):
    _, results, manifest = first_run
    assert 100 * 2 ** 20 < results["peak_rss_bytes"] < 64 * 2 ** 30  # the model alone holds more than 100 MiB
    items = [item["stats"]["peak_rss_bytes"] for item in manifest["items"]]
    assert len(items) == 10 and all(100 * 2 ** 20 < peak <= results["peak_rss_bytes"] for peak in items)


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


def test_turn_metrics_at_every_k_match_a_recomputation_from_the_raw_dataset(dataset, first_run):
    _, results, _ = first_run
    raw = {q["question_id"]: q for q in json.loads((dataset / "data.json").read_text())}
    expected = {q["question_id"]: q["expected"] for q in json.loads((dataset / "questions.json").read_text())}
    checked = 0
    for record in results["records"]:
        if not record["metrics"] or record["metrics"]["turn"] is None:
            continue
        for k in (1, 3, 5, 10, 30, 50):
            mine = independent_turn_metrics(raw[record["question_id"]], expected[record["question_id"]], record, k)
            for name, value in mine.items():
                assert record["metrics"]["turn"][name] == pytest.approx(value), (record["question_id"], name)
        checked += 1
    assert checked >= 5


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
    assert result.exit_code == 1, result.output  # written, and said: a run with a failed item does not pass
    assert "haystack_sessions" in result.output, "and says why"
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
    assert first["cache"] == {"hit": False, "reason": "no cache entry", "consulted": True}
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
    assert outcome["cache"] == {"hit": False, "reason": "item content changed", "consulted": True}


def test_cache_rebuilds_when_the_embedding_signature_changes(cached_item):
    item, cache, _ = cached_item
    outcome = evaluate_item(item, OtherModel(mode="fusion"), cache=cache)
    assert outcome["cache"] == {"hit": False, "reason": "embedding signature changed", "consulted": True}


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_cache_rebuilds_a_damaged_artifact(cached_item, damage):
    item, cache, first = cached_item
    target = cache.folder(item["item_id"], "memoria") / "vectors.faiss"
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
    manifest = cache.folder(item["item_id"], "memoria") / "entry.manifest.json"
    manifest.write_text("{ broken")
    outcome = evaluate_item(item, MemoriaSystem(mode="fusion"), cache=cache)
    assert not outcome["cache"]["hit"] and "manifest unreadable" in outcome["cache"]["reason"]


def test_rebuild_flag_ignores_a_valid_cache(cached_item):
    item, cache, _ = cached_item
    outcome = evaluate_item(item, MemoriaSystem(mode="fusion"), cache=ItemCache(cache.directory, rebuild=True))
    assert outcome["cache"] == {"hit": False, "reason": "--rebuild-cache", "consulted": True}


def test_a_change_to_the_engine_code_or_the_model_files_rebuilds(cached_item, monkeypatch):
    import memoria.version

    item, cache, first = cached_item
    monkeypatch.setattr(memoria.version, "BUILD_VERSION", "tokenizer-changed")  # as if bm25.py were edited
    outcome = evaluate_item(item, MemoriaSystem(mode="fusion"), cache=cache)
    assert outcome["cache"] == {"hit": False, "reason": "index-building code or model files changed", "consulted": True}
    assert evaluate_item(item, MemoriaSystem(mode="fusion"), cache=cache)["cache"]["hit"]
    monkeypatch.undo()
    import memoria.model_files

    monkeypatch.setattr(memoria.model_files, "model_files_sha256", lambda embedder=None: "other-weights")
    assert evaluate_item(item, MemoriaSystem(mode="fusion"), cache=cache)["cache"]["reason"] == (
        "index-building code or model files changed")


def test_ids_that_look_alike_or_are_very_long_never_share_or_break_an_entry(tmp_path, dataset):
    base = next(LongMemEval(dataset / "data.json").iter_items())
    other = list(LongMemEval(dataset / "data.json").iter_items())[1]
    cache = ItemCache(tmp_path / "cache")
    system = MemoriaSystem(mode="fusion")
    items = {"a/b": base, "a_b": other, "x" * 300: base}
    outcomes = {}
    for item_id, item in items.items():
        outcomes[item_id] = evaluate_item(dict(item, item_id=item_id), system, cache=cache)
        assert "store_error" not in outcomes[item_id]["cache"], outcomes[item_id]["cache"]
    for item_id, item in items.items():
        again = evaluate_item(dict(item, item_id=item_id), system, cache=cache)
        assert again["cache"]["hit"], (item_id[:10], again["cache"])
        assert _ranked(again) == _ranked(outcomes[item_id])
    assert _ranked(outcomes["a/b"]) != _ranked(outcomes["a_b"])


def test_a_cache_that_cannot_be_written_is_a_miss_never_a_failed_item(tmp_path, dataset):
    item = next(LongMemEval(dataset / "data.json").iter_items())
    cache = ItemCache(tmp_path / "cache")

    class Unwritable(MemoriaSystem):
        def snapshot(self, directory):
            raise OSError(28, "No space left on device")

    outcome = evaluate_item(item, Unwritable(mode="fusion"), cache=cache)
    assert outcome["records"][0]["status"] == "ok" and "No space left" in outcome["cache"]["store_error"]
    assert not outcome["cache"]["hit"]
    assert not any(p.name.startswith(".write-") for p in (tmp_path / "cache").iterdir()), "no staging left behind"


_WORKER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from adapters.benchmarks.longmemeval.reader import LongMemEval
from adapters.systems.memoria_system import MemoriaSystem
from workers.item.cache import ItemCache
from workers.item.evaluate import evaluate_item
items = list(LongMemEval(sys.argv[2]).iter_items())[:3]
cache, system, out = ItemCache(sys.argv[3]), MemoriaSystem(mode="fusion"), []
for round_ in range(3):
    for number, item in enumerate(items):
        for item_id in (f"id/{number}", f"id_{number}"):  # two ids that a sanitised name would merge
            outcome = evaluate_item(dict(item, item_id=item_id), system, cache=cache)
            out.append([item_id, outcome["cache"],
                        [[c["metadata"]["turn_id"] for c in r["candidates"]] for r in outcome["records"]]])
print(json.dumps(out))
"""


def test_two_processes_storing_and_restoring_the_same_entries_agree(tmp_path, dataset, embedder):
    import subprocess
    import sys

    from tests.conftest import REPO

    cache_dir = tmp_path / "shared-cache"
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(REPO), str(dataset / "data.json"), str(cache_dir)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    items = list(LongMemEval(dataset / "data.json").iter_items())[:3]
    serial = {}
    for number, item in enumerate(items):
        records = evaluate_item(dict(item, item_id=f"id/{number}"), MemoriaSystem(mode="fusion"))["records"]
        serial[f"id/{number}"] = serial[f"id_{number}"] = [[c["metadata"]["turn_id"] for c in r["candidates"]]
                                                           for r in records]
    for run in results:
        for item_id, cache_state, ranked in run:
            assert "store_error" not in cache_state and "restore failed" not in str(cache_state.get("reason"))
            assert ranked == serial[item_id], item_id


def test_the_embedding_store_encodes_shared_texts_once_and_changes_no_ranking(dataset, first_run, tmp_path):
    """A run with the store encodes each distinct text once and ranks as the run without it (first_run) does."""
    _, plain, plain_manifest = first_run
    assert plain_manifest["embedding_store"] == {"texts_encoded": 0, "texts_served": 0, "texts_from_shared": 0,
                                                 "texts_verified": 0, "texts_forged": 0}
    out = tmp_path / "stored.json"
    result = _run("--dataset", dataset / "data.json", "--questions", dataset / "questions.json", "--cache-dir",
                  tmp_path / "cache", "--output", out)
    assert result.exit_code == 0, result.output
    raw = json.loads((dataset / "data.json").read_text())
    turns = [t["content"] for q in raw for s in dict(zip(q["haystack_session_ids"], q["haystack_sessions"])).values()
             for t in s if isinstance(t.get("content"), str) and t["content"].strip()]
    texts = turns + [q["question"] for q in raw]  # what the model is given: every turn, then each question
    counts = json.loads((tmp_path / "stored.manifest.json").read_text())["embedding_store"]
    assert counts["texts_encoded"] == len(set(texts)), "each distinct text once"
    assert counts["texts_served"] == len(texts) - len(set(texts)) > 0
    assert (tmp_path / "cache" / "embeddings.sqlite").is_file()
    stored = json.loads(out.read_text())
    ranked = [(r["question_id"], [c["id"] for c in r.get("candidates", [])], r["metrics"]) for r in stored["records"]]
    assert ranked == [(r["question_id"], [c["id"] for c in r.get("candidates", [])], r["metrics"])
                      for r in plain["records"]], "the store changed which texts shared a batch, and no ranking"
    assert stored["metrics"] == plain["metrics"]


def test_the_onnx_backend_scores_as_torch_does_and_keys_its_own_cache(dataset, first_run, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMFARM_ONNX_DIR", str(tmp_path / "onnx"))
    _, torch_results, _ = first_run
    out = tmp_path / "onnx.json"
    result = _run("--dataset", dataset / "data.json", "--questions", dataset / "questions.json", "--cache-dir",
                  tmp_path / "cache", "--embedder-backend", "onnx", "--output", out)
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "onnx.manifest.json").read_text())
    assert manifest["cache"]["hits"] == 0, "the torch run's cache entries are not this backend's"
    assert manifest["cache"]["signature"]["backend"] == "onnxruntime/fp32-fused"
    assert manifest["embedding_store"]["texts_encoded"] > 0, "nor are its stored vectors"
    results = json.loads(out.read_text())
    for level in ("session", "turn"):
        for name, value in results["metrics"]["all"][level].items():
            assert value == pytest.approx(torch_results["metrics"]["all"][level][name], abs=0.002), (level, name)


def test_every_item_says_where_its_time_went_and_analyze_adds_it_up(dataset, first_run):
    _, results, manifest = first_run
    phases = ("parse_ms", "cache_ms", "encode_ms", "extract_ms", "index_ms", "recall_ms", "scoring_ms")
    for item in manifest["items"]:
        timing = item["timings"]["phases_ms"]
        assert set(timing) == set(phases) and all(v >= 0 for v in timing.values())
        assert timing["encode_ms"] > 0 and timing["recall_ms"] > 0 and timing["parse_ms"] > 0  # cold: built here
        assert sum(timing.values()) <= item["timings"]["total_ms"] + timing["parse_ms"] + 1
    for name in phases:
        assert results["phases_ms"][name] == pytest.approx(
            sum(i["timings"]["phases_ms"][name] for i in manifest["items"]), abs=0.5)
    # as a glob names them: the results file and its manifest; the manifest is passed over and said to be
    report = CliRunner().invoke(main, ["analyze", str(dataset / "out.json"), str(dataset / "out.manifest.json")])
    assert report.exit_code == 0, report.output
    assert "time by phase" in report.output and "encode" in report.output and "recall" in report.output
    assert "skipped 1 manifest(s)" in report.output
    alone = CliRunner().invoke(main, ["analyze", str(dataset / "out.manifest.json")])
    assert alone.exit_code == 2 and "name at least one results file" in alone.output
