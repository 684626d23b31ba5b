"""`memfarm bench longmemeval-m`: the full LongMemEval-M run, measured on a generated stand-in.

Four parts. (1) A full-size M file (500 questions, about 476 sessions each) generated as a stream: seconds,
size and the generator's peak RSS. (2) `memfarm submit` of that file: seconds, the coordinator's peak RSS,
session occurrences against sessions stored once, and Redis's memory after staging. (3) A few full-size M
questions run cold with MiniLM: one process evaluating one question (peak RSS, default and `full` mode, the
per-item cache it writes), then farm runs on 1 worker and on N, where texts encoded by the fleet over distinct
texts is measured before (each worker its own store) and after (vectors shared through Redis, with claims), at
S's measured sharing and at a higher one. (4) A projection for 500 questions on 1, 8 and 32 two-core machines,
with what it assumes.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from adapters.defaults import EMBEDDING_STORE_FILE
from coordinator.benches.common import (fresh_workdir, measure_memfarm, redis_used_memory, sharing_statistics,
                                        start_workers, stop_workers, write_bench)

MIB = 2**20
#: The fleet's variants, in the order they run: (label, run options, claims on).
VARIANTS = (("each worker its own store (before)", [], True),
            ("shared vectors, no claims", ["--shared-embeddings"], False),
            ("shared vectors with claims (after)", ["--shared-embeddings"], True))


def _generate(workdir: Path, questions: int, sessions: int, share: float, seed: int, name: str) -> tuple[Path, dict]:
    path = workdir / name
    seconds, rss = measure_memfarm(["synth", "longmemeval", "--shape", "m", "--questions", str(questions),
                                    "--sessions", str(sessions), "--distinct-share", str(share), "--seed", str(seed),
                                    "--output", str(path)])
    return path, {"questions": questions, "sessions_per_question": sessions, "distinct_share_asked": share,
                  "seconds": round(seconds, 1), "peak_rss_mib": round(rss / MIB, 1),
                  "file_mib": round(path.stat().st_size / MIB, 1)}


def _staging(workdir: Path, data: Path) -> dict:
    from coordinator.operations.doctor import dataset_check
    from coordinator.operations.processes import free_port, start_redis
    from coordinator.running.run_ledger import RunLedger, connect

    started = time.perf_counter()
    check = dataset_check(data)
    doctor_seconds = time.perf_counter() - started
    port = free_port()
    redis_proc = start_redis(workdir / "redis_staging", port, None, workdir / "redis_staging.log")
    url = f"redis://127.0.0.1:{port}/0"
    try:
        empty = redis_used_memory(url)
        seconds, rss = measure_memfarm(["submit", "longmemeval", "--dataset", str(data), "--run-id", "m-staging"], url)
        staged = redis_used_memory(url)
        stats = RunLedger(connect(url)).meta("m-staging")["staging"]
    finally:
        redis_proc.stop()
    return {"submit_seconds": round(seconds, 1), "submit_peak_rss_mib": round(rss / MIB, 1),
            "target_peak_rss_mib": 400, "redis_mib_after_staging": round((staged - empty) / MIB, 1),
            "session_occurrences": stats["session_occurrences"], "sessions_stored": stats["sessions_stored"],
            "staged_mib": {"sessions": round(stats["session_bytes"] / MIB, 1),
                           "items": round(stats["item_bytes"] / MIB, 1)},
            "doctor_dataset": {"seconds": round(doctor_seconds, 2), "status": check.status, "detail": check.detail}}


def _one_question(workdir: Path, data: Path, companion: Path) -> dict:
    """One process evaluating one full-size M question cold (what a worker does with an item), in the default
    mode and in `full` mode, each from nothing: the per-item cache entry and the embedding store it leaves."""
    rows = {}
    for mode in ("fusion", "full"):
        cache = workdir / f"one_cache_{mode}"
        seconds, rss = measure_memfarm(["run", "longmemeval", "--dataset", str(data), "--questions", str(companion),
                                        "--limit", "1", "--retrieval-mode", mode, "--cache-dir", str(cache),
                                        "--output", str(workdir / f"one_{mode}.json")])
        manifest = json.loads((workdir / f"one_{mode}.manifest.json").read_text())
        store = cache / EMBEDDING_STORE_FILE
        entries = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file() and not f.name.startswith(store.name))
        rows[mode] = {"seconds": round(seconds, 1), "peak_rss_mib": round(rss / MIB, 1),
                      "texts_encoded": manifest["embedding_store"]["texts_encoded"],
                      "item_cache_mib": round(entries / MIB, 1),
                      "embedding_store_mib": round(store.stat().st_size / MIB, 1) if store.exists() else None}
    record = json.loads((workdir / "one_fusion.json").read_text())["records"][0]
    return {"modes": rows, "target_peak_rss_mib": 1536,
            "ranking_depth": (record.get("diagnostics") or {}).get("ranking_depth")}


def _farm_run(workdir: Path, broker: str, data: Path, companion: Path, tag: str, workers: int, options: list,
              claims: bool) -> dict:
    from workers.farm.connection import connect
    from workers.farm.shared_vectors import forget_all

    forget_all(connect(broker))  # every run cold: no vectors from the run before
    os.environ["MEMFARM_SHARED_EMBEDDINGS_CLAIMS"] = "1" if claims else "0"
    running = start_workers(broker, workdir, tag, workers, 1)
    out = workdir / f"{tag}.json"
    try:
        before = redis_used_memory(broker)
        seconds, _ = measure_memfarm(["run", "longmemeval", "--dataset", str(data), "--questions", str(companion),
                                      "--output", str(out), *options], broker)
        added = redis_used_memory(broker) - before
    finally:
        stop_workers(running)
        os.environ.pop("MEMFARM_SHARED_EMBEDDINGS_CLAIMS", None)
    manifest = json.loads((workdir / f"{tag}.manifest.json").read_text())
    store = manifest["embedding_store"]
    questions = len(json.loads(out.read_text())["records"])
    return {"workers": workers, "seconds": round(seconds, 1), "seconds_per_question": round(seconds / questions, 1),
            "texts_encoded": store["texts_encoded"], "texts_from_shared": store.get("texts_from_shared", 0),
            "redis_mib_added": round(added / MIB, 1), "phases_ms": manifest.get("phases_ms"),
            "metrics": json.loads(out.read_text())["metrics"]["all"]}


def _fleet(workdir: Path, data: Path, workers: int, label: str, variants) -> dict:
    """The same small M file cold on 1 worker, then on `workers` under each variant."""
    import secrets

    from adapters.benchmarks.longmemeval.reader import extract_questions
    from coordinator.operations.processes import free_port, start_redis

    companion = data.with_suffix(".questions.json")
    extract_questions(data, companion)
    port, password = free_port(), secrets.token_urlsafe(12)
    redis_proc = start_redis(workdir / f"redis_{label}", port, password, workdir / f"redis_{label}.log")
    broker = f"redis://:{password}@127.0.0.1:{port}/0"
    try:
        one = _farm_run(workdir, broker, data, companion, f"{label}_one", 1, ["--shared-embeddings"], True)
        rows = [{"variant": name, **_farm_run(workdir, broker, data, companion, f"{label}_{n}", workers, options,
                                              claims)} for n, (name, options, claims) in enumerate(variants)]
    finally:
        redis_proc.stop()
    distinct = one["texts_encoded"]  # one worker with a fresh store encodes each distinct text once
    reference = one["metrics"]
    for row in [one, *rows]:
        row["encoded_over_distinct"] = round(row["texts_encoded"] / distinct, 3)
        row["same_metrics_as_one_worker"] = row.pop("metrics") == reference
    return {"file": sharing_statistics(data), "distinct_texts": distinct, "one_worker": one, "fleet": rows}


def _projection(one: dict, questions: int, ratio: float, full: dict, small_sessions: int) -> dict:
    """Hours for 500 questions on 1, 8 and 32 two-core machines, from the measured cold work."""
    phases = one["phases_ms"] or {}
    encode_s = phases.get("encode_ms", 0) / 1000
    per_text = encode_s / max(1, one["texts_encoded"])
    other_per_question = (sum(phases.values()) / 1000 - encode_s) / questions
    texts_per_session = one["texts_encoded"] / max(1, small_sessions)
    distinct_full = full["sessions_stored"] * texts_per_session
    work = ratio * distinct_full * per_text + 500 * other_per_question  # one-thread worker seconds
    hours = {n: round(work / (2 * n) / 3600, 2) for n in (1, 8, 32)}
    return {"hours": hours, "distinct_texts_full_file": round(distinct_full),
            "shared_vectors_gib_needed": round(distinct_full * 1.7e3 / 2**30, 2),
            "seconds_per_text_encoded": round(per_text, 5), "other_seconds_per_question": round(other_per_question, 1),
            "assumes": "two one-thread workers per two-core machine, each as fast as one worker here; the fleet "
                       "encodes the full file's distinct texts times the ratio measured on the small file (claims "
                       "keep it near 1 whatever the fleet size, while the shared vectors fit Redis: raise "
                       "MEMFARM_SHARED_EMBEDDINGS_MIB to the figure above); distinct texts of the full file = its "
                       "distinct sessions (staging) times texts per distinct session of the small file; other work "
                       "per question as measured; items spread evenly, no farm overhead"}


def run_longmemeval_m_bench(questions: int, cold_questions: int, workers: int, shares: list[float], workdir,
                            output, no_claims_variant: bool = True, sessions: int | None = None,
                            cold_sessions: int | None = None) -> str:
    from adapters.benchmarks.longmemeval.reader import extract_questions
    from adapters.generators.longmemeval_s import DISTINCT_SESSION_SHARE
    from adapters.generators.longmemeval_m import SESSIONS_PER_QUESTION

    full_size = sessions or SESSIONS_PER_QUESTION
    fleet_size = cold_sessions or full_size
    workdir = fresh_workdir(workdir)
    big, generation = _generate(workdir, questions, full_size, DISTINCT_SESSION_SHARE, 31, "m_full.json")
    staging = _staging(workdir, big)
    big.unlink()  # 2.6 GB: the rest of the bench reads small files
    one_file, _ = _generate(workdir, 1, full_size, DISTINCT_SESSION_SHARE, 33, "m_one.json")
    companion = workdir / "m_one.questions.json"
    extract_questions(one_file, companion)
    one_question = _one_question(workdir, one_file, companion)
    variants = [v for v in VARIANTS if no_claims_variant or v[1] == [] or v[2]]
    sharing = {}
    for share in shares:
        small, made = _generate(workdir, cold_questions, fleet_size, share, 32, f"m_{share}.json")
        sharing[str(share)] = {"generation": made, **_fleet(workdir, small, workers, f"share{share}", variants)}
    first = sharing[str(shares[0])]
    after = first["fleet"][-1]
    result = {"questions": questions, "generation": generation, "staging": staging, "one_question": one_question,
              "cold_questions": cold_questions, "cold_sessions_per_question": fleet_size, "workers": workers,
              "threads_per_worker": 1, "by_sharing": sharing,
              "projection": _projection(first["one_worker"], cold_questions, after["encoded_over_distinct"], staging,
                                        first["file"]["distinct_sessions"]),
              "note": "distinct texts = texts encoded by one worker with a fresh store (turns, turn windows and "
                      "questions, each distinct text once); every farm run is cold: fresh workers, caches, stores "
                      "and no shared vectors; the workers share this machine's cores, with whatever else runs on it"}
    path = write_bench("longmemeval_m", result, output)
    return _table(result, path)


def _table(r: dict, path) -> str:
    g, s, o = r["generation"], r["staging"], r["one_question"]["modes"]
    lines = [f"generated {g['questions']} M questions ({g['file_mib']:.0f} MiB) in {g['seconds']:.0f}s, "
             f"peak RSS {g['peak_rss_mib']:.0f} MiB",
             f"memfarm submit: {s['submit_seconds']:.0f}s, peak RSS {s['submit_peak_rss_mib']:.0f} MiB (target <= 400); "
             f"{s['session_occurrences']} session occurrences stored as {s['sessions_stored']}; Redis "
             f"{s['redis_mib_after_staging']:.0f} MiB after staging",
             "one M question cold in one process: " + "; ".join(
                 f"{m} {v['seconds']:.0f}s, peak RSS {v['peak_rss_mib']:.0f} MiB, item cache {v['item_cache_mib']:.0f} MiB"
                 for m, v in o.items()),
             f"{r['cold_questions']} questions of {r['cold_sessions_per_question']} sessions, cold:",
             f"{'sharing':<9}{'run':<38}{'workers':>8}{'s/question':>11}{'encoded':>9}{'/distinct':>10}{'Redis MiB':>10}"]
    for share, block in r["by_sharing"].items():
        for row in [{"variant": "one worker", **block["one_worker"]}, *block["fleet"]]:
            lines.append(f"{share:<9}{row['variant']:<38}{row['workers']:>8}{row['seconds_per_question']:>11.1f}"
                         f"{row['texts_encoded']:>9}{row['encoded_over_distinct']:>10.3f}{row['redis_mib_added']:>10.1f}")
    p = r["projection"]
    lines.append("500 questions: " + ", ".join(f"{n} machine{'s' if n > 1 else ''} {h} h" for n, h in p["hours"].items())
                 + f" (shared vectors need {p['shared_vectors_gib_needed']} GiB of Redis)")
    lines.append(f"wrote {path}")
    return "\n".join(lines)
