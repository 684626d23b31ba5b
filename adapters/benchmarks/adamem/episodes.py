"""AdaMem JSONL episodes: observations, then queries judged by expected / forbidden substrings.

One line per episode:
`{"id", "observations": [{label, content, importance, valid_from, valid_to, cause_labels, metadata}],
  "queries": [{id, query, expected_substrings, forbidden_substrings, top_k, now, answer?}]}`.
Each episode is one item of a run; its queries are its records, judged by `judge.evaluate_episode`. This
module reads, checks and writes episode files; `synthetic` holds the built-in four-failure-mode suite.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from adapters.benchmarks.adamem.synthetic import synthetic_suite
from adapters.benchmarks import declaration_of
from adapters.benchmarks.contract import Benchmark
from adapters.benchmarks.streamed import BadField, check_list, check_text
from adapters.errors import DatasetError
from adapters.files import replacing
from adapters.jsonstream import iter_json_lines


def read_episodes(path: str | Path) -> Iterator[dict]:
    seen = {}
    for number, episode, problem in iter_json_lines(path, DatasetError):
        if problem:
            raise DatasetError(problem)
        if not isinstance(episode, dict):
            raise DatasetError(f"{path}:{number}: an episode must be a JSON object")
        for field in ("id", "observations", "queries"):
            if field not in episode:
                raise DatasetError(f"{path}:{number}: episode misses field {field!r}")
        if episode["id"] in seen:
            raise DatasetError(f"{path}:{number}: duplicate episode id {episode['id']!r} (first at line {seen[episode['id']]})")
        seen[episode["id"]] = number
        yield episode


def write_episodes(episodes: list[dict], path: str | Path) -> int:
    """Write JSON lines through `replacing` (no link written through, no earlier file truncated)."""
    text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in episodes)
    with replacing(path, "episodes file", DatasetError) as out:
        out.write(text)
    return len(episodes)


def episode_problem(episode: dict) -> None:
    """Raise a BadField naming the episode and the field if any part of it has the wrong type."""
    where = f"episode {episode['id']}"
    for number, observation in enumerate(check_list(episode["observations"], where, "observations", dict)):
        check_text(observation.get("content"), f"{where}: observation {number}", "observations")
        if not isinstance(observation.get("importance", 0.5), (int, float)):
            raise BadField(f"{where}: observation {number} has a non-numeric importance", "observations")
        for field in ("metadata",):
            if not isinstance(observation.get(field) or {}, dict):
                raise BadField(f"{where}: observation {number} field {field!r} is not an object", "observations")
    for number, query in enumerate(check_list(episode["queries"], where, "queries", dict)):
        at = f"{where}: query {number}"
        check_text(query.get("query"), at, "queries")
        for field in ("expected_substrings", "forbidden_substrings"):
            for text in check_list(query.get(field, []), at, field, str):
                check_text(text, at, field)
        if "answer" in query:
            check_text(query["answer"], at, "answer")
        top_k = query.get("top_k", 5)
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            raise BadField(f"{at}: top_k must be a positive integer, not {top_k!r}", "top_k")


class _Episodes:
    """Episodes as items of a run: `scan()` for their ids, `iter_items()` for the episodes themselves."""

    def episodes(self) -> list[dict]:
        raise NotImplementedError

    def scan(self) -> list[str]:
        ids = [str(e["id"]) for e in self.episodes()]
        if not ids:
            raise DatasetError(f"{self.path}: no episodes")
        return ids

    def iter_items(self, limit: int | None = None) -> Iterator[dict]:
        for index, episode in enumerate(self.episodes()):
            if limit is not None and index >= limit:
                return
            item_id = str(episode["id"])
            try:
                episode_problem(episode)
            except BadField as bad:  # one malformed episode is one failed item; the others run
                yield {"item_id": item_id, "benchmark": self.benchmark.name, "error": str(bad), "field": bad.field}
                continue
            yield {"item_id": item_id, "benchmark": self.benchmark.name, "episode": episode,
                   "questions": [{"question_id": f"{episode['id']}:{q.get('id')}"} for q in episode["queries"]]}


class EpisodeFile(_Episodes):
    def __init__(self, path: str | Path, *, benchmark: Benchmark | None = None, profile: str | None = None):
        self.path = Path(path)
        self.benchmark = benchmark or declaration_of(EpisodeFile)

    def episodes(self) -> list[dict]:
        return list(read_episodes(self.path))


class SyntheticSuite(_Episodes):
    path = "the synthetic suite"

    def __init__(self, path=None, *, benchmark: Benchmark | None = None, profile: str | None = None):
        self.benchmark = benchmark or declaration_of(SyntheticSuite)

    def episodes(self) -> list[dict]:
        return synthetic_suite()
