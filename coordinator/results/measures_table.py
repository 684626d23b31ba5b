"""AdaMem's six measures as a table: one row per results file, printed by the analyzer and the adamem bench."""

from __future__ import annotations

import math

#: What the measures' columns mean, said wherever they are printed.
MEASURES_NOTE = "EM / F1 / in ctx: the gold answer against the context() block, no LLM; tokens: MiniLM's; stale - = not measured"


def row_of(results: dict) -> dict:
    """One table row: the measures of one ablation's results file (and the suite's pass count for episodes)."""
    m = results["measures"]
    recall = m["recall"]
    support = results["metrics"]["all"].get("support")
    return {
        "queries": m["queries"],
        "passed": support["passed"] if support else None,
        "answer_exact": m["answer_exact"], "answer_f1": m["answer_f1"], "answer_in_context": m["answer_in_context"],
        "answered": m["answered"],
        "turn_recall_any@5": (recall.get("turn") or {}).get("recall_any@5"),
        "session_recall_any@5": (recall.get("session") or {}).get("recall_any@5"),
        "recall_evaluable": recall.get("evaluable"),
        "stale_fact_rate": m["stale_fact_rate"], "stale_fact_queries": m["stale_fact_queries"],
        "latency_ms": m["latency_ms"],
        "prompt_tokens": m["prompt_tokens"],
        "write_amplification": {k: m["write_amplification"][k] for k in ("entries_per_event", "bytes_per_event")},
    }


def cell(value, width: int, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return f"{'-':>{width}}"
    if isinstance(value, bool) or isinstance(value, int):
        return f"{value:>{width}}"
    return f"{value:>{width}.{digits}f}"


def render_rows(rows: dict[str, dict]) -> list[str]:
    """The measures table: one line per ablation (or per file), the columns in the order
    `adapters.benchmarks.adamem.measures` lists the six measures."""
    head = (f"  {'ablation':<36}{'n':>4}{'passed':>7}{'EM':>7}{'F1':>7}{'in ctx':>7}{'turn R@5':>9}{'sess R@5':>9}"
            f"{'stale':>7}{'p50 ms':>8}{'p95 ms':>8}{'ctx p95':>8}{'tokens':>8}{'ent/ev':>7}{'B/ev':>8}")
    lines = [head]
    for label, r in rows.items():
        w, lat = r["write_amplification"], r["latency_ms"]
        lines.append(f"  {label[:35]:<36}{r['queries']:>4}{cell(r['passed'], 7)}{cell(r['answer_exact'], 7)}"
                     f"{cell(r['answer_f1'], 7)}{cell(r['answer_in_context'], 7)}{cell(r['turn_recall_any@5'], 9)}"
                     f"{cell(r['session_recall_any@5'], 9)}{cell(r['stale_fact_rate'], 7)}"
                     f"{cell(lat['p50'], 8, 1)}{cell(lat['p95'], 8, 1)}{cell(lat['context_p95'], 8, 1)}"
                     f"{cell(r['prompt_tokens'], 8, 1)}{cell(w['entries_per_event'], 7)}"
                     f"{cell(w['bytes_per_event'], 8, 0)}")
    return lines
