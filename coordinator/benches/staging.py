"""Benchmarks of what a farm run costs before and around the model: staging a full-scale file, and
sharing vectors between workers through Redis. Each writes JSON under results/bench/ and returns a table."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

from coordinator.benches.suite import _peak_rss_of, sharing_statistics, write_bench


def _fresh(workdir: str | Path) -> Path:
    workdir = Path(workdir)
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    return workdir


def _generated(workdir: Path, questions: int, scale: float, seed: int) -> Path:
    """A generated LongMemEval-S file whose sessions repeat about as often as the real file's."""
    from adapters.longmemeval_synth import DISTINCT_SESSION_SHARE, write

    path = workdir / "data.json"
    write(path, questions, seed=seed, scale=scale, distinct_share=DISTINCT_SESSION_SHARE)
    return path


def _used_memory(url: str) -> int:
    from workers.ledger import connect

    return int(connect(url).info("memory")["used_memory"])


def run_staging_bench(questions: int, scale: float, workdir: str | Path, output, dataset: str | None = None) -> str:
    """`memfarm submit` of a large file: its peak RSS, seconds, and what Redis holds after staging."""
    from adapters.jsonstream import iter_array
    from adapters.longmemeval import LongMemEval
    from coordinator.operations.processes import free_port, start_redis
    from coordinator.running.ledger import RunLedger, connect
    from workers.ledger import pack

    workdir = _fresh(workdir)
    data = Path(dataset) if dataset else _generated(workdir, questions, scale, seed=41)
    size_mib = data.stat().st_size / 2**20
    started = time.perf_counter()
    elements = sum(1 for _ in iter_array(data))
    read_seconds = time.perf_counter() - started
    whole_items = sum(len(pack(item)) for item in LongMemEval(data).iter_items())  # each item packed whole
    port = free_port()
    redis_proc = start_redis(workdir / "redis", port, None, workdir / "redis.log")
    url = f"redis://127.0.0.1:{port}/0"
    try:
        empty = _used_memory(url)
        seconds, rss = _peak_rss_of(["submit", "longmemeval", "--dataset", str(data), "--broker", url,
                                     "--run-id", "staging-bench"])
        staged = _used_memory(url)
        stats = RunLedger(connect(url)).meta("staging-bench")["staging"]
    finally:
        redis_proc.kill()
        redis_proc.wait(timeout=10)
    mib = 2**20
    result = {
        "dataset": str(data), "file_mib": round(size_mib, 1), "questions": elements,
        "sharing": sharing_statistics(data),
        "reader_seconds": round(read_seconds, 2), "reader": "ijson (yajl2_c) behind a surrogate guard",
        "submit_seconds": round(seconds, 1), "submit_peak_rss_mib": round(rss / mib, 1), "target_peak_rss_mib": 400,
        "redis_mib_after_staging": round((staged - empty) / mib, 1),
        "sessions": {k: stats[k] for k in ("session_occurrences", "sessions_stored")},
        "staged_mib": {"sessions": round(stats["session_bytes"] / mib, 1), "items": round(stats["item_bytes"] / mib, 1),
                       "each_item_packed_whole": round(whole_items / mib, 1)},
        "note": "Redis memory is the server's used_memory after staging minus before (keys, queue messages and "
                "allocator overhead included); 'each item packed whole' is what staging stored before sessions "
                "were stored once, computed on the same items",
    }
    path = write_bench("staging", result, output)
    s = result["staged_mib"]
    return "\n".join([
        f"{data.name}: {size_mib:.0f} MiB, {elements} questions; read in {read_seconds:.1f}s",
        f"memfarm submit: {seconds:.1f}s, peak RSS {result['submit_peak_rss_mib']:.0f} MiB (target <= 400)",
        f"sessions: {stats['session_occurrences']} occurrences stored as {stats['sessions_stored']} distinct",
        f"staged: sessions {s['sessions']:.1f} MiB + items {s['items']:.1f} MiB (each item packed whole: "
        f"{s['each_item_packed_whole']:.1f} MiB); redis holds {result['redis_mib_after_staging']:.1f} MiB more",
        f"wrote {path}"])


def run_shared_embeddings_bench(questions: int, scale: float, workers: int, workdir: str | Path, output) -> str:
    """The same cold farm run on `workers` one-thread workers with their own stores, with and without
    sharing vectors through Redis: wall seconds, texts encoded, Redis memory, the same numbers."""
    import secrets

    from adapters.longmemeval import extract_questions
    from coordinator.operations.processes import free_port, start_redis, start_worker, wait_ready

    workdir = _fresh(workdir)
    data = _generated(workdir, questions, scale, seed=43)
    companion = workdir / "questions.json"
    extract_questions(data, companion)
    port, password = free_port(), secrets.token_urlsafe(12)
    redis_proc = start_redis(workdir / "redis", port, password, workdir / "redis.log")
    broker = f"redis://:{password}@127.0.0.1:{port}/0"
    rows = []
    try:
        for shared in (False, True):
            tag = "shared" if shared else "own"
            running = []
            for number in range(workers):  # fresh caches and stores: every run is cold
                log = workdir / f"{tag}{number}.log"
                log.write_text("")
                running.append(start_worker(broker, f"{tag}{number}", workdir / f"cache_{tag}{number}", log,
                                            torch_threads=1))
            wait_ready(running)
            time.sleep(1.0)
            before = _used_memory(broker)
            out = workdir / f"{tag}.json"
            try:
                seconds, _ = _peak_rss_of(["run", "longmemeval", "--dataset", str(data), "--questions", str(companion),
                                           "--broker", broker, "--output", str(out)]
                                          + (["--shared-embeddings"] if shared else []))
            finally:
                for proc in running:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=60)
            store = json.loads((workdir / f"{tag}.manifest.json").read_text())["embedding_store"]
            rows.append({"shared_embeddings": shared, "seconds": round(seconds, 1),
                         "texts_encoded": store["texts_encoded"], "texts_from_shared": store.get("texts_from_shared", 0),
                         "redis_mib_added": round((_used_memory(broker) - before) / 2**20, 1),
                         "session_metrics": json.loads(out.read_text())["metrics"]["all"]["session"]})
    finally:
        redis_proc.kill()
        redis_proc.wait(timeout=10)
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
