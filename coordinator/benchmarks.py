"""Which benchmarks the farm runs, and how to open each one's items."""

from __future__ import annotations

from pathlib import Path

from memoria.errors import MemfarmError

BENCHMARKS = ("longmemeval", "locomo")


def open_benchmark(name: str, dataset: str | Path, questions: str | Path | None = None, profile: str = "memoria"):
    """The dataset adapter for `name`; it streams items and knows its gold rules."""
    if name == "longmemeval":
        from adapters.longmemeval import LongMemEval

        return LongMemEval(dataset, companion=questions, profile=profile)
    if name == "locomo":
        from adapters.locomo import LoCoMo

        return LoCoMo(dataset, profile=profile)
    raise MemfarmError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}")
