"""`memfarm bench ablation`: session and turn recall and recall latency of fusion, full, and full without
each of its sources and parts (or with a part that weighs nothing by default switched on), on a LoCoMo
file and a generated LongMemEval-S file."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

from coordinator.benches.common import metric, quality_row, shown, write_bench

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
    from adapters.benchmarks.longmemeval.reader import extract_questions
    from adapters.generators.longmemeval_s import write
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
            results, _ = quality_row(spec, workdir, label)
            summary = results["metrics"]["all"]
            runtimes = [r["runtime_ms"] for r in results["records"] if r.get("status") == "ok"]
            table[dataset][label] = {
                "evaluable": summary["evaluable"]["session"],
                "session_recall_any@5": metric(summary, "session", "recall_any@5"),
                "session_recall_all@5": metric(summary, "session", "recall_all@5"),
                "turn_recall_any@10": metric(summary, "turn", "recall_any@10"),
                "session_ndcg_any@10": metric(summary, "session", "ndcg_any@10"),
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
            lines.append(f"  {label:<22}{shown(r['session_recall_any@5']):>10.3f}{shown(r['session_recall_all@5']):>13.3f}"
                         f"{shown(r['turn_recall_any@10']):>11.3f}{shown(r['session_ndcg_any@10']):>14.3f}"
                         f"{r['recall_p50_ms'] or float('nan'):>9.1f}")
    lines.append(f"wrote {path}")
    return "\n".join(lines)
