"""`memfarm bench threads`: one LoCoMo conversation run locally with several model thread counts, side by side.

Each count is a fresh `memfarm run --threads N` child, cold (no cache), the counts alternating in every round so
that a change in the machine's load falls on all of them. The machine's load average is recorded before each run:
on a machine others are using, a model that takes every core competes with them, and the figure shows by how much.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from coordinator.benches.common import fresh_workdir, measure_memfarm, write_bench


def run_threads_bench(locomo: str | Path, *, threads: tuple[int, ...] = (), mode: str = "fusion", reps: int = 2,
                      workdir: str | Path = "cache/bench_threads",
                      output: str | Path = "results/bench/threads.json") -> str:
    counts = tuple(dict.fromkeys(threads or (1, os.cpu_count() or 1)))
    workdir = fresh_workdir(workdir)
    conversation = workdir / "conversation.json"
    conversation.write_text(json.dumps(json.loads(Path(locomo).read_text())[:1]))
    runs: dict[int, list[dict]] = {n: [] for n in counts}
    for rep in range(reps):
        for n in counts:
            out = workdir / f"threads{n}_{rep}.json"
            load = os.getloadavg()[0]
            seconds, rss = measure_memfarm(["run", "locomo", "--dataset", str(conversation), "--retrieval-mode", mode,
                                            "--threads", str(n), "--output", str(out)])
            results = json.loads(out.read_text())
            runs[n].append({"wall_s": round(seconds, 2), "peak_rss_mib": round(rss / 2**20, 1),
                            "load_before": round(load, 2), "complete": results.get("complete"),
                            "session_recall_all_5": results["metrics"]["all"]["session"].get("recall_all@5")})
    rows = [{"threads": n, "wall_s_median": round(statistics.median(r["wall_s"] for r in rows), 2),
             "load_before_median": round(statistics.median(r["load_before"] for r in rows), 2),
             "peak_rss_mib_max": max(r["peak_rss_mib"] for r in rows), "runs": rows} for n, rows in runs.items()]
    fastest = min(row["wall_s_median"] for row in rows)
    for row in rows:
        row["times_the_fastest"] = round(row["wall_s_median"] / fastest, 2)
    data = {"locomo": str(locomo), "mode": mode, "reps": reps, "cores": os.cpu_count(), "rows": rows,
            "same_recall_all_5": len({json.dumps(r["session_recall_all_5"]) for row in rows for r in row["runs"]}) == 1}
    path = write_bench("threads", data, output)
    lines = [f"memoria {mode}, one LoCoMo conversation, cold, median of {reps} alternating runs per thread count",
             f"{'threads':>8}{'wall s':>9}{'x fastest':>11}{'load before':>13}{'peak RSS MiB':>14}"]
    lines += [f"{row['threads']:>8}{row['wall_s_median']:>9.1f}{row['times_the_fastest']:>11.2f}"
              f"{row['load_before_median']:>13.2f}{row['peak_rss_mib_max']:>14.1f}" for row in rows]
    lines.append(f"wrote {path}")
    return "\n".join(lines)
