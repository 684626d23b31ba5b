"""The ranking lab scores what a run scores: its metrics at the default weights equal a real run's, on both
formats, and other weights move them."""

import json

import pytest
from click.testing import CliRunner

from adapters.generators.locomo_to_longmemeval import write
from adapters.benchmarks.longmemeval.official import PROFILE as OFFICIAL
from coordinator.running.local_executor import run_local
from coordinator.running.spec import RunSpec
from devtools.__main__ import devtools
from devtools import ranking_lab

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_locomo(tmp_path_factory, locomo_path):
    """The first dev conversation, its first three sessions and 16 questions whose evidence lies in them."""
    conversation = json.loads(locomo_path.read_text())[0]
    talk = {k: v for k, v in conversation["conversation"].items()
            if not k.startswith("session_") or int(k.split("_")[1]) <= 3}
    kept = {t["dia_id"] for k, v in talk.items() if k.startswith("session_") and isinstance(v, list) for t in v}
    qa = [q for q in conversation["qa"] if q.get("evidence") and set(q["evidence"]) <= kept][:16]
    path = tmp_path_factory.mktemp("lab") / "small_locomo.json"
    path.write_text(json.dumps([{**conversation, "conversation": talk, "qa": qa}]))
    return path


def _run(benchmark, dataset, profile, tmp_path):
    spec = RunSpec(benchmark, dataset=str(dataset), retrieval_mode="full", scoring_profile=profile,
                   cache_dir=str(tmp_path / f"cache-{benchmark}"))
    results, _ = run_local(spec)
    return results["metrics"]["all"]


@pytest.mark.parametrize("benchmark", ["locomo", "longmemeval"])
def test_the_lab_scores_full_as_a_run_does_and_other_weights_move_it(small_locomo, tmp_path, benchmark):
    dataset, profile = small_locomo, "expected-text"
    if benchmark == "longmemeval":
        dataset, profile = tmp_path / "small.longmemeval.json", OFFICIAL
        write(small_locomo, dataset)
    run = _run(benchmark, dataset, profile, tmp_path)
    asked = ranking_lab.ask(benchmark, dataset, profile=profile, cache_dir=tmp_path / "lab")
    assert len(asked) == run["evaluable"]["session"] > 8
    lab = ranking_lab.evaluate(asked)["all"]
    for level, name in ranking_lab.TABLE:
        assert lab[f"{level}:{name}"] == pytest.approx(run[level][name], abs=1e-9), (level, name)
    # the sources were asked once: ranking again under other weights moves the metrics without a new run
    lexical_only = ranking_lab.evaluate(asked, {"token": 1.0})["all"]
    assert lexical_only != lab
    fusion = ranking_lab.evaluate_fusion(asked)["all"]
    assert fusion["questions"] == lab["questions"]


def test_the_lab_command_scores_a_locomo_file_in_both_formats(small_locomo, tmp_path):
    weights = tmp_path / "weights.json"
    weights.write_text(json.dumps({"weights": {"semantic": 1.0}}))
    output = tmp_path / "lab.json"
    result = CliRunner().invoke(devtools, ["lab", "--locomo", str(small_locomo), "--weights", str(weights),
                                           "--by-type", "--sentence-heads", "0,2,30", "--workdir", str(tmp_path / "work"),
                                           "--output", str(output)])
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text())
    assert list(report["datasets"]) == ["small_locomo.json", "small_locomo.longmemeval.json"]
    for entry in report["datasets"].values():
        rows = entry["rows"]
        assert {"fusion", "full", "full, given weights"} <= set(rows)
        assert any(label.startswith("full: ") for label in rows)  # a row per question type
        assert rows["full"]["questions"] == rows["fusion"]["questions"] > 8
        # the default head is 30: its row is `full`'s; a head of 2 reads fewer turns' pieces than every candidate
        heads = {h: rows[f"full, sentence head {h}"] for h in (0, 2, 30)}
        assert {k: v for k, v in heads[30].items() if k != "turns_with_pieces_read"} == rows["full"]
        assert 0 < heads[2]["turns_with_pieces_read"] < heads[0]["turns_with_pieces_read"]
    assert report["datasets"]["small_locomo.longmemeval.json"]["profile"] == OFFICIAL
    # what made it, and a flat row per file and head, so the manual can render it from a published copy
    assert {"command", "commit", "cores", "load", "created"} <= set(report) and report["command"]
    assert [(r["dataset"], r["head"]) for r in report["heads"]] == [(d, h) for d in report["datasets"] for h in (0, 2, 30)]
    headers = [line.split() for line in result.output.splitlines() if "t:recall_any@10" in line]
    assert len(headers) == 2 and all(h[0] == "s:recall_all@5" for h in headers)  # the strict metric first
    bad = CliRunner().invoke(devtools, ["lab", "--locomo", str(small_locomo), "--sentence-heads", "30,x"])
    assert bad.exit_code != 0 and "--sentence-heads" in bad.output
    missing = CliRunner().invoke(devtools, ["lab"])
    assert missing.exit_code != 0 and "--locomo or --longmemeval" in missing.output


def test_the_lab_is_a_command_of_python_m_devtools_as_the_manual_runs_it():
    """docs/full-mode.md and docs/cost.md run `python -m devtools lab`: every command of the group is
    registered before the module runs it."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "devtools", "lab", "--help"], cwd=root, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "--sentence-heads" in result.stdout, result.stderr[-2000:]


def test_the_lab_scores_beam_chats_and_splits_them_by_the_items_the_weights_were_tuned_on(tmp_path):
    """`--beam` reads chats as a run does; a weights file naming the items it was tuned on gets a row for those
    and one for the rest, held out, whose question counts add up to the whole."""
    from tests.adapters.benchmarks.beam.test_reader import write_chat

    for n in (1, 2):
        write_chat(tmp_path / "chats" / "100K" / str(n))
    weights = tmp_path / "beam_weights.json"
    weights.write_text(json.dumps({"weights": {"semantic": 1.0, "standing": 0.5, "user_said": 0.5},
                                   "tuned_on": {"benchmark": "beam", "items": ["100K/1"]}}))
    output = tmp_path / "lab.json"
    result = CliRunner().invoke(devtools, ["lab", "--beam", str(tmp_path / "chats" / "100K"), "--weights", str(weights),
                                           "--by-type", "--workdir", str(tmp_path / "work"), "--output", str(output)])
    assert result.exit_code == 0, result.output
    entry = json.loads(output.read_text())["datasets"]["beam chats/100K"]
    assert entry["kind"] == "beam"
    rows = entry["rows"]
    for name in ("full", "full, given weights"):
        whole, tuned, held = (rows[name + part]["questions"] for part in ("", " (items tuned on)", " (held-out items)"))
        assert tuned == held > 0 and tuned + held == whole  # the two chats ask the same questions
    assert "full (held-out items): event_ordering" in rows
    # the flat rows the manual renders: each part and type, the rankings side by side
    flat = json.loads(output.read_text())["by_part"]
    held = next(r for r in flat if r["part"] == "held-out items" and r["type"] == "event_ordering")
    assert held["full, given weights"] == rows["full, given weights (held-out items): event_ordering"]
    assert {r["part"] for r in flat} == {"all items", "items tuned on", "held-out items"}
