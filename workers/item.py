"""Evaluate one item in isolation: build or restore its state, ask, score.

The same function serves the local executor and the Celery task, so both
produce the same records. The runner owns id minting, task building and
scoring; the system only sees rendered docs and whitelisted tasks.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import time

from adapters.contracts import DOC_PROPS, TASK_FIELDS
from memoria.defaults import DEFAULT_K_VALUES, DEFAULT_TOP_K
from workers.cache import content_hash, expected_entry
from workers.metrics import question_metrics

logger = logging.getLogger(__name__)


def label_for(item_id: str) -> str:
    """An opaque isolation label: nothing of the native id survives."""
    return "item-" + hashlib.sha256(item_id.encode()).hexdigest()[:12]


def make_docs(item: dict) -> tuple[list[dict], dict[str, dict]]:
    """Docs for the system (opaque ids, whitelisted props) and the runner's id map."""
    label = label_for(item["item_id"])
    docs, native = [], {}
    for position, turn in enumerate(item["turns"]):
        external_id = f"{label}-{position:06d}"
        props = {k: turn["props"][k] for k in DOC_PROPS if k in turn["props"]}
        docs.append({"external_id": external_id, "label": label, "text": turn["text"], "props": props})
        native[external_id] = {"session_id": turn["session_id"], "turn_id": turn["turn_id"]}
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


def clean_hits(hits, known, top_k: int) -> tuple[list[dict], list[str]]:
    """Keep well-formed hits of known docs, once each, at most top_k; say what was dropped."""
    kept, seen, problems = [], set(), []
    for position, hit in enumerate(hits or []):
        external_id = hit.get("external_id") if isinstance(hit, dict) else None
        if external_id not in known:
            problems.append(f"hit {position}: unknown id {external_id!r} dropped")
        elif external_id in seen:
            problems.append(f"hit {position}: duplicate id {external_id!r} dropped")
        else:
            seen.add(external_id)
            kept.append(hit)
    if len(kept) > top_k:
        problems.append(f"{len(kept)} hits for top_k={top_k}: truncated")
        kept = kept[:top_k]
    for problem in problems:
        logger.warning("system output rejected: %s", problem)
    return kept, problems


def failed_records(item: dict, error: str, field: str | None, worker: str, attempt: int) -> list[dict]:
    questions = item.get("questions") or [{"question_id": item["item_id"]}]
    return [{
        "question_id": q["question_id"], "item_id": item["item_id"], "status": "failed", "error": error,
        "field": field, "metrics": None, "abstention": False, "worker": worker, "attempt": attempt,
    } for q in questions]


def evaluate_item(
    item: dict,
    system,
    *,
    top_k: int = DEFAULT_TOP_K,
    k_values=DEFAULT_K_VALUES,
    profile: str = "memoria",
    cache=None,
    dataset_sha256: str | None = None,
    worker: str | None = None,
    attempt: int = 1,
) -> dict:
    """Run every question of `item` against `system`; returns records and item facts."""
    worker = worker or socket.gethostname()
    if item.get("error"):
        return {"item_id": item["item_id"], "records": failed_records(item, item["error"], item.get("field"), worker, attempt),
                "cache": None, "timings": {}, "stats": {}}
    started = time.perf_counter()
    docs, native = make_docs(item)
    label = docs[0]["label"] if docs else label_for(item["item_id"])
    signature = getattr(system, "embedding_signature", None)
    expected = expected_entry(content_hash(docs), signature)
    cache_state = {"hit": False, "reason": "no cache"}
    can_cache = cache is not None and hasattr(system, "snapshot") and hasattr(system, "restore")
    if can_cache:
        reason = cache.restore(item["item_id"], system, expected)
        cache_state = {"hit": reason is None, "reason": reason}
    if not cache_state["hit"]:
        system.reset()
        system.ingest(docs)
        if can_cache:
            cache.store(item["item_id"], system, expected, dataset_sha256)
    build_ms = (time.perf_counter() - started) * 1000

    by_id = {d["external_id"]: d for d in docs}
    session_of_turn = {ids["turn_id"]: ids["session_id"] for ids in native.values()}
    records = []
    for position, question in enumerate(item["questions"]):
        records.append(_ask(system, question, make_task(question, label, position, top_k), by_id, native,
                            session_of_turn, k_values, profile, item, worker, attempt))
    return {
        "item_id": item["item_id"],
        "records": records,
        "cache": cache_state,
        "timings": {"build_or_restore_ms": round(build_ms, 3), "total_ms": round((time.perf_counter() - started) * 1000, 3)},
        "stats": {"docs": len(docs), **item.get("stats", {})},
    }


def _ask(system, question, task, by_id, native, session_of_turn, k_values, profile, item, worker, attempt) -> dict:
    t0 = time.perf_counter()
    hits = system.retrieve(task["label"], task["question"], task["top_k"])
    runtime_ms = (time.perf_counter() - t0) * 1000
    hits, problems = clean_hits(hits, by_id, task["top_k"])
    gold_turns, gold_sessions = set(question.get("gold_turns", [])), set(question.get("gold_sessions", []))
    candidates = []
    for rank, hit in enumerate(hits, start=1):
        eid = hit["external_id"]
        diagnostics = dict(hit.get("diagnostics") or {})
        final_score = diagnostics.pop("final_score", hit.get("score"))
        candidates.append({
            "rank": rank, "id": eid, "text": by_id[eid]["text"],
            "metadata": {**by_id[eid]["props"], **native[eid]},
            "score": hit.get("score"), "final_score": final_score, "diagnostics": diagnostics,
        })
    turn_ranking = [native[c["id"]]["turn_id"] for c in candidates]
    expected_rank = next((c["rank"] for c in candidates if c["metadata"]["turn_id"] in gold_turns), None)
    if expected_rank is None and not gold_turns:
        expected_rank = next((c["rank"] for c in candidates if c["metadata"]["session_id"] in gold_sessions), None)
    scorable = not question.get("abstention") and not question.get("excluded")
    metrics = (question_metrics(turn_ranking, session_of_turn, gold_sessions, gold_turns, k_values, profile)
               if scorable else None)
    record = {
        "question_id": question["question_id"],
        "item_id": item["item_id"],
        "status": "ok",
        "query": question["question"],
        "expected": question.get("expected", ""),
        "expected_ids": question.get("expected_ids", []),
        "gold": {"sessions": sorted(gold_sessions), "turns": sorted(gold_turns)},
        "expected_rank": expected_rank,
        "retrieved": expected_rank is not None,
        "candidates": candidates,
        "runtime_ms": round(runtime_ms, 3),
        "diagnostics": {"system": getattr(system, "last_diagnostics", {}) or {}, "rejected_hits": problems},
        "metrics": metrics,
        "abstention": bool(question.get("abstention")),
        "worker": worker,
        "attempt": attempt,
    }
    for key in ("question_type", "category", "abstention_reason", "excluded", "details"):
        if key in question:
            record[key] = question[key]
    return record
