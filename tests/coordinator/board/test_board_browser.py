"""The board in a real headless Chromium: it loads without an error, sorts, filters, marks the gold, and a
results file carrying markup and script shows it as text and runs nothing."""

import copy
import json

import pytest

from coordinator.benches.board_build import generated_runs
from coordinator.board import markup as board_html, pages as board_pages, questions as board_questions
from coordinator.board.build import build_board
from coordinator.results.run_files import ResultsFile
from tests.browser import Browser
from tests.coordinator.board.test_board import HOSTILE, hostile_runs, write_runs

pytestmark = pytest.mark.slow

RESAMPLES = 500


@pytest.fixture(scope="module")
def made():
    return generated_runs(questions=24, runs=3, seed=11)


@pytest.fixture(scope="module")
def board(tmp_path_factory, made):
    root = tmp_path_factory.mktemp("board")
    paths = write_runs(root / "runs", copy.deepcopy(made))
    build_board(paths, root / "board", resamples=RESAMPLES)
    return root / "board", [ResultsFile.read(p) for p in paths]


@pytest.fixture(scope="module")
def browser():
    with Browser() as running:
        yield running


def column(browser, table: str, index: int) -> list:
    return browser.eval(f"Array.from(document.querySelectorAll('{table} tbody tr'))"
                        f".map(r => r.cells[{index}].dataset.v || r.cells[{index}].textContent.trim())")


def headers(browser, table: str) -> list[str]:
    return browser.eval(f"Array.from(document.querySelectorAll('{table} thead th')).map(h => h.textContent)")


def test_the_leaderboard_loads_and_sorts_by_a_click(browser, board):
    folder, loaded = board
    browser.events.clear()
    browser.open((folder / "index.html").as_uri())
    names = headers(browser, "#board-g1")
    strict, system = names.index("all@5"), names.index("system")
    means = {r["system"]: r["metrics"]["all"]["session"]["recall_all@5"] for r in loaded}
    shown = [float(v) for v in column(browser, "#board-g1", strict)]
    assert shown == sorted(means.values(), reverse=True) and len(shown) == 3
    browser.click(f"#board-g1 thead th:nth-child({strict + 1})")  # first click on a number: best first
    assert [float(v) for v in column(browser, "#board-g1", strict)] == sorted(means.values(), reverse=True)
    browser.click(f"#board-g1 thead th:nth-child({strict + 1})")
    assert [float(v) for v in column(browser, "#board-g1", strict)] == sorted(means.values())
    assert browser.eval(f"document.querySelector('#board-g1 thead th:nth-child({strict + 1})')"
                        ".getAttribute('aria-sort')") == "ascending"
    browser.click(f"#board-g1 thead th:nth-child({system + 1})")
    assert column(browser, "#board-g1", system) == sorted(means)
    assert browser.eval("document.querySelectorAll('.charts img').length") == 5
    assert browser.eval("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    assert browser.problems() == []


def test_a_question_page_marks_the_gold_of_every_run(browser, board):
    folder, loaded = board
    index = next(i for i, record in enumerate(loaded[0]["records"])
                 if all(any(c["metadata"]["turn_id"] in r["records"][i]["gold"]["turns"]
                            for c in r["records"][i]["candidates"][:10]) for r in loaded))
    browser.events.clear()
    browser.open((folder / "g1" / "q" / f"{index + 1:05d}.html").as_uri())
    assert browser.eval("document.querySelector('h1 code').textContent") == loaded[0]["records"][index]["question_id"]
    sections = browser.eval("Array.from(document.querySelectorAll('section.answer')).map(s => "
                            "[s.querySelector('h2').textContent, Array.from(s.querySelectorAll('tbody tr'))"
                            ".map(r => [r.cells[0].textContent, r.className, r.cells[3].textContent])])")
    assert len(sections) == 3
    for title, rows in sections:
        results = next(r for r in loaded if f" {r['system']}/" in title)
        record = results["records"][index]
        gold_turns, gold_sessions = set(record["gold"]["turns"]), set(record["gold"]["sessions"])
        expected = [[str(c["rank"]), "gold-turn" if c["metadata"]["turn_id"] in gold_turns else
                     "gold-session" if c["metadata"]["session_id"] in gold_sessions else "", c["metadata"]["turn_id"]]
                    for c in record["candidates"][:10]]
        assert rows == expected
        assert any(row[1] == "gold-turn" for row in rows)
    assert browser.problems() == []


def test_the_questions_filter_by_type_missed_by_all_and_search(browser, board):
    folder, loaded = board
    browser.events.clear()
    browser.open((folder / "g1" / "questions.html").as_uri())
    assert browser.eval("document.getElementById('shown').textContent") == "24 of 24 questions shown"
    visible = "Array.from(document.querySelectorAll('#questions tbody tr')).filter(r => !r.hidden).map(r => r.cells[0].textContent)"
    strict = {r["question_id"]: [] for r in loaded[0]["records"]}
    for results in loaded:
        for record in results["records"]:
            strict[record["question_id"]].append(record["metrics"]["session"]["recall_all@5"])
    browser.click("#missed")
    assert browser.eval(visible) == [q for q, values in strict.items() if not any(values)]
    browser.click("#missed")
    browser.click("#disagree")
    assert browser.eval(visible) == [q for q, values in strict.items() if any(values) and not all(values)]
    browser.click("#disagree")
    kind = loaded[0]["records"][2]["question_type"]
    browser.eval(f"(() => {{ const s = document.getElementById('type'); s.value = {json.dumps(kind)};"
                 " s.dispatchEvent(new Event('change')); })()")
    assert browser.eval(visible) == [r["question_id"] for r in loaded[0]["records"] if r["question_type"] == kind]
    browser.eval("(() => { const s = document.getElementById('type'); s.value = '';"
                 " s.dispatchEvent(new Event('change')); })()")
    target = loaded[0]["records"][7]
    browser.command("Runtime.evaluate", {"expression": "document.getElementById('search').focus()"})
    browser.command("Input.insertText", {"text": target["question_id"]})
    assert browser.eval(visible) == [target["question_id"]]
    words = " ".join(target["query"].split()[-2:])
    browser.open("about:blank")
    browser.open((folder / "g1" / "questions.html").as_uri() + f"#type={kind}&q={words}")  # a shared, filtered view
    assert browser.eval("document.getElementById('type').value") == kind
    assert browser.eval(visible) == [r["question_id"] for r in loaded[0]["records"]
                                     if r["question_type"] == kind and all(
                                         w in f'{r["question_id"]} {r["query"]}'.lower() for w in words.lower().split())]
    assert browser.problems() == []


def test_wins_and_losses_are_one_click_from_the_leaderboard(browser, board):
    folder, _ = board
    browser.open((folder / "index.html").as_uri())
    browser.events.clear()
    link = browser.eval("document.querySelector('#board-g1 tbody tr:nth-child(2) td:last-child a').textContent")
    wins, losses = (int(x) for x in link.split("/"))
    browser.click("#board-g1 tbody tr:nth-child(2) td:last-child a")
    browser.wait_for("Page.loadEventFired")
    assert browser.eval("location.pathname").endswith("/g1/pair-1-2.html")
    counts = browser.eval("Array.from(document.querySelectorAll('table.questions')).map(t => t.tBodies[0].rows.length)")
    assert counts == [n for n in (wins, losses) if n] and browser.problems() == []


def _pwned(browser) -> list:
    return browser.eval("[typeof window.__pwned, document.querySelectorAll('img[src=\"x\"]').length, "
                        "document.scripts.length]")


def test_a_hostile_results_file_shows_as_text_and_runs_nothing(tmp_path, made, browser):
    paths = write_runs(tmp_path / "runs", hostile_runs(made))
    build_board(paths, tmp_path / "board", resamples=RESAMPLES)
    folder = tmp_path / "board"
    for page, scripts in (("index.html", 1), ("g1/questions.html", 1), ("g1/q/00001.html", 0), ("g1/runs.html", 0),
                          ("g1/pair-1-2.html", 0)):
        browser.events.clear()
        browser.open((folder / page).as_uri())
        assert _pwned(browser) == ["undefined", 0, scripts], page
        assert HOSTILE in browser.eval("document.body.textContent"), page
        assert browser.problems() == [], page
    browser.open((folder / "index.html").as_uri())
    assert browser.eval("document.querySelector('#board-g1 tbody tr td:nth-child(2) a').textContent") \
        .startswith(HOSTILE)


def test_the_page_policy_alone_stops_script_that_escaped_escaping(tmp_path, made, browser, monkeypatch):
    """Defence in depth: were a text ever written unescaped, the Content-Security-Policy still runs none of it."""
    for module in (board_html, board_pages, board_questions):
        monkeypatch.setattr(module, "e", str)
    paths = write_runs(tmp_path / "runs", hostile_runs(made))
    build_board(paths, tmp_path / "board", resamples=RESAMPLES)
    browser.events.clear()
    browser.open((tmp_path / "board" / "g1" / "q" / "00001.html").as_uri())
    typeof, images, scripts = _pwned(browser)
    assert images > 0 and scripts > 0  # the markup did become elements...
    assert typeof == "undefined"  # ...and none of it ran
    assert any("Content Security Policy" in p for p in browser.problems())


def test_every_leaderboard_column_is_visible_at_1400_px(tmp_path, made):
    """The paired columns (Δ, its interval, Holm's p, wins and losses) come last: at 1400 px, with the long
    names real runs carry, the leaderboard fits its box with no column cut and no scrolling sideways."""
    runs = copy.deepcopy(made) + [copy.deepcopy(made[0])]
    names = [("memfarm-reference-lexical", "bm25", None),
             ("memoria", "fusion", "sentence-transformers/all-MiniLM-L6-v2"),
             ("memoria", "fusion", "sentence-transformers/all-mpnet-base-v2"),
             ("my-http-memory-server-" + "x" * 60, "http", None)]
    for (results, _), (system, mode, embedder) in zip(runs, names):
        results["system"], results["retrieval_mode"], results["embedder"] = system, mode, embedder
        results["settings_system"] = {**results["settings_system"], "name": system, "retrieval_mode": mode}
    runs[3][0]["records"][0]["runtime_ms"] = 1.0  # not a copy of run 0: another system, same answers
    paths = write_runs(tmp_path / "runs", runs, names=["locomo_memfarm-reference-lexical_bm25_20261204.json",
                                                        "locomo_memoria_fusion_minilm.json",
                                                        "locomo_memoria_fusion_mpnet.json", "http.json"])
    build_board(paths, tmp_path / "board", resamples=RESAMPLES)
    with Browser(width=1400, height=900) as wide:
        wide.open((tmp_path / "board" / "index.html").as_uri())
        shot = wide.screenshot(tmp_path / "board-1400.png", full_page=False)
        measured = wide.eval(
            "(() => { const t = document.querySelector('#board-g1'), box = t.parentElement.getBoundingClientRect();"
            " const cells = Array.from(t.tHead.rows[0].cells).map(c => c.getBoundingClientRect());"
            " return {table: t.scrollWidth, box: t.parentElement.clientWidth, page: document.documentElement.scrollWidth,"
            " view: document.documentElement.clientWidth, right: box.right,"
            " last: Math.max(...cells.map(c => c.right)), names: Array.from(t.tHead.rows[0].cells).map(c => c.textContent)}; })()")
        assert measured["table"] <= measured["box"], measured
        assert measured["page"] <= measured["view"] and measured["last"] <= measured["right"] + 0.5, measured
        assert measured["names"][-4:] == ["Δ", "Δ 95% CI", "p Holm", "W / L"]
        assert shot.stat().st_size > 10_000 and wide.problems() == []


#: Where `test_the_group_and_question_pages_at_1400_px` copies its pictures besides its own folder: the manual's
#: board page shows the ones in docs/screenshots (MEMFARM_SCREENSHOTS=docs/screenshots makes them again).
SCREENSHOTS = "MEMFARM_SCREENSHOTS"


def _boxes_overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def test_the_group_and_question_pages_at_1400_px(tmp_path, board):
    """The pictures a reader sees: the group page (leaderboard, verdicts, charts) and a question page at 1400 px,
    saved as PNG. The question-type labels are whole, inside their slots and apart; the cost chart's tags apart."""
    import os
    import shutil

    folder, _ = board
    shots = []
    with Browser(width=1400, height=900) as wide:
        for name in ("by_type.svg", "cost.svg"):  # the SVG as a document: its text can be measured
            wide.open((folder / "g1" / name).as_uri())
            boxes = wide.eval(
                "Array.from(document.querySelectorAll('text.tick, text.tag')).map(t => { const b = t.getBBox();"
                " return {text: t.textContent, left: b.x, right: b.x + b.width, top: b.y, bottom: b.y + b.height}; })")
            assert boxes, name
            assert not any("…" in b["text"] for b in boxes), boxes
            for i, a in enumerate(boxes):
                assert not [b for b in boxes[i + 1:] if _boxes_overlap(a, b)], (name, a)
        wide.open((folder / "index.html").as_uri())
        assert wide.eval("document.querySelector('div.verdicts p.verdict').textContent")
        loaded = wide.eval("(() => { document.querySelectorAll('details.pairs').forEach(d => d.open = true);"
                           " return Promise.all(Array.from(document.images).map(i => { i.loading = 'eager';"
                           " return i.complete && i.naturalWidth ? 1 : new Promise(r => { i.onload = r; }); }))"
                           ".then(() => Array.from(document.images).filter(i => i.naturalWidth > 0).length); })()")
        assert loaded == 5  # every chart drawn in the picture, none left to lazy loading
        shots.append(wide.screenshot(tmp_path / "board-group-1400.png"))
        wide.open((folder / "g1" / "q" / "00001.html").as_uri())
        shots.append(wide.screenshot(tmp_path / "board-question-1400.png", full_page=False))  # its head: the rest
        # is ten candidates per run
        assert wide.problems() == []
    for shot in shots:
        assert shot.stat().st_size > 10_000
    if os.environ.get(SCREENSHOTS):
        os.makedirs(os.environ[SCREENSHOTS], exist_ok=True)
        for shot in shots:
            shutil.copy(shot, os.path.join(os.environ[SCREENSHOTS], shot.name))
