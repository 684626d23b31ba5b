"""AdaMem JSONL episodes: observations, then queries judged by expected / forbidden substrings.

One line per episode:
`{"id", "observations": [{label, content, importance, valid_from, valid_to, cause_labels, metadata}],
  "queries": [{id, query, expected_substrings, forbidden_substrings, top_k, now, answer?}]}`.
This measures retrieval support: does the top_k hold every expected string and no forbidden one;
each query also carries the six measures of `adapters.adamem_measures` (an optional `answer` is the
gold answer for answer support, else the expected strings are; forbidden strings name stale facts).
Each episode is one item of a run; its queries are its records. Also: the
deterministic four-failure-mode suite and the LoCoMo converter.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

from adapters.adamem_measures import entry_recall, query_measures, timed_context, write_amplification
from adapters.dataset import BadField, check_list, check_text
from adapters.defaults import K_VALUES
from adapters.errors import DatasetError
from adapters.files import read_json, replacing
from adapters.jsonstream import iter_json_lines
from adapters.locomo import CATEGORIES, id_number, normalise_evidence, render
from adapters.records import judged_record, outcome
from adapters.registry import BENCHMARKS


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
    benchmark = BENCHMARKS["adamem-jsonl"]

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def episodes(self) -> list[dict]:
        return list(read_episodes(self.path))


class SyntheticSuite(_Episodes):
    benchmark = BENCHMARKS["adamem-synthetic"]
    path = "the synthetic suite"

    def __init__(self, path=None):
        pass

    def episodes(self) -> list[dict]:
        return synthetic_suite()


def evaluate_episode(item: dict, memory, worker: str = "local", attempt: int = 1) -> dict:
    """Observe every observation, run every query; the item's outcome with one judged record per query."""
    episode = item["episode"]
    started = time.perf_counter()
    memory.observe_many(episode["observations"])
    build_ms = (time.perf_counter() - started) * 1000
    records = []
    for query in episode["queries"]:
        top_k = int(query.get("top_k", 5))
        t0 = time.perf_counter()
        retrieved = memory.retrieve(query["query"], now=query.get("now"), top_k=top_k)
        runtime_ms = (time.perf_counter() - t0) * 1000
        record = judged_record(query, item["item_id"], retrieved, runtime_ms=runtime_ms, worker=worker, attempt=attempt)
        record["measures"] = _episode_measures(memory, query, retrieved, top_k, runtime_ms)
        records.append(record)
    return outcome(item["item_id"], records, stats={"observations": len(episode["observations"]),
                                                    "write": write_amplification(memory)},
                   timings={"build_or_restore_ms": round(build_ms, 3),
                            "total_ms": round((time.perf_counter() - started) * 1000, 3)})


def _episode_measures(memory, query: dict, retrieved: list[dict], top_k: int, runtime_ms: float) -> dict:
    """A query's six measures: the gold answer is its `answer` if it has one, else its expected substrings;
    gold entries (for recall) are those holding an expected substring."""
    expected = query.get("expected_substrings", [])
    block, context_ms = timed_context(memory, query["query"], now=query.get("now"), top_k=top_k)
    gold = [e.id for e in memory.entries if any(s in e.content for s in expected)]
    return query_measures(answers=[query["answer"]] if query.get("answer") else expected, block=block,
                          context_ms=context_ms, retrieve_ms=runtime_ms,
                          forbidden=query.get("forbidden_substrings", []), texts=[r["content"] for r in retrieved],
                          recall=entry_recall([r["id"] for r in retrieved], gold, K_VALUES))


def synthetic_suite() -> list[dict]:
    """Four deterministic episodes, one per failure mode of similarity-only memory."""
    return [
        {"id": "stale-fact", "observations": [
            {"label": "region-old", "content": "We deploy the production service to the us-east-1 region.",
             "importance": 0.5, "metadata": {"memory_key": "deploy.region"}},
            {"label": "lunch", "content": "The team lunch moved to Thursday.", "importance": 0.2},
            {"label": "region-new", "content": "Migration finished: production now runs in eu-west-2.",
             "importance": 0.5, "metadata": {"memory_key": "deploy.region"}},
        ], "queries": [{"id": "q1", "query": "Which region do we deploy the production service to?",
                        "expected_substrings": ["eu-west-2"], "forbidden_substrings": ["us-east-1"], "top_k": 1}]},
        {"id": "resolved-incident", "observations": [
            {"label": "cause", "content": "The TX91 token was missing from the build runner.", "importance": 0.6},
            {"label": "incident", "content": "The release build failed with error E401 during signing.",
             "importance": 0.6, "cause_labels": ["cause"]},
            {"label": "noise", "content": "Last month a release build failed because of flaky tests.", "importance": 0.3},
            {"label": "fix", "content": "Added the token to the runner secrets; the release is green again.",
             "importance": 0.5, "cause_labels": ["incident"]},
        ], "queries": [{"id": "q1", "query": "Why did the release build fail with E401?",
                        "expected_substrings": ["TX91"], "top_k": 2}]},
        {"id": "changed-code", "observations": [
            {"label": "code-old", "content": "The office door code is 4512.", "importance": 0.5,
             "valid_to": "2026-03-01T00:00:00+00:00"},
            {"label": "code-new", "content": "Since March the keypad at the office entrance opens with 9981.",
             "importance": 0.5, "valid_from": "2026-03-01T00:00:00+00:00"},
        ], "queries": [{"id": "q1", "query": "What is the office door code?", "expected_substrings": ["9981"],
                        "forbidden_substrings": ["4512"], "top_k": 1, "now": "2026-05-28T00:00:00+00:00"}]},
        {"id": "safety-rule", "observations": [
            {"label": f"routine-{i}", "content": text, "importance": 0.2} for i, text in enumerate([
                "The database migration script was updated to version 12.",
                "Nightly database backup finished in 14 minutes.",
                "Reviewed the database migration checklist with Priya.",
                "Database disk usage is at 61 percent.",
            ])] + [
            {"label": "rule", "content": "Safety rule: never migrate the primary database during business hours.",
             "importance": 1.0},
        ], "queries": [{"id": "q1", "query": "Anything to keep in mind before the database migration?",
                        "expected_substrings": ["never migrate the primary"], "top_k": 1}]},
    ]


def convert_locomo(source: str | Path, expected: str = "evidence", top_k: int = 10) -> list[dict]:
    """LoCoMo conversations as AdaMem episodes: a turn per observation, a QA per query (category 5 left out)."""
    if expected not in ("evidence", "answer", "both"):
        raise ValueError("expected must be evidence, answer or both")
    data = read_json(source, "LoCoMo file (an array of conversations)", DatasetError, top=list)
    episodes = []
    for conversation in data:
        talk = conversation["conversation"]
        numbers = []
        for key in talk:
            if key.startswith("session_") and key.count("_") == 1 and key[8:].isdigit():
                if id_number(key[8:]) is None or key != f"session_{id_number(key[8:])}":
                    raise DatasetError(f"{source}: conversation {conversation.get('sample_id')}: field {key[:40]}: "
                                       "not a session number this converter reads (session_<n>, n under 10 digits)")
                numbers.append(id_number(key[8:]))
        numbers.sort()
        observations, known = [], set()
        for n in numbers:
            date = talk.get(f"session_{n}_date_time", "")
            for turn in talk[f"session_{n}"]:
                ids, _ = normalise_evidence([turn["dia_id"]])
                if not ids:
                    continue
                known.add(ids[0])
                observations.append({"label": ids[0], "content": f"[{ids[0]}] ({date}) {render(turn)}",
                                     "importance": 0.5, "metadata": {"dia_id": ids[0], "session_date": date}})
        queries = []
        for index, qa in enumerate(conversation["qa"]):
            if qa.get("category") == 5:
                continue
            evidence = [i for i in normalise_evidence(qa.get("evidence"))[0] if i in known]
            answer = str(qa.get("answer", ""))
            if expected != "answer" and not evidence:
                continue  # nothing to retrieve: no annotated evidence matches a turn
            wanted = {"evidence": [f"[{i}]" for i in evidence], "answer": [answer] if answer else [],
                      "both": [f"[{i}]" for i in evidence] + ([answer] if answer else [])}[expected]
            if not wanted:
                continue
            queries.append({"id": f"q{index}", "query": qa["question"], "expected_substrings": wanted,
                            "forbidden_substrings": [], "top_k": top_k,
                            "category": CATEGORIES.get(qa.get("category"), str(qa.get("category")))})
        episodes.append({"id": conversation["sample_id"], "observations": observations, "queries": queries})
    return episodes
