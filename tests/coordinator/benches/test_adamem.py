"""`memfarm bench adamem`: the seven ablations side by side, here and on a real farm."""

import json

import pytest
from click.testing import CliRunner

from adapters.systems.adamem import ABLATIONS
from coordinator.cli import main

#: Measures that do not depend on timing: the same wherever the items run.
STEADY = ("queries", "passed", "answer_exact", "answer_f1", "answer_in_context", "turn_recall_any@5",
          "stale_fact_rate", "prompt_tokens", "write_amplification")

#: The synthetic suite's episodes each pass only with the one mechanism they were written for: a stale fact
#: needs supersession, the resolved incident the cause links (graph), the changed code validity in time
#: (temporal), the safety rule importance. `full_context` reads the newest top_k entries, which hold the
#: answer everywhere but in the resolved incident (top 2: fix, noise; the cause came first).
PASSING = {"full_context": {"stale-fact", "changed-code", "safety-rule"},
           "semantic_only": set(),
           "semantic_importance": {"safety-rule"},
           "semantic_temporal": {"changed-code"},
           "semantic_graph": {"resolved-incident"},
           "semantic_graph_supersession": {"resolved-incident", "stale-fact"},
           "full": {"stale-fact", "resolved-incident", "changed-code", "safety-rule"}}
#: Two queries name a stale fact (stale-fact's us-east-1, changed-code's 4512), each with top_k 1: an
#: ablation shows the stale one unless it passes that episode (full_context's newest entry is the new fact).
STALE_RATE = {"full_context": 0.0, "semantic_only": 1.0, "semantic_importance": 1.0, "semantic_temporal": 0.5,
              "semantic_graph": 1.0, "semantic_graph_supersession": 0.5, "full": 0.0}


@pytest.mark.slow
def test_the_synthetic_table_passes_each_episode_with_its_mechanism(tmp_path):
    out = tmp_path / "adamem.json"
    result = CliRunner().invoke(main, ["bench", "adamem", "--suite", "synthetic", "--workdir", str(tmp_path / "wd"),
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    table = json.loads(out.read_text())["tables"]["synthetic"]
    files = json.loads(out.read_text())["files"]["synthetic"]
    results = {name: json.loads(open(files[name]).read()) for name in ABLATIONS}
    assert {name: row["passed"] for name, row in table.items()} == {n: len(p) for n, p in PASSING.items()}
    assert {name: {r["item_id"] for r in results[name]["records"] if r["judgement"]["passed"]}
            for name in ABLATIONS} == PASSING
    assert {name: row["stale_fact_rate"] for name, row in table.items()} == STALE_RATE
    lines = {line.split()[0]: line.split() for line in result.output.splitlines() if line.startswith("  ")}
    for name in ABLATIONS:
        assert int(lines[name][2]) == len(PASSING[name])  # the printed passed column
        row = table[name]
        # each ablation has four queries, four episodes, 14 events
        assert row["queries"] == 4 and row["stale_fact_queries"] == 2
        assert row["write_amplification"]["entries_per_event"] == 1.0  # no duplicate to fold in the suite
        # nearest rank over four queries: p50 is the second fastest retrieve, p95 the slowest
        retrieve = sorted(r["measures"]["latency_ms"]["retrieve"] for r in results[name]["records"])
        assert (row["latency_ms"]["p50"], row["latency_ms"]["p95"]) == (retrieve[1], retrieve[3])
    assert "no LLM is available" in result.output
    # counted by hand from the suite: 3 + 4 + 2 + 5 events; region-new supersedes region-old (only where
    # supersession is on); incident names cause, fix names incident (links are kept whatever the switches)
    write = {name: results[name]["measures"]["write_amplification"] for name in ABLATIONS}
    assert {k: write["full"][k] for k in ("events", "entries", "folded", "supersession_edges", "links")} == \
        {"events": 14, "entries": 14, "folded": 0, "supersession_edges": 1, "links": 2}
    assert write["semantic_only"]["supersession_edges"] == 0 and write["semantic_only"]["links"] == 2
    assert write["full"]["bytes"] - write["semantic_only"]["bytes"] == 8  # the one supersession edge
    assert json.loads((tmp_path / "wd" / "adamem_synthetic.full.manifest.json").read_text())["measures"] == \
        results["full"]["measures"]

    # the analyzer lines the ablations up by the same columns, read from the results files alone
    compared = CliRunner().invoke(main, ["analyze", "--compare", *files.values()])
    assert compared.exit_code == 0, compared.output
    rows = {line.split()[0]: line.split() for line in compared.output.splitlines() if line.startswith("  adamem:")}
    assert sorted(rows) == sorted(f"adamem:{name}" for name in ABLATIONS)
    for name in ABLATIONS:
        printed = rows[f"adamem:{name}"]
        assert int(printed[2]) == len(PASSING[name])
        assert printed[8] == f"{STALE_RATE[name]:.3f}"
        assert printed[12] == f"{table[name]['prompt_tokens']:.1f}"
    single = CliRunner().invoke(main, ["analyze", files["full"]])
    assert single.exit_code == 0, single.output
    assert "AdaMem measures" in single.output and "  adamem:full" in single.output


def _tiny_longmemeval(path):
    """Two questions, each over two sessions of two short turns (four entries: every context block holds all)."""
    def turn(role, content, has_answer=False):
        return {"role": role, "content": content, **({"has_answer": True} if has_answer else {})}

    questions = []
    for n, (pet, name) in enumerate((("dog", "Rex"), ("cat", "Tom"))):
        questions.append({
            "question_id": f"q{n}", "question_type": "single-session-user", "question": f"What is my {pet} called?",
            "answer": name, "question_date": "2023/06/01 (Thu) 10:00",
            "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/05/02 (Tue) 10:00"],
            "haystack_session_ids": [f"answer_{n}", f"filler_{n}"],
            "haystack_sessions": [[turn("user", f"My {pet} is called {name}.", True), turn("assistant", "A fine name.")],
                                  [turn("user", "I like green tea."), turn("assistant", "Tea is good.")]],
            "answer_session_ids": [f"answer_{n}"]})
    path.write_text(json.dumps(questions))
    return path


@pytest.mark.slow
def test_longmemeval_suite_measures_answers_and_reports_stale_as_not_measured(tmp_path):
    from coordinator.benches.adamem import run_adamem_bench

    data = _tiny_longmemeval(tmp_path / "lme.json")
    text = run_adamem_bench(None, 1, 0.01, tmp_path / "wd", tmp_path / "adamem.json", suites=("longmemeval",),
                            longmemeval=data)
    bench = json.loads((tmp_path / "adamem.json").read_text())
    rows = bench["tables"]["longmemeval"]
    assert sorted(rows) == sorted(ABLATIONS)
    for name, row in rows.items():
        # nothing in LongMemEval-S is marked stale: not measured, never zero
        assert row["stale_fact_rate"] is None and row["stale_fact_queries"] == 0
        # four entries per item, fewer than a context block packs: the answer is in every block
        assert (row["answer_exact"], row["answer_f1"], row["answer_in_context"], row["answered"]) == (1.0, 1.0, 1.0, 2)
        assert row["write_amplification"]["entries_per_event"] == 1.0
        results = json.loads(open(bench["files"]["longmemeval"][name]).read())
        assert results["measures"]["recall"]["session"] == results["metrics"]["all"]["session"]
        assert "not measured" in results["measures"]["stale_fact_note"]
    assert "longmemeval: 2 items, 2 queries" in text
    assert bench["longmemeval"] == {"file": str(data)}


@pytest.mark.server
@pytest.mark.slow
def test_the_bench_on_the_farm_gives_the_local_table(redis_server, workers, tmp_path):
    from coordinator.benches.adamem import run_adamem_bench

    workers(redis_server.url, "w1").wait_ready()
    run_adamem_bench(None, 2, 0.02, tmp_path / "farm", tmp_path / "farm.json", suites=("synthetic",),
                     broker=redis_server.url, timeout=300)
    run_adamem_bench(None, 2, 0.02, tmp_path / "local", tmp_path / "local.json", suites=("synthetic",))
    farm, local = (json.loads((tmp_path / f).read_text()) for f in ("farm.json", "local.json"))
    assert farm["executor"].startswith("farm") and local["executor"] == "local"
    for name in ABLATIONS:
        assert {k: farm["tables"]["synthetic"][name][k] for k in STEADY} == \
            {k: local["tables"]["synthetic"][name][k] for k in STEADY}
    results = json.loads(open(farm["files"]["synthetic"]["full"]).read())
    assert len(results["farm"]["items"]) == 4  # one task per episode
