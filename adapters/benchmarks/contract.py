"""The contract of a benchmark, declared once: what every benchmark provides, and what it may.

A benchmark is a folder of `adapters/benchmarks/` whose `__init__` declares it: a `Benchmark` (its name,
source, item unit, kind, scoring profiles, how its turns are rendered) naming its reader class, handed to
`adapters.benchmarks.register`. The reader is built as `reader(path, benchmark=..., profile=...)` (a reader built by hand finds its
declaration with `adapters.benchmarks.declaration_of`) and
provides `Dataset`: every item id once (`scan`), then the items as a stream (`iter_items`), each with its
docs' turns, its questions and their gold (`adapters.contracts.Item`). Its kind is one declared value
(`Kind`); anything more a reader can do is an optional capability, each its own protocol below, asked
through its helper, never by a benchmark's name or by probing attributes elsewhere.
"""

from __future__ import annotations

import enum
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from adapters.contracts import Item
from adapters.defaults import DEFAULT_SCORING_PROFILE, K_VALUES, METRIC_NAMES
from adapters.errors import MemfarmError

#: The metric a benchmark's results are led by where it declares none: session recall_all@5, the strict one that
#: separates systems where recall_any@5 is saturated (LongMemEval-S).
DEFAULT_HEADLINE = "session:recall_all@5"
#: `LEVEL:NAME@K`, the spelling of a metric everywhere (`memfarm compare --metric`).
_METRIC = re.compile(r"^(session|turn):([a-z_]+)@(\d+)$")


class Kind(str, enum.Enum):
    """How a benchmark's items are asked: the one value the runner, the worker and the reducer branch on."""

    #: Every question of an item is asked of one memory built from the whole item (LongMemEval, LoCoMo); such an
    #: item has one state a cache can hold.
    WHOLE_HISTORY = "whole-history"
    #: Memory grows in steps and questions are asked between them (RealMem); no item has one state to cache.
    STEPPED = "stepped"
    #: Observations and queries judged by expected and forbidden substrings of what is retrieved (AdaMem).
    EPISODES = "episodes"


@runtime_checkable
class Dataset(Protocol):
    """What every benchmark's reader provides."""

    path: Path | None

    def scan(self) -> list[str]:
        """Every item id once, in order; a duplicate is refused naming both places."""

    def iter_items(self, limit: int | None = None) -> Iterator[Item]:
        """The items as a stream; a malformed one is an item with `error` and `field`, never an exception."""


@runtime_checkable
class TakesCompanion(Protocol):
    """The reader reads a companion file beside its dataset (LongMemEval's extracted questions, `--questions`)."""

    def use_companion(self, path: str | Path | None) -> None: ...


@runtime_checkable
class MissesCompanion(Protocol):
    """The reader has something to say where a run gives it no companion file (LongMemEval's expected-text gold
    falls back to each answer session's first turn); asked of its class, before any file is read."""

    @classmethod
    def without_companion(cls, profile: str) -> str | None: ...


@runtime_checkable
class Warns(Protocol):
    """The reader has something to say about a file before a run (a file it does not know by its checksum)."""

    def warnings(self) -> list[str]: ...


@runtime_checkable
class ListsFiles(Protocol):
    """The reader reads files of a `--dataset` folder other than its top-level `*.json` (BEAM's chats, nested
    folders deep): each item's files, in item order, which the dataset's checksums cover; asked of its class."""

    @classmethod
    def files_of(cls, path: Path) -> list[list[Path]]: ...


def _declares(obj, protocol) -> bool:
    """Whether `obj` has every member of `protocol`, looked up without running any."""
    members = [name for name in protocol.__dict__ if not name.startswith("_")]
    return all(_has(obj, name) for name in members)


def _has(obj, name: str) -> bool:
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True


def companion_of(dataset):
    """`dataset` where it takes a companion file, else None."""
    return dataset if _declares(dataset, TakesCompanion) else None


def without_companion(reader: type, profile: str) -> str | None:
    """What a run of `reader` (a class) under `profile` lacks without its companion file, where it says so
    (`MissesCompanion`)."""
    return reader.without_companion(profile) if _declares(reader, MissesCompanion) else None


def files_of(reader: type, path: str | Path) -> list[list[Path]] | None:
    """Each item's files of a `--dataset` folder, where `reader` (a class) lists them (`ListsFiles`); None: the
    folder's top-level `*.json` files, one an item."""
    path = Path(path)
    return reader.files_of(path) if path.is_dir() and _declares(reader, ListsFiles) else None


def warns(reader) -> bool:
    """Whether a reader (or its class) has something to say about its files before a run (`Warns`)."""
    return _declares(reader, Warns)


def plural(unit: str) -> str:
    """What a benchmark calls many of its sessions or turns: batches, messages."""
    return unit + ("es" if unit.endswith(("s", "x", "ch", "sh")) else "s")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark as data: its key, title, source, item unit, kind, reader, and how it is scored and rendered."""

    name: str
    title: str
    source: str
    item_unit: str
    kind: Kind
    #: The reader class (`Dataset`): built as `reader(path, benchmark=self, profile=...)`.
    reader: type
    needs_dataset: bool = True
    #: `--dataset` may be a folder of files, one item a file (RealMem's personas).
    reads_folders: bool = False
    #: The record fields results are grouped by, comma-separated (RealMem: by category and by persona).
    group_key: str | None = "question_type"
    rendering: str = "turn content as-is"
    #: Scoring profiles computed for every question of the benchmark (`adapters.profiles`; the first is the default).
    profiles: tuple[str, ...] = (DEFAULT_SCORING_PROFILE,)
    #: The profile of a run that names none.
    default_profile: str = DEFAULT_SCORING_PROFILE
    #: The system of a run that names none (AdaMem episodes are observed by AdaMem).
    system: str = "memoria"
    #: Every profile scores the one corpus a run gives its system, on the same gold (RealMem: only the DCG differs),
    #: so each profile's numbers are its own; elsewhere a profile other than the chosen one is on a foreign corpus.
    shared_corpus: bool = False
    #: Memoria `full`'s weights tuned for this benchmark (a file of `adapters/weights/`), taken by a run of full with
    #: MiniLM that names no --weights; None: the engine's own.
    memoria_weights: str | None = None
    #: The metric its results are led by, `LEVEL:NAME@K` (a report's headline; the board orders and judges a group of
    #: its runs by it): session recall_all@5 unless declared; turn recall_any@10 where the gold is finer than its
    #: sessions, as BEAM's messages are within batches of about ninety. Checked when declared.
    headline: str = DEFAULT_HEADLINE
    #: What its sessions and its turns are called where it names them otherwise (BEAM: its batches and messages).
    unit_names: tuple[str, str] = ("session", "turn")
    #: A title for its results where the file is not the published benchmark (a generated stand-in); None: `title`.
    description: str = ""

    def __post_init__(self):
        match = _METRIC.match(self.headline) if isinstance(self.headline, str) else None
        if not match or match.group(2) not in METRIC_NAMES or int(match.group(3)) not in K_VALUES:
            raise MemfarmError(f"benchmark {self.name!r}: headline {self.headline!r} is not a metric every run "
                               f"computes: expected LEVEL:NAME@K with LEVEL session or turn, NAME one of "
                               f"{', '.join(METRIC_NAMES)} and K one of {', '.join(map(str, K_VALUES))} "
                               f"(e.g. {DEFAULT_HEADLINE})")
        if len(self.unit_names) != 2 or not all(isinstance(n, str) and n for n in self.unit_names):
            raise MemfarmError(f"benchmark {self.name!r}: unit_names {self.unit_names!r} is not (what its sessions "
                               "are called, what its turns are called)")

    @property
    def headline_level(self) -> str:
        """The level of its headline metric: `session` or `turn`."""
        return self.headline.split(":", 1)[0]

    def headline_words(self) -> str:
        """The headline as a reader is told it: `session recall_all@5`; `message recall_any@10 (BEAM's messages)`
        where the benchmark names the headline's level otherwise."""
        level, metric = self.headline.split(":", 1)
        unit = self.unit_names[0 if level == "session" else 1]
        return f"{unit} {metric}" + ("" if unit == level else f" ({self.title}'s {plural(unit)})")

    @property
    def stepped(self) -> bool:
        """Memory grows in steps and questions are asked between them."""
        return self.kind is Kind.STEPPED

    @property
    def question_per_item(self) -> bool:
        """Each item is one question named by the item's id, so a failed item's record names its question."""
        return self.item_unit == "question"

    @property
    def ranked(self) -> bool:
        """Scored from ranked ids (the benchmarks the per-item cache and `memfarm score` serve)."""
        return self.kind is not Kind.EPISODES

    def memoria_weights_file(self) -> Path | None:
        return Path(__file__).parent.parent / "weights" / self.memoria_weights if self.memoria_weights else None

    def open(self, dataset: str | Path | None, questions: str | Path | None = None,
             profile: str = DEFAULT_SCORING_PROFILE) -> Dataset:
        """The reader of `dataset`: it streams items and knows its gold rules."""
        reader = self.reader(dataset, benchmark=self, profile=profile)
        taker = companion_of(reader)
        if taker is not None:
            taker.use_companion(questions)
        return reader
