"""`memfarm bench locomo`: session and turn recall of every retrieval mode on one LoCoMo file, with one
shared cache, side by side."""

from __future__ import annotations

import json
from pathlib import Path

from coordinator.benches.common import measure_memfarm, write_bench
from memoria.defaults import DEFAULT_EMBEDDER


def run_locomo_bench(dataset: str | Path, workdir: str | Path, output,
                     embedder: str = DEFAULT_EMBEDDER) -> str:
    """Every mode on one LoCoMo file, one shared cache, side by side."""
    from memoria.defaults import MODE_SOURCES

    workdir = Path(workdir)
    rows = {}
    for mode in MODE_SOURCES:
        out = workdir / f"locomo_{mode}.json"
        seconds, _ = measure_memfarm(["run", "locomo", "--dataset", str(dataset), "--retrieval-mode", mode,
                                      "--embedder", embedder, "--cache-dir", str(workdir / "cache"), "--output", str(out)])
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
    path = write_bench("locomo", {"dataset": str(dataset), "embedder": embedder, "modes": rows,
                                  "quality_bar": {"fusion_session_recall_any@5": 0.80, "fusion_turn_recall_any@10": 0.58}},
                       output)
    lines = [f"{'mode':<8}{'n':>5}{'sess R@5':>10}{'sess R@10':>10}{'turn R@5':>10}{'turn R@10':>10}{'sess nDCG@10':>13}"]
    for mode, r in rows.items():
        lines.append(f"{mode:<8}{r['evaluable']:>5}{r['session_recall_any@5']:>10.3f}{r['session_recall_any@10']:>10.3f}"
                     f"{r['turn_recall_any@5']:>10.3f}{r['turn_recall_any@10']:>10.3f}{r['session_ndcg_any@10']:>13.3f}")
    lines.append(f"wrote {path}")
    return "\n".join(lines)
