"""One verdict and one Holm family everywhere: the same pair shows the same p in `memfarm compare`, on the board and in
`memfarm bench systems`; the board names no leader without a significant win; its labels are readable and unique;
two runs of different question sets are compared on the questions they share, and only those are listed."""

import copy
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from coordinator.benches.board_build import generated_runs
from coordinator.benches.systems import _dataset_rows, verdict_lines
from coordinator.board import charts, data as board_data, pages as board_pages, questions as board_questions
from coordinator.cli import main
from coordinator.results.compare import compare_files
from coordinator.results.run_files import ResultsFile
from tests.coordinator.board.test_board import write_runs
from tests.factories import remade_header

RESAMPLES = 300


@pytest.fixture(scope="module")
def made():
    return generated_runs(questions=24, runs=3, seed=5)


def test_one_pair_shows_one_p_in_compare_on_the_board_and_in_bench_systems(tmp_path, made):
    paths = write_runs(tmp_path / "runs", copy.deepcopy(made))
    (group,) = board_data.build_data(paths, resamples=RESAMPLES)["groups"]
    order = [Path(row["run"]["path"]) for row in group["rows"]]  # the board's #1 first: compare's baseline
    table = compare_files([ResultsFile.read(p) for p in order], resamples=RESAMPLES)  # every default metric
    strict = [c for c in table["comparisons"] if c["metric"] == "session:recall_all@5"]
    bench = _dataset_rows("longmemeval", {f"system {n}": (p, 1.0, 2 ** 27) for n, p in enumerate(order)}, RESAMPLES)
    board = [row["pair"] for row in group["rows"][1:]]
    assert len(strict) == len(board) == len(bench) - 1 == 2
    assert min(pair["p_holm"] for pair in board) < 0.25  # small enough that a larger family would change it
    for on_board, in_compare, in_bench in zip(board, strict, bench[1:]):
        assert on_board["p_holm"] == in_compare["p_holm"]
        assert in_bench["session_recall_all_5_p_holm"] == float(f'{in_compare["p_holm"]:.3g}')
        assert on_board["holm_family"] == in_compare["holm_family"] == in_bench["session_recall_all_5_holm_family"] == 2
        assert on_board["outcome"] == in_compare["outcome"]
    lines = verdict_lines(bench)
    assert len(lines) == 4 and all("after Holm over 2 comparisons" in line for line in lines[1:3])
    result = CliRunner().invoke(main, ["compare", *map(str, order), "--resamples", str(RESAMPLES)])
    assert result.exit_code == 0, result.output
    assert "Holm over 2 comparisons per metric" in result.output
    for entry in table["comparisons"]:
        assert entry["verdict"] in result.output


def test_no_leader_without_a_significant_win_over_every_other_run(tmp_path, made):
    paths = write_runs(tmp_path / "runs", copy.deepcopy(made))
    data = board_data.build_data(paths, resamples=RESAMPLES)
    (group,) = data["groups"]
    assert any(row["pair"]["outcome"] != "behind" for row in group["rows"][1:])  # the case this test is about
    assert group["leader"] is None and group["top"] is group["rows"][0]
    html = board_pages.leaderboard_table(group) + board_pages.verdict_lines(group)
    assert ">leader<" not in html and "#1, not a leader" in html
    assert "No leader: the top runs are not told apart" in html
    assert "not told apart: " + group["rows"][0]["label"] in board_pages.index_page(data)


def test_a_run_significantly_ahead_of_every_other_is_the_leader(tmp_path):
    paths = write_runs(tmp_path / "runs", generated_runs(questions=80, runs=2, seed=3))
    data = board_data.build_data(paths, resamples=RESAMPLES)
    (group,) = data["groups"]
    assert group["rows"][1]["pair"]["outcome"] == "behind"
    assert group["leader"] is group["rows"][0]
    html = board_pages.leaderboard_table(group) + board_pages.verdict_lines(group)
    assert ">leader<" in html and "Leader: #1" in html and "retrieves worse than" in html


def test_question_type_labels_are_whole_and_unique():
    types = ["single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
             "temporal-reasoning", "knowledge-update"]
    svg = charts.grouped_bars("t", "y", types, [{"label": "a", "colour": "#000", "values": [0.5] * 6}])
    shown = [" ".join(re.findall(r"<tspan[^>]*>([^<]*)</tspan>", t))
             for t in re.findall(r'<text class="tick".*?</text>', svg)]
    assert [s.replace("- ", "-") for s in shown] == types  # every name whole, wrapped after its hyphens
    assert all(f"<title>{t}</title>" in svg for t in types)
    long = ["a-very-long-question-type-name-" + tail for tail in ("one", "two")]
    ticks = [" ".join(lines) for lines in charts.tick_labels(long, 8)]
    assert len(set(ticks)) == 2 and ticks[0].startswith("1:")  # cut alike, told apart by their place


def test_tags_of_nearby_dots_in_the_cost_chart_do_not_overlap():
    dots = [(100.0, 100.0, "#1"), (103.0, 101.0, "#2"), (112.0, 100.0, "#3"), (118.0, 104.0, "#4")]
    placed = charts.place_tags(dots)
    boxes = [(x, y - charts.TAG_HEIGHT + 2, x + len(t) * charts.TAG_CHAR_WIDTH, y + 2) for x, y, t in placed]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)
    assert sorted(", ".join(t for _, _, t in placed).split(", ")) == ["#1", "#2", "#3", "#4"]


def test_two_runs_of_different_question_sets_are_compared_on_the_shared_questions_only(tmp_path, made):
    runs = copy.deepcopy(made)
    cut = runs[1][0]
    kept = cut["records"][:16]
    cut["records"], cut["question_count"] = kept, len(kept)  # a run of the first 16 questions only
    remade_header(cut)
    paths = write_runs(tmp_path / "runs", runs)
    data = board_data.build_data(paths, resamples=RESAMPLES)
    whole = next(g for g in data["groups"] if len(g["question_ids"]) == 24)
    (table,) = whole["shared"]
    assert table["shared"] == 16 and table["only_here"] == 8 and table["only_there"] == 0
    shared = {str(r["question_id"]) for r in kept}
    for pair in table["pairs"]:
        assert pair["n"] == 16 and pair["holm_family"] == len(table["pairs"]) == 2
        page = board_questions.pair_page(whole, pair, table)
        listed = set(re.findall(r'<td><a href="q/\d+\.html">([^<]+)</a>', page))
        assert listed and listed <= shared
        assert listed == set(pair["wins"]["question_ids"]) | set(pair["losses"]["question_ids"])
        assert "16 questions both question sets hold" in page and pair["verdict"] in page.replace("&#x27;", "'")


def test_the_bench_table_prints_a_tiny_p_as_below_a_thousandth():
    from coordinator.benches.systems import _table

    row = {"dataset": "locomo", "system": "bm25s", "n": 30, "session_recall_all_5": 0.2,
           "session_recall_all_5_delta": -0.3, "session_recall_all_5_ci_low": -0.4, "session_recall_all_5_ci_high": -0.2,
           "session_recall_all_5_p_holm": 0.0, "session_recall_any_5": 0.7, "session_ndcg_10": 0.6,
           "turn_recall_any_10": 0.4, "ingest_ms_per_turn": 1.0, "recall_p50_ms": 2.0, "peak_rss_mib": 100.0}
    line = _table([row])[1]
    assert "<0.001" in line and " 0 " not in line
