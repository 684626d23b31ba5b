"""Benchmarks of the product itself; each writes JSON under results/bench/ and returns a table.

Whatever a bench evaluates goes through the same paths as a user's run (the
`memfarm` command, or the local executor and the reducer), so each of its
results files has a manifest beside it.
"""

from __future__ import annotations

import json
import platform
import shutil
import statistics
import time
from dataclasses import replace
from pathlib import Path

from adapters.errors import MemfarmError
from adapters.percentile import percentile
from coordinator.running.reducer import git_commit, summarize


def sample_turns(count: int, seed: int = 11) -> list[str]:
    """LongMemEval-like turns: short user turns mixed with long assistant turns."""
    from adapters.longmemeval_synth import iter_questions

    texts = []
    for question in iter_questions(max(2, count // 400 + 2), seed=seed, scale=1.0):
        for session in question["haystack_sessions"]:
            texts += [t["content"] for t in session if t["content"].strip() and len(t["content"]) < 8000]
        if len(texts) >= count:
            break
    return texts[:count]


def write_bench(name: str, data: dict, output: str | Path) -> Path:
    data = {"benchmark": name, "commit": git_commit(), "machine": platform.platform(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **data}
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return output


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


def _peak_rss_of(args: list[str]) -> tuple[float, int]:
    """Peak RSS of one `memfarm` child, measured by a fresh wrapper process."""
    import subprocess
    import sys

    code = ("import resource,subprocess,sys,time;t=time.perf_counter();"
            "p=subprocess.run([sys.executable,'-m','coordinator.cli',*sys.argv[1:]],capture_output=True);"
            "sys.exit(p.returncode) if p.returncode else None;"
            "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024)")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"memfarm {' '.join(args)} failed (exit {proc.returncode})")
    seconds, rss = proc.stdout.split()
    return float(seconds), int(rss)


def run_longmemeval_bench(questions: int, scale: float, rss_questions: int, workdir: str | Path, output) -> str:
    """Cold vs warm seconds per question on a generated file, and peak RSS against file size."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    from adapters.longmemeval import extract_questions
    from adapters.longmemeval_synth import write

    data, companion, cache = workdir / "bench.json", workdir / "bench_q.json", workdir / "cache"
    write(data, questions, seed=17, scale=scale)
    extract_questions(data, companion)
    base = ["run", "longmemeval", "--dataset", str(data), "--questions", str(companion), "--cache-dir", str(cache)]
    # cold: every item built and every text encoded (the embedding store is `bench coldrun`'s subject)
    cold_s, cold_rss = _peak_rss_of(base + ["--rebuild-cache", "--no-embedding-store",
                                            "--output", str(workdir / "cold.json")])
    warm_s, warm_rss = _peak_rss_of(base + ["--output", str(workdir / "warm.json")])
    warm_manifest = json.loads((workdir / "warm.manifest.json").read_text())
    cold_records = json.loads((workdir / "cold.json").read_text())["records"]
    warm_records = json.loads((workdir / "warm.json").read_text())["records"]
    same = [r["metrics"] for r in cold_records] == [r["metrics"] for r in warm_records]

    # Memory must not grow with the file: the same 5 items out of a small and a large file.
    rss = {}
    for n in (max(10, rss_questions // 10), rss_questions):
        path = workdir / f"rss_{n}.json"
        write(path, n, seed=23, scale=scale)
        _, peak = _peak_rss_of(["run", "longmemeval", "--dataset", str(path), "--limit", "5",
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


def run_locomo_bench(dataset: str | Path, workdir: str | Path, output) -> str:
    """Every mode on one LoCoMo file, one shared cache, side by side."""
    from memoria.defaults import MODE_SOURCES

    workdir = Path(workdir)
    rows = {}
    for mode in MODE_SOURCES:
        out = workdir / f"locomo_{mode}.json"
        seconds, _ = _peak_rss_of(["run", "locomo", "--dataset", str(dataset), "--retrieval-mode", mode,
                                   "--cache-dir", str(workdir / "cache"), "--output", str(out)])
        results = json.loads(out.read_text())
        summary = results["metrics"]["all"]
        rows[mode] = {
            "seconds": round(seconds, 1),
            "evaluable": results["retrieval_evaluable"],
            "session_recall_any@5": round(summary["session"]["recall_any@5"], 4),
            "session_recall_any@10": round(summary["session"]["recall_any@10"], 4),
            "turn_recall_any@5": round(summary["turn"]["recall_any@5"], 4),
            "turn_recall_any@10": round(summary["turn"]["recall_any@10"], 4),
            "session_ndcg_any@10": round(summary["session"]["ndcg_any@10"], 4),
            "by_category_turn_recall_any@10": {k: round(v["turn"]["recall_any@10"], 4)
                                               for k, v in results["metrics"]["by_question_type"].items()},
        }
    path = write_bench("locomo", {"dataset": str(dataset), "modes": rows,
                                  "quality_bar": {"fusion_session_recall_any@5": 0.80, "fusion_turn_recall_any@10": 0.58}},
                       output)
    lines = [f"{'mode':<8}{'n':>5}{'sess R@5':>10}{'sess R@10':>10}{'turn R@5':>10}{'turn R@10':>10}{'sess nDCG@10':>13}"]
    for mode, r in rows.items():
        lines.append(f"{mode:<8}{r['evaluable']:>5}{r['session_recall_any@5']:>10.3f}{r['session_recall_any@10']:>10.3f}"
                     f"{r['turn_recall_any@5']:>10.3f}{r['turn_recall_any@10']:>10.3f}{r['session_ndcg_any@10']:>13.3f}")
    lines.append(f"wrote {path}")
    return "\n".join(lines)


def run_farm_bench(questions: int, scale: float, workdir: str | Path, output) -> str:
    """Farm vs local executor as ratios, 2 workers vs 1, and the broker's per-task overhead."""
    import os
    import secrets
    import signal

    from adapters.longmemeval import extract_questions
    from adapters.longmemeval_synth import write
    from coordinator.operations.processes import free_port, start_redis, start_worker, wait_ready

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

    def start_workers(count: int, threads: int, tag: str) -> None:
        for number in range(count):
            log = workdir / f"{tag}{number}.log"
            log.write_text("")
            running.append(start_worker(broker, f"{tag}{number}", workdir / f"cache_{tag}{number}", log,
                                        torch_threads=threads))
        wait_ready(running)
        time.sleep(1.0)  # pool processes load the model right after ready

    def stop_workers() -> None:
        for proc in running:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        running.clear()

    def timed(args: list[str]) -> float:
        seconds, _ = _peak_rss_of(args)
        return seconds

    try:
        local_cache = str(workdir / "cache_local")
        local_cold = timed(base + ["--cache-dir", local_cache, "--rebuild-cache", "--output", str(workdir / "l1.json")])
        local_warm = timed(base + ["--cache-dir", local_cache, "--output", str(workdir / "l2.json")])
        start_workers(1, 2, "same")  # the local run uses torch's default 2 threads here
        farm_cold = timed(base + ["--broker", broker, "--rebuild-cache", "--output", str(workdir / "f1.json")])
        farm_warm = timed(base + ["--broker", broker, "--output", str(workdir / "f2.json")])
        stop_workers()
        start_workers(1, 1, "one")
        one_worker = timed(base + ["--broker", broker, "--rebuild-cache", "--output", str(workdir / "o1.json")])
        stop_workers()
        start_workers(2, 1, "two")
        two_workers = timed(base + ["--broker", broker, "--rebuild-cache", "--output", str(workdir / "t1.json")])
        stop_workers()
    finally:
        stop_workers()
        redis_proc.kill()
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


def _quality_row(spec, workdir: Path, label: str) -> tuple[dict, dict]:
    """Run `spec` here through the reducer; write its results file and manifest under `workdir`."""
    from coordinator.running.local_executor import run_local
    from coordinator.running.reducer import write_results

    results, manifest = run_local(spec)
    name = "".join(c if c.isalnum() else "-" for c in label).strip("-")
    write_results(results, manifest, workdir / f"{spec.benchmark}_{name}.json")
    return results, manifest


def _metric(summary: dict, level: str, name: str) -> float:
    return round((summary.get(level) or {}).get(name, float("nan")), 4)


#: The weight a ranking part that is off by default gets in its ablation row.
ABLATION_TRIAL_WEIGHT = 0.1


def ablation_configs() -> list[tuple[str, str, dict]]:
    """(label, mode, system settings) of each row of the ablation bench: every source and part of `full`
    left out, or switched on at a trial weight where it weighs nothing by default."""
    from memoria.defaults import DEFAULT_WEIGHTS, MODE_SOURCES, QUERY_SWITCHES, RANKING_SWITCHES, SWITCHES

    configs = [("fusion", "fusion", {}), ("full", "full", {})]
    configs += [(f"full - {source}", "full", {"without": (source,)}) for source in MODE_SOURCES["full"]
                if source != "window"]
    for part in ("window",) + RANKING_SWITCHES:  # a part on by default is left out; one off is switched on
        if DEFAULT_WEIGHTS.get(part):
            configs.append((f"full - {part}", "full", {"without": (part,)}))
        else:
            configs.append((f"full + {part} {ABLATION_TRIAL_WEIGHT}", "full",
                            {"weights": {**DEFAULT_WEIGHTS, part: ABLATION_TRIAL_WEIGHT}}))
    configs += [(f"full - {part}", "full", {"without": (part,)}) for part in QUERY_SWITCHES]
    configs += [("full, no MMR", "full", {"mmr_lambda": 1.0}),
                ("full, no new parts", "full", {"without": SWITCHES})]
    return configs


def run_ablation_bench(locomo: str | Path, longmemeval_questions: int, scale: float, workdir: str | Path, output) -> str:
    """fusion, full, full without each source and each ranking part, on LoCoMo and a generated LongMemEval-S file."""
    from adapters.longmemeval import extract_questions
    from adapters.longmemeval_synth import write
    from coordinator.running.spec import RunSpec

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    lme, lme_q = workdir / "ablation_lme.json", workdir / "ablation_lme_q.json"
    if not lme.exists():
        write(lme, longmemeval_questions, seed=101, scale=scale)
        extract_questions(lme, lme_q)
    datasets = {"locomo": RunSpec("locomo", dataset=str(locomo), cache_dir=str(workdir / "cache_locomo")),
                "longmemeval": RunSpec("longmemeval", dataset=str(lme), questions=str(lme_q),
                                       cache_dir=str(workdir / "cache_longmemeval"))}
    configs = ablation_configs()
    table = {}
    for dataset, base in datasets.items():
        table[dataset] = {}
        for label, mode, extra in configs:
            spec = replace(base, retrieval_mode=mode, extra_settings=extra)
            results, _ = _quality_row(spec, workdir, label)
            summary = results["metrics"]["all"]
            runtimes = [r["runtime_ms"] for r in results["records"] if r.get("status") == "ok"]
            table[dataset][label] = {
                "evaluable": summary["evaluable"]["session"],
                "session_recall_any@5": _metric(summary, "session", "recall_any@5"),
                "session_recall_all@5": _metric(summary, "session", "recall_all@5"),
                "turn_recall_any@10": _metric(summary, "turn", "recall_any@10"),
                "session_ndcg_any@10": _metric(summary, "session", "ndcg_any@10"),
                "recall_p50_ms": round(statistics.median(runtimes), 2) if runtimes else None,
            }
    path = write_bench("ablation", {"locomo": str(locomo), "longmemeval": {"questions": longmemeval_questions,
                                                                          "scale": scale, "seed": 101},
                                    "table": table}, output)
    lines = []
    for dataset, rows in table.items():
        lines.append(f"{dataset}  ({next(iter(rows.values()))['evaluable']} evaluable)")
        lines.append(f"  {'configuration':<22}{'sess R@5':>10}{'sess Rall@5':>13}{'turn R@10':>11}"
                     f"{'sess nDCG@10':>14}{'p50 ms':>9}")
        for label, r in rows.items():
            lines.append(f"  {label:<22}{r['session_recall_any@5']:>10.3f}{r['session_recall_all@5']:>13.3f}"
                         f"{r['turn_recall_any@10']:>11.3f}{r['session_ndcg_any@10']:>14.3f}"
                         f"{r['recall_p50_ms'] or float('nan'):>9.1f}")
    lines.append(f"wrote {path}")
    return "\n".join(lines)


def run_systems_bench(locomo: str | Path, output, workdir: str | Path = "cache/bench_systems") -> str:
    """Systems side by side on one LoCoMo file: same docs, same top_k, same scorer."""
    from adapters.errors import SystemUnavailable
    from coordinator.running.spec import RunSpec

    workdir = Path(workdir)
    configs = [("memoria fusion", {"system": "memoria", "retrieval_mode": "fusion"}),
               ("memoria full", {"system": "memoria", "retrieval_mode": "full"}),
               ("adamem full", {"system": "adamem", "ablation": "full"}),
               ("adamem semantic_only", {"system": "adamem", "ablation": "semantic_only"}),
               ("mem0", {"system": "mem0"})]
    rows, skipped = {}, {}
    for label, options in configs:
        try:
            results, manifest = _quality_row(RunSpec("locomo", dataset=str(locomo), **options), workdir, label)
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
            **{f"{level}_recall_any@{k}": _metric(summary, level, f"recall_any@{k}")
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


def sharing_statistics(path: str | Path) -> dict:
    """How much a LongMemEval-S file repeats itself: session occurrences vs distinct ids, turns vs distinct texts."""
    from adapters.jsonstream import iter_array

    occurrences, sessions, turns, texts = 0, set(), 0, set()
    for question in iter_array(path):
        for sid, session in dict(zip(question["haystack_session_ids"], question["haystack_sessions"])).items():
            occurrences += 1
            sessions.add(sid)
            for turn in session:
                if isinstance(turn.get("content"), str) and turn["content"].strip():
                    turns += 1
                    texts.add(turn["content"])
        texts.add(question["question"])
        turns += 1
    return {"session_occurrences": occurrences, "distinct_sessions": len(sessions),
            "texts_given_to_the_model": turns, "distinct_texts": len(texts),
            "real_file": {"session_occurrences": 23867, "distinct_sessions": 19195}}


def _extrapolate(seconds_per_question: float, scale: float) -> dict:
    """500 full-scale questions from a measured cold rate, on 1, 4 and 8 two-core workers."""
    one = 500 * seconds_per_question / scale
    hours = {n: round(one / n / 3600 * 1.01 if n > 1 else one / 3600, 2) for n in (1, 4, 8)}
    return {"hours": hours, "assumes": "cost per question grows linearly with haystack size (scale); this file's "
            "sharing; the farm's 1% overhead (bench farm); independent items spread evenly over workers",
            "text": ", ".join(f"{n} worker{'s' if n > 1 else ''} {h:.2f} h" for n, h in hours.items())}


def backend_quality(locomo: str | Path, workdir: Path) -> dict:
    """Session R@5 and turn R@10 on a LoCoMo file for each embedder backend (fusion, the default mode)."""
    rows = {}
    for backend in ("torch", "onnx", "onnx-int8"):
        out = workdir / f"locomo_{backend}.json"
        seconds, _ = _peak_rss_of(["run", "locomo", "--dataset", str(locomo), "--embedder-backend", backend,
                                   "--cache-dir", str(workdir / f"locomo_cache_{backend}"), "--output", str(out)])
        metrics = json.loads(out.read_text())["metrics"]["all"]
        rows[backend] = {"session_recall_any@5": round(metrics["session"]["recall_any@5"], 4),
                         "turn_recall_any@10": round(metrics["turn"]["recall_any@10"], 4), "seconds": round(seconds, 1)}
    for backend in ("onnx", "onnx-int8"):
        rows[backend]["cost_vs_torch"] = {k: round(rows[backend][k] - rows["torch"][k], 4)
                                          for k in ("session_recall_any@5", "turn_recall_any@10")}
    return {"dataset": str(locomo), "mode": "fusion", "backends": rows}


def _question_slices(data: Path, workdir: Path, rounds: int) -> list[tuple[Path, Path]]:
    """`data` cut into `rounds` files of consecutive questions, each with its companion questions file."""
    from adapters.longmemeval import extract_questions

    questions = json.loads(data.read_text(encoding="utf-8"))
    size = -(-len(questions) // rounds)
    slices = []
    for number in range(rounds):
        part = questions[number * size:(number + 1) * size]
        if not part:
            break
        path, companion = workdir / f"round_{number}.json", workdir / f"round_{number}_q.json"
        path.write_text(json.dumps(part, ensure_ascii=False), encoding="utf-8")
        extract_questions(path, companion)
        slices.append((path, companion))
    return slices


def round_ratios(baseline_seconds: list[float], variant_seconds: list[float]) -> dict:
    """The baseline's time over the variant's in each round, and the median of those ratios.

    The rounds interleave the variants, so one round's ratio compares times taken under the same load; a
    whole-run ratio lets a round that load slowed for one side weigh in with all its seconds, the median
    of the rounds does not."""
    if not baseline_seconds or len(baseline_seconds) != len(variant_seconds):
        raise MemfarmError(f"round ratios need the same rounds on both sides, not {len(baseline_seconds)} "
                           f"baseline and {len(variant_seconds)} variant times")
    ratios = []
    for number, (baseline, variant) in enumerate(zip(baseline_seconds, variant_seconds)):
        if variant <= 0:
            raise MemfarmError(f"round {number}: the variant took {variant} s, so it has no ratio to the baseline")
        ratios.append(baseline / variant)
    return {"per_round": [round(r, 3) for r in ratios], "median": round(statistics.median(ratios), 3)}


def run_coldrun_bench(questions: int, scale: float, workdir: str | Path, output, locomo: str | Path | None = None,
                      rounds: int = 4) -> str:
    """A cold run with and without the embedding store, side by side on one generated file whose sessions
    repeat as often as the real file's; with `locomo`, each backend's quality on that file too."""
    workdir = Path(workdir)
    if workdir.exists():
        shutil.rmtree(workdir)  # cold means cold: no item cache, no store from an earlier bench
    workdir.mkdir(parents=True)
    from adapters.longmemeval import extract_questions
    from adapters.longmemeval_synth import DISTINCT_SESSION_SHARE, write

    data, companion = workdir / "bench.json", workdir / "bench_q.json"
    write(data, questions, seed=29, scale=scale, distinct_share=DISTINCT_SESSION_SHARE)
    extract_questions(data, companion)
    sharing = sharing_statistics(data)
    # the ONNX files are made once per machine: export them first, so that the runs time running, not exporting
    import os

    from memoria.onnx_backend import export

    onnx_dir = workdir / "onnx"
    os.environ["MEMFARM_ONNX_DIR"] = str(onnx_dir)
    started = time.perf_counter()
    export(onnx_dir, "onnx")
    export(onnx_dir, "onnx-int8")
    export_seconds = round(time.perf_counter() - started, 1)
    # Rounds: each variant runs a slice of the questions in turn, so that a change in the machine's load
    # falls on every variant alike; a variant's store lives on across its rounds, as in one long run.
    # Seconds are the items' own (process start and model load are not a question's cost).
    rounds = _question_slices(data, workdir, max(1, min(rounds, questions)))
    setups = (("torch, no store (the old path)", "plain", ["--no-embedding-store"]),
              ("store + torch", "store", []),
              ("store + onnx", "onnx", ["--embedder-backend", "onnx"]),
              ("store + onnx-int8", "int8", ["--embedder-backend", "onnx-int8"]))
    runs = {slug: {"round_ms": [], "rss": 0, "encoded": 0, "records": []} for _, slug, _ in setups}
    for number, (chunk, chunk_questions) in enumerate(rounds):
        for _, slug, extra in setups:
            out = workdir / f"{slug}_{number}.json"
            _, rss = _peak_rss_of(["run", "longmemeval", "--dataset", str(chunk), "--questions", str(chunk_questions),
                                   "--cache-dir", str(workdir / f"cache_{slug}"), *extra, "--output", str(out)])
            manifest = json.loads((workdir / f"{slug}_{number}.manifest.json").read_text())
            run = runs[slug]
            run["round_ms"].append(sum(i["timings"].get("total_ms", 0) + i["stats"].get("parse_ms", 0)
                                       for i in manifest["items"]))
            run["rss"] = max(run["rss"], rss)
            run["encoded"] += manifest["embedding_store"]["texts_encoded"]
            run["records"] += json.loads(out.read_text())["records"]
    variants = []
    for name, slug, _ in setups:
        run = runs[slug]
        session = summarize(run["records"], None)["all"]["session"]
        encoded = sharing["texts_given_to_the_model"] if slug == "plain" else run["encoded"]
        ratios = round_ratios(runs["plain"]["round_ms"], run["round_ms"])
        variants.append({"name": name, "seconds_per_question": round(sum(run["round_ms"]) / 1000 / questions, 3),
                         "seconds_per_round": [round(ms / 1000, 2) for ms in run["round_ms"]],
                         "ratio_to_the_old_path_per_round": ratios["per_round"],
                         "ratio_to_the_old_path_median_of_rounds": ratios["median"],
                         "texts_encoded": encoded, "peak_rss_mib": round(run["rss"] / 2**20, 1),
                         "session_metrics": {k: round(v, 4) for k, v in session.items()}})
    plain, stored, onnx, int8 = variants

    def gap(variant):
        return round(max(abs(plain["session_metrics"][k] - variant["session_metrics"][k])
                         for k in plain["session_metrics"]), 4)

    data_out = {"questions": questions, "scale": scale, "rounds": len(rounds), "sharing": sharing, "variants": variants,
                "seconds": "the items' own time (reading, build or restore, questions), summed over the rounds; "
                           "process start and model load are left out",
                "round_ratios": "the old path's seconds over the variant's in each round (every round runs each "
                                "variant on the same slice, in turn), and their median: a round that a change in "
                                "the machine's load distorted moves the whole-run speedup, hardly the median; the "
                                "rounds are not alike, though: a store filled in the early rounds makes the later "
                                "ones cheaper, so the median is read beside the whole-run speedup, not instead",
                "speedup": round(plain["seconds_per_question"] / onnx["seconds_per_question"], 3),
                "speedup_store_torch": round(plain["seconds_per_question"] / stored["seconds_per_question"], 3),
                "speedup_store_int8": round(plain["seconds_per_question"] / int8["seconds_per_question"], 3),
                "target_speedup": 2.0,
                "largest_session_metric_difference": {"store + torch": gap(stored), "store + onnx": gap(onnx),
                                                      "store + onnx-int8": gap(int8)},
                "extrapolation": _extrapolate(onnx["seconds_per_question"], scale),
                "onnx_export_seconds_once_per_machine": export_seconds}
    if locomo:
        data_out["backend_quality"] = backend_quality(locomo, workdir)
    path = write_bench("coldrun", data_out, output)
    lines = [f"{questions} questions at scale {scale}: {sharing['distinct_sessions']} distinct sessions in "
             f"{sharing['session_occurrences']} occurrences, {sharing['distinct_texts']} distinct texts in "
             f"{sharing['texts_given_to_the_model']} (the real file: 19,195 sessions in 23,867)",
             f"{'variant':<32}{'s/question':>11}{'texts encoded':>15}{'peak RSS MiB':>14}{'sess R@5':>10}"
             f"{'median of rounds':>18}"]
    lines += [f"{v['name']:<32}{v['seconds_per_question']:>11.3f}{v['texts_encoded']:>15}{v['peak_rss_mib']:>14.1f}"
              f"{v['session_metrics']['recall_any@5']:>10.3f}{v['ratio_to_the_old_path_median_of_rounds']:>17.2f}x"
              for v in variants]
    lines.append(f"speedup over the old path, whole run: store + torch {data_out['speedup_store_torch']:.2f}x, "
                 f"store + onnx {data_out['speedup']:.2f}x (target 2.0), store + onnx-int8 "
                 f"{data_out['speedup_store_int8']:.2f}x")
    lines.append("in each round: " + "; ".join(
        f"{v['name']} " + " ".join(f"{r:.2f}x" for r in v["ratio_to_the_old_path_per_round"]) for v in variants[1:]))
    lines.append(f"largest session metric difference from the old path: {data_out['largest_session_metric_difference']}")
    if locomo:
        quality = data_out["backend_quality"]["backends"]
        lines.append(f"{'backend on ' + Path(locomo).name:<32}{'sess R@5':>10}{'turn R@10':>11}{'vs torch':>18}")
        lines += [f"{name:<32}{row['session_recall_any@5']:>10.3f}{row['turn_recall_any@10']:>11.3f}"
                  + (f"{row['cost_vs_torch']['session_recall_any@5']:>+9.3f}"
                     f"{row['cost_vs_torch']['turn_recall_any@10']:>+9.3f}" if "cost_vs_torch" in row else "")
                  for name, row in quality.items()]
    lines.append(f"500 questions at full scale, store + onnx: {data_out['extrapolation']['text']}; wrote {path}")
    return "\n".join(lines)


def length_buckets(texts: list[str], tokenizer, lengths=(16, 64, 128, 256), per_bucket_tokens: int = 20000,
                   natural: int = 300) -> dict[str, list[str]]:
    """The same kind of text at fixed token lengths (each cut to exactly that many tokens, [CLS] and [SEP]
    included), about `per_bucket_tokens` tokens per bucket, and the texts as they come (`natural`)."""
    encodings = tokenizer.encode_batch(texts)
    buckets = {}
    for length in lengths:
        wanted = max(4, per_bucket_tokens // length)
        picked = [tokenizer.decode(e.ids[1:length - 1]) for e in encodings if len(e.ids) >= length][:wanted]
        if picked:
            buckets[f"{length} tokens"] = picked
    buckets["as generated"] = texts[:natural]
    return buckets


def run_encoders_bench(output: str | Path, rounds: int = 3, threads: int = 2, workdir: str | Path = "cache/bench_encoders",
                       per_bucket_tokens: int = 20000) -> str:
    """Texts per second of each embedder backend by text length, the backends interleaved in every round so
    that a change in the machine's load falls on all alike; the median round is reported."""
    import statistics

    import torch

    from adapters.longmemeval_synth import iter_questions
    from memoria.embedder import Embedder
    from memoria.onnx_backend import OnnxEmbedder

    torch.set_num_threads(threads)
    texts = [f"{turn['role']}: {turn['content']}" for question in iter_questions(4, seed=7, scale=1.0)
             for session in question["haystack_sessions"] for turn in session]
    folder = Path(workdir) / "onnx"
    backends = {"torch": Embedder(), "onnx": OnnxEmbedder(folder, "onnx", threads=threads),
                "onnx-int8": OnnxEmbedder(folder, "onnx-int8", threads=threads)}
    tokenizer = backends["onnx"].tokenizer
    buckets = length_buckets(texts, tokenizer, per_bucket_tokens=per_bucket_tokens)
    for embedder in backends.values():
        embedder.encode(texts[:8])  # first-call setup is not a text's cost
    rates = {bucket: {name: [] for name in backends} for bucket in buckets}
    for _ in range(rounds):
        for bucket, chunk in buckets.items():
            for name, embedder in backends.items():
                started = time.perf_counter()
                embedder.encode(chunk)
                rates[bucket][name].append(len(chunk) / (time.perf_counter() - started))
    table = {}
    for bucket, chunk in buckets.items():
        median = {name: statistics.median(values) for name, values in rates[bucket].items()}
        tokens = sum(len(e.ids) for e in tokenizer.encode_batch(chunk)) / len(chunk)
        table[bucket] = {"texts": len(chunk), "mean_tokens": round(tokens, 1),
                         "texts_per_second": {n: round(v, 1) for n, v in median.items()},
                         "speedup_over_torch": {n: round(v / median["torch"], 3) for n, v in median.items()},
                         "rounds": {n: [round(v, 1) for v in values] for n, values in rates[bucket].items()}}
    data = {"threads": threads, "rounds": rounds, "buckets": table,
            "texts": "generated LongMemEval-S turns ('role: content'), cut to each length with the model's tokenizer"}
    path = write_bench("encoders", data, output)
    names = list(backends)
    lines = [f"{'texts':<16}{'tokens':>8}" + "".join(f"{n + ' texts/s':>18}" for n in names) +
             "".join(f"{n + ' / torch':>18}" for n in names[1:])]
    for bucket, row in table.items():
        lines.append(f"{bucket:<16}{row['mean_tokens']:>8.1f}" +
                     "".join(f"{row['texts_per_second'][n]:>18.1f}" for n in names) +
                     "".join(f"{row['speedup_over_torch'][n]:>17.2f}x" for n in names[1:]))
    lines.append(f"median of {rounds} interleaved rounds, {threads} threads each; wrote {path}")
    return "\n".join(lines)
