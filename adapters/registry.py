"""What each benchmark is, as data: one registry that the CLI, the analyzer and the adapters read.

How a benchmark's items become docs and questions is its adapter module; the
registry says where that module is, and everything a reader or a manifest
needs to know about the benchmark without opening the file.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from adapters.defaults import DEFAULT_SCORING_PROFILE, EXPECTED_TEXT_PROFILE, OFFICIAL_PROFILE, REALMEM_PROFILE
from adapters.errors import MemfarmError


@dataclass(frozen=True)
class Benchmark:
    """One benchmark as data: its key, title, source file, item unit, how it is scored and rendered."""

    name: str
    title: str
    source: str
    item_unit: str
    #: `ids`: scored at session and turn level from ranked ids; `substrings`: judged by expected /
    #: forbidden substrings of the retrieved text (AdaMem episodes).
    scoring: str
    adapter: str
    needs_dataset: bool = True
    #: The record fields results are grouped by, comma-separated (RealMem: by category and by persona).
    group_key: str | None = "question_type"
    rendering: str = "turn content as-is"
    #: Scoring profiles computed for every question of the benchmark (the first is the default).
    profiles: tuple[str, ...] = (DEFAULT_SCORING_PROFILE,)
    #: The profile of a run that names none.
    default_profile: str = DEFAULT_SCORING_PROFILE
    #: The system of a run that names none (AdaMem episodes are observed by AdaMem).
    system: str = "memoria"
    #: Memory grows in steps and questions are asked between them (RealMem): `--dataset` may be a folder of
    #: files, and no item has one state a cache could hold.
    stepped: bool = False
    #: Every profile scores the one corpus a run gives its system, on the same gold (RealMem: only the DCG differs),
    #: so each profile's numbers are its own; elsewhere a profile other than the chosen one is on a foreign corpus.
    shared_corpus: bool = False
    #: Memoria `full`'s weights tuned for this benchmark (a file of `adapters/weights/`), taken by a run of full with
    #: MiniLM that names no --weights; None: the engine's own.
    memoria_weights: str | None = None

    def memoria_weights_file(self) -> Path | None:
        return Path(__file__).parent / "weights" / self.memoria_weights if self.memoria_weights else None

    def open(self, dataset: str | Path | None, questions: str | Path | None = None,
             profile: str = DEFAULT_SCORING_PROFILE):
        """The dataset adapter: it streams items and knows its gold rules."""
        module_name, _, class_name = self.adapter.partition(":")
        factory = getattr(importlib.import_module(module_name), class_name)
        if self.name == "longmemeval":
            return factory(dataset, companion=questions, profile=profile)
        if self.scoring == "substrings":
            return factory(dataset)
        return factory(dataset, profile=profile)


BENCHMARKS = {b.name: b for b in (
    Benchmark("longmemeval", "LongMemEval-S", "longmemeval_s_cleaned.json (xiaowu0162/LongMemEval)", "question",
              "ids", "adapters.longmemeval:LongMemEval", profiles=(EXPECTED_TEXT_PROFILE, OFFICIAL_PROFILE),
              default_profile=OFFICIAL_PROFILE),
    Benchmark("locomo", "LoCoMo", "locomo10.json (snap-research/LoCoMo)", "conversation", "ids",
              "adapters.locomo:LoCoMo",
              rendering="'{speaker}: {text}' plus ' [shares a photo: {caption}]' where the turn shares an image"),
    Benchmark("realmem", "RealMem", "dataset/*_dialogues_256k.json (AvatarMemory/RealMemBench), a file or the folder",
              "persona", "ids", "adapters.realmem:RealMem", group_key="question_type,item_id",
              rendering="'{speaker}: {content}'; memory grows one session at a time, each after its queries",
              profiles=(REALMEM_PROFILE, EXPECTED_TEXT_PROFILE), default_profile=REALMEM_PROFILE, stepped=True,
              shared_corpus=True, memoria_weights="realmem.json"),
    Benchmark("adamem-jsonl", "AdaMem JSONL", "AdaMem episodes, one JSON object per line", "episode", "substrings",
              "adapters.adamem_jsonl:EpisodeFile", group_key=None, rendering="observation content as-is",
              system="adamem"),
    Benchmark("adamem-synthetic", "AdaMem synthetic suite", "four built-in episodes, one per failure mode",
              "episode", "substrings", "adapters.adamem_jsonl:SyntheticSuite", needs_dataset=False, group_key=None,
              rendering="observation content as-is", system="adamem"),
)}
#: Benchmarks scored from ranked ids (the ones the per-item cache and `memfarm score` serve).
RANKED_BENCHMARKS = tuple(name for name, b in BENCHMARKS.items() if b.scoring == "ids")


def default_profile(name: str) -> str:
    """The scoring profile of a run of benchmark `name` that names none."""
    return BENCHMARKS[name].default_profile if name in BENCHMARKS else DEFAULT_SCORING_PROFILE


def benchmark(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise MemfarmError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}") from None
