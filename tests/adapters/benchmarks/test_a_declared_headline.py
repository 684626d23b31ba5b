"""A benchmark's headline metric is part of its declaration: checked when declared, a bad one refused naming the
benchmark; BEAM's is message recall_any@10, its batches being too few for a batch-level metric to tell systems
apart."""

import pytest

from adapters.benchmarks import BENCHMARKS, Benchmark, Kind
from adapters.benchmarks.contract import DEFAULT_HEADLINE
from adapters.errors import MemfarmError


class _Reader:
    def __init__(self, path, *, benchmark, profile):
        self.path = path

    def scan(self):
        return []

    def iter_items(self, limit=None):
        return iter(())


def _declare(**fields):
    return Benchmark("tiny", "Tiny", "nowhere", "item", Kind.WHOLE_HISTORY, _Reader, **fields)


def test_a_benchmark_that_declares_no_headline_is_led_by_session_recall_all_at_5():
    tiny = _declare()
    assert tiny.headline == DEFAULT_HEADLINE == "session:recall_all@5"
    assert tiny.headline_level == "session" and tiny.headline_words() == "session recall_all@5"


def test_beam_declares_message_recall_any_at_10():
    beam = BENCHMARKS["beam"]
    assert beam.headline == "turn:recall_any@10" and beam.headline_level == "turn"
    assert beam.headline_words() == "message recall_any@10 (BEAM's messages)"
    assert BENCHMARKS["longmemeval"].headline == BENCHMARKS["locomo"].headline == DEFAULT_HEADLINE


@pytest.mark.parametrize("headline", ["turn:recall_any", "message:recall_any@10", "turn:precision@10",
                                      "session:recall_all@7", "recall_all@5", "session:recall_all@5 ", "", None])
def test_a_malformed_headline_is_refused_when_declared_naming_the_benchmark(headline):
    with pytest.raises(MemfarmError, match=r"benchmark 'tiny': headline .* is not a metric every run computes"):
        _declare(headline=headline)
    assert "tiny" not in BENCHMARKS


def test_every_metric_a_run_computes_may_lead():
    graded = _declare(headline="turn:ndcg_any@30", unit_names=("chapter", "passage"))
    assert graded.headline_level == "turn" and graded.headline_words() == "passage ndcg_any@30 (Tiny's passages)"
    with pytest.raises(MemfarmError, match="benchmark 'tiny': unit_names"):
        _declare(unit_names=("batch",))


def test_every_declared_headline_is_a_metric_memfarm_compare_reads():
    from coordinator.results.compare import parse_metric

    for name, declared in BENCHMARKS.items():
        level, metric, k = parse_metric(declared.headline)
        assert level == declared.headline_level, name
