"""A benchmark argument whose choices are the registry's as it is when the command runs, not when it was built."""

from __future__ import annotations

import click

from adapters.benchmarks import BENCHMARKS


class BenchmarkChoice(click.Choice):
    """The registered benchmarks (`ranked`: those scored from ranked ids only), read live."""

    def __init__(self, ranked: bool = False):
        self.ranked = ranked
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(name for name, b in BENCHMARKS.items() if b.ranked or not self.ranked)

    @choices.setter
    def choices(self, value) -> None:  # click's own constructor assigns it; the registry decides
        pass
