"""Assemble item outcomes into one results file and one reproducibility manifest.

The local executor and the farm both end here, so their files are the same.
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from adapters import defaults as harness
from adapters.benchmarks.adamem.measures import run_measures
from adapters.errors import ResultsError
from adapters.files import write_json
from adapters.metrics import METRIC_NAMES
from adapters.profiles import profile_name
from adapters.records import failed_records, is_ok
from coordinator.results.failures import failure_summary
from coordinator.results.run_files import Manifest, Results, current_profile_names
from coordinator.results.summary import by_profile, counts, shares_corpus, summarize
from memoria import defaults as engine
from workers.item.run_context import RunContext

def git_commit() -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit + ("-dirty" if dirty else "")) if commit else "unknown"


def settings_snapshot() -> dict:
    """Every named default of the engine and the harness, as this run saw them."""
    return {f"{prefix}.{name}": (list(v) if isinstance(v, tuple) else v)
            for prefix, module in (("memoria", engine), ("harness", harness))
            for name, v in vars(module).items() if name.isupper() and not name.startswith("_")}


#: The phases of an item, in the order a person reads them.
PHASES = ("parse_ms", "cache_ms", "encode_ms", "extract_ms", "index_ms", "recall_ms", "scoring_ms")


def phase_totals(outcomes: list[dict]) -> dict:
    """Milliseconds per phase over every item (parsing, cache, encoding, extraction, index builds, recall,
    scoring), so that a reader sees where a run's time went."""
    totals = {name: 0.0 for name in PHASES}
    for outcome in outcomes:
        for name, value in ((outcome.get("timings") or {}).get("phases_ms") or {}).items():
            if name in totals:
                totals[name] += value
    return {name: round(value, 1) for name, value in totals.items()}


def _short(record: dict) -> bool:
    """Did the system return fewer docs than it was asked for (the official profile asks for all)?"""
    depth = (record.get("diagnostics") or {}).get("ranking_depth") or {}
    return depth.get("returned", 0) < min(depth.get("asked", 0), depth.get("docs", 0))


@dataclass(frozen=True)
class Tally:
    """What the reducer counts over a run's records and outcomes, once, for both files."""

    abstentions: int
    excluded: int
    failed: list[dict]
    evaluable: int
    without_gold: int
    summary: dict
    by_profile: dict
    short: int
    phases: dict
    store_counts: dict
    measures: dict | None


def reduce_run(outcomes: list[dict], context: RunContext, *, elapsed_seconds: float,
               commit: str | None = None, peak_rss_bytes: int | None = None,
               farm: dict | None = None) -> tuple[dict, dict]:
    """(results, manifest) from item outcomes in dataset order and the run's context.

    `commit`: the code's (default: this checkout's); `peak_rss_bytes`: of the process that ran every item (a
    local run); `farm`: a farm run's block, in both files (the analyzer reads results files only)."""
    context = replace(context, scoring_profile=profile_name(context.scoring_profile))
    records = gather_records(fail_colliding_items(outcomes))
    check_one_run(records)
    tally = compute_metrics(records, outcomes, context)
    results = build_results(records, tally, context, commit=commit or git_commit(),
                            elapsed_seconds=round(elapsed_seconds, 3), peak_rss_bytes=peak_rss_bytes,
                            farm=farm)
    manifest = build_manifest(outcomes, tally, context, results)
    return results.to_dict(), manifest.to_dict()


def gather_records(outcomes: list[dict]) -> list[dict]:
    """Every question record of the outcomes, in dataset order, each profile under its current name."""
    return [current_profile_names(r) for outcome in outcomes for r in outcome["records"]]


def fail_colliding_items(outcomes: list[dict]) -> list[dict]:
    """The outcomes with every item that holds a question id twice, or one another item holds too, failed.

    Two records of one question id cannot both stand in a results file, and which is the question's is not the
    reducer's to guess: each item holding such an id becomes one failed record named after the item (its
    questions are not known apart), the error naming the question and every item that holds it; every other
    item keeps its records. Repeated until no id repeats (a failed item's record could take another's id)."""
    outcomes = list(outcomes)
    failed: set[int] = set()
    while True:
        holders: dict[str, list[int]] = defaultdict(list)
        for index, outcome in enumerate(outcomes):
            for record in outcome["records"]:
                holders[record["question_id"]].append(index)
        colliding = {qid: places for qid, places in holders.items() if len(places) > 1}
        to_fail = sorted({i for places in colliding.values() for i in places} - failed)
        if not colliding:
            return outcomes
        if not to_fail:  # only failed items' own records repeat: two items of one id (a reader lets none through)
            check_one_run(gather_records(outcomes))
        for index in to_fail:
            outcomes[index] = _collision_outcome(outcomes, index, colliding)
        failed.update(to_fail)


def _collision_outcome(outcomes: list[dict], index: int, colliding: dict[str, list[int]]) -> dict:
    """Item `index`'s outcome as one failed record named after it, saying which question id collided where."""
    outcome, item_ids = outcomes[index], [o["item_id"] for o in outcomes]
    item = outcome["item_id"]
    said = []
    for qid, places in colliding.items():
        if index in places:
            others = sorted({item_ids[p] for p in places if p != index})
            said.append(f"question {qid} is held twice by item {item}" if not others else
                        f"question {qid} is also item {', '.join(others)}'s")
    error = (f"item {item}: {'; '.join(said)}; their records cannot be told apart, so the item is failed "
             "and every other item kept")
    first = outcome["records"][0] if outcome["records"] else {}
    records = failed_records({"item_id": item}, error, "question_id", first.get("worker"), first.get("attempt", 1))
    return {**outcome, "records": records}


def check_one_run(records: list[dict]) -> None:
    """Refuse records that hold a question twice: two runs' records, or one item's twice."""
    seen: dict[str, str] = {}
    for record in records:
        qid = record["question_id"]
        if qid in seen:
            raise ResultsError(f"question {qid}: records of items {seen[qid]} and {record.get('item_id')} hold it "
                               "twice; refusing to reduce")
        seen[qid] = record.get("item_id")


def _consulted(cache: dict) -> bool:
    """Whether the item's cache entry was looked up (an outcome of an older worker says so only by its reason)."""
    return bool(cache.get("consulted", cache.get("reason") != "no cache"))


def compute_metrics(records: list[dict], outcomes: list[dict], context: RunContext) -> Tally:
    """The averages (overall, per group, per profile) and the counts both files report."""
    ok = [r for r in records if is_ok(r)]
    summary = summarize(records, context.group_key)
    counted = counts(records, context.scoring_profile)  # as the reader counts them again

    def stat(name: str) -> int:
        return sum(o.get("stats", {}).get(name, 0) for o in outcomes)

    return Tally(
        abstentions=counted["abstentions_excluded"], excluded=counted["excluded"],
        failed=[r for r in records if not is_ok(r)],
        evaluable=counted["retrieval_evaluable"], without_gold=counted["scored_without_gold"],
        summary=summary,
        by_profile=by_profile(records, context.group_key, context.scoring_profile,
                              shared_corpus=shares_corpus(context.benchmark)),
        short=sum(1 for r in ok if _short(r)),
        phases=phase_totals(outcomes),
        # texts encoded by the model vs served from the machine's store (of those, from the farm's shared
        # vectors); shared vectors encoded again to check them (among those encoded), and those found forged
        store_counts={name: stat(name) for name in ("texts_encoded", "texts_served", "texts_from_shared",
                                                    "texts_verified", "texts_forged")},
        # AdaMem's six measures (systems that pack a context block), in both files
        measures=run_measures(records, outcomes, summary["all"]) or None,
    )


def build_results(records: list[dict], tally: Tally, context: RunContext, *, commit: str,
                  elapsed_seconds: float, peak_rss_bytes: int | None, farm: dict | None) -> Results:
    signature = context.embedding_signature or {}
    return Results(
        # a run with failed items averages over the rest: said first, so that no reader misses it
        complete=not tally.failed, failures=failure_summary(records, context.benchmark),
        # weights tuned on this very dataset make numbers that are not held out: said at the top too
        tuning=context.tuning, benchmark=context.benchmark_title, benchmark_key=context.benchmark,
        system=context.system_config.get("name"), question_count=len(records),
        retrieval_evaluable=tally.evaluable,
        # official profile: questions without a has_answer user turn, scored anyway (recall_all 1, recall_any 0)
        scored_without_gold=tally.without_gold, abstentions_excluded=tally.abstentions,
        excluded=tally.excluded,
        failed=len(tally.failed), metrics=tally.summary, metrics_by_profile=tally.by_profile,
        short_rankings=tally.short, phases_ms=tally.phases, embedding_store=tally.store_counts,
        records=records,
        dataset_checksum=context.dataset_sha256, embedder=signature.get("model_id"),
        embedding_dimension=signature.get("dimension"), commit=commit,
        retrieval_mode=context.system_config.get("retrieval_mode"), scoring_profile=context.scoring_profile,
        settings=settings_snapshot(), settings_system=context.system_config, command=context.command,
        elapsed_seconds=elapsed_seconds,
        # the peak resident memory of the process that ran every item (local runs; a farm's are its workers')
        peak_rss_bytes=peak_rss_bytes, measures=tally.measures, farm=farm,
        dataset_file_checksums=context.dataset_file_checksums)


def build_manifest(outcomes: list[dict], tally: Tally, context: RunContext, results: Results) -> Manifest:
    caches = [o.get("cache") for o in outcomes if o.get("cache")]
    return Manifest(
        dataset_path=str(context.dataset_path), dataset_sha256=context.dataset_sha256,
        arguments=context.arguments,
        command=context.command, commit=results.commit, python=sys.version.split()[0],
        platform=platform.platform(), system=context.system_config, top_k=context.top_k,
        rendering=context.rendering,
        cache={
            "dir": context.cache_dir, "rebuild": context.rebuild_cache,
            "signature": context.embedding_signature or {},
            "format_version": harness.CACHE_FORMAT_VERSION,
            "hits": sum(1 for c in caches if c["hit"]),
            "misses": sum(1 for c in caches if _consulted(c) and not c["hit"]),
            "rebuild_reasons": {o["item_id"]: o["cache"]["reason"] for o in outcomes
                                if o.get("cache") and _consulted(o["cache"]) and not o["cache"]["hit"]},
            # items no cache entry was looked up for (no cache given, a system without snapshots, memory in steps)
            "not_cached": {o["item_id"]: o["cache"]["reason"] for o in outcomes
                           if o.get("cache") and not _consulted(o["cache"])},
        },
        evaluation={
            "k_values": list(context.k_values), "scoring_profile": context.scoring_profile,
            "profiles_computed": sorted(results.metrics_by_profile), "metric_names": list(METRIC_NAMES),
            "levels": ["session", "turn"], "question_count": results.question_count,
            "evaluable": tally.evaluable, "scored_without_gold": tally.without_gold,
            "turn_evaluable": tally.summary["all"]["evaluable"]["turn"],
            "abstentions": tally.abstentions, "excluded": tally.excluded, "failed": len(tally.failed),
            "truncated_texts": sum(o.get("stats", {}).get("truncated_texts", 0) for o in outcomes),
            # questions whose system returned fewer docs than asked (the official profile asks for all)
            "short_rankings": tally.short,
        },
        phases_ms=tally.phases, embedding_store=tally.store_counts,
        failures=[{"question_id": r["question_id"], "item_id": r["item_id"], "attempt": r.get("attempt"),
                   "error": r.get("error"), "field": r.get("field")} for r in tally.failed],
        items=[{"item_id": o["item_id"], "timings": o.get("timings", {}), "stats": o.get("stats", {}),
                "worker": (o["records"][0].get("worker") if o["records"] else None)} for o in outcomes],
        settings=results.settings, elapsed_seconds=results.elapsed_seconds,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), measures=tally.measures,
        farm=results.farm)


def write_results(results: dict, manifest: dict, output: str | Path | None = None) -> tuple[Path, Path]:
    """Write the results file and its manifest beside it; the default name says benchmark, system and mode."""
    output = Path(output) if output else default_output(results)
    manifest_path = output.with_name(output.name[:-5] + ".manifest.json" if output.name.endswith(".json")
                                     else output.name + ".manifest.json")
    write_json(output, results)
    write_json(manifest_path, manifest)
    return output, manifest_path


def default_output(results: dict) -> Path:
    """results/{benchmark}_{system}_{mode}_{timestamp}.json, every part safe as a file name (no mode part for a
    system that has none)."""
    parts = [results["benchmark_key"], results.get("system") or "system", *(
        [results["retrieval_mode"]] if results.get("retrieval_mode") else [])]
    stem = "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", str(p)).strip("-") for p in parts)
    stem = f"{stem}_{time.strftime('%Y%m%d-%H%M%S')}"
    path, number = Path("results") / f"{stem}.json", 1
    while path.exists():  # two runs in one second never overwrite each other
        number += 1
        path = Path("results") / f"{stem}-{number}.json"
    return path
