"""`memfarm bench coldrun`: what a cold LongMemEval-S run costs in each mode (fusion, full, full without the
sentence signal), with each embedding model and backend, in interleaved rounds: seconds per question, texts
encoded by kind, peak RSS, the session metrics, each mode's cost over fusion's and over full without sentences
side by side, and machine-hours for 500 questions; optionally one LongMemEval-M question cold in full mode and,
given a LoCoMo file, each backend's quality on it."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from adapters.errors import MemfarmError
from coordinator.benches.common import fresh_workdir, generated_longmemeval, measure_memfarm, question_files
from coordinator.benches.common import sharing_statistics, write_bench
from coordinator.results.summary import summarize
from memoria.defaults import DEFAULT_EMBEDDER, EMBEDDER_BACKENDS


def backend_quality(locomo: str | Path, workdir: Path) -> dict:
    """Session R@5 and turn R@10 on a LoCoMo file for each embedder backend (fusion, the default mode)."""
    rows = {}
    for backend in EMBEDDER_BACKENDS:
        out = workdir / f"locomo_{backend}.json"
        seconds, _ = measure_memfarm(["run", "locomo", "--dataset", str(locomo), "--embedder-backend", backend,
                                      "--cache-dir", str(workdir / f"locomo_cache_{backend}"), "--output", str(out)])
        metrics = json.loads(out.read_text())["metrics"]["all"]
        rows[backend] = {"session_recall_any@5": round(metrics["session"]["recall_any@5"], 4),
                         "turn_recall_any@10": round(metrics["turn"]["recall_any@10"], 4), "seconds": round(seconds, 1)}
    for backend in EMBEDDER_BACKENDS[1:]:  # each against torch
        rows[backend]["cost_vs_torch"] = {k: round(rows[backend][k] - rows["torch"][k], 4)
                                          for k in ("session_recall_any@5", "turn_recall_any@10")}
    return {"dataset": str(locomo), "mode": "fusion", "backends": rows}


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


#: The modes the bench compares: (name, `memfarm run` options).
MODES = {"fusion": ["--retrieval-mode", "fusion"],
         "full": ["--retrieval-mode", "full"],
         "full-nosentence": ["--retrieval-mode", "full", "--without", "sentence"]}
#: Texts a run encodes, by kind, as its items count them (memoria.encoding.ENCODED_KINDS).
KINDS = ("turns", "windows", "pieces", "questions")
#: The memory bound of one LongMemEval-M question in one process, MiB.
M_BOUND_MIB = 1536
#: Machines a farm is planned for.
FLEETS = (1, 8, 32)


def _variants(modes, embedders, backends) -> list[dict]:
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise MemfarmError(f"--modes: unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    return [{"mode": m, "embedder": e, "backend": b, "slug": f"{m}_{e}_{b}".replace("/", "-")}
            for e in embedders for b in backends for m in modes]


def _onnx_folder(onnx_dir: Path, embedder: str) -> Path:
    """Where a run looks for `embedder`'s ONNX files (memoria.embedder.LazyEmbedder.loaded)."""
    from memoria.defaults import DEFAULT_EMBEDDER
    from memoria.model_files import embedder_key, resolve

    key = embedder_key(embedder)
    return onnx_dir if key == DEFAULT_EMBEDDER else onnx_dir / resolve(key).files_sha256[:16]


def _run_one(workdir: Path, variant: dict, data: Path, companion: Path, tag: str) -> dict:
    """One cold `memfarm run` of `data` under `variant` (its store lives on across the variant's rounds)."""
    out = workdir / f"{variant['slug']}_{tag}.json"
    _, rss = measure_memfarm(["run", "longmemeval", "--dataset", str(data), "--questions", str(companion),
                              *MODES[variant["mode"]], "--embedder", variant["embedder"],
                              "--embedder-backend", variant["backend"],
                              "--cache-dir", str(workdir / f"cache_{variant['slug']}"), "--output", str(out)])
    manifest = json.loads(out.with_name(out.stem + ".manifest.json").read_text())
    items = manifest["items"]
    return {"ms": sum(i["timings"].get("total_ms", 0) + i["stats"].get("parse_ms", 0) for i in items), "rss": rss,
            "kinds": {k: sum(i["stats"].get("texts_encoded_by_kind", {}).get(k, 0) for i in items) for k in KINDS},
            "records": json.loads(out.read_text())["records"]}


#: The peer's published rate, the figure a fleet is set against: mnem's benchmarks README gives 500 LongMemEval-S
#: questions in 1,127 s on one four-core lane with dense MiniLM.
PEER_RATE = {"system": "mnem", "questions": 500, "seconds": 1127, "cores": 4,
             "source": "mnem's benchmarks README: LongMemEval-S, dense MiniLM, one four-core lane"}
PEER_RATE["questions_per_core_hour"] = round(PEER_RATE["questions"] * 3600 / PEER_RATE["seconds"] / PEER_RATE["cores"])


def _per_core_hour(seconds_per_question: float, scale: float, cores: int) -> dict:
    """Questions at full scale per core-hour from a measured rate, and that over the peer's published rate."""
    rate = 3600 * scale / seconds_per_question / cores if seconds_per_question > 0 else None
    return {"questions_per_core_hour": round(rate) if rate else None,
            "x_peer_rate": round(rate / PEER_RATE["questions_per_core_hour"], 2) if rate else None}


def _hours(seconds_per_question: float, scale: float) -> dict:
    """A cold 500-question run at full scale from a measured rate: machine-hours, and wall hours on N machines."""
    one = 500 * seconds_per_question / scale / 3600
    return {"machine_hours": round(one, 2),
            "wall_hours": {str(n): round(one / n * (1.01 if n > 1 else 1.0), 2) for n in FLEETS}}


def _ratio(rounds: dict, variant: dict, baseline_mode: str) -> dict | None:
    """The variant's seconds over its baseline mode's (same embedder and backend) in each round, and the median."""
    base = rounds.get(f"{baseline_mode}_{variant['embedder']}_{variant['backend']}".replace("/", "-"))
    if base is None or variant["mode"] == baseline_mode:
        return None
    return round_ratios(rounds[variant["slug"]], base)


def _m_question(workdir: Path, sessions: int, embedder: str, backend: str) -> dict:
    """One full-size LongMemEval-M question in one process, cold, in `full` mode: seconds, peak RSS against the
    bound, texts by kind."""
    from adapters.benchmarks.longmemeval.reader import extract_questions

    data, companion = workdir / "m_one.json", workdir / "m_one_q.json"
    measure_memfarm(["synth", "longmemeval", "--shape", "m", "--questions", "1", "--sessions", str(sessions),
                     "--seed", "33", "--output", str(data)])
    extract_questions(data, companion)
    variant = {"mode": "full", "embedder": embedder, "backend": backend, "slug": f"m_full_{embedder}_{backend}"}
    run = _run_one(workdir, variant, data, companion, "m")
    seconds = run["ms"] / 1000
    return {"sessions": sessions, "mode": "full", "embedder": embedder, "backend": backend,
            "seconds": round(seconds, 1), "peak_rss_mib": round(run["rss"] / 2**20, 1), "bound_mib": M_BOUND_MIB,
            "within_bound": run["rss"] / 2**20 <= M_BOUND_MIB,
            **{f"encoded_{k}": v for k, v in run["kinds"].items()}, **_hours(seconds, 1.0),
            "assumes": "each of 500 questions costs what this one did cold (no sharing between questions counted: "
                       "an upper bound for one machine's store); one question per two-core machine at a time"}


def run_coldrun_bench(questions: int, scale: float, workdir: str | Path, output, locomo: str | Path | None = None,
                      rounds: int = 2, modes=("fusion", "full", "full-nosentence"), embedders=(DEFAULT_EMBEDDER,),
                      backends=("torch",), m_sessions: int = 0) -> str:
    """Cold LongMemEval-S runs under every mode x embedder x backend, interleaved in rounds on one generated file
    whose sessions repeat as often as the real file's; each variant keeps its own embedding store across its
    rounds, as one long run would. With `m_sessions`, one LongMemEval-M question of that many sessions, cold,
    in full mode; with `locomo`, each backend's quality on that file too."""
    workdir = fresh_workdir(workdir)  # cold means cold: no item cache, no store from an earlier bench
    variants = _variants(modes, embedders, backends)
    data = generated_longmemeval(workdir, questions, scale, seed=29)
    sharing = sharing_statistics(data)
    export_seconds = None
    if any(b != "torch" for b in backends):  # the ONNX files are made once per machine: not a run's cost
        from memoria.onnx_backend import export

        onnx_dir = workdir / "onnx"
        os.environ["MEMFARM_ONNX_DIR"] = str(onnx_dir)
        started = time.perf_counter()
        for embedder in embedders:
            for backend in sorted({b for b in backends if b != "torch"}):
                export(_onnx_folder(onnx_dir, embedder), backend, embedder=embedder)
        export_seconds = round(time.perf_counter() - started, 1)
    load_before = [round(x, 2) for x in os.getloadavg()]
    slices = question_files(data, workdir, "round", -(-questions // max(1, min(rounds, questions))))
    runs = {v["slug"]: {"round_ms": [], "rss": 0, "kinds": dict.fromkeys(KINDS, 0), "records": []} for v in variants}
    for number, (chunk, chunk_questions) in enumerate(slices):
        order = variants if number % 2 == 0 else variants[::-1]  # no variant always first (or last) in a round
        for variant in order:
            one = _run_one(workdir, variant, chunk, chunk_questions, str(number))
            run = runs[variant["slug"]]
            run["round_ms"].append(one["ms"])
            run["rss"] = max(run["rss"], one["rss"])
            run["records"] += one["records"]
            for kind in KINDS:
                run["kinds"][kind] += one["kinds"][kind]
    round_seconds = {slug: run["round_ms"] for slug, run in runs.items()}
    rows = []
    for variant in variants:
        run = runs[variant["slug"]]
        session = summarize(run["records"], None)["all"]["session"]
        per_question = sum(run["round_ms"]) / 1000 / questions
        to_fusion, to_plain = _ratio(round_seconds, variant, "fusion"), _ratio(round_seconds, variant,
                                                                               "full-nosentence")
        hours = _hours(per_question, scale)
        rows.append({"mode": variant["mode"], "embedder": variant["embedder"], "backend": variant["backend"],
                     "seconds_per_question": round(per_question, 3),
                     "seconds_per_round": [round(ms / 1000, 2) for ms in run["round_ms"]],
                     **{f"encoded_{k}": v for k, v in run["kinds"].items()},
                     "peak_rss_mib": round(run["rss"] / 2**20, 1),
                     "session_recall_any@5": round(session["recall_any@5"], 4),
                     "session_recall_all@5": round(session["recall_all@5"], 4),
                     "session_ndcg_any@10": round(session["ndcg_any@10"], 4),
                     "x_fusion": to_fusion["median"] if to_fusion else None,
                     "x_fusion_per_round": to_fusion["per_round"] if to_fusion else None,
                     "x_full_nosentence": to_plain["median"] if to_plain else None,
                     "x_full_nosentence_per_round": to_plain["per_round"] if to_plain else None,
                     "machine_hours_500": hours["machine_hours"],
                     **_per_core_hour(per_question, scale, len(os.sched_getaffinity(0))),
                     **{f"wall_hours_500_on_{n}": h for n, h in hours["wall_hours"].items()}})
    result = {"questions": questions, "scale": scale, "rounds": len(slices), "sharing": sharing,
              "load_before": load_before, "variants": rows, "target_full_over_full_nosentence": 1.15,
              "onnx_export_seconds_once_per_machine": export_seconds, "peer_rate": PEER_RATE,
              "cores": len(os.sched_getaffinity(0)),
              "seconds": "the items' own time (reading, build, questions, cache writes), summed over the rounds; "
                         "process start and model load are left out",
              "ratios": "x_fusion: the variant's seconds over fusion's with the same embedder and backend, in each "
                        "round (the variants run in turn on the same slice, the order reversed every other round), "
                        "and their median; x_full_nosentence likewise against full without the sentence signal",
              "hours": "machine_hours_500: a cold 500-question LongMemEval-S run at full scale on one two-core "
                       "machine, from seconds_per_question / scale (cost per question taken as linear in haystack "
                       "size; this file's sharing, each machine its own store); wall_hours_500_on_N: the same on N "
                       "machines, items spread evenly, 1% farm overhead (bench farm); questions_per_core_hour: the "
                       "same rate per core of this machine, x_peer_rate: that over peer_rate's"}
    if m_sessions:
        result["longmemeval_m"] = [_m_question(workdir, m_sessions, embedder, backends[0]) for embedder in embedders]
    if locomo:
        result["backend_quality"] = backend_quality(locomo, workdir)
    path = write_bench("coldrun", result, output)
    return _table(json.loads(Path(path).read_text()), path)  # as written: with the load the bench ended at


def _fmt(value, spec: str) -> str:
    """`value` under `spec`, or a dash as wide as the spec's field where there is no value."""
    return format("-", spec.split(".")[0].rstrip("d")) if value is None else format(value, spec)


def _table(r: dict, path) -> str:
    lines = [f"{r['questions']} questions at scale {r['scale']} in {r['rounds']} rounds; load before "
             f"{r['load_before']}, after {r['load']}",
             f"{'mode':<16}{'embedder':<9}{'backend':<10}{'s/q':>7}{'turns':>7}{'pieces':>7}{'windows':>8}"
             f"{'RSS MiB':>8}{'sR@5':>7}{'sRall@5':>8}{'x fusion':>9}{'x nosent':>9}{'mach-h':>8}{'q/core-h':>9}"
             f"{'x peer':>7}"]
    for v in r["variants"]:
        lines.append(f"{v['mode']:<16}{v['embedder']:<9}{v['backend']:<10}{v['seconds_per_question']:>7.2f}"
                     f"{v['encoded_turns']:>7}{v['encoded_pieces']:>7}{v['encoded_windows']:>8}"
                     f"{v['peak_rss_mib']:>8.0f}{v['session_recall_any@5']:>7.3f}{v['session_recall_all@5']:>8.3f}"
                     f"{_fmt(v['x_fusion'], '>8.2f')}x{_fmt(v['x_full_nosentence'], '>8.2f')}x"
                     f"{v['machine_hours_500']:>8.2f}{_fmt(v.get('questions_per_core_hour'), '>9')}"
                     f"{_fmt(v.get('x_peer_rate'), '>7.2f')}")
    peer = r.get("peer_rate")
    if peer:
        lines.append(f"peer: {peer['system']}, {peer['questions_per_core_hour']} questions per core-hour "
                     f"({peer['questions']} in {peer['seconds']} s on {peer['cores']} cores; {peer['source']})")
    for m in r.get("longmemeval_m", []):
        lines.append(f"LongMemEval-M, one question of {m['sessions']} sessions, full, {m['embedder']} "
                     f"{m['backend']}: {m['seconds']:.0f}s cold, peak RSS {m['peak_rss_mib']:.0f} MiB (bound "
                     f"{m['bound_mib']}), pieces {m['encoded_pieces']} of {m['encoded_turns']} turns encoded; 500 "
                     f"questions {m['machine_hours']} machine-hours")
    if "backend_quality" in r:
        for name, row in r["backend_quality"]["backends"].items():
            lines.append(f"{name:<12} on LoCoMo: session R@5 {row['session_recall_any@5']:.3f}, turn R@10 "
                         f"{row['turn_recall_any@10']:.3f}")
    lines.append(f"wrote {path}")
    return "\n".join(lines)
