"""`memfarm bench adamem`: the seven AdaMem ablations side by side, with the design's six measures.

Three suites: the deterministic synthetic suite, a LoCoMo file and a generated
LongMemEval-S file. Every ablation of every suite is one ordinary run (the local
executor, or one farm task per item with a broker), written with its manifest
under the work folder; the bench reads the measures back from those results.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from coordinator.benches.common import write_bench
from coordinator.results.measures_table import render_rows, row_of

SUITES = ("synthetic", "locomo", "longmemeval")
#: The generated LongMemEval-S file's seed (so that two benches read the same file).
LONGMEMEVAL_SEED = 107
_NOTE = ("answer support: no LLM is available, so the gold answer is matched against the packed context() block; "
         "prompt tokens: MiniLM's WordPiece tokenizer; stale: null where nothing in the dataset is marked stale")


def _specs(suite: str, workdir: Path, locomo, longmemeval, questions: int, scale: float, conversations: int | None):
    from coordinator.running.spec import RunSpec

    if suite == "synthetic":
        return RunSpec("adamem-synthetic", ablation="all")
    if suite == "locomo":
        return RunSpec("locomo", dataset=str(locomo), system="adamem", ablation="all", limit=conversations)
    from adapters.benchmarks.longmemeval.reader import extract_questions
    from adapters.generators.longmemeval_s import write

    data, companion = Path(longmemeval) if longmemeval else workdir / "adamem_lme.json", workdir / "adamem_lme_q.json"
    if not longmemeval:
        write(data, questions, seed=LONGMEMEVAL_SEED, scale=scale)
    extract_questions(data, companion)
    return RunSpec("longmemeval", dataset=str(data), questions=str(companion), system="adamem", ablation="all")


def _evaluate(spec, broker: str | None, timeout: float) -> tuple[dict, dict]:
    """(results, manifest) of one run: here, or one task per item on the farm behind `broker`."""
    if not broker:
        from coordinator.running.local_executor import run_local

        return run_local(spec)
    from coordinator.running import farm_run as farm
    from coordinator.running.run_ledger import RunLedger, connect
    from workers.farm.app import make_app

    ledger, app = RunLedger(connect(broker)), make_app(broker)
    run_id, _ = farm.submit(ledger, app, spec, broker)
    farm.watch(ledger, app, run_id, timeout=timeout)
    results, manifest = farm.reduce_farm_run(ledger, run_id)
    farm.expire_reduced(ledger, run_id)
    return results, manifest


def run_adamem_bench(locomo: str | Path | None, questions: int, scale: float, workdir: str | Path, output, *,
                     suites=SUITES, conversations: int | None = None, broker: str | None = None, longmemeval=None,
                     timeout: float = 3600) -> str:
    """Every ablation on every suite; writes each run's results and manifest, the bench JSON, returns the tables.

    `conversations`: only the first N LoCoMo conversations; `longmemeval`: a LongMemEval-S file to read
    instead of generating one of `questions` at `scale`.
    """
    from coordinator.running.reducer import write_results

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
