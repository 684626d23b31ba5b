"""`memfarm`: the command line of the benchmark farm."""

from __future__ import annotations

import logging
import shlex
import sys
import time
from pathlib import Path

import click

from memoria import defaults
from memoria.errors import MemfarmError

logger = logging.getLogger(__name__)


class _Cli(click.Group):
    """Turns any MemfarmError into one readable line and exit status 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except MemfarmError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)


@click.group(cls=_Cli)
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.pass_context
def main(ctx, verbose):
    """Benchmark farm for agent-memory retrieval (LongMemEval-S, LoCoMo)."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    ctx.ensure_object(dict)
    ctx.obj["command"] = "memfarm " + " ".join(shlex.quote(a) for a in sys.argv[1:])


# -- data ------------------------------------------------------------------------
@main.group()
def synth():
    """Generate benchmark-shaped files."""


@synth.command("longmemeval")
@click.option("--questions", type=click.IntRange(1), default=50, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=1.0, show_default=True,
              help="Share of the ~48 sessions per haystack (1.0 = full scale).")
@click.option("--output", type=click.Path(dir_okay=False), required=True)
def synth_longmemeval(questions, seed, scale, output):
    """A LongMemEval-S-shaped file: schema, type mix, abstentions and quirks of the real one."""
    from adapters.longmemeval_synth import write

    Path(output).parent.mkdir(parents=True, exist_ok=True)
    count = write(output, questions, seed=seed, scale=scale)
    click.echo(f"wrote {count} questions to {output}")


@main.command("extract-questions")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--output", type=click.Path(dir_okay=False), required=True)
def extract_questions(input_path, output):
    """Write the companion questions file (expected = first turn of the first answer session)."""
    from adapters.longmemeval import extract_questions as extract

    Path(output).parent.mkdir(parents=True, exist_ok=True)
    click.echo(f"wrote {extract(input_path, output)} questions to {output}")


# -- runs ------------------------------------------------------------------------
@main.command()
@click.argument("benchmark", type=click.Choice(["longmemeval", "locomo"]))
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--questions", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Companion questions file (LongMemEval) for turn-level gold.")
@click.option("--retrieval-mode", type=click.Choice(sorted(defaults.MODE_SOURCES)), default=defaults.DEFAULT_MODE,
              show_default=True)
@click.option("--system", "system_name", default="memoria", show_default=True)
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N items.")
@click.option("--cache-dir", type=click.Path(file_okay=False), envvar="MEMFARM_CACHE_DIR", default=None)
@click.option("--rebuild-cache", is_flag=True, help="Ignore cached items and rebuild them.")
@click.option("--output", type=click.Path(dir_okay=False), default=None)
@click.option("--scoring-profile", type=click.Choice(defaults.SCORING_PROFILES),
              default=defaults.DEFAULT_SCORING_PROFILE, show_default=True)
@click.option("--batch-size", type=click.IntRange(1), default=defaults.DEFAULT_BATCH_SIZE, show_default=True)
@click.option("--workers", type=click.IntRange(1), default=defaults.DEFAULT_MAX_WORKERS, show_default=True,
              help="Parallel extraction workers inside the engine.")
@click.option("--top-k", type=click.IntRange(1), default=defaults.DEFAULT_TOP_K, show_default=True)
@click.pass_context
def run(ctx, benchmark, dataset, questions, retrieval_mode, system_name, limit, cache_dir, rebuild_cache, output,
        scoring_profile, batch_size, workers, top_k):
    """Run BENCHMARK on this machine and write the results file and manifest."""
    from adapters.systems.memoria_system import MemoriaSystem
    from coordinator.benchmarks import open_benchmark
    from coordinator.local import run_items
    from coordinator.reducer import default_output, reduce_run, write_results
    from coordinator.report import metrics_table
    from workers.cache import ItemCache, file_sha256

    started = time.perf_counter()
    adapter = open_benchmark(benchmark, dataset, questions, scoring_profile)
    if benchmark == "longmemeval" and questions is None and scoring_profile == "memoria":
        click.echo("warning: no --questions file; turn gold is the first turn of each answer session", err=True)
    ids = adapter.scan()
    total = min(len(ids), limit) if limit else len(ids)
    dataset_sha = file_sha256(dataset)
    if system_name != "memoria":
        raise MemfarmError(f"unknown system {system_name!r}; built in: memoria")
    system = MemoriaSystem(mode=retrieval_mode, batch_size=batch_size, max_workers=workers)
    cache = ItemCache(cache_dir, rebuild=rebuild_cache) if cache_dir else None
    click.echo(f"{benchmark}: {total} items from {dataset} ({system.name}, mode {retrieval_mode})", err=True)
    misses = []
    with click.progressbar(length=total, label="items", show_eta=True, show_pos=True, file=sys.stderr,
                           item_show_func=lambda o: o["item_id"][:16] if o else "") as bar:
        def advance(outcome):
            if outcome.get("cache") and not outcome["cache"]["hit"] and cache is not None:
                misses.append(f"{outcome['item_id']}: {outcome['cache']['reason']}")
            bar.update(1, outcome)

        outcomes = run_items(adapter.iter_items(limit=limit), system, top_k=top_k, k_values=defaults.DEFAULT_K_VALUES,
                             profile=scoring_profile, cache=cache, dataset_sha256=dataset_sha, on_item=advance)
    if cache is not None:
        click.echo(f"cache: {total - len(misses)} hits, {len(misses)} rebuilt", err=True)
        for line in misses[:20]:
            click.echo(f"  rebuilt {line}", err=True)
    context = {
        "benchmark": benchmark,
        "benchmark_title": adapter.benchmark["title"],
        "group_key": adapter.benchmark.get("group_key", "question_type"),
        "dataset_path": str(Path(dataset).resolve()),
        "dataset_sha256": dataset_sha,
        "system_config": system.config,
        "embedding_signature": system.embedding_signature,
        "scoring_profile": scoring_profile,
        "top_k": top_k,
        "k_values": defaults.DEFAULT_K_VALUES,
        "rendering": adapter.benchmark.get("rendering", "turn content as-is"),
        "cache_dir": str(Path(cache_dir).resolve()) if cache_dir else None,
        "rebuild_cache": rebuild_cache,
        "arguments": {k: v for k, v in ctx.params.items()},
        "command": ctx.obj["command"],
        "elapsed_seconds": time.perf_counter() - started,
    }
    results, manifest = reduce_run(outcomes, context)
    results_path, manifest_path = write_results(results, manifest, output or default_output(benchmark, retrieval_mode))
    click.echo(metrics_table(results))
    click.echo(f"results:  {results_path}\nmanifest: {manifest_path}")


# -- benchmarks of the product itself ---------------------------------------------
@main.group()
def bench():
    """Speed and memory benchmarks; each writes JSON under results/bench/."""


@bench.command("engine")
@click.option("--turns", type=click.IntRange(10), default=5000, show_default=True)
@click.option("--store-turns", type=click.IntRange(10), default=500, show_default=True)
@click.option("--queries", type=click.IntRange(1), default=100, show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/engine.json", show_default=True)
def bench_engine(turns, store_turns, queries, output):
    """Engine insert throughput next to bare encode, and recall latency per mode."""
    from coordinator.perf import run_engine_bench

    report = run_engine_bench(turns=turns, store_turns=store_turns, queries=queries, output=output)
    click.echo(report)


if __name__ == "__main__":
    main()
