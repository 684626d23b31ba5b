"""`memfarm bench farm`: the farm against the local executor (cold and warm), two workers against one,
and the broker's overhead per task; it starts its own Redis server and workers."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from coordinator.benches.common import measure_memfarm, start_workers, stop_workers, write_bench


def run_farm_bench(questions: int, scale: float, workdir: str | Path, output) -> str:
    """Farm vs local executor as ratios, 2 workers vs 1, and the broker's per-task overhead."""
    from adapters.benchmarks.longmemeval.reader import extract_questions
    from adapters.generators.longmemeval_s import write
    from coordinator.operations.processes import free_port, start_redis

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    data, companion = workdir / "farm_bench.json", workdir / "farm_bench_q.json"
    write(data, questions, seed=31, scale=scale)
    extract_questions(data, companion)
    port, password = free_port(), secrets.token_urlsafe(12)
    redis_proc = start_redis(workdir / "redis", port, password, workdir / "redis.log")
    broker = f"redis://:{password}@127.0.0.1:{port}/0"
    # farm against local, like for like: no embedding store on either side (bench coldrun measures the store)
    base = ["run", "longmemeval", "--dataset", str(data), "--questions", str(companion), "--no-embedding-store"]
    running: list = []

    def timed(args: list[str], broker: str | None = None) -> float:
        seconds, _ = measure_memfarm(args, broker)
        return seconds

    try:
        local_cache = str(workdir / "cache_local")
        local_cold = timed(base + ["--cache-dir", local_cache, "--rebuild-cache", "--output", str(workdir / "l1.json")])
        local_warm = timed(base + ["--cache-dir", local_cache, "--output", str(workdir / "l2.json")])
        running = start_workers(broker, workdir, "same", 1, 2)  # the local run uses torch's default 2 threads
        farm_cold = timed(base + ["--rebuild-cache", "--output", str(workdir / "f1.json")], broker)
        farm_warm = timed(base + ["--output", str(workdir / "f2.json")], broker)
        stop_workers(running)
        running = start_workers(broker, workdir, "one", 1, 1)
        one_worker = timed(base + ["--rebuild-cache", "--output", str(workdir / "o1.json")], broker)
        stop_workers(running)
        running = start_workers(broker, workdir, "two", 2, 1)
        two_workers = timed(base + ["--rebuild-cache", "--output", str(workdir / "t1.json")], broker)
        stop_workers(running)
    finally:
        stop_workers(running)
        redis_proc.stop()
    same_records = (json.loads((workdir / "l1.json").read_text())["metrics"]
                    == json.loads((workdir / "f1.json").read_text())["metrics"])
    data_out = {
        "questions": questions, "scale": scale,
        "seconds": {"local_cold": round(local_cold, 2), "local_warm": round(local_warm, 2),
                    "farm1_cold": round(farm_cold, 2), "farm1_warm": round(farm_warm, 2),
                    "one_worker_1thread_cold": round(one_worker, 2), "two_workers_1thread_cold": round(two_workers, 2)},
        "farm_over_local_cold": round(farm_cold / local_cold, 3), "target_farm_over_local_cold": 1.05,
        "farm_over_local_warm": round(farm_warm / local_warm, 3), "target_farm_over_local_warm": 1.10,
        "two_worker_speedup": round(one_worker / two_workers, 3), "target_two_worker_speedup": 1.7,
        "broker_overhead_ms_per_task": round((farm_warm - local_warm) / questions * 1000, 1),
        "farm_metrics_equal_local": same_records,
        "note": "wall seconds of whole commands (process start and model load included), workers started beforehand",
    }
    path = write_bench("farm", data_out, output)
    s = data_out["seconds"]
    return "\n".join([
        f"{questions} questions at scale {scale}",
        f"local cold {s['local_cold']:>7.1f}s   farm(1 worker) cold {s['farm1_cold']:>7.1f}s   ratio {data_out['farm_over_local_cold']:.3f} (target <= 1.05)",
        f"local warm {s['local_warm']:>7.1f}s   farm(1 worker) warm {s['farm1_warm']:>7.1f}s   ratio {data_out['farm_over_local_warm']:.3f} (target <= 1.10)",
        f"1 worker x 1 thread {s['one_worker_1thread_cold']:.1f}s, 2 workers x 1 thread {s['two_workers_1thread_cold']:.1f}s: "
        f"speedup {data_out['two_worker_speedup']:.2f}x (target >= 1.7)",
        f"broker overhead {data_out['broker_overhead_ms_per_task']:.1f} ms per task; farm metrics equal local: {same_records}",
        f"wrote {path}"])
