"""`memfarm bench coldrun`: a cold LongMemEval-S run with and without the embedding store (torch, onnx,
onnx-int8), in interleaved rounds: seconds per question, texts encoded, peak RSS, the same metrics; and,
given a LoCoMo file, each embedder backend's quality on it."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from adapters.errors import MemfarmError
from coordinator.benches.common import fresh_workdir, measure_memfarm, sharing_statistics, write_bench
from coordinator.running.reducer import summarize


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
        seconds, _ = measure_memfarm(["run", "locomo", "--dataset", str(locomo), "--embedder-backend", backend,
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
    workdir = fresh_workdir(workdir)  # cold means cold: no item cache, no store from an earlier bench
    from adapters.longmemeval import extract_questions
    from adapters.longmemeval_synth import DISTINCT_SESSION_SHARE, write

    data, companion = workdir / "bench.json", workdir / "bench_q.json"
    write(data, questions, seed=29, scale=scale, distinct_share=DISTINCT_SESSION_SHARE)
    extract_questions(data, companion)
    sharing = sharing_statistics(data)
    # the ONNX files are made once per machine: export them first, so that the runs time running, not exporting
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
            _, rss = measure_memfarm(["run", "longmemeval", "--dataset", str(chunk),
                                      "--questions", str(chunk_questions), "--cache-dir", str(workdir / f"cache_{slug}"),
                                      *extra, "--output", str(out)])
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
