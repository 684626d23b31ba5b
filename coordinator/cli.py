"""`memfarm`: the command line of the benchmark farm."""

from __future__ import annotations

import logging
import os
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
def run_options(command):
    """Options shared by `run` and `submit`: what to evaluate and how."""
    options = [
        click.argument("benchmark", type=click.Choice(["longmemeval", "locomo", "adamem-jsonl", "adamem-synthetic"])),
        click.option("--dataset", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="The dataset file (not needed for adamem-synthetic)."),
        click.option("--questions", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="Companion questions file (LongMemEval) for turn-level gold."),
        click.option("--retrieval-mode", type=click.Choice(sorted(defaults.MODE_SOURCES)),
                     default=defaults.DEFAULT_MODE, show_default=True),
        click.option("--system", "system_name", default="memoria", show_default=True),
        click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N items."),
        click.option("--cache-dir", type=click.Path(file_okay=False), envvar="MEMFARM_CACHE_DIR", default=None,
                     help="Per-item cache (local runs; farm workers use their own --cache-dir)."),
        click.option("--rebuild-cache", is_flag=True, help="Ignore cached items and rebuild them."),
        click.option("--output", type=click.Path(dir_okay=False), default=None),
        click.option("--scoring-profile", type=click.Choice(defaults.SCORING_PROFILES),
                     default=defaults.DEFAULT_SCORING_PROFILE, show_default=True),
        click.option("--batch-size", type=click.IntRange(1), default=defaults.DEFAULT_BATCH_SIZE, show_default=True),
        click.option("--workers", type=click.IntRange(1), default=defaults.DEFAULT_MAX_WORKERS, show_default=True,
                     help="Parallel extraction workers inside the engine."),
        click.option("--top-k", type=click.IntRange(1), default=defaults.DEFAULT_TOP_K, show_default=True),
        click.option("--max-attempts", type=click.IntRange(1), default=3, show_default=True,
                     help="Farm: attempts per item before it is a final failure."),
        click.option("--run-id", default=None, help="Farm: name the run (default: time + random)."),
        click.option("--weights", "weights_file", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="Ranking weights (JSON) for --retrieval-mode full."),
        click.option("--ablation", default=None,
                     help="AdaMem configuration (system adamem, adamem-* benchmarks; 'all' there)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def broker_option(required: bool = True):
    return click.option("--broker", envvar="MEMFARM_BROKER", required=required, default=None,
                        help="Redis URL (redis://:password@host:6379/0); also MEMFARM_BROKER.")


def _prepare(ctx, p: dict) -> tuple:
    """The adapter, the item count, the system and the run context shared by local and farm runs."""
    from adapters.systems import describe, make_system
    from coordinator.benchmarks import open_benchmark
    from workers.cache import file_sha256

    adapter = open_benchmark(p["benchmark"], p["dataset"], p["questions"], p["scoring_profile"])
    if p["benchmark"] == "longmemeval" and p["questions"] is None and p["scoring_profile"] == "memoria":
        click.echo("warning: no --questions file; turn gold is the first turn of each answer session", err=True)
    ids = adapter.scan()
    total = min(len(ids), p["limit"]) if p["limit"] else len(ids)
    options = {"batch_size": p["batch_size"], "max_workers": p["workers"], "ablation": p.get("ablation")}
    if p.get("weights_file"):
        from coordinator.optimize import load_weights

        options["weights"] = load_weights(p["weights_file"])
    try:
        system = make_system(p["system_name"], p["retrieval_mode"], **options)
    except ValueError as exc:
        raise MemfarmError(str(exc)) from exc
    context = {
        "benchmark": p["benchmark"],
        "benchmark_title": adapter.benchmark["title"],
        "group_key": adapter.benchmark.get("group_key", "question_type"),
        "dataset_path": str(Path(p["dataset"]).resolve()),
        "dataset_sha256": file_sha256(p["dataset"]),
        "system_config": describe(system),
        "embedding_signature": getattr(system, "embedding_signature", None),
        "scoring_profile": p["scoring_profile"],
        "top_k": p["top_k"],
        "k_values": defaults.DEFAULT_K_VALUES,
        "rendering": adapter.benchmark.get("rendering", "turn content as-is"),
        "cache_dir": str(Path(p["cache_dir"]).resolve()) if p["cache_dir"] else None,
        "rebuild_cache": p["rebuild_cache"],
        "arguments": dict(p),
        "command": ctx.obj["command"],
    }
    return adapter, total, system, context


def _finish(results: dict, manifest: dict, output, benchmark: str, mode: str) -> None:
    from coordinator.reducer import default_output, write_results
    from coordinator.report import metrics_table

    results_path, manifest_path = write_results(results, manifest, output or default_output(benchmark, mode))
    click.echo(metrics_table(results))
    click.echo(f"results:  {results_path}\nmanifest: {manifest_path}")
    return results_path


@main.command()
@run_options
@broker_option(required=False)
@click.option("--optimize", is_flag=True, help="After the run, tune the full-mode weights on its records.")
@click.option("--step-size", type=click.FloatRange(min=0, min_open=True), default=0.02, show_default=True)
@click.option("--objective", default="session:ndcg_any@10", show_default=True, help="LEVEL:METRIC@K to maximise.")
@click.option("--dry-run-weights", is_flag=True, help="With --optimize: print the proposed weights, write nothing.")
@click.option("--save-weights", type=click.Path(dir_okay=False), default=None,
              help="With --optimize: where to write the weights (default: beside the results file).")
@click.pass_context
def run(ctx, broker, optimize, step_size, objective, dry_run_weights, save_weights, **p):
    """Run BENCHMARK and write the results file and manifest.

    Without --broker (or MEMFARM_BROKER) every item runs here, no server needed.
    With it, items are staged in Redis and run by `memfarm worker` processes.
    """
    from coordinator.local import run_items
    from coordinator.reducer import reduce_run
    from workers.cache import ItemCache

    started = time.perf_counter()
    if p["benchmark"].startswith("adamem-"):
        _run_adamem(ctx, p)
        return
    if p["dataset"] is None:
        raise click.UsageError(f"--dataset is required for {p['benchmark']}")
    if optimize and p["retrieval_mode"] != "full":
        raise click.UsageError("--optimize tunes the ranking weights of --retrieval-mode full")
    if broker:
        run_id = _submit(ctx, broker, p)
        results_path = _watch_and_reduce(broker, run_id, p["output"])
        if optimize:
            _optimize(results_path, step_size, objective, dry_run_weights, save_weights)
        return
    adapter, total, system, context = _prepare(ctx, p)
    cache = ItemCache(p["cache_dir"], rebuild=p["rebuild_cache"]) if p["cache_dir"] else None
    click.echo(f"{p['benchmark']}: {total} items from {p['dataset']} ({system.name}, mode {p['retrieval_mode']})",
               err=True)
    misses = []
    with click.progressbar(length=total, label="items", show_eta=True, show_pos=True, file=sys.stderr,
                           item_show_func=lambda o: o["item_id"][:16] if o else "") as bar:
        def advance(outcome):
            if cache is not None and outcome.get("cache") and not outcome["cache"]["hit"]:
                misses.append(f"{outcome['item_id']}: {outcome['cache']['reason']}")
            bar.update(1, outcome)

        outcomes = run_items(adapter.iter_items(limit=p["limit"]), system, top_k=p["top_k"],
                             k_values=defaults.DEFAULT_K_VALUES, profile=p["scoring_profile"], cache=cache,
                             dataset_sha256=context["dataset_sha256"], on_item=advance)
    if cache is not None:
        click.echo(f"cache: {total - len(misses)} hits, {len(misses)} rebuilt", err=True)
        for line in misses[:20]:
            click.echo(f"  rebuilt {line}", err=True)
    context["elapsed_seconds"] = time.perf_counter() - started
    results, manifest = reduce_run(outcomes, context)
    results_path = _finish(results, manifest, p["output"], p["benchmark"], p["retrieval_mode"])
    if optimize:
        _optimize(results_path, step_size, objective, dry_run_weights, save_weights)


def _optimize(results_path: Path, step_size: float, objective_name: str, dry_run: bool, save_to) -> None:
    import json

    from coordinator.optimize import optimise

    results = json.loads(Path(results_path).read_text(encoding="utf-8"))
    weights = results["settings_system"]["ranking"]["weights"]
    report = optimise(results["records"], weights, step=step_size, objective_name=objective_name)
    click.echo(f"optimise {report['objective']} over {report['questions']} questions: "
               f"{report['before']:.4f} -> {report['after']:.4f}")
    for name in report["weights"]:
        before, after = report["weights_before"][name], report["weights"][name]
        click.echo(f"  {name:<16} {before:>7.3f} -> {after:>7.3f}" + ("  *" if before != after else ""))
    if dry_run:
        click.echo("dry run: weights not written")
        return
    target = Path(save_to) if save_to else Path(str(results_path)[:-5] + ".weights.json")
    target.write_text(json.dumps({"weights": report["weights"], "optimisation": report}, indent=1), encoding="utf-8")
    click.echo(f"weights: {target} (use with --weights)")


# -- the farm ----------------------------------------------------------------------
def _farm(broker: str):
    from coordinator.ledger import Ledger, connect
    from workers.app import make_app

    return Ledger(connect(broker)), make_app(broker)


def _run_adamem(ctx, p: dict) -> None:
    """AdaMem episodes (a JSONL file or the synthetic suite), judged by expected / forbidden substrings."""
    import json

    from adapters.adamem_jsonl import evaluate_episode, read_episodes, synthetic_suite
    from adapters.systems.adamem import ABLATIONS, AdaMem

    if p["benchmark"] == "adamem-jsonl":
        if not p["dataset"]:
            raise click.UsageError("--dataset is required for adamem-jsonl")
        episodes = list(read_episodes(p["dataset"]))
    else:
        episodes = synthetic_suite()
    if p["limit"]:
        episodes = episodes[: p["limit"]]
    names = list(ABLATIONS) if p.get("ablation") in (None, "all") else [p["ablation"]]
    unknown = [n for n in names if n not in ABLATIONS]
    if unknown:
        raise MemfarmError(f"unknown AdaMem ablation {unknown[0]!r}; choose from {', '.join(ABLATIONS)}")
    table = {}
    for name in names:
        records = [r for episode in episodes for r in evaluate_episode(episode, AdaMem.ablation(name))]
        table[name] = {"passed": sum(r["passed"] for r in records), "queries": len(records), "records": records,
                       "stale_hits": sum(1 for r in records if r["forbidden_found"])}
    width = max(map(len, table))
    click.echo(f"{'ablation':<{width}}  {'passed':>8}  {'stale hits':>10}   (retrieval support, not answer accuracy)")
    for name, row in table.items():
        click.echo(f"{name:<{width}}  {row['passed']:>3}/{row['queries']:<4}  {row['stale_hits']:>10}")
    output = Path(p["output"] or f"results/{p['benchmark']}_{time.strftime('%Y%m%d-%H%M%S')}.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"benchmark": p["benchmark"], "dataset": p["dataset"], "command": ctx.obj["command"],
                                  "ablations": table}, indent=1), encoding="utf-8")
    click.echo(f"results: {output}")


def _submit(ctx, broker: str, p: dict) -> str:
    from coordinator.farm import enqueue, new_run_id, run_meta, stage_run
    from workers.app import DEFAULT_TASK_TIME_LIMIT
    from workers.version import CODE_VERSION

    ledger, app = _farm(broker)
    adapter, total, system, context = _prepare(ctx, p)
    run_id = p["run_id"] or new_run_id()
    meta = run_meta(context, broker=broker, code_version=CODE_VERSION, max_attempts=p["max_attempts"],
                    task_time_limit=int(os.environ.get("MEMFARM_TASK_TIME_LIMIT", DEFAULT_TASK_TIME_LIMIT)),
                    system=p["system_name"], retrieval_mode=p["retrieval_mode"], batch_size=p["batch_size"],
                    rebuild_cache=p["rebuild_cache"], ablation=p.get("ablation"))
    click.echo(f"run id: {run_id}", err=True)
    with click.progressbar(length=total, label="staging", file=sys.stderr) as bar:
        staged = stage_run(ledger, run_id, adapter, meta, p["limit"], on_item=lambda _: bar.update(1))
    enqueue(app, run_id, staged)
    click.echo(f"enqueued {len(staged)} items of run {run_id}", err=True)
    return run_id


def _watch_and_reduce(broker: str, run_id: str, output) -> None:
    from coordinator.farm import reduce_farm_run, watch

    ledger, app = _farm(broker)
    meta = ledger.meta(run_id)
    total = meta.get("item_count", 0)
    with click.progressbar(length=total, label=f"run {run_id}", show_eta=True, show_pos=True, file=sys.stderr) as bar:
        seen = {"n": 0}

        def update(state):
            bar.update(state["finished"] - seen["n"])
            seen["n"] = state["finished"]

        state = watch(ledger, app, run_id, on_progress=update)
    if state["final_failures"]:
        click.echo(f"{state['final_failures']} items failed for good; see the manifest's farm block", err=True)
    results, manifest = reduce_farm_run(ledger, run_id)
    return _finish(results, manifest, output, meta["context"]["benchmark"], meta["retrieval_mode"])


@main.command()
@run_options
@broker_option()
@click.pass_context
def submit(ctx, broker, **p):
    """Stage BENCHMARK's items in Redis and enqueue one task per item; prints the run id."""
    click.echo(_submit(ctx, broker, p))


@main.command()
@click.argument("run_id")
@broker_option()
@click.option("--watch", "follow", is_flag=True, help="Refresh until the run is complete.")
@click.option("--interval", type=float, default=2.0, show_default=True)
def status(run_id, broker, follow, interval):
    """Progress of a farm run: done, running, failed, per-worker counts and ETA."""
    from coordinator.farm import progress

    ledger, _ = _farm(broker)
    while True:
        state = progress(ledger, run_id)
        eta = f"{state['eta_seconds']:.0f}s" if state["eta_seconds"] is not None else "?"
        width = 30
        filled = int(width * state["finished"] / state["total"]) if state["total"] else 0
        click.echo(f"[{'#' * filled}{'.' * (width - filled)}] {state['finished']}/{state['total']}  "
                   f"done {state['done']}  running {state['running']}  queued {state['queued']}  "
                   f"failed {state['failed']} ({state['final_failures']} final)  ETA {eta}")
        for worker, count in sorted(state["workers"].items()):
            click.echo(f"  {worker}: {count} items")
        if not follow or state["complete"]:
            return
        time.sleep(interval)


@main.command("requeue")
@click.argument("run_id")
@broker_option()
@click.option("--failed", is_flag=True, help="Every failed item, attempts reset.")
@click.option("--stale", is_flag=True, help="Items started longer ago than --stale-after.")
@click.option("--stale-after", type=float, default=None, help="Seconds (default: task time limit + 60).")
def requeue_command(run_id, broker, failed, stale, stale_after):
    """Put failed or stale items of a run back on the queue."""
    from coordinator.farm import requeue

    if not failed and not stale:
        raise click.UsageError("say what to requeue: --failed and/or --stale")
    ledger, app = _farm(broker)
    chosen = requeue(ledger, app, run_id, failed=failed, stale=stale, stale_after=stale_after)
    click.echo(f"requeued {len(chosen)} items" + (f": {', '.join(chosen[:20])}" if chosen else ""))


@main.command("resume")
@click.argument("run_id")
@broker_option()
@click.option("--output", type=click.Path(dir_okay=False), default=None)
def resume_command(run_id, broker, output):
    """Finish a run whose coordinator died: enqueue what is not done, watch, reduce."""
    from coordinator.farm import resume

    ledger, app = _farm(broker)
    chosen = resume(ledger, app, run_id)
    click.echo(f"re-enqueued {len(chosen)} items not done", err=True)
    _watch_and_reduce(broker, run_id, output)


@main.command("reduce")
@click.argument("run_id")
@broker_option()
@click.option("--output", type=click.Path(dir_okay=False), default=None)
def reduce_command(run_id, broker, output):
    """Write the results file and manifest of a farm run from its ledger."""
    from coordinator.farm import reduce_farm_run

    ledger, _ = _farm(broker)
    meta = ledger.meta(run_id)
    results, manifest = reduce_farm_run(ledger, run_id)
    _finish(results, manifest, output, meta["context"]["benchmark"], meta["retrieval_mode"])


@main.command()
@broker_option()
@click.option("--cache-dir", type=click.Path(file_okay=False), envvar="MEMFARM_CACHE_DIR", default="cache/worker",
              show_default=True)
@click.option("--concurrency", type=click.IntRange(1), default=1, show_default=True)
@click.option("--torch-threads", type=click.IntRange(1), default=1, show_default=True,
              help="Torch threads per worker process.")
@click.option("--name", default=None, help="Worker name (default: memfarm-<pid>@host).")
@click.option("--loglevel", default="INFO", show_default=True)
def worker(broker, cache_dir, concurrency, torch_threads, name, loglevel):
    """A Celery worker for farm runs (sane defaults for a small machine)."""
    os.environ["MEMFARM_BROKER"] = broker
    os.environ["MEMFARM_CACHE_DIR"] = str(Path(cache_dir).resolve())
    os.environ["MEMFARM_TORCH_THREADS"] = str(torch_threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(torch_threads))
    from coordinator.ledger import connect

    connect(broker)  # one clear line for a wrong password or a missing server
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    from workers.app import make_app

    app = make_app(broker)
    import workers.tasks  # noqa: F401  (registers the task)

    app.worker_main([
        "worker", "--loglevel", loglevel, "--concurrency", str(concurrency), "--pool", "prefork",
        "--hostname", name or f"memfarm-{os.getpid()}@%h", "--task-events", "--without-gossip", "--without-mingle",
    ])


@main.command()
@broker_option()
@click.option("--address", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=5555, show_default=True)
@click.option("--no-auth", is_flag=True, help="Run without basic auth (only on a trusted machine).")
def flower(broker, address, port, no_auth):
    """Flower on localhost with basic auth from MEMFARM_FLOWER_USER / MEMFARM_FLOWER_PASSWORD."""
    user, password = os.environ.get("MEMFARM_FLOWER_USER"), os.environ.get("MEMFARM_FLOWER_PASSWORD")
    env = dict(os.environ, MEMFARM_BROKER=broker)
    if not no_auth:
        if not user or not password:
            raise MemfarmError("Flower needs MEMFARM_FLOWER_USER and MEMFARM_FLOWER_PASSWORD (or --no-auth)")
        env["FLOWER_BASIC_AUTH"] = f"{user}:{password}"
    else:
        env.pop("FLOWER_BASIC_AUTH", None)
        env["FLOWER_UNAUTHENTICATED_API"] = "true"
    argv = [sys.executable, "-m", "celery", "-A", "workers.app", "--broker", broker, "flower",
            f"--address={address}", f"--port={port}"]
    os.execve(sys.executable, argv, env)


@main.group()
def cluster():
    """A one-machine farm without Docker: redis-server, workers and Flower as child processes."""


@cluster.command("up")
@click.option("--workers", "count", type=click.IntRange(1), default=2, show_default=True)
@click.option("--state-dir", type=click.Path(file_okay=False), default=".memfarm", show_default=True)
@click.option("--redis-port", type=int, default=None, help="Default: a free port.")
@click.option("--flower-port", type=int, default=5555, show_default=True)
@click.option("--no-flower", is_flag=True)
@click.option("--cache-dir", type=click.Path(file_okay=False), default="cache/worker", show_default=True)
def cluster_up(count, state_dir, redis_port, flower_port, no_flower, cache_dir):
    """Start redis-server (with a password), N workers and Flower; prints the broker URL."""
    from coordinator.cluster import up

    state = up(Path(state_dir), workers=count, redis_port=redis_port, flower_port=None if no_flower else flower_port,
               cache_dir=cache_dir)
    click.echo(f"broker: {state['broker']}")
    click.echo(f"export MEMFARM_BROKER='{state['broker']}'")
    if state.get("flower"):
        click.echo(f"flower: http://127.0.0.1:{state['flower']['port']} (user {state['flower']['user']}, "
                   f"password in {state_dir}/cluster.json)")
    click.echo(f"logs: {state_dir}/logs")


@cluster.command("down")
@click.option("--state-dir", type=click.Path(file_okay=False), default=".memfarm", show_default=True)
def cluster_down(state_dir):
    """Stop every process `cluster up` started, by PID."""
    from coordinator.cluster import down

    stopped = down(Path(state_dir))
    click.echo(f"stopped {len(stopped)} processes")


@main.group()
def convert():
    """Convert datasets between formats."""


@convert.command("locomo")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--expected", type=click.Choice(["evidence", "answer", "both"]), default="evidence", show_default=True)
@click.option("--top-k", type=click.IntRange(1), default=10, show_default=True)
def convert_locomo_command(source, target, expected, top_k):
    """LoCoMo (locomo10.json) to AdaMem JSONL episodes."""
    from adapters.adamem_jsonl import convert_locomo, write_episodes

    episodes = convert_locomo(source, expected=expected, top_k=top_k)
    count = write_episodes(episodes, target)
    click.echo(f"wrote {count} episodes ({sum(len(e['queries']) for e in episodes)} queries) to {target}")


# -- reading results ---------------------------------------------------------------------
@main.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--compare", "do_compare", is_flag=True, help="One row per file: session R@1/3/5/10 and NDCG@10.")
@click.option("--force", is_flag=True, help="Compare files of different benchmarks or profiles anyway.")
@click.option("--explain", type=click.IntRange(1), default=None, help="The N worst questions, explained.")
@click.option("--questions", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Companion questions file for --explain.")
@click.option("--all", "all_files", is_flag=True, help="Summarise every results JSON in --results-dir as JSON.")
@click.option("--results-dir", type=click.Path(file_okay=False), default="results", show_default=True)
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None, help="Write PNG charts here.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None, help="Write one HTML report.")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON.")
def analyze(files, do_compare, force, explain, questions, all_files, results_dir, plot_dir, html_file, as_json):
    """Read result files (and nothing else) and report on them."""
    import json

    from coordinator import analyze as analysis

    if all_files:
        click.echo(json.dumps(analysis.summarize_directory(results_dir), indent=1))
        return
    if not files:
        raise click.UsageError("name at least one results file (or use --all)")
    loaded = [analysis.load_results(f) for f in files]
    if do_compare:
        rows = analysis.compare(loaded, force=force)
        click.echo(json.dumps(rows, indent=1) if as_json else analysis.render_compare(rows))
    elif explain:
        companion = None
        if questions:
            from adapters.longmemeval import load_companion

            companion = load_companion(questions)
        for results in loaded:
            report = analysis.explain(results, explain, companion)
            click.echo(json.dumps(report, indent=1) if as_json else analysis.render_explain(report))
    else:
        for results in loaded:
            report = analysis.analyze(results)
            click.echo(json.dumps(report, indent=1, default=str) if as_json else analysis.render_analysis(report))
    if plot_dir or html_file:
        from coordinator import plots

        if plot_dir:
            for path in plots.write_plots(loaded, plot_dir):
                click.echo(f"chart: {path}", err=True)
        if html_file:
            Path(html_file).parent.mkdir(parents=True, exist_ok=True)
            Path(html_file).write_text(plots.html_report(loaded), encoding="utf-8")
            click.echo(f"report: {html_file}", err=True)


@main.command()
@click.option("--benchmark", type=click.Choice(["longmemeval", "locomo"]), default="longmemeval", show_default=True)
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--rankings", type=click.Path(exists=True, dir_okay=False), required=True,
              help='JSON lines: {"question_id": ..., "ranked": [ids, best first]}.')
@click.option("--level", type=click.Choice(["session", "turn"]), default="session", show_default=True)
@click.option("--scoring-profile", type=click.Choice(defaults.SCORING_PROFILES),
              default=defaults.DEFAULT_SCORING_PROFILE, show_default=True)
@click.option("--questions", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Companion questions file (LongMemEval turn gold).")
@click.option("--output", type=click.Path(dir_okay=False), default=None)
@click.pass_context
def score(ctx, benchmark, dataset, rankings, level, scoring_profile, questions, output):
    """Score a rankings file from any system with the metric code of the runs."""
    from coordinator.benchmarks import open_benchmark
    from coordinator.reducer import reduce_run
    from coordinator.score import score_rankings
    from workers.cache import file_sha256

    started = time.perf_counter()
    adapter = open_benchmark(benchmark, dataset, questions, scoring_profile)
    adapter.scan()
    outcomes, report = score_rankings(adapter, rankings, level, scoring_profile, defaults.DEFAULT_K_VALUES)
    for problem in report["problems"]:
        click.echo(f"warning: {problem}", err=True)
    if report["missing"]:
        click.echo(f"warning: {len(report['missing'])} questions have no ranking and score 0 "
                   f"(first: {', '.join(report['missing'][:5])})", err=True)
    context = {
        "benchmark": benchmark, "benchmark_title": adapter.benchmark["title"],
        "group_key": adapter.benchmark.get("group_key", "question_type"),
        "dataset_path": str(Path(dataset).resolve()), "dataset_sha256": file_sha256(dataset),
        "system_config": {"name": "external", "retrieval_mode": f"rankings:{level}", "rankings": str(Path(rankings).resolve()),
                          "rankings_sha256": file_sha256(rankings)},
        "embedding_signature": None, "scoring_profile": scoring_profile, "top_k": None,
        "k_values": defaults.DEFAULT_K_VALUES, "rendering": None, "arguments": dict(ctx.params),
        "command": ctx.obj["command"], "elapsed_seconds": time.perf_counter() - started,
    }
    results, manifest = reduce_run(outcomes, context)
    manifest["rankings"] = report
    _finish(results, manifest, output, benchmark, f"score-{level}")


# -- your own notes and code ----------------------------------------------------------
def _open_store(store: str):
    from memoria import MemoryInterface
    from memoria.interface import SNAPSHOT_FILES

    memory = MemoryInterface()
    if all((Path(store) / f).is_file() for f in SNAPSHOT_FILES.values()):
        memory.restore(store)
    return memory


def _ingest(adapter, store: str, batch_size: int) -> None:
    from memoria import BatchLoader

    records = adapter.records()
    memory = _open_store(store)
    loader = BatchLoader(memory)
    stored = 0
    with click.progressbar(length=len(records), label="ingesting", file=sys.stderr, show_pos=True) as bar:
        for start in range(0, len(records), batch_size):
            batch = [r for r in records[start:start + batch_size] if r["text"].strip()]
            stored += loader.insert_batch([r["text"] for r in batch], [r["metadata"] for r in batch],
                                          batch_size=batch_size)
            bar.update(min(batch_size, len(records) - start))
    memory.snapshot(store)
    stats = adapter.stats()
    click.echo(f"stored {stored} records in {store} ({len(memory)} in all)")
    click.echo(" ".join(f"{k}={v}" for k, v in stats.items() if isinstance(v, (int, str)) and k != "source"))
    for skipped in stats.get("skipped", []):
        click.echo(f"skipped {skipped['path']}: {skipped['reason']}", err=True)


@main.group()
def ingest():
    """Put your own sources into a Memoria store (a folder)."""


@ingest.command("obsidian")
@click.argument("vault", type=click.Path(file_okay=False))
@click.option("--store", type=click.Path(file_okay=False), required=True)
@click.option("--batch-size", type=click.IntRange(1), default=defaults.DEFAULT_BATCH_SIZE, show_default=True)
def ingest_obsidian(vault, store, batch_size):
    """Every note of an Obsidian VAULT, with its links, tags, tasks and frontmatter."""
    from adapters.sources.obsidian import ObsidianAdapter

    try:
        adapter = ObsidianAdapter(vault)
    except OSError as exc:
        raise MemfarmError(str(exc)) from exc
    _ingest(adapter, store, batch_size)


@ingest.command("git")
@click.argument("repo", type=click.Path(file_okay=False))
@click.option("--store", type=click.Path(file_okay=False), required=True)
@click.option("--batch-size", type=click.IntRange(1), default=defaults.DEFAULT_BATCH_SIZE, show_default=True)
@click.option("--max-file-bytes", type=click.IntRange(1), default=256 * 1024, show_default=True)
def ingest_git(repo, store, batch_size, max_file_bytes):
    """A local Git REPO: repository, directory, file and Python symbol records."""
    from adapters.sources.github import GitRepositoryAdapter

    try:
        adapter = GitRepositoryAdapter(repo, max_file_bytes=max_file_bytes)
    except (OSError, ValueError) as exc:
        raise MemfarmError(str(exc)) from exc
    _ingest(adapter, store, batch_size)


@main.command()
@click.argument("query")
@click.option("--store", type=click.Path(exists=True, file_okay=False), required=True)
@click.option("--mode", type=click.Choice(sorted(defaults.MODE_SOURCES)), default=defaults.DEFAULT_MODE,
              show_default=True)
@click.option("--limit", type=click.IntRange(1), default=5, show_default=True)
def recall(query, store, mode, limit):
    """Ask a store made by `memfarm ingest`; prints ranked hits with their source path."""
    memory = _open_store(store)
    if len(memory) == 0:
        raise MemfarmError(f"{store}: no Memoria store here (run `memfarm ingest` first)")
    for hit in memory.recall(query, mode=mode, limit=limit)["results"]:
        meta = hit["metadata"]
        where = meta.get("path", "") or meta.get("repository", "")
        if meta.get("line_start"):
            where += f":{meta['line_start']}"
        first = hit["text"].strip().split("\n", 1)[0][:100]
        click.echo(f"{hit['rank']:>3}. {hit['score']:.4f}  {where}  [{meta.get('record_type', '')}]  {first}")


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


@bench.command("longmemeval")
@click.option("--questions", type=click.IntRange(1), default=50, show_default=True)
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=1.0, show_default=True)
@click.option("--rss-questions", type=click.IntRange(10), default=500, show_default=True,
              help="Size of the large file whose peak RSS is compared with a small one's.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_longmemeval", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/longmemeval.json", show_default=True)
def bench_longmemeval(questions, scale, rss_questions, workdir, output):
    """Cold vs warm seconds per question, cache hits and peak RSS on generated files."""
    from coordinator.perf import run_longmemeval_bench

    click.echo(run_longmemeval_bench(questions, scale, rss_questions, workdir, output))


@bench.command("locomo")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_locomo", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/locomo.json", show_default=True)
def bench_locomo(dataset, workdir, output):
    """dense, bm25, raw and fusion on one LoCoMo file, side by side."""
    from coordinator.perf import run_locomo_bench

    click.echo(run_locomo_bench(dataset, workdir, output))


@bench.command("farm")
@click.option("--questions", type=click.IntRange(2), default=20, show_default=True)
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.1, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_farm", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/farm.json", show_default=True)
def bench_farm(questions, scale, workdir, output):
    """Farm vs local (warm and cold), 2 workers vs 1, broker overhead; starts its own redis and workers."""
    from coordinator.perf import run_farm_bench

    click.echo(run_farm_bench(questions, scale, workdir, output))


@bench.command("ablation")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--questions", type=click.IntRange(1), default=30, show_default=True,
              help="Questions of the generated LongMemEval-S file.")
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.3, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_ablation", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/ablation.json", show_default=True)
def bench_ablation(locomo, questions, scale, workdir, output):
    """fusion vs full vs full without each source (and without MMR), on LoCoMo and generated LongMemEval-S."""
    from coordinator.perf import run_ablation_bench

    click.echo(run_ablation_bench(locomo, questions, scale, workdir, output))


@bench.command("systems")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/systems.json", show_default=True)
def bench_systems(locomo, output):
    """memoria (fusion, full), adamem (full, semantic-only) and mem0 on one LoCoMo file."""
    from coordinator.perf import run_systems_bench

    click.echo(run_systems_bench(locomo, output))


if __name__ == "__main__":
    main()
