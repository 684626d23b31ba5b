"""A `memfarm bench` command turns SIGTERM into an exit while it runs (so its cleanup stops what it started) and
puts the handler it found back when it ends, for a process that runs a bench and goes on."""

import signal

import pytest
from click.testing import CliRunner

import coordinator.benches.engine as engine_bench
from coordinator.cli import main
from coordinator.cli.bench import _exit_on_terminate


def _callers_own(signum, frame):
    """The handler a process had before it ran a bench."""


@pytest.fixture()
def callers_handler():
    before = signal.signal(signal.SIGTERM, _callers_own)
    yield _callers_own
    signal.signal(signal.SIGTERM, before)


def test_sigterm_exits_during_a_bench_and_the_callers_handler_is_back_after(monkeypatch, callers_handler):
    seen = []

    def bench(**options):
        seen.append(signal.getsignal(signal.SIGTERM))
        return "a table"

    monkeypatch.setattr(engine_bench, "run_engine_bench", bench)
    result = CliRunner().invoke(main, ["bench", "engine", "--output", "unused.json"])
    assert result.exit_code == 0, result.output
    assert "a table" in result.output
    assert seen == [_exit_on_terminate]
    assert signal.getsignal(signal.SIGTERM) is callers_handler


def test_the_callers_handler_is_back_when_a_bench_fails_or_is_refused(monkeypatch, callers_handler):
    def bench(**options):
        raise RuntimeError("the bench broke")

    monkeypatch.setattr(engine_bench, "run_engine_bench", bench)
    failed = CliRunner().invoke(main, ["bench", "engine", "--output", "unused.json"])
    assert isinstance(failed.exception, RuntimeError)
    assert signal.getsignal(signal.SIGTERM) is callers_handler
    refused = CliRunner().invoke(main, ["bench", "engine", "--turns", "1"])
    assert refused.exit_code == 2 and "--turns" in refused.output
    assert signal.getsignal(signal.SIGTERM) is callers_handler
