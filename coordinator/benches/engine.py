"""`memfarm bench engine`: the engine's insert throughput next to bare encoding of the same turns, and
recall latency (p50, p95) of every retrieval mode on a small store."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from adapters.percentile import percentile
from coordinator.benches.common import write_bench


def sample_turns(count: int, seed: int = 11) -> list[str]:
    """LongMemEval-like turns: short user turns mixed with long assistant turns."""
    from adapters.generators.longmemeval_s import iter_questions

    texts = []
    for question in iter_questions(max(2, count // 400 + 2), seed=seed, scale=1.0):
        for session in question["haystack_sessions"]:
            texts += [t["content"] for t in session if t["content"].strip() and len(t["content"]) < 8000]
        if len(texts) >= count:
            break
    return texts[:count]


def run_engine_bench(turns: int, store_turns: int, queries: int, output: str | Path) -> str:
    from memoria import BatchLoader, MemoryInterface, defaults
    from memoria.embedder import Embedder

    embedder = Embedder.shared()
    texts = sample_turns(turns)
    metadatas = [{"n": i} for i in range(len(texts))]
    embedder.encode(texts[:64])  # warm-up: first call pays one-off allocations

    # Interleave bare and engine rounds on the same chunks, alternating which goes first,
    # so that a noisy neighbour slows both sides alike.
    memory = MemoryInterface(embedder=embedder)
    loader = BatchLoader(memory)
    bare_s = engine_s = 0.0
    rounds = 10
    size = -(-len(texts) // rounds)
    for number in range(rounds):
        chunk, metas = texts[number * size:(number + 1) * size], metadatas[number * size:(number + 1) * size]
        for side in (("bare", "engine") if number % 2 == 0 else ("engine", "bare")):
            t0 = time.perf_counter()
            if side == "bare":
                embedder.encode(chunk, batch_size=defaults.DEFAULT_BATCH_SIZE)
                bare_s += time.perf_counter() - t0
            else:
                loader.insert_batch(chunk, metas, batch_size=defaults.DEFAULT_BATCH_SIZE)
                engine_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    memory.recall("warm the bm25 index", mode="bm25", limit=1)  # the lexical index is built lazily; count it
    engine_s += time.perf_counter() - t0

    store = MemoryInterface(embedder=embedder)
    BatchLoader(store).insert_batch(texts[:store_turns], metadatas[:store_turns])
    questions = [t[:120] for t in sample_turns(queries, seed=29)]
    latency = {}
    for mode in defaults.MODE_SOURCES:
        store.recall(questions[0], mode=mode)
        times = []
        for q in questions:
            t0 = time.perf_counter()
            store.recall(q, mode=mode, limit=defaults.DEFAULT_RECALL_LIMIT)
            times.append((time.perf_counter() - t0) * 1000)
        latency[mode] = {"p50_ms": round(statistics.median(times), 3), "p95_ms": round(percentile(times, 0.95), 3)}

    data = {
        "turns": len(texts),
        "mean_chars": round(sum(map(len, texts)) / len(texts), 1),
        "bare_encode_turns_per_s": round(len(texts) / bare_s, 2),
        "engine_insert_turns_per_s": round(len(texts) / engine_s, 2),
        "engine_over_bare": round(bare_s / engine_s, 4),
        "target_engine_over_bare": 0.90,
        "recall_store_turns": store_turns,
        "recall_queries": len(questions),
        "recall_latency": latency,
    }
    path = write_bench("engine", data, output)
    lines = [f"turns {data['turns']} (mean {data['mean_chars']} chars)",
             f"bare encode     {data['bare_encode_turns_per_s']:>8.2f} turns/s",
             f"engine insert   {data['engine_insert_turns_per_s']:>8.2f} turns/s",
             f"engine / bare   {data['engine_over_bare']:>8.3f}  (target >= 0.90)",
             f"recall on {store_turns} turns, {len(questions)} queries:",
             *(f"  {m:<7} p50 {v['p50_ms']:>8.2f} ms   p95 {v['p95_ms']:>8.2f} ms" for m, v in latency.items()),
             f"wrote {path}"]
    return "\n".join(lines)
