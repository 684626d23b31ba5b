"""Every benchmark the farm runs, registered by declaration: one folder each under `adapters/benchmarks/`.

A benchmark's folder holds its reader, its gold rules, its scoring profile where it has one of its own, and its
declaration: its `__init__` calls `register(Benchmark(...))` (`contract.Benchmark`) beside the class it names.
The folders are imported the first time the registry is read, so a reader may import `adapters.benchmarks.*`
freely. Adding a benchmark touches its folder and nothing else (docs/contributing.md, "Add a benchmark").
"""

from __future__ import annotations

import importlib
import pkgutil

from adapters.benchmarks.contract import Benchmark, Kind
from adapters.declarations import Declarations
from adapters.defaults import DEFAULT_SCORING_PROFILE
from adapters.errors import MemfarmError

__all__ = ["BENCHMARKS", "Benchmark", "Kind", "benchmark", "declaration_of", "default_profile", "ranked_benchmarks", "register"]

def _load() -> None:
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module.ispkg:
            importlib.import_module(f"{__name__}.{module.name}")


#: Every registered benchmark by name, read live: a benchmark registered later is seen at once.
BENCHMARKS: Declarations[Benchmark] = Declarations("benchmark", _load, lambda b: (b.name,),
                                                   lambda b: b.reader.__module__)
#: Add a declared benchmark (a second of one name is refused); take one out again (a test's own).
register, unregister = BENCHMARKS.register, BENCHMARKS.unregister


def ranked_benchmarks() -> tuple[str, ...]:
    """The benchmarks scored from ranked ids (the ones the per-item cache and `memfarm score` serve)."""
    return tuple(name for name, b in BENCHMARKS.items() if b.ranked)


def declaration_of(reader: type) -> Benchmark:
    """The benchmark that declares `reader` as its reader (a reader built by hand, outside `Benchmark.open`), or the
    nearest class it derives from (a test's subclass of a reader reads as that reader's benchmark)."""
    for cls in reader.__mro__:
        found = [b for b in BENCHMARKS.values() if b.reader is cls]
        if found:
            break
    if len(found) != 1:
        raise TypeError(f"{reader.__qualname__}: declared by {len(found)} benchmarks; open it through one "
                        "(BENCHMARKS[name].open) instead")
    return found[0]


def default_profile(name: str) -> str:
    """The scoring profile of a run of benchmark `name` that names none."""
    return BENCHMARKS[name].default_profile if name in BENCHMARKS else DEFAULT_SCORING_PROFILE


def benchmark(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise MemfarmError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}") from None
