"""`memfarm bench staging`: `memfarm submit` of a large LongMemEval-S file: its peak RSS and seconds, how
fast the file reads, and what Redis holds after staging, sessions stored once against each item packed whole."""

from __future__ import annotations

import time
from pathlib import Path

from coordinator.benches.common import (fresh_workdir, generated_longmemeval, measure_memfarm, redis_used_memory,
                                        sharing_statistics, write_bench)


def run_staging_bench(questions: int, scale: float, workdir: str | Path, output, dataset: str | None = None) -> str:
    """`memfarm submit` of a large file: its peak RSS, seconds, and what Redis holds after staging."""
    from adapters.jsonstream import iter_array
    from adapters.benchmarks.longmemeval.reader import LongMemEval
    from coordinator.operations.processes import free_port, start_redis
    from coordinator.running.run_ledger import RunLedger, connect
    from workers.farm.staging_codec import pack

    workdir = fresh_workdir(workdir)
    data = Path(dataset) if dataset else generated_longmemeval(workdir, questions, scale, seed=41)
    size_mib = data.stat().st_size / 2**20
    started = time.perf_counter()
    elements = sum(1 for _ in iter_array(data))
    read_seconds = time.perf_counter() - started
    whole_items = sum(len(pack(item)) for item in LongMemEval(data).iter_items())  # each item packed whole
    port = free_port()
    redis_proc = start_redis(workdir / "redis", port, None, workdir / "redis.log")
    url = f"redis://127.0.0.1:{port}/0"
    try:
        empty = redis_used_memory(url)
        seconds, rss = measure_memfarm(["submit", "longmemeval", "--dataset", str(data), "--run-id", "staging-bench"],
                                       url)
        staged = redis_used_memory(url)
        stats = RunLedger(connect(url)).meta("staging-bench")["staging"]
    finally:
        redis_proc.stop()
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
