"""`memfarm bench adamem`: the seven AdaMem ablations side by side, with the design's six measures.

Three suites: the deterministic synthetic suite, a LoCoMo file and a generated
LongMemEval-S file. Every ablation of every suite is one ordinary run (the local
executor, or one farm task per item with a broker), written with its manifest
under the work folder; the bench reads the measures back from those results.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

SUITES = ("synthetic", "locomo", "longmemeval")
#: The generated LongMemEval-S file's seed (so that two benches read the same file).
LONGMEMEVAL_SEED = 107
#: What the measures' columns mean, said wherever they are printed.
MEASURES_NOTE = "EM / F1 / in ctx: the gold answer against the context() block, no LLM; tokens: MiniLM's; stale - = not measured"
_NOTE = ("answer support: no LLM is available, so the gold answer is matched against the packed context() block; "
         "prompt tokens: MiniLM's WordPiece tokenizer; stale: null where nothing in the dataset is marked stale")


def _specs(suite: str, workdir: Path, locomo, longmemeval, questions: int, scale: float, conversations: int | None):
    from coordinator.spec import RunSpec

    if suite == "synthetic":
        return RunSpec("adamem-synthetic", ablation="all")
    if suite == "locomo":
        return RunSpec("locomo", dataset=str(locomo), system="adamem", ablation="all", limit=conversations)
    from adapters.longmemeval import extract_questions
    from adapters.longmemeval_synth import write

    data, companion = Path(longmemeval) if longmemeval else workdir / "adamem_lme.json", workdir / "adamem_lme_q.json"
    if not longmemeval:
        write(data, questions, seed=LONGMEMEVAL_SEED, scale=scale)
    extract_questions(data, companion)
    return RunSpec("longmemeval", dataset=str(data), questions=str(companion), system="adamem", ablation="all")


def _evaluate(spec, broker: str | None, timeout: float) -> tuple[dict, dict]:
    """(results, manifest) of one run: here, or one task per item on the farm behind `broker`."""
    if not broker:
        from coordinator.local import run_local

        return run_local(spec)
    from coordinator import farm
    from coordinator.ledger import RunLedger, connect
    from workers.app import make_app

    ledger, app = RunLedger(connect(broker)), make_app(broker)
    run_id, _ = farm.submit(ledger, app, spec, broker)
    farm.watch(ledger, app, run_id, timeout=timeout)
    results, manifest = farm.reduce_farm_run(ledger, run_id)
    farm.expire_reduced(ledger, run_id)
    return results, manifest


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
    """The measures table: one line per ablation (or per file), the columns in the issue's order."""
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


def run_adamem_bench(locomo: str | Path | None, questions: int, scale: float, workdir: str | Path, output, *,
                     suites=SUITES, conversations: int | None = None, broker: str | None = None, longmemeval=None,
                     timeout: float = 3600) -> str:
    """Every ablation on every suite; writes each run's results and manifest, the bench JSON, returns the tables.

    `conversations`: only the first N LoCoMo conversations; `longmemeval`: a LongMemEval-S file to read
    instead of generating one of `questions` at `scale`.
    """
    from coordinator.benches import write_bench
    from coordinator.reducer import write_results

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    tables, files, sizes = {}, {}, {}
    for suite in suites:
        if suite == "locomo" and not locomo:
            raise ValueError("the locomo suite needs a LoCoMo file (--locomo)")
        base = _specs(suite, workdir, locomo, longmemeval, questions, scale, conversations)
        base.check(farm=bool(broker))
        tables[suite], files[suite] = {}, {}
        for spec in base.ablations():
            spec = replace(spec, command=f"memfarm bench adamem ({suite}, {spec.ablation})")
            results, manifest = _evaluate(spec, broker, timeout)
            path, _ = write_results(results, manifest, workdir / f"adamem_{suite}.{spec.ablation}.json")
            tables[suite][spec.ablation] = row_of(results)
            files[suite][spec.ablation] = str(path)
            sizes[suite] = {"items": len(manifest["items"]), "questions": results["question_count"],
                            "dataset": manifest["dataset"]["path"]}
    data = {"executor": "farm (one task per item)" if broker else "local", "suites": list(suites),
            "locomo": str(locomo) if locomo else None, "locomo_conversations": conversations,
            "longmemeval": ({"file": str(longmemeval)} if longmemeval
                            else {"generated": True, "questions": questions, "scale": scale, "seed": LONGMEMEVAL_SEED}),
            "sizes": sizes, "tables": tables, "files": files, "note": _NOTE}
    path = write_bench("adamem", data, output)
    lines = []
    for suite, rows in tables.items():
        size = sizes[suite]
        lines.append(f"{suite}: {size['items']} items, {size['questions']} queries ({data['executor']})")
        lines += render_rows(rows)
    lines += [_NOTE, f"wrote {path}"]
    return "\n".join(lines)
