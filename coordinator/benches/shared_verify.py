"""`memfarm bench shared-verify`: what checking the farm's shared vectors costs a machine, and what it catches.

A machine that takes vectors from the shared tier encodes a random share of them again and refuses a fetch
whose checked vectors are not its own (`memoria.embedding_store`). Here one machine fills a real Redis with the
real model's vectors of LoCoMo turns, then a second machine with an empty store of its own runs the same items
(each item's turns in one call, then its questions one by one, as the engine does) at several shares, next to
encoding everything itself: wall seconds, texts encoded, and the ratio to encoding everything. Then every
vector in the tier is forged and the second machine, at the default share, must end with the first run's vectors.
"""

from __future__ import annotations

import json
import secrets
import tempfile
import time
from pathlib import Path

import numpy as np

from coordinator.benches.common import write_bench

#: Shares of fetched vectors encoded again; 0 trusts the tier, 1 encodes everything again.
SHARES = (0.0, 0.05, 0.2, 1.0)


def _items(dataset: Path, conversations: int, turns: int, questions: int) -> list[tuple[list[str], list[str]]]:
    data = json.loads(Path(dataset).read_text(encoding="utf-8"))[:conversations]
    items = []
    for conversation in data:
        texts = [t["text"] for key, session in conversation["conversation"].items()
                 if key.startswith("session_") and isinstance(session, list) for t in session if t.get("text")]
        items.append((texts[:turns], [q["question"] for q in conversation["qa"][:questions]]))
    return items


def _machine(embedder, folder: Path, name: str, tier, share: float):
    from memoria.embedding_store import EmbeddingStore, StoredEmbedder
    from memoria.model_files import model_files_sha256

    return StoredEmbedder(embedder, EmbeddingStore(folder / f"{name}.sqlite"), model_files=model_files_sha256(),
                          shared=tier, verify_share=share)


def _run(machine, items) -> tuple[float, np.ndarray]:
    started, vectors = time.perf_counter(), []
    for turns, questions in items:
        vectors.append(machine.encode(turns))
        vectors += [machine.encode([q]) for q in questions]
    return time.perf_counter() - started, np.concatenate(vectors)


def run_shared_verify_bench(dataset: str | Path, conversations: int, turns: int, questions: int, output) -> str:
    from coordinator.operations.processes import free_port, start_redis
    from memoria.embedder import Embedder
    from memoria.embedding_store import SHARED_VERIFY_SHARE, text_key
    from workers.farm.connection import connect
    from workers.farm.shared_vectors import RedisVectors, forget_all

    embedder = Embedder.shared()
    items = _items(Path(dataset), conversations, turns, questions)
    texts = [t for turns_, questions_ in items for t in turns_ + questions_]
    embedder.encode(texts[:8])  # the model loaded before any clock starts
    rows = []
    with tempfile.TemporaryDirectory(prefix="memfarm-bench-verify-") as work:
        folder = Path(work)
        port, password = free_port(), secrets.token_urlsafe(12)
        server = start_redis(folder / "redis", port, password, folder / "redis.log")
        try:
            client = connect(f"redis://:{password}@127.0.0.1:{port}/0")
            alone_seconds, reference = _run(_machine(embedder, folder, "alone", None, 0.0), items)
            rows.append({"setting": "no shared tier: encode everything", "share_checked": None,
                         "seconds": round(alone_seconds, 2), "texts_encoded": len(texts), "seconds_ratio": 1.0})
            _run(_machine(embedder, folder, "filler", RedisVectors(client), 0.0), items)  # fills the tier
            for share in SHARES:
                machine = _machine(embedder, folder, f"share{share}", RedisVectors(client, claims=False), share)
                seconds, vectors = _run(machine, items)
                rows.append({"setting": f"shared tier, {share:.0%} checked", "share_checked": share,
                             "seconds": round(seconds, 2), "texts_encoded": machine.counts["encoded"],
                             "seconds_ratio": round(seconds / alone_seconds, 3),
                             "same_vectors": bool(np.array_equal(vectors, reference))})
            forger = _machine(embedder, folder, "forger", None, 0.0)
            rng = np.random.default_rng(3)
            forged = {}
            for text in texts:
                vector = rng.standard_normal(embedder.dimension).astype(np.float32)
                forged[text_key(forger.space, text)] = vector / np.linalg.norm(vector)
            forget_all(client)
            RedisVectors(client, claims=False).put(forged)
            victim = _machine(embedder, folder, "victim", RedisVectors(client, claims=False), SHARED_VERIFY_SHARE)
            seconds, vectors = _run(victim, items)
            caught = {"share_checked": SHARED_VERIFY_SHARE, "texts_forged": len(forged),
                      "forged_seen": victim.counts["forged"], "tier_refused": victim.shared_refused,
                      "vectors_equal_to_clean_run": bool(np.array_equal(vectors, reference)),
                      "seconds": round(seconds, 2), "seconds_ratio": round(seconds / alone_seconds, 3)}
        finally:
            server.stop()
    odds = [{"forged_vectors_hidden": k, "share_checked": share,
             "chance_one_machine_sees_one": round(1 - (1 - share) ** k, 4)}
            for share in (0.05, 0.2) for k in (1, 10, 100)]
    result = {"dataset": str(dataset), "conversations": conversations, "turns_per_item": turns,
              "questions_per_item": questions, "texts": len(texts), "runs": rows, "forged_tier": caught,
              "detection_odds": odds,
              "note": "each item's turns are one fetch (at least one of them checked), each question a fetch of "
                      "one, always checked; seconds are wall seconds of one process on this machine"}
    path = write_bench("shared_verify", result, output)
    lines = [f"{len(texts)} texts ({conversations} conversations, {turns} turns and {questions} questions each)",
             f"{'':<40}{'seconds':>9}{'encoded':>9}{'ratio':>7}"]
    lines += [f"{r['setting']:<40}{r['seconds']:>9.2f}{r['texts_encoded']:>9}{r['seconds_ratio']:>7.2f}" for r in rows]
    lines.append(f"every vector forged: {caught['forged_seen']} caught, tier refused {caught['tier_refused']}, "
                 f"vectors as clean {caught['vectors_equal_to_clean_run']}; wrote {path}")
    return "\n".join(lines)
