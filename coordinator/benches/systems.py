"""`memfarm bench systems`: recall, ingest rate and recall latency of each system (memoria, adamem, mem0)
on one LoCoMo file, with the same docs, top_k and scorer; a system that cannot run here is listed as
skipped."""

from __future__ import annotations

import statistics
from pathlib import Path

from coordinator.benches.common import metric, quality_row, write_bench


def run_systems_bench(locomo: str | Path, output, workdir: str | Path = "cache/bench_systems", extra=()) -> str:
    """Systems side by side on one LoCoMo file: same docs, same top_k, same scorer; `extra` names more
    systems (a server's URL, a Python class), each a row under its own name."""
    from adapters.errors import SystemUnavailable
    from coordinator.running.spec import RunSpec

    workdir = Path(workdir)
    configs = [("memoria fusion", {"system": "memoria", "retrieval_mode": "fusion"}),
               ("memoria full", {"system": "memoria", "retrieval_mode": "full"}),
               ("adamem full", {"system": "adamem", "ablation": "full"}),
               ("adamem semantic_only", {"system": "adamem", "ablation": "semantic_only"}),
               ("mem0", {"system": "mem0"})] + [(spec, {"system": spec}) for spec in extra]
    rows, skipped = {}, {}
    for label, options in configs:
        try:
            results, manifest = quality_row(RunSpec("locomo", dataset=str(locomo), **options), workdir, label)
        except SystemUnavailable as exc:
            skipped[label] = str(exc)
            continue
        summary = results["metrics"]["all"]
        build_ms = sum(item["timings"].get("build_or_restore_ms", 0.0) for item in manifest["items"])
        docs = sum(item["stats"].get("docs", 0) for item in manifest["items"])
        runtimes = [r["runtime_ms"] for r in results["records"] if r.get("status") == "ok"]
        rows[label] = {
            "config": results["settings_system"],
            "evaluable": summary["evaluable"]["session"],
            **{f"{level}_recall_any@{k}": metric(summary, level, f"recall_any@{k}")
               for level in ("session", "turn") for k in (5, 10)},
            "ingest_turns_per_s": round(docs / (build_ms / 1000), 1),
            "recall_p50_ms": round(statistics.median(runtimes), 2),
        }
    path = write_bench("systems", {"dataset": str(locomo), "top_k": 50, "rows": rows, "skipped": skipped}, output)
    lines = [f"{'system':<22}{'n':>5}{'sess R@5':>9}{'sess R@10':>10}{'turn R@5':>9}{'turn R@10':>10}"
             f"{'ingest/s':>10}{'p50 ms':>8}"]
    for label, r in rows.items():
        lines.append(f"{label:<22}{r['evaluable']:>5}{r['session_recall_any@5']:>9.3f}{r['session_recall_any@10']:>10.3f}"
                     f"{r['turn_recall_any@5']:>9.3f}{r['turn_recall_any@10']:>10.3f}{r['ingest_turns_per_s']:>10.1f}"
                     f"{r['recall_p50_ms']:>8.2f}")
    lines += [f"skipped {k}: {v}" for k, v in skipped.items()] + [f"wrote {path}"]
    return "\n".join(lines)
