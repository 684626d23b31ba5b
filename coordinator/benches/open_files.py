"""`memfarm bench open-files`: one long local run under a small limit on open files, with the process's open
files counted after every item, so a system that keeps a finished item's store open shows it as a slope (and a run
that runs out of handles fails the bench instead of reporting a rate).

The run is a child process (`python -m coordinator.benches.open_files`) whose soft RLIMIT_NOFILE is set before
anything is imported, so the limit binds the system's own code (SQLite, ChromaDB's Rust core) as a user's
`ulimit -n` would, and leaves the parent's alone. The child writes one trace: per item its status and the number of
entries in /proc/self/fd once the item is done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from coordinator.benches.common import fresh_workdir, generated_longmemeval, write_bench


def run_open_files_bench(system: str, *, questions: int = 100, scale: float = 0.05, nofile: int = 256,
                         workdir: str | Path = "cache/bench_open_files",
                         output: str | Path = "results/bench/open_files.json") -> str:
    """Run `system` over a generated LongMemEval-S file of `questions` questions with at most `nofile` open files;
    write the per-item counts and return the printed table."""
    workdir = fresh_workdir(workdir)
    dataset = generated_longmemeval(workdir, questions, scale, seed=7)
    trace_path = workdir / "trace.json"
    child = subprocess.run([sys.executable, "-m", __name__, str(dataset), system, str(nofile), str(trace_path)],
                           capture_output=True, text=True)
    if child.returncode != 0 or not trace_path.exists():
        raise RuntimeError(f"the run under `ulimit -n {nofile}` ended with exit {child.returncode} before its trace "
                           f"was written:\n{child.stderr[-2000:]}")
    trace = json.loads(trace_path.read_text())
    counts = trace["open_files"]
    quarter = max(1, len(counts) // 4)
    summary = {"items": len(counts), "ok": trace["statuses"].count("ok"),
               "failed": len(counts) - trace["statuses"].count("ok"), "complete": trace["complete"],
               "open_files_first_quarter_max": max(counts[:quarter]), "open_files_last_quarter_max": max(counts[-quarter:]),
               "open_files_max": max(counts), "open_files_before": trace["open_files_before"]}
    data = {"system": system, "questions": questions, "scale": scale, "nofile": nofile, **summary,
            "open_files_per_item": counts, "failures": trace["failures"][:20]}
    path = write_bench("open_files", data, output)
    lines = [f"{system} on {questions} generated LongMemEval-S questions under ulimit -n {nofile}",
             f"{'items':>6} {'ok':>5} {'failed':>7} {'fds before':>11} {'first 1/4 max':>14} {'last 1/4 max':>13}",
             f"{summary['items']:>6} {summary['ok']:>5} {summary['failed']:>7} {summary['open_files_before']:>11} "
             f"{summary['open_files_first_quarter_max']:>14} {summary['open_files_last_quarter_max']:>13}",
             f"wrote {path}"]
    return "\n".join(lines)


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def _child(dataset: str, system: str, nofile: int, trace_path: str) -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))
    from adapters.files import write_json
    from coordinator.running.local_executor import run_local
    from coordinator.running.spec import RunSpec

    trace = {"open_files_before": _open_files(), "open_files": [], "statuses": [], "failures": []}

    def after_item(outcome: dict) -> None:
        trace["open_files"].append(_open_files())
        failed = [r for r in outcome["records"] if r.get("status") != "ok"]
        trace["statuses"].append("failed" if failed else "ok")
        if failed:
            trace["failures"].append({"item": outcome["item_id"], "error": str(failed[0].get("error"))[:300]})

    results, _ = run_local(RunSpec(benchmark="longmemeval", dataset=dataset, system=system), on_item=after_item)
    trace["complete"] = bool(results.get("complete"))
    write_json(trace_path, trace)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
