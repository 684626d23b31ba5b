"""`memfarm board`: grouping, the leaderboard's statistics against `memfarm compare`'s own, gold ranks, escaping,
the folder it writes and the server."""

import copy
import json
import re
import threading
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from adapters.errors import ResultsError
from coordinator.benches.board_build import generated_runs
from coordinator.board import charts, data as board_data, files as board_files, markup as board_html, pages as board_pages
from coordinator.board import run_view
from coordinator.board import questions as board_questions
from coordinator.board.build import build_board, make_server
from coordinator.cli import main
from coordinator.results.run_files import ResultsFile
from coordinator.results.compare import bootstrap_interval, compare_files
from coordinator.running.reducer import write_results
from tests.factories import remade_header, run_context

RESAMPLES = 500  # enough for an interval to be an interval; the statistics' own tests live with compare

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">"\'&'


def write_runs(directory: Path, made: list[tuple[dict, dict]], names=None) -> list[Path]:
    paths = []
    for number, (results, manifest) in enumerate(made):
        name = names[number] if names else f"run{number}.json"
        paths.append(write_results(results, manifest, directory / name)[0])
    return paths


@pytest.fixture(scope="module")
def made():
    return generated_runs(questions=24, runs=3, seed=5)


@pytest.fixture
def three(tmp_path, made):
    return write_runs(tmp_path / "runs", copy.deepcopy(made))


def test_gold_ranks_first_and_every_gold_by_hand():
    candidates = [{"rank": r, "metadata": {"session_id": s}} for r, s in
                  enumerate(["x", "a", "y", "a", "b", "z"], start=1)]
    # sessions count once, at their first place (x, a, y, b, z), as session recall ranks them
    assert run_view.gold_ranks(candidates, ["a", "b"], "session_id") == (2, 4)
    assert run_view.gold_ranks(candidates, ["z"], "session_id") == (5, 5)
    assert run_view.gold_ranks(candidates, ["a", "c"], "session_id") == (2, None)
    assert run_view.gold_ranks(candidates, ["c"], "session_id") == (None, None)
    assert run_view.gold_ranks(candidates, [], "session_id") == (None, None)


def test_runs_of_the_same_questions_form_one_group_and_another_dataset_its_own(tmp_path, made):
    runs = copy.deepcopy(made)
    other = copy.deepcopy(made[0])
    other[0]["dataset_checksum"] = "f" * 64
    other[0]["system"] = "elsewhere"
    dropped = copy.deepcopy(made[1])
    dropped[0]["records"] = dropped[0]["records"][:-2]
    dropped[0]["question_count"] = len(dropped[0]["records"])  # a file that agrees with itself: fewer questions
    remade_header(dropped[0])
    dropped[0]["system"] = "fewer"
    paths = write_runs(tmp_path, runs + [other, dropped])
    groups = board_data.group_runs([run_view.load_run(p) for p in paths])
    assert [len(g["runs"]) for g in groups] == [3, 1, 1]
    main_group = groups[0]
    assert {r["system"] for r in main_group["runs"]} == {"system0", "system1", "system2"}
    by_system = {g["runs"][0]["system"]: g for g in groups[1:]}
    said = {a["group"]: a["differences"] for a in by_system["elsewhere"]["apart"]}
    assert any(d.startswith("dataset checksum ffffffffffff here, ") for d in said[1])
    fewer = {a["group"]: a["differences"] for a in by_system["fewer"]["apart"]}[1]
    assert fewer == ["question set differs (0 questions only here, 2 only there)"]
    # groups of one benchmark are built into one board, each saying which group it cannot be ranked with
    result = CliRunner().invoke(main, ["board", *map(str, paths), "--output", str(tmp_path / "b"),
                                       "--resamples", "200"])
    assert result.exit_code == 0, result.output
    index = (tmp_path / "b" / "index.html").read_text()
    assert index.count('not comparable with <a href="#g1">group 1</a>') == 2


def test_two_runs_of_one_system_and_mode_are_told_apart_by_their_file_names(tmp_path, made):
    twice = [copy.deepcopy(made[0]), copy.deepcopy(made[0])]
    paths = write_runs(tmp_path, twice, names=["monday.json", "tuesday.json"])
    group = board_data.group_runs([run_view.load_run(p) for p in paths])[0]
    # still named by what ran first, as every other run and every leader is: the file only tells them apart
    assert sorted(r["label"] for r in group["runs"]) == ["system0/generated (monday)", "system0/generated (tuesday)"]


def test_each_row_is_the_paired_test_of_memfarm_compare_against_the_leader(three):
    data = board_data.build_data([three[0].parent], resamples=RESAMPLES, seed=3)
    (group,) = data["groups"]
    rows = group["rows"]
    loaded = {Path(p).name: ResultsFile.read(p) for p in three}

    def strict(results):
        values = [r["metrics"]["session"]["recall_all@5"] for r in results["records"] if r["metrics"]]
        return float(np.mean(values)), values

    means = {name: strict(results)[0] for name, results in loaded.items()}
    order = sorted(means, key=lambda n: -means[n])
    assert [row["run"]["name"] for row in rows] == order
    assert rows[0]["pair"]["top"] and group["top"] is rows[0]
    behind = all(row["pair"]["outcome"] == "behind" for row in rows[1:])
    assert (group["leader"] is rows[0]) == behind and bool(rows[0]["pair"].get("leader")) == behind
    assert [row["strict"] for row in rows] == pytest.approx([means[n] for n in order])
    values = strict(loaded[order[1]])[1]
    assert rows[1]["strict_ci95"] == bootstrap_interval(np.array(values), resamples=RESAMPLES, seed=3)
    table = compare_files([loaded[n] for n in order], ("session:recall_all@5",), resamples=RESAMPLES, seed=3)
    for row, entry in zip(rows[1:], table["comparisons"]):
        for key in ("delta", "ci95", "p_value", "p_holm", "n", "test"):
            assert row["pair"][key] == entry[key], key
        assert row["pair"]["wins"] == entry["wins"] and row["pair"]["losses"] == entry["losses"]
        assert row["pair"]["p_value"] <= row["pair"]["p_holm"]


def test_an_incomplete_run_stays_on_its_leaderboard_marked_and_unpaired(tmp_path, made):
    runs = copy.deepcopy(made)
    broken = runs[0][0]  # the best run fails one item: it must neither lead nor be paired
    failed = broken["records"][3]
    broken["records"][3] = {"question_id": failed["question_id"], "item_id": failed["item_id"], "status": "failed",
                            "error": "ValueError: boom", "field": None, "metrics": None, "abstention": False}
    broken["complete"], broken["failed"] = False, 1
    broken["failures"] = {"items": 1, "item_ids": [failed["item_id"]], "questions": 1,
                          "question_ids": [failed["question_id"]], "items_without_question_ids": []}
    remade_header(broken)
    paths = write_runs(tmp_path, runs)
    (group,) = board_data.build_data(paths, resamples=RESAMPLES)["groups"]
    last = group["rows"][-1]
    assert last["run"]["system"] == "system0" and not last["run"]["complete"]
    assert "incomplete run: 1 failed item (1 question);" in last["pair"]["not_paired"]  # one, not "1 items"
    assert group["top"]["run"]["system"] == "system1"
    html = board_pages.leaderboard_table(group)
    assert "no: 1 item failed" in html
    question = next(q for q in group["questions"] if q["id"] == failed["question_id"])
    assert question["answers"][-1] == {"status": "failed", "error": "ValueError: boom"}


def test_folders_skip_manifests_and_other_json_but_a_named_file_must_be_results(tmp_path, three):
    (tmp_path / "runs" / "bench.json").write_text(json.dumps({"benchmark": "engine", "rows": []}))
    files, skipped = board_files.find_results([tmp_path / "runs", three[0]])
    assert sorted(files) == sorted(p.resolve() for p in three)
    assert sum(name.endswith(".manifest.json") for name in skipped) == 3 and any("bench.json" in s for s in skipped)
    with pytest.raises(ResultsError, match="bench.json: not a memoria-farm results file"):
        board_data.build_data([tmp_path / "runs" / "bench.json"])
    with pytest.raises(ResultsError, match="no results file among"):
        board_data.build_data([tmp_path / "empty"] if (tmp_path / "empty").mkdir() is None else [])


class _Tags(HTMLParser):
    """Every start tag and attribute of a page, and every script's source."""

    def __init__(self):
        super().__init__()
        self.tags, self.attributes, self.scripts = set(), [], []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attributes += [(tag, name, value) for name, value in attrs]
        if tag == "script":
            self.scripts.append(dict(attrs).get("src"))


def hostile_runs(made) -> list[tuple[dict, dict]]:
    """The generated runs with markup and script in every text a results file brings: question text, id and
    type, expected answer, gold and candidate ids and texts, system name, mode, embedder, commit, settings."""
    runs = copy.deepcopy(made)
    for results, _ in runs:
        results["system"] = HOSTILE + results["system"]
        results["retrieval_mode"] = HOSTILE
        results["embedder"], results["commit"] = HOSTILE, HOSTILE
        results["settings_system"] = {"name": HOSTILE, "</pre><script>": HOSTILE}
        results["command"] = HOSTILE
        for record in results["records"]:
            record["query"] = HOSTILE + record["query"]
            record["question_type"] = HOSTILE
            record["expected"] = HOSTILE
            record["question_id"] = HOSTILE + record["question_id"]
            record["gold"]["sessions"] = [HOSTILE + s for s in record["gold"]["sessions"]]
            for c in record["candidates"]:
                c["text"] = HOSTILE + c["text"]
                c["metadata"]["session_id"] = HOSTILE + c["metadata"]["session_id"]
        remade_header(results)
    return runs


def test_no_text_of_a_results_file_becomes_markup(tmp_path, made):
    paths = write_runs(tmp_path / "runs", hostile_runs(made))
    built = build_board(paths, tmp_path / "board", resamples=RESAMPLES)
    pages = sorted((tmp_path / "board").rglob("*.html"))
    assert len(pages) == built["question_pages"] + 3 + 3  # index, questions, runs, a page per pair of 3 runs
    allowed = {"html", "head", "meta", "title", "link", "script", "body", "nav", "a", "h1", "h2", "h3", "p", "ul",
               "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "code", "small", "br", "section", "div",
               "label", "input", "select", "option", "span", "blockquote", "dl", "dt", "dd", "b", "figure", "img",
               "pre", "details", "summary"}
    for page in pages:
        text = page.read_text()
        parser = _Tags()
        parser.feed(text)
        assert parser.tags <= allowed, (page, parser.tags - allowed)
        assert not [a for a in parser.attributes if a[1].startswith("on")], page
        assert all(src and src.endswith("board.js") for src in parser.scripts), page
        assert not [v for _, name, v in parser.attributes if name in ("src", "href") and ":" in v.split("#")[0]], page
        assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in text, page  # shown, as text
    index = (tmp_path / "board" / "index.html").read_text()
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;img src=x onerror=&quot;" in index
    for svg in (tmp_path / "board").rglob("*.svg"):
        parser = _Tags()
        parser.feed(svg.read_text())
        assert "script" not in parser.tags and not [a for a in parser.attributes if a[1].startswith("on")], svg


def test_the_folder_replaces_an_earlier_board_and_refuses_any_other_folder(tmp_path, three):
    output = tmp_path / "board"
    build_board(three, output, resamples=RESAMPLES)
    (output / "stale.html").write_text("from an earlier build")
    build_board(three[:2], output, resamples=RESAMPLES)
    assert not (output / "stale.html").exists() and (output / board_pages.MARKER).exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left behind
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("mine")
    with pytest.raises(ResultsError, match="precious: exists and is not a board folder"):
        build_board(three, precious, resamples=RESAMPLES)
    assert (precious / "notes.txt").read_text() == "mine"


def test_the_board_is_self_contained(tmp_path, three):
    build_board(three, tmp_path / "board", resamples=RESAMPLES)
    for page in (tmp_path / "board").rglob("*.html"):
        parser = _Tags()
        parser.feed(page.read_text())
        for tag, name, value in parser.attributes:
            if name in ("src", "href"):
                assert "://" not in value and not value.startswith("//"), (page, value)
                target = value.split("#")[0]
                assert not target or (page.parent / target).resolve().is_file(), (page, value)


def test_the_command_line_builds_and_names_the_folder(tmp_path, three):
    result = CliRunner().invoke(main, ["board", str(three[0].parent), "--output", str(tmp_path / "b"),
                                       "--resamples", "200"])
    assert result.exit_code == 0, result.output
    assert "board: 3 runs in 1 group, 24 question pages" in result.output
    assert f"open:  {(tmp_path / 'b' / 'index.html').resolve().as_uri()}" in result.output
    refused = CliRunner().invoke(main, ["board", str(three[0]), "--output", str(tmp_path / "runs")])
    assert refused.exit_code == 2 and "is not a board folder" in refused.output


def test_the_server_shows_the_board_on_loopback(tmp_path, three):
    build_board(three, tmp_path / "board", resamples=RESAMPLES)
    server = make_server(tmp_path / "board", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert server.server_address[0] == "127.0.0.1"
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        with urllib.request.urlopen(url + "index.html", timeout=30) as reply:
            assert "memoria-farm board" in reply.read().decode()
        with urllib.request.urlopen(url + "g1/q/00001.html", timeout=30) as reply:
            assert reply.status == 200
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def test_the_html_report_of_a_run_links_to_the_board(tmp_path, three):
    build_board(three, tmp_path / "boards" / "all", resamples=RESAMPLES)
    report = tmp_path / "reports" / "one.html"
    result = CliRunner().invoke(main, ["analyze", str(three[0]), "--html", str(report),
                                       "--board", str(tmp_path / "boards" / "all")])
    assert result.exit_code == 0, result.output
    parser = _Tags()
    parser.feed(report.read_text())
    links = [value for tag, name, value in parser.attributes if tag == "a" and name == "href"]
    assert links == ["../boards/all/index.html"]
    assert (report.parent / links[0]).resolve() == (tmp_path / "boards" / "all" / "index.html").resolve()
    CliRunner().invoke(main, ["analyze", str(three[0]), "--html", str(report), "--board", str(tmp_path / "none")])
    assert f"memfarm board results --output {tmp_path / 'none'}</code> builds the board" in report.read_text()


def test_runs_judged_by_substrings_stand_apart_with_their_pass_rates(tmp_path, made):
    from adapters.records import judged_record, outcome
    from coordinator.running.reducer import reduce_run

    retrieved = [{"id": 1, "content": "I moved to Lisbon in March", "score": 0.9, "contributions": {}},
                 {"id": 2, "content": "I lived in Porto", "score": 0.5, "contributions": {}}]
    queries = [{"id": "a", "query": "Where do I live?", "expected_substrings": ["Lisbon"],
                "forbidden_substrings": ["Porto"]},
               {"id": "b", "query": "When did I move?", "expected_substrings": ["March"]}]
    records = [judged_record(q, "episode-1", retrieved, runtime_ms=1.0, worker="w", attempt=1) for q in queries]
    context = run_context(benchmark="adamem-jsonl", benchmark_title="AdaMem episodes", group_key=None,
                          dataset_path="episodes.jsonl", dataset_sha256="e" * 64,
                          system_config={"name": "adamem", "retrieval_mode": "full"}, scoring_profile=None,
                          top_k=None)
    judged = reduce_run([outcome("episode-1", records)], context, elapsed_seconds=1.0,
                        commit="c")
    paths = write_runs(tmp_path, [judged, copy.deepcopy(made[0])])
    data = board_data.build_data(paths, resamples=RESAMPLES)
    (episodes,) = [g for g in data["groups"] if g["judged"]]
    assert episodes["leader"] is None and len(episodes["rows"]) == 1
    assert episodes["rows"][0]["support"] == {"queries": 2, "passed": 1, "stale_hits": 1, "pass_rate": 0.5}
    html = board_pages.judged_table(episodes)
    assert '<td class="num" data-v="0.5">0.500</td>' in html
    build_board(paths, tmp_path / "board", resamples=RESAMPLES)
    assert (tmp_path / "board" / episodes["id"] / "q" / "00002.html").is_file()


def test_the_gold_ranks_a_question_page_shows_agree_with_the_runs_own_session_metrics(three):
    for path in three:
        run = run_view.load_run(path)
        for answer in run["runs_of"].values():
            first, last = answer["session_ranks"]
            assert answer["session_recall_any@5"] == float(first is not None and first <= 5)
            assert answer["strict"] == float(last is not None and last <= 5)


# ---- What a reader sees: names, counts, copies, order, what is not read -----------------------------------------

def _renamed(made, systems):
    runs = copy.deepcopy(made)
    for (results, _), (system, mode) in zip(runs, systems):
        results["system"], results["retrieval_mode"] = system, mode
        results["settings_system"] = {**results["settings_system"], "name": system, "retrieval_mode": mode}
    return runs


def test_the_leader_is_named_system_and_mode_in_every_group(tmp_path, made):
    """Where two runs of a group share a system and mode, the file tells them apart but does not replace the
    name: the leader of that group is named as the leader of any other."""
    shared = _renamed(made, [("memoria", "fusion"), ("memoria", "fusion"), ("bm25", "lexical")])
    alone = _renamed(made, [("memoria", "fusion"), ("bm25", "lexical"), ("mnem", "hybrid")])
    for results, _ in alone:
        results["dataset_checksum"] = "f" * 64
    paths = write_runs(tmp_path / "a", shared, names=["locomo_memoria_1.json", "locomo_memoria_2.json", "c.json"])
    paths += write_runs(tmp_path / "b", alone)
    data = board_data.build_data(paths, resamples=RESAMPLES)
    leaders = [g["top"]["label"] for g in data["groups"]]
    systems = [f'{g["top"]["run"]["system"]}/{g["top"]["run"]["mode"]}' for g in data["groups"]]
    assert all(label.startswith(system) for label, system in zip(leaders, systems)), leaders
    index = board_pages.index_page(data)
    for label in leaders:
        assert f"<td>{label}</td></tr>" in index or f"<td>not told apart: {label}" in index  # named by its label


def test_an_outside_systems_mode_is_said_once(tmp_path, made):
    """Outside systems name their modes `SYSTEM:MODE`; the board shows `lancedb/fts`, not `lancedb/lancedb:fts`,
    and a mode that only looks alike is left whole."""
    runs = _renamed(made, [("lancedb", "lancedb:fts"), ("mnem", "mempalace:search"), ("memoria", "fusion")])
    data = board_data.build_data(write_runs(tmp_path, runs), resamples=RESAMPLES)
    modes = {row["run"]["system"]: row["run"]["mode"] for g in data["groups"] for row in g["rows"]}
    assert modes == {"lancedb": "fts", "mnem": "mempalace:search", "memoria": "fusion"}
    assert "lancedb/fts" in {row["label"] for g in data["groups"] for row in g["rows"]}


def test_an_embedder_never_shows_as_none_and_seconds_never_as_zero(tmp_path, made):
    runs = copy.deepcopy(made)
    runs[0][0]["embedder"] = None  # a system that embeds nothing
    runs[1][0]["embedder"] = None  # an HTTP system: the server does not say
    runs[1][0]["settings_system"] = {**runs[1][0]["settings_system"], "url": "http://127.0.0.1:9/", "wire_version": 1}
    runs[0][0]["elapsed_seconds"] = 0.1  # 24 questions in 0.1 s: 0.0042 s each, not 0.00
    runs[1][0]["elapsed_seconds"] = None  # not measured
    paths = write_runs(tmp_path, runs)
    (group,) = board_data.build_data(paths, resamples=RESAMPLES)["groups"]
    html = board_pages.leaderboard_table(group)
    cells = {r["run"]["system"]: r for r in group["rows"]}
    assert cells["system0"]["run"]["embedder"] == "none" and cells["system1"]["run"]["embedder"] == "not disclosed"
    assert ">None<" not in html and ">none<" in html and ">not disclosed<" in html
    assert ">0.00<" not in html and ">0.0042<" in html and 'title="not measured">–<' in html


def test_counts_agree_with_their_nouns():
    assert [board_html.count(n, "run") for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]
    assert board_html.count(1, "copy", "copies") == "1 copy" and board_html.count(3, "copy", "copies") == "3 copies"


def test_one_run_in_one_group_is_said_in_the_singular(tmp_path, made):
    paths = write_runs(tmp_path, copy.deepcopy(made[:1]))
    index = board_pages.index_page(board_data.build_data(paths, resamples=RESAMPLES))
    assert "1 run from 1 results file in 1 group." in index and "1 groups" not in index


def test_identical_results_files_are_one_run_shown_as_copies(tmp_path, made):
    """`make run` twice on the same code and data writes two files whose records differ only in timings: one
    run, "2 copies", by the records' content and not by the files' names. A run that answered one question
    differently is another run."""
    first = copy.deepcopy(made[0])
    again = copy.deepcopy(made[0])
    for record in again[0]["records"]:
        record["runtime_ms"] = (record["runtime_ms"] or 0) + 7.5
    again[0]["elapsed_seconds"] = 99.0
    other = copy.deepcopy(made[0])
    record = other[0]["records"][0]
    record["candidates"][-1]["text"] = str(record["candidates"][-1].get("text")) + " (said otherwise)"
    paths = write_runs(tmp_path, [first, again, other, copy.deepcopy(made[1])],
                       names=["locomo_a.json", "zz_rerun.json", "changed.json", "b.json"])
    data = board_data.build_data(paths, resamples=RESAMPLES)
    (group,) = data["groups"]
    copies = sorted(len(r["run"]["copies"]) for r in group["rows"])
    assert data["runs"] == 3 and len(data["files"]) == 4 and copies == [1, 1, 2]
    folded = next(r["run"] for r in group["rows"] if len(r["run"]["copies"]) == 2)
    assert sorted(Path(p).name for p in folded["copies"]) == ["locomo_a.json", "zz_rerun.json"]
    assert ">2 copies</span>" in board_pages.leaderboard_table(group)
    assert "3 runs from 4 results files (1 file identical to another" in board_pages.index_page(data)
    assert "zz_rerun.json" in board_pages.runs_page(group)


def test_a_pair_page_lists_question_ids_in_natural_order(tmp_path, made):
    runs = copy.deepcopy(made)
    for results, _ in runs:
        for number, record in enumerate(results["records"]):
            record["question_id"] = f"q{(number * 37) % 101}"  # q0, q37, q74, q10, q47, ...: 1 to 3 digits
    paths = write_runs(tmp_path, runs)
    (group,) = board_data.build_data(paths, resamples=RESAMPLES)["groups"]
    pair = next(p for p in group["pairs"] if p["n"] and p["losses"]["count"] > 2)
    page = board_questions.pair_page(group, pair)
    listed = [m for m in re.findall(r'<td><a href="q/\d+\.html">(q\d+)</a>', page)]
    losses = listed[pair["wins"]["count"]:]
    assert losses == sorted(losses, key=lambda q: int(q[1:])) and len(losses) > 2
    assert run_view.natural_key("q2") < run_view.natural_key("q11") < run_view.natural_key("q100")


def test_published_figures_and_bench_outputs_are_not_entered(tmp_path, three):
    root = three[0].parent
    for folder in ("published", "bench", "deep/bench"):
        (root / folder).mkdir(parents=True)
        (root / folder / "figure.json").write_text(json.dumps({"figure": "x", "rows": []}))
    hidden = root / "bench" / "kept.json"
    hidden.write_bytes(three[0].read_bytes())  # not entered even where a results file lies there
    files, skipped = board_files.find_results([root])
    assert sorted(files) == sorted(p.resolve() for p in three)
    assert not any("figure.json" in s for s in skipped) and all(s.endswith(".manifest.json") for s in skipped)
    assert board_files.find_results([root / "bench"])[0] == [hidden.resolve()]  # named itself: read


def test_a_control_arm_is_tagged_and_the_ceiling_shown(tmp_path, made):
    runs = copy.deepcopy(made)
    runs[2][0]["settings_system"] = {**runs[2][0]["settings_system"], "control_arm": "random"}
    ceiling = runs[0][0]["metrics"]["all"]["ceiling"]["session"]["recall_all@5"]
    paths = write_runs(tmp_path, runs)
    (group,) = board_data.build_data(paths, resamples=RESAMPLES)["groups"]
    table = board_pages.leaderboard_table(group)
    assert table.count('class="tag arm"') == 1
    arm_row = next(r for r in group["rows"] if r["run"]["system"] == "system2")
    assert re.search(rf'<tr data-run="{arm_row["position"]}">(?:(?!</tr>).)*>arm</span>', table)
    section = board_pages.index_page({"groups": [group], "runs": 3, "files": paths, "skipped": [],
                                      "resamples": RESAMPLES, "seed": 0})
    assert f"reaches session recall_all@5 <b>{ceiling:.3f}</b>" in section
    for results, _ in runs:
        del results["metrics"]["all"]["ceiling"]
    paths = write_runs(tmp_path / "without", runs)
    (group,) = board_data.build_data(paths, resamples=RESAMPLES)["groups"]
    assert "Ceiling:" not in board_pages.index_page({"groups": [group], "runs": 3, "files": paths, "skipped": [],
                                                     "resamples": RESAMPLES, "seed": 0})


def test_a_long_legend_wraps_whole_instead_of_being_cut():
    label = "#3 memfarm-reference-lexical/bm25 (locomo_memfarm-reference-lexical_bm25_20261204)"
    svg = charts.recall_curves("t", "y", [{"label": label, "colour": "#000", "points": [(1, 0.5), (5, 0.9)]}])
    lines = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", svg)
    assert len(lines) > 1 and all(len(line) <= charts.LEGEND_CHARS for line in lines)
    assert "".join(lines).replace(" ", "") == label.replace(" ", "") and "…" not in svg
    many = charts.recall_curves("t", "y", [{"label": label, "colour": "#000", "points": []}] * 12)
    height = int(re.search(r'<svg[^>]* height="(\d+)"', many).group(1))
    last = max(float(y) for y in re.findall(r'<line x1="\d+" y1="([\d.]+)"', many))
    assert height > charts.HEIGHT and last < height  # the svg grows to hold every entry
