"""`memfarm bench determinism`: the same rankings whoever computes them.

One dataset, system and settings are run many ways: here and on a farm of 1 or 3 workers, with the
embedding store on or off, cold or warm, and with the items in another order. Every question's ranking
(candidate ids in order) and metrics are compared with the first variant's (here, store off, cold); the
share of identical rankings is reported per variant, and each question that differs is listed with the
reference's score gap between the two candidates that swapped. It runs on a generated LongMemEval-S
file and on a LoCoMo file, and also times the encoder with ordinary batches against canonical ones on
the same texts (the cost of making vectors independent of their batch). It starts its own Redis and
workers.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import subprocess
import sys
import time
from pathlib import Path

from coordinator.benches.common import fresh_workdir, start_workers, stop_workers, write_bench

#: (name, where, store, item order, cache state); `where` is "local" or the number of farm workers.
VARIANTS = (
    ("local, store off, cold", "local", False, "file", "cold"),
    ("local, store on, cold", "local", True, "file", "cold"),
    ("local, store on, warm", "local", True, "file", "warm"),
    ("local, store on, items shuffled", "local", True, "shuffled", "cold"),
    ("farm 1 worker, store on, cold", 1, True, "file", "cold"),
    ("farm 1 worker, store on, warm", 1, True, "file", "warm"),
    ("farm 3 workers, store on, cold", 3, True, "file", "cold"),
    ("farm 3 workers, store off, cold", 3, False, "file", "cold"),
    ("farm 3 workers, store on, items shuffled", 3, True, "shuffled", "cold"),
)


def rankings(results: dict) -> dict[str, dict]:
    """question id -> {"ids": candidate ids best first, "scores": {id: score}, "metrics": ...}."""
    return {r["question_id"]: {"ids": [c["id"] for c in r.get("candidates", [])],
                               "scores": {c["id"]: c["score"] for c in r.get("candidates", [])},
                               "metrics": r.get("metrics")}
            for r in results["records"]}


def differences(reference: dict[str, dict], other: dict[str, dict]) -> list[dict]:
    """Each question whose ranking or metrics differ from the reference's, with where and by how much."""
    out = []
    for question, ref in reference.items():
        got = other.get(question)
        if got is None:
            out.append({"question_id": question, "missing": True})
            continue
        if got["ids"] == ref["ids"] and got["metrics"] == ref["metrics"]:
            continue
        position = next((k for k, (a, b) in enumerate(zip(ref["ids"], got["ids"])) if a != b),
                        min(len(ref["ids"]), len(got["ids"])))
        entry = {"question_id": question, "first_differing_rank": position + 1,
                 "metrics_equal": got["metrics"] == ref["metrics"]}
        if position < min(len(ref["ids"]), len(got["ids"])):
            a, b = ref["ids"][position], got["ids"][position]
            entry.update(reference_id=a, other_id=b)
            if b in ref["scores"]:
                entry["score_gap"] = abs(ref["scores"][a] - ref["scores"][b])
        out.append(entry)
    return out


def _shuffled(path: Path, target: Path, seed: int) -> Path:
    items = json.loads(path.read_text(encoding="utf-8"))
    random.Random(seed).shuffle(items)
    target.write_text(json.dumps(items), encoding="utf-8")
    return target


def _memfarm(args: list[str], broker: str | None) -> None:
    env = dict(os.environ, MEMFARM_BROKER=broker) if broker else {k: v for k, v in os.environ.items()
                                                                   if k != "MEMFARM_BROKER"}
    proc = subprocess.run([sys.executable, "-m", "coordinator.cli", *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"memfarm {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")


def _run_variants(benchmark: str, files: dict[str, Path], base: list[str], workdir: Path, broker: str) -> dict:
    """Every variant of one dataset; returns {variant: rankings}."""
    out, running, workers_now = {}, [], None
    try:
        for number, (name, where, store, order, state) in enumerate(VARIANTS):
            args = ["run", benchmark, "--dataset", str(files[order]), *base,
                    "--output", str(workdir / f"v{number}.json"),
                    "--embedding-store" if store else "--no-embedding-store"]
            if where == "local":
                cache = workdir / ("cache_off" if not store else "cache_on" if order == "file" else "cache_shuffled")
                args += ["--cache-dir", str(cache)] + (["--rebuild-cache"] if state == "cold" else [])
                _memfarm(args, None)
            else:
                if workers_now != where:
                    stop_workers(running)
                    running = start_workers(broker, workdir, f"{benchmark}{where}w", where, 1)
                    workers_now = where
                _memfarm(args + (["--rebuild-cache"] if state == "cold" else []), broker)
            results = json.loads((workdir / f"v{number}.json").read_text(encoding="utf-8"))
            if not results.get("complete", True):  # a failed item is no ranking to compare: say why, stop
                error = next((r.get("error") for r in results["records"] if r.get("status") != "ok"), None)
                raise RuntimeError(f"{benchmark}, {name}: the run is incomplete "
                                   f"({results['failures']['items']} items failed; first error: {error})")
            out[name] = rankings(results)
    finally:
        stop_workers(running)
    return out


def _encoding_speed(texts: list[str], rounds: int) -> dict:
    """Texts per second of ordinary (longest-in-batch) padding and of canonical widths, round by round."""
    from memoria.embedder import Embedder

    embedder = Embedder.shared()
    plain = lambda: embedder.model.encode(texts, batch_size=32, normalize_embeddings=True,  # noqa: E731
                                          convert_to_numpy=True, show_progress_bar=False)
    canonical = lambda: embedder.encode(texts, batch_size=32)  # noqa: E731
    embedder.encode(texts[:32])
    seconds = {"ordinary_batches": [], "canonical_batches": []}
    for _ in range(rounds):
        for name, call in (("ordinary_batches", plain), ("canonical_batches", canonical)):
            started = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - started)
    median = {name: sorted(values)[len(values) // 2] for name, values in seconds.items()}
    return {"texts": len(texts), "rounds": rounds,
            "texts_per_second": {name: round(len(texts) / s, 1) for name, s in median.items()},
            "canonical_over_ordinary_seconds": round(median["canonical_batches"] / median["ordinary_batches"], 3)}


def run_determinism_bench(questions: int, scale: float, locomo: str | Path | None, locomo_items: int, mode: str,
                          speed_rounds: int, workdir: str | Path, output) -> str:
    from adapters.benchmarks.longmemeval.reader import extract_questions
    from adapters.generators.longmemeval_s import write
    from coordinator.operations.processes import free_port, start_redis

    workdir = fresh_workdir(workdir)
    datasets = {}
    lme = workdir / "lme"
    lme.mkdir()
    write(lme / "data.json", questions, seed=41, scale=scale)
    extract_questions(lme / "data.json", lme / "questions.json")
    datasets["longmemeval"] = ({"file": lme / "data.json",
                                "shuffled": _shuffled(lme / "data.json", lme / "shuffled.json", 5)},
                               ["--questions", str(lme / "questions.json")], lme)
    texts: list[str] = []
    if locomo:
        folder = workdir / "locomo"
        folder.mkdir()
        conversations = json.loads(Path(locomo).read_text(encoding="utf-8"))[:locomo_items]
        (folder / "data.json").write_text(json.dumps(conversations), encoding="utf-8")
        datasets["locomo"] = ({"file": folder / "data.json",
                               "shuffled": _shuffled(folder / "data.json", folder / "shuffled.json", 5)}, [], folder)
        texts = [t["text"] for c in conversations for key, session in c["conversation"].items()
                 if key.startswith("session_") and isinstance(session, list) for t in session if t.get("text")]
    port, password = free_port(), secrets.token_urlsafe(12)
    redis_proc = start_redis(workdir / "redis", port, password, workdir / "redis.log")
    broker = f"redis://:{password}@127.0.0.1:{port}/0"
    report = {"questions": questions, "scale": scale, "locomo": str(locomo) if locomo else None,
              "locomo_items": locomo_items if locomo else 0, "mode": mode, "datasets": {}}
    try:
        for benchmark, (files, extra, folder) in datasets.items():
            runs = _run_variants(benchmark, files, ["--retrieval-mode", mode, *extra], folder, broker)
            reference_name = VARIANTS[0][0]
            reference = runs[reference_name]
            rows = {}
            for name, ranked in runs.items():
                differing = differences(reference, ranked)
                rows[name] = {"questions": len(reference), "identical": len(reference) - len(differing),
                              "identical_share": round((len(reference) - len(differing)) / max(1, len(reference)), 4),
                              "differing": differing}
            report["datasets"][benchmark] = {"reference": reference_name, "variants": rows}
    finally:
        redis_proc.stop()
    if texts:
        report["encoding_speed"] = _encoding_speed(texts, speed_rounds)
    path = write_bench("determinism", report, output)
    return _table(report, path)


def _table(report: dict, path: Path) -> str:
    lines = [f"mode {report['mode']}; each variant against the first (local, store off, cold)"]
    for benchmark, block in report["datasets"].items():
        lines.append(f"{benchmark}:")
        lines.append(f"  {'variant':<42} {'identical':>12} {'share':>7}")
        for name, row in block["variants"].items():
            lines.append(f"  {name:<42} {row['identical']:>5} of {row['questions']:<4} {row['identical_share']:>7.3f}")
            for entry in row["differing"][:10]:
                gap = entry.get("score_gap")
                lines.append(f"      differs: {entry['question_id']} from rank {entry.get('first_differing_rank')}"
                             + (f", score gap {gap:.3g}" if gap is not None else ""))
    speed = report.get("encoding_speed")
    if speed:
        rate = speed["texts_per_second"]
        lines.append(f"encoding {speed['texts']} LoCoMo turns (median of {speed['rounds']} rounds): ordinary batches "
                     f"{rate['ordinary_batches']} texts/s, canonical batches {rate['canonical_batches']} texts/s "
                     f"(time ratio {speed['canonical_over_ordinary_seconds']})")
    lines.append(f"wrote {path}")
    return "\n".join(lines)
