"""A `memfarm bench` command turns SIGTERM into an exit while it runs (so its cleanup stops what it started) and
puts the handler it found back when it ends, for a process that runs a bench and goes on."""

import signal

from click.testing import CliRunner

import coordinator.benches.engine as engine_bench
from coordinator.cli import main
from coordinator.cli.bench import _exit_on_terminate


def test_sigterm_exits_during_a_bench_and_the_handler_before_it_is_back_after(monkeypatch):
    seen = []

    def bench(**options):
        seen.append(signal.getsignal(signal.SIGTERM))
        return "a table"

    monkeypatch.setattr(engine_bench, "run_engine_bench", bench)
    before = signal.getsignal(signal.SIGTERM)
    assert before is not _exit_on_terminate
    result = CliRunner().invoke(main, ["bench", "engine", "--output", "unused.json"])
    assert result.exit_code == 0, result.output
    assert "a table" in result.output
    assert seen == [_exit_on_terminate]
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_handler_is_put_back_when_a_bench_command_is_refused():
    before = signal.getsignal(signal.SIGTERM)
    result = CliRunner().invoke(main, ["bench", "engine", "--turns", "1"])
    assert result.exit_code == 2 and "--turns" in result.output
    assert signal.getsignal(signal.SIGTERM) is before
