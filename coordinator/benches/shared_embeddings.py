"""`memfarm bench shared-embeddings`: the same cold farm run on N one-thread workers, each with its own
embedding store, with and without sharing vectors through Redis: wall seconds, texts encoded, Redis memory
added, and whether the numbers are the same."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from coordinator.benches.common import (fresh_workdir, generated_longmemeval, measure_memfarm, redis_used_memory,
                                        sharing_statistics, start_workers, stop_workers, write_bench)


def run_shared_embeddings_bench(questions: int, scale: float, workers: int, workdir: str | Path, output) -> str:
    """The same cold farm run on `workers` one-thread workers with their own stores, with and without
    sharing vectors through Redis: wall seconds, texts encoded, Redis memory, the same numbers."""
    from adapters.benchmarks.longmemeval.reader import extract_questions
    from coordinator.operations.processes import free_port, start_redis

    workdir = fresh_workdir(workdir)
    data = generated_longmemeval(workdir, questions, scale, seed=43)
    companion = workdir / "questions.json"
    extract_questions(data, companion)
    port, password = free_port(), secrets.token_urlsafe(12)
    redis_proc = start_redis(workdir / "redis", port, password, workdir / "redis.log")
    broker = f"redis://:{password}@127.0.0.1:{port}/0"
    rows = []
    try:
        for shared in (False, True):
            tag = "shared" if shared else "own"
            # fresh caches and stores: every run is cold
            running = start_workers(broker, workdir, tag, workers, 1)
            before = redis_used_memory(broker)
            out = workdir / f"{tag}.json"
            try:
                seconds, _ = measure_memfarm(["run", "longmemeval", "--dataset", str(data),
                                              "--questions", str(companion), "--output", str(out)]
                                             + (["--shared-embeddings"] if shared else []), broker)
            finally:
                stop_workers(running)
            store = json.loads((workdir / f"{tag}.manifest.json").read_text())["embedding_store"]
            rows.append({"shared_embeddings": shared, "seconds": round(seconds, 1),
                         "texts_encoded": store["texts_encoded"], "texts_from_shared": store.get("texts_from_shared", 0),
                         "redis_mib_added": round((redis_used_memory(broker) - before) / 2**20, 1),
                         "session_metrics": json.loads(out.read_text())["metrics"]["all"]["session"]})
    finally:
        redis_proc.stop()
    own, shared = rows
    result = {"questions": questions, "scale": scale, "workers": workers, "threads_per_worker": 1,
              "sharing": sharing_statistics(data), "runs": rows,
              "speedup": round(own["seconds"] / shared["seconds"], 3),
              "same_session_metrics": own["session_metrics"] == shared["session_metrics"],
              "vector_format": "float32 with a 16-byte checksum (bit-identical to a local encoding)",
              "note": "wall seconds of the whole `memfarm run`, workers started beforehand; on this machine the "
                      "workers share its cores, so the saving is in encoding work, which is what a fleet of "
                      "separate machines saves too"}
    path = write_bench("shared_embeddings", result, output)
    lines = [f"{questions} questions at scale {scale} on {workers} workers (1 thread each)",
             f"{'':<22}{'seconds':>9}{'texts encoded':>15}{'from Redis':>12}{'Redis MiB':>11}"]
    lines += [f"{('shared' if r['shared_embeddings'] else 'each its own'):<22}{r['seconds']:>9.1f}"
              f"{r['texts_encoded']:>15}{r['texts_from_shared']:>12}{r['redis_mib_added']:>11.1f}" for r in rows]
    lines.append(f"speedup {result['speedup']:.2f}x; same session metrics: {result['same_session_metrics']}; wrote {path}")
    return "\n".join(lines)
