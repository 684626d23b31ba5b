"""`memfarm bench embedders`: what each embedding model costs and buys, side by side.

Per model and backend: texts per second at several token lengths (generated LongMemEval-S turns cut with
the model's own tokenizer), and on a LoCoMo file the session R@5, recall_all@5, nDCG@10 and turn R@10 of
each mode, with the seconds and peak RSS of each `memfarm run` child. Optionally a cold run on a generated
LongMemEval-S file (seconds per question). The cost per 500 cold LongMemEval-S questions is derived from the
speed of the model on texts as generated and the distinct texts a generated full-scale question holds.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from coordinator.benches.common import (fresh_workdir, measure_memfarm, metric, sharing_statistics, shown,
                                       write_bench)

#: The metrics of each mode on the LoCoMo file: (level, name).
QUALITY = (("session", "recall_any@5"), ("session", "recall_all@5"), ("session", "ndcg_any@10"),
           ("turn", "recall_any@10"))


def trimmed_locomo(source: str | Path, conversations: int | None, out: Path) -> Path:
    """The first `conversations` conversations of a LoCoMo file (all of them when None)."""
    if not conversations:
        return Path(source)
    data = json.loads(Path(source).read_text(encoding="utf-8"))[:conversations]
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


def speed(embedder: str, backend: str, texts: list[str], lengths, per_length: int, rounds: int, threads: int,
          workdir: Path) -> dict:
    """Texts per second of one model and backend at each token length, the median of `rounds`."""
    import torch
    from tokenizers import Tokenizer

    from memoria.embedder import LazyEmbedder
    from memoria.model_files import resolve

    torch.set_num_threads(threads)
    model = LazyEmbedder(backend=backend, onnx_dir=workdir / "onnx", threads=threads, embedder=embedder)
    tokenizer = Tokenizer.from_file(str(resolve(embedder).root / "tokenizer.json"))
    tokenizer.no_padding()  # a tokenizer.json may pad and cut every text to a fixed length: count real tokens
    tokenizer.no_truncation()
    encodings = tokenizer.encode_batch(texts)
    buckets = {}
    for length in lengths:
        picked = [tokenizer.decode(e.ids[1:length - 1]) for e in encodings if len(e.ids) >= length][:per_length]
        if picked:
            buckets[f"{length} tokens"] = picked
    buckets["as generated"] = texts[:per_length]
    model.encode(texts[:4])  # loading and first-call setup are not a text's cost
    rates = {}
    for bucket, chunk in buckets.items():
        measured = []
        for _ in range(rounds):
            started = time.perf_counter()
            model.encode(chunk)
            measured.append(len(chunk) / (time.perf_counter() - started))
        tokens = sum(len(e.ids) for e in tokenizer.encode_batch(chunk)) / len(chunk)
        rates[bucket] = {"texts": len(chunk), "mean_tokens": round(tokens, 1),
                         "texts_per_second": round(statistics.median(measured), 2)}
    return {"signature": model.signature, "speed": rates}


def quality(embedder: str, backend: str, locomo: Path, modes, workdir: Path) -> dict:
    """Each mode on the LoCoMo file, one cache per model and backend (each text encoded once for all modes)."""
    rows = {}
    for mode in modes:
        out = workdir / f"locomo_{embedder}_{backend}_{mode}.json"
        seconds, rss = measure_memfarm(["run", "locomo", "--dataset", str(locomo), "--retrieval-mode", mode,
                                        "--embedder", embedder, "--embedder-backend", backend,
                                        "--cache-dir", str(workdir / f"cache_{embedder}_{backend}"),
                                        "--output", str(out)])
        results = json.loads(out.read_text())
        manifest = json.loads(out.with_suffix(".manifest.json").read_text())
        summary = results["metrics"]["all"]
        rows[mode] = {"seconds": round(seconds, 1), "peak_rss_mib": round(rss / 2**20, 1),
                      "evaluable": results["retrieval_evaluable"],
                      **{f"{level}_{name}": metric(summary, level, name) for level, name in QUALITY},
                      "weights_source": (manifest["system"].get("ranking") or {}).get("weights_source")}
    return rows


def cold_longmemeval(embedder: str, backend: str, questions: int, scale: float, workdir: Path) -> dict:
    """A cold `memfarm run` (fusion, fresh cache) on a generated LongMemEval-S file: seconds per question."""
    from coordinator.benches.common import generated_longmemeval

    folder = fresh_workdir(workdir / f"cold_{embedder}_{backend}")
    data = generated_longmemeval(folder, questions, scale, seed=7)
    seconds, rss = measure_memfarm(["run", "longmemeval", "--dataset", str(data), "--embedder", embedder,
                                    "--embedder-backend", backend, "--cache-dir", str(folder / "cache"),
                                    "--output", str(folder / "out.json")])
    return {"questions": questions, "scale": scale, "seconds_per_question": round(seconds / questions, 2),
            "peak_rss_mib": round(rss / 2**20, 1)}


def run_embedders_bench(*, embedders, backends, locomo: str | Path | None, conversations: int | None, modes,
                        lengths, per_length: int, rounds: int, threads: int, longmemeval_questions: int,
                        scale: float, workdir: str | Path, output: str | Path) -> str:
    from adapters.generators.longmemeval_s import iter_questions

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    texts = [f"{turn['role']}: {turn['content']}" for question in iter_questions(2, seed=7, scale=1.0)
             for session in question["haystack_sessions"] for turn in session]
    stats_file = workdir / "full_scale_stats.json"  # what one full-scale question holds, no model needed
    from coordinator.benches.common import generated_longmemeval

    per_question = sharing_statistics(generated_longmemeval(workdir, 4, 1.0, seed=7))["distinct_texts"] / 4
    stats_file.write_text(json.dumps({"distinct_texts_per_question": per_question}))
    dataset = trimmed_locomo(locomo, conversations, workdir / "locomo.json") if locomo else None
    rows = []
    for embedder in embedders:
        for backend in backends:
            row = {"embedder": embedder, "backend": backend,
                   **speed(embedder, backend, texts, lengths, per_length, rounds, threads, workdir)}
            generated = row["speed"]["as generated"]["texts_per_second"]
            hours = 500 * per_question / generated / 3600
            row["cost_500_longmemeval_s_questions"] = {
                "machine_hours_one_2_core_machine": round(hours, 2),
                "how": f"500 x {per_question:.0f} distinct texts per generated full-scale question / "
                       f"{generated} texts per second as generated; N machines: divide by N"}
            if dataset:
                row["locomo"] = quality(embedder, backend, dataset, modes, workdir)
            if longmemeval_questions:
                row["longmemeval_cold"] = cold_longmemeval(embedder, backend, longmemeval_questions, scale, workdir)
            rows.append(row)
    data = {"threads": threads, "rounds": rounds, "locomo": str(locomo) if locomo else None,
            "conversations": conversations, "modes": list(modes), "rows": rows,
            "distinct_texts_per_full_scale_question": per_question}
    path = write_bench("embedders", data, output)
    return _table(rows, path)


def _table(rows: list[dict], path: Path) -> str:
    buckets = list(rows[0]["speed"]) if rows else []
    lines = [f"{'model':<8}{'backend':<11}" + "".join(f"{b + ' t/s':>18}" for b in buckets) + f"{'h/500q':>9}"]
    for row in rows:
        lines.append(f"{row['embedder'][:8]:<8}{row['backend']:<11}"
                     + "".join(f"{row['speed'][b]['texts_per_second']:>18.1f}" if b in row["speed"] else f"{'-':>18}"
                               for b in buckets)
                     + f"{row['cost_500_longmemeval_s_questions']['machine_hours_one_2_core_machine']:>9.1f}")
    quality_rows = [(row, mode, r) for row in rows for mode, r in row.get("locomo", {}).items()]
    if quality_rows:
        lines.append(f"{'model':<8}{'backend':<11}{'mode':<8}{'n':>5}{'sess R@5':>10}{'all@5':>8}{'nDCG@10':>9}"
                     f"{'turn R@10':>10}{'seconds':>9}{'RSS MiB':>9}")
        for row, mode, r in quality_rows:
            lines.append(f"{row['embedder'][:8]:<8}{row['backend']:<11}{mode:<8}{r['evaluable']:>5}"
                         f"{shown(r['session_recall_any@5']):>10.3f}{shown(r['session_recall_all@5']):>8.3f}"
                         f"{shown(r['session_ndcg_any@10']):>9.3f}{shown(r['turn_recall_any@10']):>10.3f}{r['seconds']:>9.1f}"
                         f"{r['peak_rss_mib']:>9.0f}")
    for row in rows:
        if "longmemeval_cold" in row:
            cold = row["longmemeval_cold"]
            lines.append(f"{row['embedder']} {row['backend']}: cold LongMemEval-S {cold['seconds_per_question']} s per "
                         f"question ({cold['questions']} questions, scale {cold['scale']}), peak RSS "
                         f"{cold['peak_rss_mib']:.0f} MiB")
    lines.append(f"h/500q: machine-hours for 500 cold full-scale LongMemEval-S questions on one machine at these "
                 f"threads (N machines: /N); wrote {path}")
    return "\n".join(lines)
