"""AdaMem's episodes: observations, then queries judged by expected and forbidden substrings.

Two benchmarks share this folder: a file of episodes (`episodes`, one JSON object a line) and the built-in
four-failure-mode suite (`synthetic`); `judge` scores an episode, `measures` adds AdaMem's six measures.
"""

from adapters.benchmarks import register
from adapters.benchmarks.adamem.episodes import EpisodeFile, SyntheticSuite
from adapters.benchmarks.contract import Benchmark, Kind

EPISODES = register(Benchmark(
    "adamem-jsonl", "AdaMem JSONL", "AdaMem episodes, one JSON object per line", "episode", Kind.EPISODES,
    EpisodeFile, group_key=None, rendering="observation content as-is", system="adamem"))
SYNTHETIC = register(Benchmark(
    "adamem-synthetic", "AdaMem synthetic suite", "four built-in episodes, one per failure mode", "episode",
    Kind.EPISODES, SyntheticSuite, needs_dataset=False, group_key=None, rendering="observation content as-is",
    system="adamem"))
