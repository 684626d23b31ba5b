import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.benchmarks.adamem.episodes import read_episodes, write_episodes
from adapters.benchmarks.adamem.judge import evaluate_episode
from adapters.benchmarks.adamem.synthetic import synthetic_suite
from adapters.systems import make_system
from adapters.systems.adamem import ABLATIONS, AdaMem
from adapters.benchmarks.adamem.episodes import SyntheticSuite
from coordinator.cli import main
from adapters.errors import MemfarmError
from tests.helpers import skip_outside_ci, write_dataset

SPY = Path(__file__).with_name("spy_system.py")


def _spy_run(tmp_path, monkeypatch, benchmark, dataset, *extra):
    log = tmp_path / f"spy_{benchmark}.jsonl"
    monkeypatch.setenv("SPY_LOG", str(log))
    result = CliRunner().invoke(main, ["run", benchmark, "--dataset", str(dataset), "--system", f"{SPY}:SpySystem",
                                       "--output", str(tmp_path / f"{benchmark}.json"), *extra])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in log.read_text().splitlines()]


def _blob(events):
    return json.dumps([e["payload"] for e in events])


def test_no_ground_truth_reaches_a_system_on_longmemeval(tmp_path, monkeypatch):
    data = write_dataset(tmp_path / "lme.json", questions=6, seed=2, scale=0.06)
    events = _spy_run(tmp_path, monkeypatch, "longmemeval", data)
    raw = json.loads(data.read_text())
    blob = _blob(events)
    assert any(e["kind"] == "ingest" for e in events) and any(e["kind"] == "retrieve" for e in events)
    for question in raw:
        for session_id in set(question["haystack_session_ids"]) | set(question["answer_session_ids"]):
            assert session_id not in blob, f"native session id {session_id} reached the system"
        assert question["question_id"] not in blob  # labels and task ids are opaque too
    assert "answer_" not in blob and "has_answer" not in blob
    for event in events:
        if event["kind"] == "retrieve":
            assert set(event["payload"]) == {"label", "query", "top_k"}
            question = next(q for q in raw if q["question"] == event["payload"]["query"])
            if str(question["answer"]) not in question["question"]:
                assert str(question["answer"]) not in json.dumps(event["payload"])
        if event["kind"] == "ingest":
            for doc in event["payload"]:
                assert set(doc) == {"external_id", "label", "text", "props"}
                assert set(doc["props"]) <= {"role", "speaker", "date", "turn_index", "session_index", "caption"}


def test_no_ground_truth_reaches_a_system_on_locomo(tmp_path, monkeypatch, locomo_path):
    data = json.loads(locomo_path.read_text())[:1]
    (tmp_path / "one.json").write_text(json.dumps(data))
    events = _spy_run(tmp_path, monkeypatch, "locomo", tmp_path / "one.json")
    blob = _blob(events)
    assert not re.search(r"\bD\d+:\d+\b", blob), "a dia_id (native turn id / evidence id) reached the system"
    assert "evidence" not in blob and "adversarial_answer" not in blob and "conv-26" not in blob
    retrieves = [e["payload"] for e in events if e["kind"] == "retrieve"]
    assert len(retrieves) == len(data[0]["qa"])
    for qa, call in zip(data[0]["qa"], retrieves):
        assert call["query"] == qa["question"]


def test_the_runner_rejects_foreign_and_duplicate_hits_and_truncates(tmp_path, caplog):
    data = write_dataset(tmp_path / "lme.json", questions=2, seed=2, scale=0.06)
    out = tmp_path / "bad.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system",
                                       f"{SPY}:Misbehaving", "--top-k", "5", "--profile", "expected-text",
                                       "--output", str(out)])  # official: asked for every doc, so never cut
    assert result.exit_code == 0, result.output
    for record in json.loads(out.read_text())["records"]:
        ids = [c["id"] for c in record["candidates"]]
        assert len(ids) == 5 and len(set(ids)) == 5 and "answer_leak_1" not in ids
        problems = record["diagnostics"]["rejected_hits"]
        assert any("unknown id 'answer_leak_1'" in p for p in problems)
        assert any("duplicate id" in p for p in problems) and any("truncated" in p for p in problems)
        assert any("unknown id None" in p for p in problems)  # the hit that was not a dict


def test_a_user_system_must_keep_the_contract(tmp_path):
    with pytest.raises(MemfarmError, match="does not implement the contract"):
        make_system(f"{SPY}:NotASystem")
    with pytest.raises(MemfarmError, match="no file"):
        make_system("missing/file.py:Thing")
    with pytest.raises(MemfarmError, match="has no"):
        make_system(f"{SPY}:Nothing")
    assert make_system("tests.adapters.systems.spy_system:Misbehaving").name == "misbehaving"


@pytest.mark.slow
def test_synthetic_suite_semantic_only_fails_and_full_adamem_passes_all():
    scores = {}
    for name in ABLATIONS:
        records = [r for item in SyntheticSuite().iter_items()
                   for r in evaluate_episode(item, AdaMem.ablation(name))["records"]]
        scores[name] = {r["item_id"] for r in records if r["judgement"]["passed"]}
    assert scores["full"] == {"stale-fact", "resolved-incident", "changed-code", "safety-rule"}
    assert len(scores["semantic_only"]) <= 1
    # each mechanism rescues the failure mode it exists for
    assert "safety-rule" in scores["semantic_importance"]
    assert "changed-code" in scores["semantic_temporal"]
    assert "resolved-incident" in scores["semantic_graph"]
    assert "stale-fact" in scores["semantic_graph_supersession"]


@pytest.mark.slow
def test_adamem_write_manage_read(embedder):
    memory = AdaMem(embedder=embedder)
    first = memory.observe({"content": "My favourite colour is green.", "metadata": {"memory_key": "colour"}})
    again = memory.observe({"content": "My favourite colour is green.", "metadata": {"memory_key": "colour"}})
    assert again == first and len(memory.entries) == 1  # near-duplicate folded in
    newer = memory.observe({"content": "These days my favourite colour is blue.", "metadata": {"memory_key": "colour"}})
    assert memory.entries[first].active is False and memory.entries[first].superseded_by == newer
    results = memory.retrieve("What is my favourite colour?", top_k=2)
    assert [r["id"] for r in results] == [newer]  # the superseded fact is kept but not served
    assert set(results[0]["contributions"]) >= {"semantic", "importance", "recency"}
    assert results[0]["score"] == pytest.approx(sum(results[0]["contributions"].values()))
    block = memory.context("favourite colour", top_k=3)
    assert block.startswith("- These days my favourite colour is blue.")


@pytest.mark.slow
def test_seven_ablations_run_from_the_cli_each_with_a_results_file_and_manifest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", "adamem-synthetic", "--ablation", "all"])
    assert result.exit_code == 0, result.output
    files = sorted((tmp_path / "results").glob("adamem-synthetic_adamem_*.json"))
    runs = {json.loads(f.read_text())["retrieval_mode"]: f for f in files if not f.name.endswith(".manifest.json")}
    assert sorted(runs) == sorted(f"adamem:{name}" for name in ABLATIONS)
    for path in runs.values():
        assert path.with_name(path.name[:-5] + ".manifest.json").is_file()
    full = json.loads(runs["adamem:full"].read_text())
    assert full["metrics"]["all"]["support"] == {"queries": 4, "passed": 4, "stale_hits": 0, "pass_rate": 1.0}
    assert json.loads(runs["adamem:semantic_only"].read_text())["metrics"]["all"]["support"]["passed"] <= 1
    assert "4/4" in result.output


@pytest.mark.slow
def test_adamem_jsonl_goes_through_the_reducer_and_refuses_what_it_would_ignore(tmp_path):
    episodes = tmp_path / "episodes.jsonl"
    write_episodes(synthetic_suite()[:2], episodes)
    out = tmp_path / "one.json"
    result = CliRunner().invoke(main, ["run", "adamem-jsonl", "--dataset", str(episodes), "--ablation", "full",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    manifest = json.loads((tmp_path / "one.manifest.json").read_text())
    assert results["question_count"] == 2 and results["system"] == "adamem"
    assert manifest["dataset"]["path"] == str(episodes.resolve()) and manifest["system"]["ablation"] == "full"
    for refused in (["--retrieval-mode", "full"], ["--system", "memoria"], ["--top-k", "3"]):
        result = CliRunner().invoke(main, ["run", "adamem-jsonl", "--dataset", str(episodes), *refused])
        assert result.exit_code == 2, (refused, result.output)


@pytest.mark.slow
def test_run_with_system_adamem_writes_results_and_a_manifest(tmp_path):
    data = write_dataset(tmp_path / "lme.json", questions=2, seed=2, scale=0.06)
    out = tmp_path / "ada.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "adamem",
                                       "--ablation", "semantic_only", "--output", str(out)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "ada.manifest.json").read_text())
    assert manifest["system"]["ablation"] == "semantic_only" and manifest["evaluation"]["evaluable"] == 2
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "adamem",
                                       "--retrieval-mode", "dense"])
    assert result.exit_code == 2 and "no retrieval modes" in result.output


def test_locomo_converter_round_trip(tmp_path, locomo_path):
    raw = json.loads(locomo_path.read_text())
    target = tmp_path / "locomo.adamem.jsonl"
    result = CliRunner().invoke(main, ["convert", "locomo", str(locomo_path), str(target), "--expected", "both"])
    assert result.exit_code == 0, result.output
    episodes = list(read_episodes(target))
    assert [e["id"] for e in episodes] == [c["sample_id"] for c in raw]
    for conversation, episode in zip(raw, episodes):
        turns = [t for k, s in conversation["conversation"].items() if re.fullmatch(r"session_\d+", k) for t in s]
        assert len(episode["observations"]) == len(turns)
        contents = "\n".join(o["content"] for o in episode["observations"])
        assert len(episode["queries"]) <= sum(1 for q in conversation["qa"] if q["category"] != 5)
        for query in episode["queries"]:
            evidence = [s for s in query["expected_substrings"] if s.startswith("[D")]
            assert evidence and all(s in contents for s in evidence)
    write_episodes(episodes, tmp_path / "again.jsonl")
    assert list(read_episodes(tmp_path / "again.jsonl")) == episodes


def test_bad_jsonl_episodes_name_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "observations": [], "queries": []}\n{"id": "a", "observations": [], "queries": []}\n')
    result = CliRunner().invoke(main, ["run", "adamem-jsonl", "--dataset", str(path)])
    assert result.exit_code == 2 and "bad.jsonl:2: duplicate episode id 'a'" in result.output


@pytest.mark.slow
def test_mem0_runs_offline_through_the_same_contract(tmp_path, monkeypatch):
    import adapters.systems.mem0_system  # noqa: F401  (switches mem0's telemetry off before mem0 is imported)

    try:
        import mem0  # noqa: F401
    except ImportError:
        skip_outside_ci("mem0 is not installed (`make test` installs it; pip install -e '.[mem0]')")
    monkeypatch.setenv("HOME", str(tmp_path))
    data = write_dataset(tmp_path / "lme.json", questions=2, seed=2, scale=0.06)
    out = tmp_path / "mem0.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "mem0",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results["system"] == "mem0" and all(r["candidates"] for r in results["records"])
    manifest = json.loads((tmp_path / "mem0.manifest.json").read_text())
    assert manifest["system"]["infer"] is False and manifest["fairness"]["top_k"] == 50
    # the model is named as every other system's is (the board's embedder column), and the path is mem0's own
    from memoria.model_files import packaged_signature

    assert results["embedder"] == packaged_signature()["model_id"]
    assert manifest["system"]["embedding_signature"]["backend"].startswith("mem0 ")
