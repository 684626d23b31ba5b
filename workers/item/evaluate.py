"""Evaluate one item in isolation: build or restore its state, ask, score.

The same function serves the local executor and the Celery task, so both
produce the same records. The runner owns id minting, task building and
rejecting bad hits; the system only sees rendered docs and whitelisted tasks;
the records are built by the evaluation core (`adapters.records`).
"""

from __future__ import annotations

import hashlib
import logging
import socket
import time
from contextlib import contextmanager

from adapters.benchmarks import Kind, benchmark
from adapters.benchmarks.adamem.judge import evaluate_episode
from adapters.benchmarks.adamem.measures import query_measures, timed_context
from adapters.contracts import DOC_PROPS, TASK_FIELDS
from adapters.defaults import CONTEXT_ENTRIES, DEFAULT_SCORING_PROFILE, DEFAULT_TOP_K, K_VALUES
from adapters.errors import MemfarmError
from adapters.files import content_hash
from adapters.hits import clean_hits
from adapters.profiles import profile as scoring_profile
from adapters.records import candidate, failure_outcome, outcome, question_record
from adapters.systems.contract import (adds_on_ingest, build_identity_of, close_system, context_packer_of,
                                       counters_of, diagnostics_of, encoder_ahead_of, fresh_memory_of,
                                       grows_while_asked, name_of, questions_ahead_of, signature_of, snapshots_of,
                                       write_stats_of)
from workers.item.cache import expected_entry
from workers.item.peak_memory import peak_rss_bytes, reset_peak_rss

logger = logging.getLogger(__name__)

#: Requests to stop the process: they pass through an item's evaluation as they are, never failing one item.
STOP_REQUESTS = (KeyboardInterrupt, SystemExit, GeneratorExit)


class SystemCrash(RuntimeError):
    """A vendor's code raised a BaseException that is no request to stop (a Rust panic through pyo3 is one):
    as an ordinary error it fails its item, where the caller's `except Exception` would let it end the run."""


@contextmanager
def crashes_as_errors():
    """Inside: a BaseException, not an Exception nor a stop request, comes out as a `SystemCrash`."""
    try:
        yield
    except (Exception, *STOP_REQUESTS):
        raise
    except BaseException as exc:  # noqa: BLE001  (re-raised as an error that names it)
        raise SystemCrash(f"{type(exc).__name__}: {exc}") from exc


def close_after_use(system) -> None:
    """Close a system the caller is done with (`contract.Closes`); a failure to close is logged, never raised,
    so that the results it gave still count."""
    try:
        with crashes_as_errors():
            close_system(system)
    except Exception as exc:
        logger.warning("closing system %s failed: %s", name_of(system) or "?", exc)


def label_for(item_id: str) -> str:
    """An opaque isolation label: nothing of the native id survives."""
    return "item-" + hashlib.sha256(item_id.encode()).hexdigest()[:12]


def make_docs(item: dict) -> tuple[list[dict], dict[str, dict]]:
    """Docs for the system (opaque ids, whitelisted props) and the runner's id map; an empty turn is no doc."""
    label = label_for(item["item_id"])
    docs, native = [], {}
    for position, turn in enumerate(t for t in item["turns"] if t["text"]):
        external_id = f"{label}-{position:06d}"
        props = {k: turn["props"][k] for k in DOC_PROPS if k in turn["props"]}
        docs.append({"external_id": external_id, "label": label, "text": turn["text"], "props": props})
        native[external_id] = {"session_id": turn["session_id"], "turn_id": turn["turn_id"]}
        if turn.get("official_id"):
            native[external_id]["official_id"] = turn["official_id"]
    return docs, native


def make_task(question: dict, label: str, position: int, top_k: int) -> dict:
    """A task from a whitelist of fields: ground truth cannot get in."""
    task = {
        "task_id": f"{label}-q{position:04d}",
        "label": label,
        "question": question["question"],
        "question_date": question.get("question_date", ""),
        "top_k": top_k,
    }
    return {k: task[k] for k in TASK_FIELDS}


def evaluate_item(
    item: dict,
    system,
    *,
    top_k: int = DEFAULT_TOP_K,
    k_values=K_VALUES,
    profile: str = DEFAULT_SCORING_PROFILE,
    cache=None,
    dataset_sha256: str | None = None,
    worker: str | None = None,
    attempt: int = 1,
    on_question=None,
) -> dict:
    """Run every question of `item` against `system`; returns the item's outcome.

    How the item is asked is its benchmark's declared kind (`item["benchmark"]`, `Kind`). An item the adapter
    already marked malformed becomes its failed records at once; an exception while building or asking
    propagates, so that the caller decides (the local executor records it, a farm task retries it); a vendor's
    BaseException propagates as a `SystemCrash`, so that both callers see an error. `on_question(done, total)`,
    where given, is called after each question is asked (progress inside a long item), and with `done` 0 before
    an item in steps encodes its history ahead.
    """
    worker = worker or socket.gethostname()
    if item.get("error"):
        return failure_outcome(item, item["error"], item.get("field"), worker, attempt)
    kind = _kind_of(item)
    with crashes_as_errors():
        if kind is Kind.EPISODES:
            return evaluate_episode(item, _episode_memory(system, item), worker=worker, attempt=attempt)
        if kind is Kind.STEPPED:
            return _evaluate_in_steps(item, system, top_k, k_values, profile, worker, attempt, on_question)
        return _evaluate_turns(item, system, top_k, k_values, profile, cache, dataset_sha256, worker, attempt,
                               on_question)


def _kind_of(item: dict) -> Kind:
    """The declared kind of the item's benchmark; an item that names none is refused, naming the item."""
    name = item.get("benchmark")
    if not name:
        raise MemfarmError(f"item {item.get('item_id')}: names no benchmark (field benchmark), so how to ask it "
                           "is unknown")
    return benchmark(name).kind


def _episode_memory(system, item: dict):
    """An empty memory for one episode, made by a system that declares it can (`contract.FreshMemory`)."""
    observer = fresh_memory_of(system)
    if observer is None:
        raise MemfarmError(f"item {item['item_id']}: {name_of(system) or type(system).__name__} cannot observe "
                           "episodes: it declares no fresh_memory() (adapters.systems.contract.FreshMemory)")
    return observer.fresh_memory()


def _evaluate_turns(item, system, top_k, k_values, profile, cache, dataset_sha256, worker, attempt,
                    on_question=None) -> dict:
    meter = _Meter(system)
    docs, native = make_docs(item)
    label = docs[0]["label"] if docs else label_for(item["item_id"])
    cache_state = {"hit": False, "reason": "no cache", "consulted": False}
    can_cache = cache is not None and snapshots_of(system) is not None
    if can_cache:  # the key (the model files' hash among it) is worked out only when there is a cache
        expected = expected_entry(content_hash(docs), signature_of(system), build_identity_of(system))
        reason = cache.restore(item["item_id"], system, expected)
        cache_state = {"hit": reason is None, "reason": reason, "consulted": True}
    meter.phases["cache_ms"] = meter.elapsed_ms()
    meter.start_counting()
    if not cache_state["hit"]:
        system.reset()
        system.ingest(docs)
        meter.add_ingest_timings()
        if can_cache:
            stored = time.perf_counter()
            failure = cache.store(item["item_id"], system, expected, dataset_sha256)
            meter.phases["cache_ms"] += (time.perf_counter() - stored) * 1000
            if failure:
                cache_state["store_error"] = failure
    build_ms = meter.elapsed_ms()

    by_id = {d["external_id"]: d for d in docs}
    # a profile that reads the whole ranking (the official one widens k until it spans k sessions) has the system
    # asked for every doc; the results file keeps the first top_k as candidates
    depth = scoring_profile(profile).depth(top_k, len(docs))
    asker = _Asker(system, item, label, by_id, native, top_k, depth, k_values, profile, worker, attempt, on_question)
    asker.ahead(list(enumerate(item["questions"])))
    records = [asker.ask(position, question) for position, question in enumerate(item["questions"])]
    if can_cache and grows_while_asked(system):  # what the questions built (sentence vectors of
        stored = time.perf_counter()  # their candidates) goes into the entry, so the next run of the item reads it
        failure = cache.store(item["item_id"], system, expected, dataset_sha256)
        meter.phases["cache_ms"] += (time.perf_counter() - stored) * 1000
        cache_state["stored_after_questions"] = failure is None
        if failure:
            cache_state["store_error"] = failure
    return meter.outcome(item, records, asker, cache=cache_state, build_ms=build_ms, stats={"docs": len(docs)})


def _evaluate_in_steps(item, system, top_k, k_values, profile, worker, attempt, on_question=None) -> dict:
    """A stepped item (RealMem): for each step in order, its questions are asked against memory holding the
    docs of every earlier step, then the step's docs are added. The system never holds a later step's doc when
    it answers. A system that adds on ingest (`contract.AddsOnIngest`) is given each step's docs; any other is
    reset and given every doc so far. No one state answers every question, so nothing is cached per item."""
    meter = _Meter(system)
    docs, native = make_docs(item)
    steps = [turn["step"] for turn in item["turns"] if turn["text"]]
    label = docs[0]["label"] if docs else label_for(item["item_id"])
    by_step: dict[int, list[dict]] = {}
    for doc, step in zip(docs, steps):
        by_step.setdefault(step, []).append(doc)
    asking: dict[int, list[tuple[int, dict]]] = {}
    for position, question in enumerate(item["questions"]):
        asking.setdefault(question["step"], []).append((position, question))
    adds = adds_on_ingest(system)
    # a step's docs are added after its questions, so those of the last step asked, and any after it, serve none
    last = max(asking, default=-1)
    needed = [doc for step, step_docs in sorted(by_step.items()) if step < last for doc in step_docs]
    meter.start_counting()
    asker = _Asker(system, item, label, {d["external_id"]: d for d in docs}, native, top_k, top_k, k_values,
                   profile, worker, attempt, on_question)
    records: dict[int, dict] = {}
    held: list[dict] = []
    ingest_ms = 0.0
    meter.phases.update(dict.fromkeys(("encode_ms", "extract_ms", "index_ms"), 0.0))
    system.reset()
    ahead = encoder_ahead_of(system)
    try:
        if ahead:  # every doc's vector in one batch, held apart from memory until its step (contract.EncodesAhead)
            if on_question:
                on_question(0, len(item["questions"]))
            t0 = time.perf_counter()
            ahead.encode_ahead(needed)
            meter.phases["encode_ms"] += (time.perf_counter() - t0) * 1000
            ingest_ms += (time.perf_counter() - t0) * 1000
        for step in range(last + 1):
            if held:  # the questions asked of one state, handed over together (contract.AsksAhead)
                asker.ahead(asking.get(step, []))
            for position, question in asking.get(step, ()):
                records[position] = asker.ask(position, question, memory=held)
            new = by_step.get(step, []) if step < last else []
            if new:
                t0 = time.perf_counter()
                if not adds:
                    system.reset()
                system.ingest(new if adds else held + new)
                held += new
                ingest_ms += (time.perf_counter() - t0) * 1000
                meter.add_ingest_timings()
    finally:  # what was encoded ahead is this item's only, whether or not it ended
        if ahead:
            ahead.encode_ahead([])
    return meter.outcome(item, [records[p] for p in sorted(records)], asker,
                         cache={"hit": False, "reason": "memory grows in steps: no one state to cache",
                                "consulted": False},
                         build_ms=ingest_ms,
                         stats={"docs": len(docs), "docs_ingested": len(held), "ingest_steps": len([
                             s for s in by_step if s < last]), "added_on_ingest": adds})


class _Meter:
    """What one item's evaluation measures beside its records: wall time, time per phase, and what the system's
    counters moved by (texts encoded and served, by kind), so that every way of evaluating reports them alike."""

    def __init__(self, system):
        self.system = system
        reset_peak_rss()  # the item's own peak: what a worker's memory bound must hold
        self.started = time.perf_counter()
        self.phases: dict[str, float] = {}
        self.counters = None
        self.counts_before = self.kinds_before = None

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def start_counting(self) -> None:
        """The counters from here on are the item's (a restore from the cache before this is not)."""
        self.counters = counters_of(self.system)
        if self.counters:
            self.counts_before, self.kinds_before = self.counters.embedding_counts, self.counters.encoded_by_kind

    def add_ingest_timings(self) -> None:
        for name, value in ((self.counters.ingest_timings if self.counters else None) or {}).items():
            self.phases[name] = self.phases.get(name, 0.0) + value

    def outcome(self, item: dict, records: list[dict], asker: "_Asker", *, cache: dict, build_ms: float,
                stats: dict) -> dict:
        self.phases.update(recall_ms=asker.recall_ms, scoring_ms=asker.scoring_ms,
                           parse_ms=item.get("stats", {}).get("parse_ms", 0.0))
        return outcome(item["item_id"], records, cache=cache,
                       timings={"build_or_restore_ms": round(build_ms, 3), "total_ms": round(self.elapsed_ms(), 3),
                                "phases_ms": {name: round(value, 3) for name, value in self.phases.items()}},
                       stats={**stats, **item.get("stats", {}), **_store_counts(self.counts_before, self.counters),
                              **_kind_counts(self.kinds_before, self.counters), **_write_counts(self.system),
                              **_peak(peak_rss_bytes())})


def _peak(value: int | None) -> dict:
    return {"peak_rss_bytes": value} if value is not None else {}


class _Asker:
    """Asks one item's questions and builds their records: the task from the whitelist, the hits cleaned, the
    native ids mapped back, the metrics of every profile."""

    def __init__(self, system, item, label, by_id, native, top_k, depth, k_values, profile, worker, attempt,
                 on_question=None):
        self.system, self.item, self.label, self.by_id, self.native = system, item, label, by_id, native
        self.top_k, self.depth, self.k_values, self.profile = top_k, depth, k_values, profile
        self.worker, self.attempt = worker, attempt
        self.packs = context_packer_of(system) is not None  # a system that packs a prompt block (AdaMem) is measured
        self.recall_ms = self.scoring_ms = 0.0
        self.on_question, self.asked = on_question, 0
        self.ahead_ms: dict[int, float] = {}  # each question's share of encoding the questions ahead (`ahead`)

    def ahead(self, questions: list[tuple[int, dict]]) -> None:
        """Hand `questions` ((position, question), about to be asked of what the system now holds) to a system that
        takes them together (`contract.AsksAhead`). The time is shared out among their runtimes, so that the runtimes
        still add up to what asking cost."""
        system = questions_ahead_of(self.system)
        if system is None or not questions:
            return
        t0 = time.perf_counter()
        system.questions_ahead([question["question"] for _, question in questions], self.depth)
        share = (time.perf_counter() - t0) * 1000 / len(questions)
        self.ahead_ms.update((position, share) for position, _ in questions)

    def ask(self, position: int, question: dict, memory: list[dict] | None = None) -> dict:
        """The record of one question. `memory`: the docs memory holds when it is asked (a stepped item; None: every
        doc of the item); a hit naming any other (a later session's, the query's own) is dropped and said, as an
        unknown id is, and the ranking's depth counts what memory held. Memory holding nothing is not asked."""
        known = self.by_id if memory is None else {d["external_id"]: d for d in memory}
        empty = memory is not None and not memory
        task = make_task(question, self.label, position, self.depth)
        t0 = time.perf_counter()
        hits = [] if empty else self.system.retrieve(task["label"], task["question"], task["top_k"])
        runtime_ms = (time.perf_counter() - t0) * 1000 + self.ahead_ms.pop(position, 0.0)
        self.recall_ms += runtime_ms
        measures = (_context_measures(self.system, task, question, hits, known, runtime_ms)
                    if self.packs and not empty else None)
        t1 = time.perf_counter()
        hits, problems = clean_hits(hits, known, task["top_k"])
        candidates = []
        for rank, hit in enumerate(hits[:self.top_k], start=1):
            eid = hit["external_id"]
            diagnostics = dict(hit.get("diagnostics") or {})
            final_score = diagnostics.pop("final_score", hit.get("score"))
            candidates.append(candidate(rank, eid, text=self.by_id[eid]["text"], props=self.by_id[eid]["props"],
                                        score=hit.get("score"), final_score=final_score, diagnostics=diagnostics,
                                        **self.native[eid]))
        record = question_record(
            question, self.item["item_id"], candidates, level="turn", k_values=self.k_values, profile=self.profile,
            ranking=[self.native[hit["external_id"]] for hit in hits], runtime_ms=runtime_ms, worker=self.worker,
            attempt=self.attempt,
            diagnostics={"system": diagnostics_of(self.system) if not empty else {}, "rejected_hits": problems,
                         "ranking_depth": {"asked": task["top_k"], "returned": len(hits), "docs": len(known)}})
        if measures:
            record["measures"] = measures
        self.scoring_ms += (time.perf_counter() - t1) * 1000
        self.asked += 1
        if self.on_question:
            self.on_question(self.asked, len(self.item["questions"]))
        return record


def _context_measures(system, task: dict, question: dict, hits, by_id: dict, retrieve_ms: float) -> dict:
    """AdaMem's measures of one question: its context block set against the gold answer, timed and counted.
    Nothing in LoCoMo or LongMemEval-S is marked stale, so the stale fact is not measured (None)."""
    block, context_ms = timed_context(system, task["label"], task["question"], CONTEXT_ENTRIES)
    answer = question.get("answer", question.get("expected", ""))
    measures = query_measures(answers=[answer], block=block, context_ms=context_ms, retrieve_ms=retrieve_ms,
                              forbidden=[], texts=[by_id[h["external_id"]]["text"] for h in hits
                                                   if isinstance(h, dict) and h.get("external_id") in by_id])
    return {**measures, "answer": answer}


def _write_counts(system) -> dict:
    """What the system stored for the item's docs (write amplification), where it says."""
    stats = write_stats_of(system)
    return {"write": stats} if stats is not None else {}


def _kind_counts(before: dict | None, counters) -> dict:
    """Texts the model encoded for this item by kind (turns, windows, pieces, questions), where the system says."""
    after = counters.encoded_by_kind if counters else None
    if before is None or after is None:
        return {}
    return {"texts_encoded_by_kind": {kind: after[kind] - before.get(kind, 0) for kind in after}}


def _store_counts(before: dict | None, counters) -> dict:
    """Texts this item encoded and texts the embedding store served it (queries included)."""
    after = counters.embedding_counts if counters else None
    if before is None or after is None:
        return {}
    return {"texts_encoded": after["encoded"] - before["encoded"], "texts_served": after["served"] - before["served"],
            "texts_from_shared": after.get("shared", 0) - before.get("shared", 0),
            "texts_verified": after.get("verified", 0) - before.get("verified", 0),
            "texts_forged": after.get("forged", 0) - before.get("forged", 0)}
