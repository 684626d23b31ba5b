"""RealMem end to end: `memfarm run realmem` on a folder of personas, locally and on a farm of real workers."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.helpers import realmem_persona
from workers.farm.app import DEFAULT_MAX_MEMORY_PER_CHILD_KIB


@pytest.fixture(scope="module")
def personas(realmem_dir, tmp_path_factory):
    """Two development personas cut to their first 12 sessions, in one folder."""
    folder = tmp_path_factory.mktemp("realmem")
    for name in ("Kenta_Tanaka", "Liam_O_Connor"):
        realmem_persona(realmem_dir / f"{name}_dialogues_256k.json", 12, folder / f"{name}_dialogues_256k.json")
    return folder


def _run(personas, out, env=None, *extra):
    result = CliRunner().invoke(main, ["run", "realmem", "--dataset", str(personas), "--retrieval-mode", "bm25",
                                       "--top-k", "20", "--output", str(out), *extra], env=env or {})
    assert result.exit_code == 0, result.output
    return result, json.loads(out.read_text()), out


def _comparable(records):
    return [(r["question_id"], r["status"], r["metrics_by_profile"], [c["id"] for c in r["candidates"]])
            for r in records]


@pytest.fixture(scope="module")
def local(personas, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "realmem.json"
    return _run(personas, out)


def test_a_folder_of_personas_runs_scored_under_realmems_profile(embedder, personas, local, tmp_path):
    result, results, out = local
    raw = [json.loads(p.read_text()) for p in sorted(personas.glob("*.json"))]
    queries = sum(1 for d in raw for s in d["dialogues"] for t in s["dialogue_turns"] if t["is_query"])
    assert results["benchmark"] == "RealMem" and results["scoring_profile"] == "realmem"
    assert results["question_count"] == queries == len(results["records"])
    assert "checksum" in result.output, "cut personas are not the known files: the run says so"
    # progress inside each persona, off a terminal: lines of questions asked, the last at the persona's total
    for persona in ("Kenta_Tanaka", "Liam_O_Connor"):
        asked = [line.strip() for line in result.output.splitlines() if line.strip().startswith(f"{persona}: ")]
        total = sum(1 for r in results["records"] if r["item_id"] == persona)
        assert asked and asked[-1].startswith(f"{persona}: {total}/{total} questions")
    assert {r["item_id"] for r in results["records"]} == {"Kenta_Tanaka", "Liam_O_Connor"}
    scored = [r for r in results["records"] if r["metrics"]]
    assert scored and all(set(r["metrics_by_profile"]) == {"realmem", "expected-text"} for r in scored)
    by_persona = results["metrics"]["by_item_id"]
    assert set(by_persona) == {"Kenta_Tanaka", "Liam_O_Connor"}
    assert sum(b["evaluable"]["session"] for b in by_persona.values()) == results["metrics"]["all"]["evaluable"]["session"]
    assert "by item_id" in CliRunner().invoke(main, ["analyze", str(out)]).output
    assert {r.get("question_type") for r in results["records"]} <= {
        "Dynamic Incremental", "Dynamic Updating", "Implicit Preference", "Temporal-reasoning"}
    manifest = json.loads(out.with_name("realmem.manifest.json").read_text())
    from adapters.files import dataset_sha256, file_sha256

    assert manifest["dataset"]["sha256"] == dataset_sha256(personas) == results["dataset_checksum"]
    # a folder's files, each: weights tuned on this run know a later run on one persona file as tuned on
    assert results["dataset_file_checksums"] == [file_sha256(p) for p in sorted(personas.glob("*.json"))]
    assert {i["item_id"] for i in manifest["items"]} == {"Kenta_Tanaka", "Liam_O_Connor"}
    analyzed = CliRunner().invoke(main, ["analyze", str(out)])
    assert analyzed.exit_code == 0, analyzed.output


@pytest.mark.slow
def test_realmem_on_the_farm_gives_the_local_records(embedder, redis_server, workers, personas, local, tmp_path):
    for name in ("w1", "w2"):
        workers(redis_server.url, name).wait_ready()
    _, farm, out = _run(personas, tmp_path / "farm.json", {"MEMFARM_BROKER": redis_server.url})
    assert _comparable(farm["records"]) == _comparable(local[1]["records"])
    assert farm["metrics"] == local[1]["metrics"]
    assert farm["dataset_file_checksums"] == local[1]["dataset_file_checksums"]  # through the farm's run context
    # what each persona cost the worker's process, set against the bound at which a worker's child is replaced
    items = json.loads(out.with_name("farm.manifest.json").read_text())["items"]
    assert len(items) == 2
    assert all(50 * 2 ** 20 < i["stats"]["peak_rss_bytes"] < DEFAULT_MAX_MEMORY_PER_CHILD_KIB * 1024 for i in items)


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["random", "recency"])
def test_a_control_arm_on_the_farm_ranks_as_it_does_here(redis_server, workers, personas, tmp_path, arm):
    workers(redis_server.url, "w1").wait_ready()
    here = CliRunner().invoke(main, ["run", "realmem", "--dataset", str(personas), "--system", arm,
                                     "--output", str(tmp_path / "here.json")])
    assert here.exit_code == 0, here.output
    farm = CliRunner().invoke(main, ["run", "realmem", "--dataset", str(personas), "--system", arm,
                                     "--output", str(tmp_path / "farm.json")], env={"MEMFARM_BROKER": redis_server.url})
    assert farm.exit_code == 0, farm.output
    local_records = json.loads((tmp_path / "here.json").read_text())["records"]
    farm_records = json.loads((tmp_path / "farm.json").read_text())["records"]
    assert _comparable(farm_records) == _comparable(local_records)
    manifest = json.loads((tmp_path / "farm.manifest.json").read_text())
    assert manifest["system"]["control_arm"] == arm


def test_a_persona_is_never_counted_as_a_cache_miss_it_is_not_cached_and_says_why(embedder, personas, tmp_path):
    """Memory grows in steps, so no entry is looked up for a persona: `--cache-dir` must not report it as
    rebuilt (which reads as a miss to investigate), but as not cached, with the reason."""
    out = tmp_path / "cached.json"
    result, _, _ = _run(personas, out, None, "--cache-dir", str(tmp_path / "cache"))
    assert "--cache-dir keeps only the embedding store here: RealMem's memory grows in steps" in result.output
    cache = json.loads(out.with_name("cached.manifest.json").read_text())["cache"]
    assert cache["hits"] == cache["misses"] == 0 and cache["rebuild_reasons"] == {}
    assert set(cache["not_cached"]) == {"Kenta_Tanaka", "Liam_O_Connor"}
    assert "cache: 0 hits, 0 rebuilt" in result.output and "rebuilt Kenta" not in result.output
    assert "not cached, 2 of 2 items: memory grows in steps" in result.output
