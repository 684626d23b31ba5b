"""Every scoring profile, declared as data beside its code: the scorer, the checks, the report, the worker and the
reducer ask a profile's declaration, never its name.

A profile (`ScoringProfile`) says how a question's ranking is scored: the levels it has gold at, how much of the
ranking it reads, its DCG, whether a question without gold still counts, the notes a report prints beside its
numbers, and the two functions that score a question and re-check a stored score. Each is declared beside its code
by `register_profile`: the expected-text profile in `adapters.metrics` (every benchmark's), LongMemEval's official
one in `adapters.benchmarks.longmemeval.profile`, RealMem's in `adapters.benchmarks.realmem.profile`. The modules
that declare them are imported the first time the registry is read (the benchmarks' folders with the benchmark
registry), so they may import this module freely.
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from adapters.declarations import Declarations
from adapters.errors import MemfarmError, ResultsError

__all__ = ["PROFILES", "PROFILE_ALIASES", "Notes", "Reads", "Scored", "ScoringProfile", "agree", "find_profile",
           "profile", "profile_name", "register_profile", "unregister_profile"]

#: Two computations of one metric agree to this much (a float written to JSON and read back is exact).
TOLERANCE = 1e-9


class Reads(str, enum.Enum):
    """How much of a question's ranking a profile scores."""

    #: The candidates a results file keeps: the first top_k.
    KEPT = "kept candidates"
    #: Every doc of the item: the system is asked to rank them all, and the file keeps the first top_k.
    WHOLE = "whole ranking"


@dataclass(frozen=True)
class Notes:
    """What a report prints about a profile's numbers; None where the profile has nothing to say there."""

    #: Under the table of profiles, wherever this profile is among them: why its numbers differ from the others'.
    table: str | None = None
    #: After the line saying the numbers of other profiles are on the run's corpus, where this profile's are.
    foreign: str | None = None
    #: Where every profile scored the run's one corpus on one gold and this one is among them: what tells them apart.
    shared: str | None = None
    #: Where this is the run's profile and `{count}` rankings were shorter than the corpus.
    short_rankings: str | None = None
    #: Where this is the run's profile and `{count}` scored questions had no gold turn (`scores_without_gold`).
    without_gold: str | None = None


@dataclass(frozen=True)
class Scored:
    """A stored record as a profile re-checks it: the part of its ranking the profile reads, as native ids."""

    ranking: Sequence[dict]
    #: The record kept no ranking at all: a null turn block cannot be told from a ranking of sessions there.
    empty: bool
    #: What the ranking holds: `turn` ids, or `session` ids only.
    level: str
    #: The record's gold, `{"sessions": [...], "turns": [...]}`.
    gold: dict
    #: This is the file's profile: the record's gold and its `metrics` are this profile's own.
    own: bool
    k_values: tuple[int, ...]


@dataclass(frozen=True)
class ScoringProfile:
    """One scoring profile as data."""

    name: str
    title: str
    #: The levels it scores (`session`, `turn`).
    gold_levels: tuple[str, ...]
    reads: Reads
    #: Its DCG, in words (a report or a manual says which discount its nDCG uses).
    dcg: str
    #: `(ranking it reads, the question's gold, level, k values) -> {"session": ..., "turn": ...} | None`; the
    #: ranking is native ids, best first; None: the question is not scored.
    score: Callable[[Sequence[dict], dict, str, Sequence[int]], dict | None]
    #: `(stored metrics, Scored, where) -> None`: raises `ResultsError` where what the record's own ranking and gold
    #: give disagrees with what is stored under this profile.
    recheck: Callable[[dict, Scored, str], None]
    #: `question -> gold | None`: the question's gold under this profile; None: the question carries none and the
    #: profile is not computed for it. By default the question's `gold_by_profile[name]`.
    gold_of: Callable[[dict], dict | None] | None = None
    #: A question with no gold turn still counts in every mean (LongMemEval's rules: recall_any 0, recall_all 1).
    scores_without_gold: bool = False
    notes: Notes = field(default_factory=Notes)
    #: Older names of the profile: files and manifests written under them read as this profile.
    aliases: tuple[str, ...] = ()

    def gold(self, question: dict) -> dict | None:
        if self.gold_of is not None:
            return self.gold_of(question)
        return (question.get("gold_by_profile") or {}).get(self.name)

    def read(self, ranking: Sequence, kept: int) -> Sequence:
        """The part of `ranking` this profile scores, of which the first `kept` are the candidates a file keeps."""
        return ranking if self.reads is Reads.WHOLE else ranking[:kept]

    def depth(self, top_k: int, docs: int) -> int:
        """How many of an item's `docs` a system is asked to rank so that this profile reads what it needs."""
        return max(top_k, docs) if self.reads is Reads.WHOLE else top_k


#: The modules that declare a profile outside a benchmark's folder (the benchmarks' own load with their folders).
_DECLARING_MODULES = ("adapters.metrics",)


def _load() -> None:
    for module in _DECLARING_MODULES:
        importlib.import_module(module)
    len(importlib.import_module("adapters.benchmarks").BENCHMARKS)  # reading it imports every benchmark's folder


#: Every registered scoring profile by name, read live, in the order of their names.
PROFILES: Declarations[ScoringProfile] = Declarations("scoring profile", _load, lambda p: (p.name, *p.aliases),
                                                      lambda p: p.score.__module__)
#: Add a declared profile (a second of one name, or of a name another profile goes by, is refused); take one out
#: again (a test's own profile, once the test is done).
register_profile, unregister_profile = PROFILES.register, PROFILES.unregister


class _Aliases(Mapping):
    """Every older name of a profile -> the name it goes by now, read live from the declarations."""

    def _table(self) -> dict[str, str]:
        return {alias: p.name for p in PROFILES.values() for alias in p.aliases}

    def __getitem__(self, alias: str) -> str:
        return self._table()[alias]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


#: Older names of profiles (`memoria` for `expected-text`) -> their current names.
PROFILE_ALIASES: Mapping[str, str] = _Aliases()


def profile_name(name: str | None) -> str | None:
    """The name a scoring profile goes by in this version: an alias becomes its profile, any other name stays."""
    return PROFILE_ALIASES.get(name, name) if name is not None else None


def find_profile(name: str | None) -> ScoringProfile | None:
    """The profile of `name` (or of an alias), None where no profile goes by it (a judged run has none)."""
    return PROFILES.get(profile_name(name)) if name is not None else None


def profile(name: str) -> ScoringProfile:
    """The profile of `name` (or of an alias); an unknown name is refused, naming every known one."""
    found = find_profile(name)
    if found is None:
        raise MemfarmError(f"unknown scoring profile {name!r}; choose from {', '.join(PROFILES)}")
    return found


def agree(stored: dict, recomputed: dict, where: str, partial: bool = False) -> None:
    """Every stored value that was recomputed must equal it; `partial`: only some metrics were."""
    for level, values in recomputed.items():
        mine = stored.get(level)
        if values is None or mine is None:
            if (values is None) != (mine is None) and not partial:
                raise ResultsError(f"{where}.{level}: stored {'null' if mine is None else 'metrics'} but the "
                                   f"record's ranking and gold give {'null' if values is None else 'metrics'}")
            continue
        for key, value in mine.items():
            if key in values and abs(values[key] - value) > TOLERANCE:
                raise ResultsError(f"{where}.{level}.{key}: stored {value!r}, but the record's own ranking and gold "
                                   f"give {values[key]!r}")
