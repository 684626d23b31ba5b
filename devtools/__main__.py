"""`python -m devtools ...`: developer tools that need a checkout, root or the test suite.

They stay out of the installed package; `make bench-mutation` and `make bench-fleet` run them.
"""

from __future__ import annotations

import click


@click.group()
def devtools():
    """Developer benches: mutation testing, the fleet fault campaign and the ranking lab."""


@devtools.command("same-rankings")
@click.option("--before", type=click.Path(exists=True, dir_okay=False), required=True, help="A results file.")
@click.option("--after", type=click.Path(exists=True, dir_okay=False), required=True,
              help="A results file of the same questions.")
@click.option("--label", default="", help="What the two runs are, in words.")
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/same_rankings.json",
              show_default=True)
def same_rankings(before, after, label, output):
    """Two runs of the same questions, question by question: rankings identical in order, score gaps, texts encoded."""
    from devtools.same_rankings import same_rankings as compare_runs

    click.echo(compare_runs(before, after, output, label))


@devtools.command("docs-figures")
@click.option("--write", is_flag=True, help="Write every figure as its file gives it now (and each {{ }} macro out).")
@click.option("--check", is_flag=True, help="List each figure not as its file gives it now; exit 1 if any (default).")
@click.argument("pages", nargs=-1, type=click.Path(exists=True, dir_okay=False))
def docs_figures(write, check, pages):
    """The manual's figures against their files in results/published/: checked, or written into docs/*.md."""
    from devtools.docs_figures import refresh_pages

    if write and check:
        raise click.UsageError("--write or --check, not both")
    report, current = refresh_pages(pages, write=write)
    click.echo("\n".join(report))
    raise SystemExit(0 if current else 1)


@devtools.command("realmem-metrics")
@click.option("--checkout", type=click.Path(exists=True, file_okay=False), required=True,
              help="A checkout of RealMem's repository (AvatarMemory/RealMemBench).")
@click.option("--rankings", type=click.IntRange(1), default=500, show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/realmem_metrics_check.json",
              show_default=True)
def realmem_metrics(checkout, rankings, output):
    """The realmem profile's formulas against RealMem's own metric script, on the same rankings."""
    from devtools.realmem_metrics_check import check

    click.echo(check(checkout, output, rankings))


@devtools.command("fleet")
@click.option("--questions", type=click.IntRange(4), default=12, show_default=True)
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.05, show_default=True)
@click.option("--workers", type=click.IntRange(3), default=3, show_default=True)
@click.option("--time-limit", type=click.IntRange(10), default=40, show_default=True,
              help="Hard time limit per item on the fleet, seconds.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_fleet", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/fleet.json", show_default=True)
def bench_fleet(questions, scale, workers, time_limit, workdir, output):
    """A fault campaign on simulated machines (namespaces, cgroups; needs root): a faulty run next to a clean one."""
    from devtools.fleet_bench import run_fleet_bench

    click.echo(run_fleet_bench(questions, scale, workdir, output, workers=workers, time_limit=time_limit))


@devtools.command("mutation")
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/mutation.json", show_default=True)
@click.option("--area", "areas", multiple=True,
              help="Only these areas (metrics, official profile, RRF, gold, abstention, ledger (Python)); "
                   "default: all.")
@click.option("--lua-limit", type=click.IntRange(0), default=None,
              help="At most N Lua mutants of the ledger's scripts (0: none; default: all).")
@click.option("--timeout", type=click.IntRange(60), default=3600, show_default=True, help="Seconds for mutmut.")
@click.option("--keep", is_flag=True, help="Keep the scratch copy (to inspect a survivor with mutmut show).")
def bench_mutation(output, areas, lua_limit, timeout, keep):
    """Mutation testing of the scoring and ledger code: mutants made, killed, survived, survivors listed."""
    from devtools.mutation import PYTHON_SCOPE, mutation_bench, render

    unknown = [a for a in areas if a not in PYTHON_SCOPE]
    if unknown:
        raise click.UsageError(f"unknown area {unknown[0]!r}; choose from {', '.join(PYTHON_SCOPE)}")
    scope = {a: PYTHON_SCOPE[a] for a in areas} if areas else None
    report = mutation_bench(output, scope=scope, lua_limit=lua_limit, timeout=timeout, keep=keep)
    click.echo(render(report))
    click.echo(f"wrote {output}")


@devtools.command("lab")
@click.option("--locomo", "locomo_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A LoCoMo file; also scored as a LongMemEval-format file made from it.")
@click.option("--longmemeval", "longmemeval_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A LongMemEval-format file (generated, or converted).")
@click.option("--beam", "beam_paths", multiple=True, type=click.Path(exists=True),
              help="BEAM chats (a size folder or a chat folder), scored message by message.")
@click.option("--embedder", default="minilm", show_default=True, help="minilm, mpnet or a model folder.")
@click.option("--weights", "weights_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Also rank under these weights (a weights file), beside the embedder's defaults; where the "
              "file names the items it was tuned on, a row for those and one for the others (held out).")
@click.option("--by-type", is_flag=True, help="A row per question type as well.")
@click.option("--sentence-heads", default="", help="Also rank with the sentence signal read for each of these "
              "head sizes (comma-separated; 0: every candidate), with the turns whose pieces were read.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/ranking_lab", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/ranking_lab.json", show_default=True)
def ranking_lab(locomo_files, longmemeval_files, beam_paths, embedder, weights_file, by_type, sentence_heads, workdir,
                output):
    """fusion and full on LoCoMo, LongMemEval-format files and BEAM chats at once, each question's sources asked
    once."""
    from pathlib import Path

    from adapters.files import write_json
    from adapters.generators.locomo_to_longmemeval import write
    from coordinator.benches.common import provenance
    from coordinator.results.optimize import load_weights, tuned_on_items
    from devtools.ranking_lab import lab_report, render

    if not locomo_files and not longmemeval_files and not beam_paths:
        raise click.UsageError("give at least one --locomo or --longmemeval file or --beam folder")
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    datasets = []
    for path in locomo_files:
        converted = work / f"{Path(path).stem}.longmemeval.json"
        if not converted.is_file() or converted.stat().st_mtime < Path(path).stat().st_mtime:
            write(path, converted)  # once per version of the LoCoMo file
        datasets += [(Path(path).name, "locomo", path), (converted.name, "longmemeval", str(converted))]
    datasets += [(Path(path).name, "longmemeval", path) for path in longmemeval_files]
    # a chat folder's name is a number every size has (chats/100K/1, chats/500K/1): its size folder names it too
    datasets += [(f"beam {Path(path).resolve().parent.name}/{Path(path).resolve().name}", "beam", path)
                 for path in beam_paths]
    labels = [label for label, _, _ in datasets]
    if len(set(labels)) < len(labels):
        raise click.UsageError(f"two datasets would share a label: {sorted({l for l in labels if labels.count(l) > 1})}")
    weights = load_weights(weights_file) if weights_file else None
    tuned_items = tuned_on_items(weights_file) if weights_file else {}
    try:
        heads = [int(h) for h in sentence_heads.split(",") if h.strip()]
    except ValueError:
        raise click.BadParameter(f"{sentence_heads!r} is no comma-separated list of integers",
                                 param_hint="--sentence-heads") from None
    if any(h < 0 for h in heads):
        raise click.BadParameter("a head size is 0 or more", param_hint="--sentence-heads")
    report = lab_report(datasets, embedder, weights, work / "memories", by_type, sentence_heads=heads,
                        tuned_items=tuned_items,
                        progress=lambda item, n: click.echo(f"  {item}: {n} questions asked", err=True))
    click.echo(render(report))
    write_json(output, {**provenance(), **report})  # what made it, so the manual can render it
    click.echo(f"wrote {output}")


if __name__ == "__main__":  # last, so every command above is registered before the group runs
    devtools()
