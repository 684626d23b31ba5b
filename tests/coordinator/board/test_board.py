"""`memfarm board`: grouping, the leaderboard's statistics against `memfarm compare`'s own, gold ranks, escaping,
the folder it writes and the server."""

import copy
import json
import threading
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from adapters.errors import ResultsError
from coordinator.benches.board_build import generated_runs
from coordinator.board import data as board_data, pages as board_pages
from coordinator.board.build import build_board, make_server
from coordinator.cli import main
from coordinator.results.analyze import load_results
from coordinator.results.compare import bootstrap_interval, compare_files
from coordinator.running.reducer import write_results

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
    assert board_data.gold_ranks(candidates, ["a", "b"], "session_id") == (2, 4)
    assert board_data.gold_ranks(candidates, ["z"], "session_id") == (5, 5)
    assert board_data.gold_ranks(candidates, ["a", "c"], "session_id") == (2, None)
    assert board_data.gold_ranks(candidates, ["c"], "session_id") == (None, None)
    assert board_data.gold_ranks(candidates, [], "session_id") == (None, None)


def test_runs_of_the_same_questions_form_one_group_and_another_dataset_its_own(tmp_path, made):
    runs = copy.deepcopy(made)
    other = copy.deepcopy(made[0])
    other[0]["dataset_checksum"] = "f" * 64
    other[0]["system"] = "elsewhere"
    dropped = copy.deepcopy(made[1])
    dropped[0]["records"] = dropped[0]["records"][:-2]
    dropped[0]["question_count"] = len(dropped[0]["records"])  # a file that agrees with itself: fewer questions
    dropped[0]["system"] = "fewer"
    paths = write_runs(tmp_path, runs + [other, dropped])
    groups = board_data.group_runs([board_data.load_run(p) for p in paths])
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
    group = board_data.group_runs([board_data.load_run(p) for p in paths])[0]
    # still named by what ran first, as every other run and every leader is: the file only tells them apart
    assert sorted(r["label"] for r in group["runs"]) == ["system0/generated (monday)", "system0/generated (tuesday)"]


def test_each_row_is_the_paired_test_of_memfarm_compare_against_the_leader(three):
    data = board_data.build_data([three[0].parent], resamples=RESAMPLES, seed=3)
    (group,) = data["groups"]
    rows = group["rows"]
    loaded = {Path(p).name: load_results(p) for p in three}

    def strict(results):
        values = [r["metrics"]["session"]["recall_all@5"] for r in results["records"] if r["metrics"]]
        return float(np.mean(values)), values

    means = {name: strict(results)[0] for name, results in loaded.items()}
    order = sorted(means, key=lambda n: -means[n])
    assert [row["run"]["name"] for row in rows] == order
    assert rows[0]["pair"] == {"leader": True} and group["leader"] is rows[0]
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
    paths = write_runs(tmp_path, runs)
    (group,) = board_data.build_data(paths, resamples=RESAMPLES)["groups"]
    last = group["rows"][-1]
    assert last["run"]["system"] == "system0" and not last["run"]["complete"]
    assert "incomplete run: 1 failed item (1 question);" in last["pair"]["not_paired"]  # one, not "1 items"
    assert group["leader"]["run"]["system"] == "system1"
    html = board_pages.leaderboard_table(group)
    assert "no: 1 item failed" in html
    question = next(q for q in group["questions"] if q["id"] == failed["question_id"])
    assert question["answers"][-1] == {"status": "failed", "error": "ValueError: boom"}


def test_folders_skip_manifests_and_other_json_but_a_named_file_must_be_results(tmp_path, three):
    (tmp_path / "runs" / "bench.json").write_text(json.dumps({"benchmark": "engine", "rows": []}))
    files, skipped = board_data.find_results([tmp_path / "runs", three[0]])
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
    return runs


def test_no_text_of_a_results_file_becomes_markup(tmp_path, made):
    paths = write_runs(tmp_path / "runs", hostile_runs(made))
    built = build_board(paths, tmp_path / "board", resamples=RESAMPLES)
    pages = sorted((tmp_path / "board").rglob("*.html"))
    assert len(pages) == built["question_pages"] + 3 + 2  # index, questions, runs, 2 pair pages
    allowed = {"html", "head", "meta", "title", "link", "script", "body", "nav", "a", "h1", "h2", "h3", "p", "ul",
               "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "code", "small", "br", "section", "div",
               "label", "input", "select", "option", "span", "blockquote", "dl", "dt", "dd", "b", "figure", "img",
               "pre"}
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
    from workers.item.run_context import RunContext

    retrieved = [{"id": 1, "content": "I moved to Lisbon in March", "score": 0.9, "contributions": {}},
                 {"id": 2, "content": "I lived in Porto", "score": 0.5, "contributions": {}}]
    queries = [{"id": "a", "query": "Where do I live?", "expected_substrings": ["Lisbon"],
                "forbidden_substrings": ["Porto"]},
               {"id": "b", "query": "When did I move?", "expected_substrings": ["March"]}]
    records = [judged_record(q, "episode-1", retrieved, runtime_ms=1.0, worker="w", attempt=1) for q in queries]
    context = {"benchmark": "adamem-jsonl", "benchmark_title": "AdaMem episodes", "group_key": None,
               "dataset_path": "episodes.jsonl", "dataset_sha256": "e" * 64,
               "system_config": {"name": "adamem", "retrieval_mode": "full"}, "embedding_signature": None,
               "scoring_profile": None, "top_k": None, "k_values": (1, 5), "rendering": None, "arguments": {},
               "command": "test", "tuning": None}
    judged = reduce_run([outcome("episode-1", records)], RunContext.from_dict(context), elapsed_seconds=1.0,
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
        run = board_data.load_run(path)
        for answer in run["runs_of"].values():
            first, last = answer["session_ranks"]
            assert answer["session_recall_any@5"] == float(first is not None and first <= 5)
            assert answer["strict"] == float(last is not None and last <= 5)
