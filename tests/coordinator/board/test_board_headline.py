"""Each group of the board is led by its benchmark's headline metric: a BEAM group by message recall_any@10 (its
batches are so few that batch recall is near 1.0 for every system), a LongMemEval group in the same board still by
session recall_all@5."""

import copy
import re

import numpy as np
import pytest
from click.testing import CliRunner

from coordinator.benches.board_build import generated_runs
from coordinator.board import data as board_data
from coordinator.cli import main
from coordinator.results.compare import compare_files
from coordinator.results.run_files import ResultsFile
from coordinator.running.reducer import write_results

RESAMPLES = 500


def _means(path, level: str, metric: str) -> float:
    """The mean of one metric over a results file's scored questions, from its records."""
    values = [r["metrics"][level][metric] for r in ResultsFile.read(path)["records"] if r.get("metrics")]
    return float(np.mean(values))


@pytest.fixture(scope="module")
def board(tmp_path_factory, beam_dir):
    """Two runs of BEAM (control arms: no model, seconds) and three generated LongMemEval runs, on one board."""
    root = tmp_path_factory.mktemp("headline")
    beam = {}
    for system in ("recency", "random"):
        beam[system] = root / "runs" / f"beam_{system}.json"
        result = CliRunner().invoke(main, ["run", "beam", "--dataset", str(beam_dir / "chats" / "100K"), "--limit",
                                           "2", "--system", system, "--output", str(beam[system])])
        assert result.exit_code == 0, result.output
    other = [write_results(results, manifest, root / "runs" / f"lme{n}.json")[0]
             for n, (results, manifest) in enumerate(copy.deepcopy(generated_runs(questions=24, runs=3, seed=5)))]
    built = CliRunner().invoke(main, ["board", str(root / "runs"), "--output", str(root / "board"),
                                      "--resamples", str(RESAMPLES)])
    assert built.exit_code == 0, built.output
    data = board_data.build_data([root / "runs"], resamples=RESAMPLES, seed=0)
    groups = {g["benchmark_key"]: g for g in data["groups"]}
    return {"beam": beam, "other": other, "groups": groups, "site": root / "board"}


def test_a_beam_group_is_ordered_and_judged_by_message_recall_any_at_10(board):
    group = board["groups"]["beam"]
    files = {str(path): path for path in board["beam"].values()}
    means = {p: _means(p, "turn", "recall_any@10") for p in files}
    batches = {p: _means(p, "session", "recall_all@5") for p in files}
    assert means != batches, "the two levels must differ on these runs, or this test tells nothing"
    rows = group["rows"]
    label = {row["run"]["path"]: row["label"] for row in rows}
    assert [row["run"]["path"] for row in rows] == sorted(means, key=lambda p: (-means[p], label[p]))
    assert [row["strict"] for row in rows] == pytest.approx([means[row["run"]["path"]] for row in rows])
    assert group["headline"]["metric"] == "turn:recall_any@10"
    # the pair's verdict, and the leaderboard's against #1, are the paired test of `memfarm compare` on that metric
    (pair,) = group["pairs"]
    assert pair["metric"] == "turn:recall_any@10" and "turn:recall_any@10" in pair["verdict"]
    assert (pair["baseline_value"], pair["system_value"]) == pytest.approx([means[r["run"]["path"]] for r in rows])
    table = compare_files([ResultsFile.read(row["run"]["path"]) for row in rows], ("turn:recall_any@10",),
                          resamples=RESAMPLES, seed=0)
    (entry,) = table["comparisons"]
    for key in ("delta", "ci95", "p_value", "p_holm", "n", "test", "outcome"):
        assert rows[1]["pair"][key] == entry[key], key
    assert (group["leader"] is rows[0]) == (entry["outcome"] == "behind")


def test_a_longmemeval_group_on_the_same_board_is_still_led_by_session_recall_all_at_5(board):
    group = board["groups"]["longmemeval"]
    means = {str(p): _means(p, "session", "recall_all@5") for p in board["other"]}
    assert group["headline"]["metric"] == "session:recall_all@5"
    assert [row["strict"] for row in group["rows"]] == pytest.approx([means[r["run"]["path"]] for r in group["rows"]])
    assert sorted(means.values(), reverse=True) == pytest.approx([row["strict"] for row in group["rows"]])
    assert {pair["metric"] for pair in group["pairs"]} == {"session:recall_all@5"}


def _section(index: str, group: dict) -> str:
    start = index.index(f'<section class="group" id="{group["id"]}">')
    return index[start:index.index("</section>", start)]


def test_the_pages_name_each_group_s_own_headline(board):
    beam, other = board["groups"]["beam"], board["groups"]["longmemeval"]
    index = (board["site"] / "index.html").read_text()
    said = _section(index, beam).replace("&#x27;", "'")
    assert "Ordered by message recall_any@10 (BEAM's messages), BEAM's headline metric (any gold message in the top " \
           "10)" in said
    assert re.search(r'<th data-kind="num" tabindex="0" title="message recall_any@10 \(BEAM\'s messages\), BEAM\'s '
                     r'headline metric: any gold message in the top 10">message any@10</th>', said)
    assert "session recall_all@5" not in said and "the strict metric" not in said
    assert ">batch any@5</th>" in said and ">batch nDCG @10</th>" in said and ">message R@10</th>" in said
    assert ">any@5</th>" not in said and "turn R@10" not in said, "every level as BEAM calls it"
    kept = _section(index, other)
    assert "Ordered by session recall_all@5, the strict metric (every gold session in the top 5)" in kept
    assert ">all@5</th>" in kept and "message" not in kept
    assert ">any@5</th>" in kept and ">turn R@10</th>" in kept
    pair = (board["site"] / beam["id"] / "pair-1-2.html").read_text()
    assert "<p>turn:recall_any@10 on the " in pair
    questions = (board["site"] / beam["id"] / "questions.html").read_text()
    assert "did the run get a gold message into its top 10 (message recall_any@10)?" in questions
    first = (board["site"] / beam["id"] / "q" / "00001.html").read_text()
    assert "<th>message any@10</th>" in first
