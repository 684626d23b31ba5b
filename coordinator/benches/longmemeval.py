"""`memfarm bench longmemeval`: cold against warm seconds per question on a generated LongMemEval-S
file (cache hits, the same metrics both ways), and peak RSS against the file's size."""

from __future__ import annotations

import json
from pathlib import Path

from coordinator.benches.common import measure_memfarm, write_bench


def run_longmemeval_bench(questions: int, scale: float, rss_questions: int, workdir: str | Path, output) -> str:
    """Cold vs warm seconds per question on a generated file, and peak RSS against file size."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    from adapters.benchmarks.longmemeval.reader import extract_questions
    from adapters.generators.longmemeval_s import write

    data, companion, cache = workdir / "bench.json", workdir / "bench_q.json", workdir / "cache"
    write(data, questions, seed=17, scale=scale)
    extract_questions(data, companion)
    base = ["run", "longmemeval", "--dataset", str(data), "--questions", str(companion), "--cache-dir", str(cache)]
    # cold: every item built and every text encoded (the embedding store is `bench coldrun`'s subject)
    cold_s, cold_rss = measure_memfarm(base + ["--rebuild-cache", "--no-embedding-store",
                                               "--output", str(workdir / "cold.json")])
    warm_s, warm_rss = measure_memfarm(base + ["--output", str(workdir / "warm.json")])
    warm_manifest = json.loads((workdir / "warm.manifest.json").read_text())
    cold_records = json.loads((workdir / "cold.json").read_text())["records"]
    warm_records = json.loads((workdir / "warm.json").read_text())["records"]
    same = [r["metrics"] for r in cold_records] == [r["metrics"] for r in warm_records]

    # Memory must not grow with the file: the same 5 items out of a small and a large file.
    rss = {}
    for n in (max(10, rss_questions // 10), rss_questions):
        path = workdir / f"rss_{n}.json"
        write(path, n, seed=23, scale=scale)
        _, peak = measure_memfarm(["run", "longmemeval", "--dataset", str(path), "--limit", "5",
                                   "--output", str(workdir / f"rss_{n}_out.json")])
        rss[n] = {"file_bytes": path.stat().st_size, "peak_rss_bytes": peak}
    data_out = {
        "questions": questions, "scale": scale,
        "cold_seconds_per_question": round(cold_s / questions, 3),
        "warm_seconds_per_question": round(warm_s / questions, 3),
        "cold_over_warm": round(cold_s / warm_s, 2),
        "target_cold_over_warm": 20,
        "warm_cache_hits": warm_manifest["cache"]["hits"],
        "warm_metrics_identical": same,
        "peak_rss_cold_bytes": cold_rss, "peak_rss_warm_bytes": warm_rss,
        "rss_by_file_size": {str(k): v for k, v in rss.items()},
        "target_peak_rss_bytes": int(1.5 * 2**30),
    }
    path = write_bench("longmemeval", data_out, output)
    gib = lambda b: b / 2**30
    lines = [f"{questions} questions at scale {scale}",
             f"cold  {data_out['cold_seconds_per_question']:>8.2f} s/question   peak RSS {gib(cold_rss):.2f} GiB",
             f"warm  {data_out['warm_seconds_per_question']:>8.2f} s/question   peak RSS {gib(warm_rss):.2f} GiB",
             f"cold / warm {data_out['cold_over_warm']:.1f}x (target >= 20), warm hits {data_out['warm_cache_hits']}, "
             f"metrics identical: {same}",
             *(f"file of {k} questions ({v['file_bytes'] / 2**20:.0f} MiB), 5 items: peak RSS {gib(v['peak_rss_bytes']):.2f} GiB"
               for k, v in rss.items()),
             f"wrote {path}"]
    return "\n".join(lines)
