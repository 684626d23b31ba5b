"""A benchmark defined wholly inside this test, with its own reader and its own scoring profile, registered by
declaration and run through `run`, `analyze`, `compare` and `board` without touching any other module: what
docs/contributing.md ("Add a benchmark") promises a newcomer."""

import json

import pytest
from click.testing import CliRunner

from adapters.benchmarks import Benchmark, Kind, register, unregister
from adapters.metrics import level_metrics
from adapters.profiles import Notes, Reads, ScoringProfile, agree, register_profile, unregister_profile
from coordinator.cli import main

NOTE = "notes profile: a question's gold is the one note that holds its answer, nothing else counts"


class NotesReader:
    """A JSON file of notebooks: `[{"id", "notes": [text, ...], "questions": [{"q", "answer_note"}]}]`."""

    def __init__(self, path, *, benchmark, profile):
        self.path, self.benchmark = path, benchmark

    def _books(self):
        with open(self.path, encoding="utf-8") as file:
            return json.load(file)

    def scan(self):
        return [book["id"] for book in self._books()]

    def iter_items(self, limit=None):
        for book in self._books()[:limit]:
            turns = [{"session_id": f"{book['id']}/p{n // 2}", "turn_id": f"{book['id']}/n{n}", "text": text,
                      "props": {"role": "user", "turn_index": n}} for n, text in enumerate(book["notes"])]
            questions = []
            for n, question in enumerate(book["questions"]):
                gold = f"{book['id']}/n{question['answer_note']}"
                session = f"{book['id']}/p{question['answer_note'] // 2}"
                questions.append({"question_id": f"{book['id']}#{n}", "question": question["q"],
                                  "question_type": "lookup", "expected_ids": [session],
                                  "gold_sessions": [session], "gold_turns": [gold],
                                  "gold_by_profile": {"notes": {"sessions": [session], "turns": [gold]}}})
            yield {"item_id": book["id"], "benchmark": self.benchmark.name, "turns": turns, "questions": questions}


def _score(ranking, gold, level, k_values):
    """Turn level only: the one gold note among the ranked notes."""
    if level != "turn":
        return {"session": None, "turn": None}
    return {"session": None, "turn": level_metrics([r["turn_id"] for r in ranking], gold["turns"], k_values)}


def _recheck(stored, scored, where):
    agree(stored, _score(scored.ranking, scored.gold, scored.level, scored.k_values), where, partial=scored.empty)


@pytest.fixture()
def notes_benchmark(tmp_path):
    register_profile(ScoringProfile("notes", "one note", ("turn",), Reads.KEPT, "standard: rel_i / log2(i + 1)",
                                    _score, _recheck, notes=Notes(table=NOTE)))
    register(Benchmark("notes", "Notebooks", "a notebook file", "notebook", Kind.WHOLE_HISTORY, NotesReader,
                       profiles=("notes",), default_profile="notes"))
    books = [{"id": f"book{b}",
              "notes": [f"book {b} note {n}: the {word} is kept in drawer {n}" for n, word in
                        enumerate(["stapler", "ledger", "compass", "lantern", "thimble", "atlas"])],
              "questions": [{"q": f"where is the {word}?", "answer_note": n}
                            for n, word in enumerate(["stapler", "compass", "atlas"], start=0)]}
             for b in range(3)]
    path = tmp_path / "notebooks.json"
    path.write_text(json.dumps(books))
    yield path
    unregister("notes")
    unregister_profile("notes")


def test_a_benchmark_declared_in_a_test_runs_through_run_analyze_compare_and_board(tmp_path, notes_benchmark):
    cli = CliRunner()
    outputs = {}
    for system in ("recency", "random"):
        outputs[system] = tmp_path / f"notes_{system}.json"
        result = cli.invoke(main, ["run", "notes", "--dataset", str(notes_benchmark), "--system", system,
                                   "--output", str(outputs[system])])
        assert result.exit_code == 0, result.output
        assert NOTE in result.output, "the closing table prints the profile's own note"
        assert "has_answer" not in result.output and "official" not in result.output, "and no other profile's"
        written = json.loads(outputs[system].read_text())
        assert written["benchmark_key"] == "notes" and written["scoring_profile"] == "notes"
        assert len(written["records"]) == 9 and all(r["metrics"]["turn"] for r in written["records"])

    analyzed = cli.invoke(main, ["analyze", str(outputs["recency"])])
    assert analyzed.exit_code == 0, analyzed.output
    assert "Notebooks" in analyzed.output and "turn R@10 1.000 (n=9)" in analyzed.output

    compared = cli.invoke(main, ["compare", str(outputs["recency"]), str(outputs["random"])])
    assert compared.exit_code == 0, compared.output
    assert "recency" in compared.output and "random" in compared.output

    board = cli.invoke(main, ["board", str(outputs["recency"]), str(outputs["random"]),
                              "--output", str(tmp_path / "board")])
    assert board.exit_code == 0, board.output
    assert "Notebooks" in (tmp_path / "board" / "index.html").read_text()


def test_a_benchmark_is_unknown_once_unregistered(tmp_path):
    result = CliRunner().invoke(main, ["run", "notes", "--dataset", str(tmp_path)])
    assert result.exit_code == 2 and "'notes' is not one of" in result.output
