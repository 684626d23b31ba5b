"""A name read from a results file (a server's `/info` name, a mode, a group) reaches the terminal with its
control characters, escapes and bidirectional overrides shown as escapes, in `analyze` and `compare` alike."""

import copy

import pytest
from click.testing import CliRunner

from coordinator.benches.board_build import generated_runs
from coordinator.cli import main
from coordinator.running.reducer import write_results

#: Retitles the window, clears the screen, and turns the rest of the line right to left.
HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\u202egnp.exe\u2066x\u2069\nfake: line"
RAW = ("\x1b", "\x07", "\u202e", "\u2066", "\u2069", "\nfake: line")


@pytest.fixture(scope="module")
def made():
    return generated_runs(questions=8, runs=2, seed=7)


@pytest.fixture
def files(tmp_path, made):
    paths = []
    for number, (results, manifest) in enumerate(copy.deepcopy(made)):
        results["system"], results["retrieval_mode"] = f"{HOSTILE}{number}", HOSTILE
        paths.append(str(write_results(results, manifest, tmp_path / f"run{number}.json")[0]))
    return paths


def _shown_escaped(output: str) -> None:
    assert not [raw for raw in RAW if raw in output], repr(output)
    assert "\\x1b]0;pwned\\x07" in output and "\\u202egnp.exe\\u2066x\\u2069\\nfake: line" in output


@pytest.mark.parametrize("arguments", [["analyze"], ["analyze", "--compare"], ["compare"]])
def test_a_name_from_a_results_file_is_printed_escaped(files, arguments):
    result = CliRunner().invoke(main, [*arguments, *files, "--resamples", "200"] if arguments == ["compare"]
                                else [*arguments, *files])
    assert result.exit_code == 0, result.output
    _shown_escaped(result.output)
