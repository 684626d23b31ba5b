"""`memfarm bench fleet-rate`: a whole generated LongMemEval-S file through the farm, as a fleet of one-core
machines would run it, and one worker alone on a slice of it; questions per core-hour beside the peer's
published rate. (`make bench-fleet` is another thing: a fault campaign on simulated machines.)

The fleet in small: one worker per core of this machine, each with one model thread, its own cache and its own
embedding store (each a one-core machine of the fleet), behind a Redis server the bench starts. Each mode runs
cold on workers started for it, so no mode reads what another encoded. One worker alone then runs the first
questions of the same file, cold, in each mode: what one machine of the fleet does by itself. A rate is the
questions over the run's wall seconds and the cores the workers had; the peer's is `coldrun.PEER_RATE`.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections import Counter
from pathlib import Path

from adapters.errors import MemfarmError
from coordinator.benches.coldrun import MODES, PEER_RATE
from coordinator.benches.common import fresh_workdir, measure_memfarm, start_workers, stop_workers, write_bench
from coordinator.benches.common import generated_longmemeval, question_files, sharing_statistics
from coordinator.running.reducer import git_commit


#: The generator's seed for the file every run reads (written into the bench's file).
SEED = 29


def _run(broker: str, workdir: Path, tag: str, workers: int, cores: int, mode: str, data: Path, companion: Path,
         scale: float) -> dict:
    """`data` in `mode` through `workers` fresh one-thread workers on `cores` cores: wall seconds, what was
    answered, rates, session recall; a run that failed is a row that says so, with no rate."""
    out = workdir / f"{tag}.json"
    row = {"mode": mode, "workers": workers, "cores": cores, "torch_threads": 1}
    running: list = []
    try:
        running = start_workers(broker, workdir, tag, workers, 1)
        row["load_before"] = [round(x, 2) for x in os.getloadavg()]
        seconds, _ = measure_memfarm(["run", "longmemeval", "--dataset", str(data), "--questions", str(companion),
                                      *MODES[mode], "--rebuild-cache", "--output", str(out)], broker, written=out)
        results = json.loads(out.read_text(encoding="utf-8"))
        manifest = json.loads(out.with_name(out.stem + ".manifest.json").read_text(encoding="utf-8"))
    except (MemfarmError, RuntimeError, OSError, ValueError) as error:
        return {**row, "error": str(error)[-500:] or type(error).__name__, "questions_per_core_hour": None, "x_peer_rate": None}
    finally:
        stop_workers(running)
    by_worker = Counter(str(item.get("worker", "?")).split("@")[0] for item in manifest.get("items", []))
    session = (results.get("metrics") or {}).get("all", {}).get("session", {})
    failures = results.get("failures") or {}
    answered = (results.get("question_count") or 0) - int(failures.get("questions", 0))
    # full-scale questions per core-hour, cost taken as linear in haystack size (as bench coldrun does)
    rate = answered * 3600 * scale / seconds / cores if seconds > 0 and answered > 0 else None
    return {**row, "questions": results.get("question_count"), "answered": answered,
            "complete": results.get("complete"), "failed_items": int(failures.get("items", 0)),
            "wall_s": round(seconds, 1), "items_by_worker": dict(sorted(by_worker.items())),
            "code_commit": manifest.get("commit"),
            "questions_per_core_hour": round(rate) if rate else None,
            "questions_per_hour_all_workers": round(rate * cores) if rate else None,
            "x_peer_rate": round(rate / PEER_RATE["questions_per_core_hour"], 2) if rate else None,
            **{f"session_{k}": round(session[k], 4) if k in session else None
               for k in ("recall_any@5", "recall_all@5")}}


def run_fleet_bench(questions: int, scale: float, one_worker_questions: int, modes=("fusion", "full"),
                    workers: int | None = None, workdir: str | Path = "cache/bench_fleet_rate",
                    output: str | Path = "results/bench/fleet_rate.json", progress=None) -> str:
    """The file through `workers` one-thread workers (default: one per core), then its first
    `one_worker_questions` through one worker, each mode cold; writes `output`, with what ran, even where a run
    failed."""
    from adapters.benchmarks.longmemeval.reader import extract_questions
    from coordinator.operations.processes import free_port, start_redis

    modes = tuple(dict.fromkeys(modes))  # a mode twice would run warm on its own first run's caches
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ValueError(f"bench fleet-rate: unknown mode(s) {', '.join(unknown) or '(none given)'} "
                         f"(known: {', '.join(MODES)})")
    cores = len(os.sched_getaffinity(0))
    workers = workers or cores
    started_at = git_commit()  # the tree may move while the bench runs
    workdir = fresh_workdir(workdir)
    data, companion = generated_longmemeval(workdir, questions, scale, SEED), workdir / "data_q.json"
    extract_questions(data, companion)
    sharing = sharing_statistics(data)
    first = min(one_worker_questions, questions)
    alone = question_files(data, workdir, f"first_{first}", first, limit=first)[0] if first else None
    rows, started, redis_proc = [], time.perf_counter(), None
    try:  # `memfarm bench` turns SIGTERM into an exit, so these blocks stop what the bench started
        port, password = free_port(), secrets.token_urlsafe(12)
        redis_proc = start_redis(workdir / "redis", port, password, workdir / "redis.log")
        broker = f"redis://:{password}@127.0.0.1:{port}/0"
        for mode in modes:
            runs = [("fleet", f"fleet_{mode}", workers, (data, companion))]
            runs += [("one worker", f"one_{mode}", 1, alone)] if alone else []
            for name, tag, count, (path, asked) in runs:
                # more workers than cores share them
                rows.append({"run": name, **_run(broker, workdir, tag, count, min(count, cores), mode, path, asked,
                                                 scale)})
                if progress:
                    progress(_line(rows[-1]))
    finally:
        if redis_proc is not None:
            redis_proc.stop()
    data_out = {"questions": questions, "scale": scale, "seed": SEED, "one_worker_questions": one_worker_questions,
                "workers": workers, "cores": cores, "sharing": sharing, "rows": rows,
                "peer_rate": PEER_RATE, "bench_seconds": round(time.perf_counter() - started, 1),
                "rates": "questions_per_core_hour: the questions answered, times scale (cost taken as linear in "
                         "haystack size), * 3600 / (the run's wall seconds * the cores its workers had, one "
                         "worker per core with one model thread); questions_per_hour_all_workers: the same for all "
                         "the run's workers together; x_peer_rate: per core-hour over peer_rate's",
                "seconds": "wall seconds of the whole `memfarm run` through the broker (its start, the items' "
                           "reading, encoding and questions, the reduce); the workers were started and ready "
                           "beforehand, and each loads its model on its first item, inside these seconds; every "
                           "run cold: fresh workers, fresh caches, fresh stores"}
    path = write_bench("fleet_rate", data_out, output, started_at)
    return table(rows) + f"\nwrote {path}"


def _line(r: dict) -> str:
    if r.get("error"):
        return f"{r['run']:<12}{r['mode']:<8}{r['workers']:>8}  FAILED: {(r['error'].splitlines() or ['?'])[-1]}"
    return (f"{r['run']:<12}{r['mode']:<8}{r['workers']:>8}{r['answered']:>10}{r['wall_s']:>9.1f}"
            f"{r['questions_per_core_hour'] or 0:>10}{r['questions_per_hour_all_workers'] or 0:>10}"
            f"{r['x_peer_rate'] or 0:>8.2f}{r['session_recall_any@5'] or 0:>8.3f}"
            f"{'' if r['complete'] else '  INCOMPLETE':>12}")


def table(rows: list[dict]) -> str:
    """The runs, one line each, with the peer's rate below."""
    head = (f"{'run':<12}{'mode':<8}{'workers':>8}{'answered':>10}{'wall s':>9}{'q/core-h':>10}{'q/h all':>10}"
            f"{'x peer':>8}{'R@5 any':>8}")
    peer = (f"peer: {PEER_RATE['system']} {PEER_RATE['questions_per_core_hour']} q/core-h "
            f"({PEER_RATE['questions']} in {PEER_RATE['seconds']} s on {PEER_RATE['cores']} cores)")
    return "\n".join([head, *(_line(r) for r in rows), peer])
