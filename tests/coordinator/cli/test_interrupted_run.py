"""Ctrl-C in a run says in one line what is kept and how to go on, and exits 130 (not click's bare `Aborted!`)."""

from types import SimpleNamespace

from click.testing import CliRunner

from coordinator.cli import main
from coordinator.cli.run import interrupted_line
from tests.farm_support import REPO
from tests.helpers import write_dataset

FAILING = REPO / "tests" / "adapters" / "systems" / "failing_at_ingest.py"


def _run(tmp_path, *extra):
    system = FAILING
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.04)
    return CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", f"{system}:Stopped",
                                     "--output", str(tmp_path / "r.json"), *extra])


def test_ctrl_c_in_a_run_with_a_cache_says_the_same_command_resumes_from_it(tmp_path):
    cache = tmp_path / "cache"
    result = _run(tmp_path, "--cache-dir", str(cache))
    assert result.exit_code == 130, result.output
    assert "Aborted!" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("interrupted")]
    assert lines == [f"interrupted: the items done are kept in the per-item cache under {cache} and the embedding "
                     f"store ({cache / 'embeddings.sqlite'}); the same command resumes from them"], result.output
    assert not (tmp_path / "r.json").exists()


def test_ctrl_c_in_a_run_without_a_cache_says_nothing_is_kept(tmp_path):
    result = _run(tmp_path)
    assert result.exit_code == 130, result.output
    assert "interrupted: nothing is kept (no --cache-dir)" in result.output


def test_ctrl_c_while_watching_a_farm_run_names_the_commands_that_follow_and_finish_it():
    line = interrupted_line(SimpleNamespace(cache_dir=None, embedding_store=True), "run-7", farm=True)
    assert line.startswith("interrupted: run run-7 goes on on the workers")
    assert "`memfarm status run-7`" in line and "`memfarm resume run-7`" in line
