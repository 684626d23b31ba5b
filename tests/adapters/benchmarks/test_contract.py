"""The benchmark contract: declarations registered once, readers opened with what they declare, kinds as values."""

import pytest

from adapters.benchmarks import BENCHMARKS, Benchmark, Kind, declaration_of, register, unregister
from adapters.benchmarks.contract import companion_of, warns
from adapters.errors import MemfarmError


class _Recorder:
    """A reader that records what it was built with."""

    seen: dict = {}

    def __init__(self, path, *, benchmark, profile):
        _Recorder.seen = {"path": path, "benchmark": benchmark.name, "profile": profile}
        self.path = path

    def scan(self):
        return []

    def iter_items(self, limit=None):
        return iter(())


class _CompanionRecorder(_Recorder):
    def use_companion(self, path):
        _Recorder.seen["companion"] = path


def test_open_builds_the_reader_with_its_declaration_and_hands_a_companion_only_to_a_reader_that_takes_one():
    plain = Benchmark("t-plain", "T", "s", "thing", Kind.WHOLE_HISTORY, _Recorder)
    plain.open("d", "q", "expected-text")
    assert _Recorder.seen == {"path": "d", "benchmark": "t-plain", "profile": "expected-text"}
    taking = Benchmark("t-companion", "T", "s", "thing", Kind.WHOLE_HISTORY, _CompanionRecorder)
    reader = taking.open("d", "q", "longmemeval-official")
    assert _Recorder.seen == {"path": "d", "benchmark": "t-companion", "profile": "longmemeval-official",
                              "companion": "q"}
    assert companion_of(reader) is reader and companion_of(plain.open("d")) is None


def test_the_built_in_readers_declare_what_they_can_do():
    assert BENCHMARKS["longmemeval"].open("x.json", None, "longmemeval-official").profile == "longmemeval-official"
    assert companion_of(BENCHMARKS["longmemeval"].open("x.json")) is not None
    assert companion_of(BENCHMARKS["locomo"].open("x.json")) is None
    assert warns(BENCHMARKS["realmem"].reader) and not warns(BENCHMARKS["locomo"].reader)
    assert BENCHMARKS["longmemeval"].profiles == ("expected-text", "longmemeval-official")
    assert BENCHMARKS["locomo"].profiles == ("expected-text",)
    kinds = {name: b.kind for name, b in BENCHMARKS.items()}
    assert kinds == {"adamem-jsonl": Kind.EPISODES, "adamem-synthetic": Kind.EPISODES, "beam": Kind.WHOLE_HISTORY,
                     "locomo": Kind.WHOLE_HISTORY,
                     "longmemeval": Kind.WHOLE_HISTORY, "realmem": Kind.STEPPED}
    assert [name for name, b in BENCHMARKS.items() if b.reads_folders] == ["beam", "realmem"]


def test_a_reader_built_by_hand_finds_its_declaration_by_its_class():
    from adapters.benchmarks.locomo.reader import LoCoMo

    assert declaration_of(LoCoMo) is BENCHMARKS["locomo"]
    assert LoCoMo("x.json").benchmark is BENCHMARKS["locomo"]

    class Slower(LoCoMo):  # a reader derived from a declared one reads as its benchmark
        pass

    assert Slower("x.json").benchmark is BENCHMARKS["locomo"]
    with pytest.raises(TypeError, match="declared by 0 benchmarks"):
        declaration_of(_Recorder)


def test_a_registered_benchmark_is_seen_at_once_and_a_second_of_one_name_is_refused():
    declared = Benchmark("t-live", "T", "s", "thing", Kind.WHOLE_HISTORY, _Recorder)
    try:
        register(declared)
        assert BENCHMARKS["t-live"] is declared and "t-live" in list(BENCHMARKS)
        register(declared)  # the same declaration again (a module imported twice) is no conflict
        with pytest.raises(MemfarmError, match="declared twice"):
            register(Benchmark("t-live", "Other", "s", "thing", Kind.STEPPED, _Recorder))
    finally:
        unregister("t-live")
    assert "t-live" not in BENCHMARKS
