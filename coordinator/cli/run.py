"""`memfarm run` and `memfarm submit`: one RunSpec, evaluated here or staged on the farm."""

from __future__ import annotations

import sys
from collections import Counter
from contextlib import ExitStack
from dataclasses import fields
from pathlib import Path

import click

from adapters.defaults import DEFAULT_MAX_ATTEMPTS, DEFAULT_OBJECTIVE, DEFAULT_TOP_K
from adapters.benchmarks import BENCHMARKS
from coordinator.cli.benchmark_choice import BenchmarkChoice
from adapters.systems.settings import BY_NAME, SETTINGS, Kind, Setting
from adapters.terminal import printable
from adapters.threads import use_threads
from coordinator.cli.root import ProfileChoice, broker_option, main
from memoria import defaults as engine
from memoria.settings import MemoriaSettings, default_of


#: What an option's help adds to its setting's own line, where the system decides whether the setting is used.
OPTION_NOTES = {"window_size": "used where --weights gives `window` a weight"}


def settings_options(settings_class=MemoriaSettings) -> list:
    """One option per Memoria setting marked `option`: named, bounded and explained by its field.

    Each defaults to None, so a RunSpec records only the settings given and the engine keeps its own default.
    """
    return [_setting_option(spec) for spec in fields(settings_class) if spec.metadata["option"]]


def _setting_option(spec):
    default, meta = default_of(spec), spec.metadata
    if isinstance(default, bool) or not isinstance(default, (int, float)):
        raise TypeError(f"setting {spec.name}: only a number can be an option, not {default!r}")
    bounds = (click.IntRange if isinstance(default, int) else click.FloatRange)(meta["minimum"], meta["maximum"])
    scope = f"{'/'.join(engine.RANKED_MODES)}: " if meta["ranked"] else ""
    note = f"; {OPTION_NOTES[spec.name]}" if spec.name in OPTION_NOTES else ""
    return click.option(f"--{spec.name.replace('_', '-')}", spec.name, type=bounds, default=None,
                        help=f"{scope}{meta['doc']} (default {default}{note}).")


def system_option(setting: Setting):
    """The option of a system's setting (`adapters.systems.settings`): named, typed and explained by it.

    A choice offers every built-in system's values (the spec refuses one its system does not have);
    one with an `each` value (`--ablation all`) is any text, which the spec expands and the system checks.
    """
    from adapters.systems import SYSTEMS

    kwargs = {"help": setting.help_for(SYSTEMS.values()), "metavar": setting.metavar, "envvar": setting.envvar}
    if setting.kind is Kind.PARTS:
        kwargs["multiple"] = True  # none given: an empty tuple, click's own
    else:
        kwargs["default"] = setting.default
        if setting.default is not None:
            kwargs["show_default"] = True
    if setting.kind is Kind.COUNT:
        kwargs["type"] = click.IntRange(setting.minimum)
    elif setting.kind is Kind.CHOICE and setting.each is None:
        kwargs["type"] = click.Choice(setting.offered(SYSTEMS.values()))
    elif setting.kind is Kind.WEIGHTS:
        kwargs["type"] = click.Path(exists=True, dir_okay=False)
    if setting.kind is Kind.STORE:
        return click.option(f"{setting.flag}/--no-{setting.flag[2:]}", **kwargs)
    return click.option(setting.flag, setting.option, **kwargs)


def run_options(command):
    """Options shared by `run` and `submit`: what to evaluate and how (they become a RunSpec).

    Each system setting's option is placed by name where its help reads best; one not placed comes last.
    """
    placed = []

    def described(*names):
        placed.extend(names)
        return [system_option(BY_NAME[name]) for name in names]

    options = [
        click.argument("benchmark", type=BenchmarkChoice()),
        click.option("--dataset", type=click.Path(), default=None,
                     help="The dataset file (not for adamem-synthetic); for realmem, a persona file or a folder of "
                          "them; for beam, BEAM's chats/ folder, a size folder or a chat folder."),
        click.option("--questions", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="Companion questions file (LongMemEval) for turn-level gold."),
        *described("mode"),
        click.option("--system", default=None,
                     help="memoria (default), adamem (default for adamem-*), mem0, mnem, mempalace, bm25s, qdrant, lancedb, "
                          "txtai, engrava, random, recency, "
                          "path/to/file.py:ClassName, or a server: http://HOST:PORT[/PREFIX] (token in "
                          "MEMFARM_SYSTEM_TOKEN)."),
        click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N items."),
        click.option("--cache-dir", type=click.Path(file_okay=False), envvar="MEMFARM_CACHE_DIR", default=None,
                     help="Per-item cache (local runs; farm workers use their own --cache-dir)."),
        click.option("--rebuild-cache", is_flag=True, help="Ignore cached items and rebuild them."),
        click.option("--output", type=click.Path(dir_okay=False), default=None),
        click.option("--scoring-profile", "--profile", "scoring_profile", type=ProfileChoice(),
                     default=None,
                     help="Gold rules and corpus of the run (every profile of the benchmark is also computed). "
                          "Default: longmemeval-official for longmemeval (citable), expected-text otherwise."),
        *described("batch_size", "max_workers"),
        click.option("--top-k", type=click.IntRange(1), default=DEFAULT_TOP_K, show_default=True),
        click.option("--max-attempts", type=click.IntRange(1), default=DEFAULT_MAX_ATTEMPTS, show_default=True,
                     help="Farm: attempts per item before it is a final failure."),
        click.option("--run-id", default=None, help="Farm: name the run (default: time + random)."),
        *described("weights", "without"),
        *settings_options(),
        *described("ablation", "max_seq_length", "embedder_backend", "embedder", "embedding_store"),
        *[system_option(setting) for setting in SETTINGS if setting.name not in placed],
        click.option("--threads", type=click.IntRange(1), envvar="MEMFARM_THREADS", default=None,
                     help="Local runs: threads of the model (torch, ONNX Runtime). Default: every core; 1 on a "
                          "machine others use (oversubscribed threads slow a run several times over)."),
        click.option("--shared-embeddings", is_flag=True, default=False,
                     help="Farm: workers also share vectors through the run's Redis (float32, bounded by "
                          "MEMFARM_SHARED_EMBEDDINGS_MIB, default 256)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def spec_from(ctx: click.Context, command: str, params: dict, farm: bool):
    """The RunSpec of a `run` / `submit` command line, checked; warnings printed once."""
    from coordinator.running.spec import from_options

    explicit = {name for name in params
                if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)}
    dataset = params.get("dataset")
    benchmark = BENCHMARKS[params["benchmark"]]
    if dataset is not None and Path(dataset).is_dir() and not benchmark.reads_folders:
        raise click.BadParameter(f"{dataset!r} is a folder; {benchmark.title} takes one file", ctx=ctx,
                                 param_hint="'--dataset'")
    if dataset is not None and not Path(dataset).exists():  # named with where the benchmark's file comes from
        raise click.BadParameter(f"file {dataset!r} does not exist; {benchmark.title} comes as {benchmark.source} "
                                 "(docs/datasets.md)", ctx=ctx, param_hint="'--dataset'")
    spec = from_options(params.pop("benchmark"), params, command=command, explicit=explicit)
    for warning in spec.check(farm=farm):
        click.echo(f"warning: {warning}", err=True)
    return spec


@main.command()
@run_options
@broker_option(required=False)
@click.option("--optimize", is_flag=True, help="After the run, tune the full-mode weights on its records.")
@click.option("--step-size", type=click.FloatRange(min=0, min_open=True), default=0.02, show_default=True)
@click.option("--objective", default=DEFAULT_OBJECTIVE, show_default=True, help="LEVEL:METRIC@K to maximise.")
@click.option("--dry-run-weights", is_flag=True, help="With --optimize: print the proposed weights, write nothing.")
@click.option("--save-weights", type=click.Path(dir_okay=False), default=None,
              help="With --optimize: where to write the weights (default: beside the results file).")
@click.pass_context
def run(ctx, broker, optimize, step_size, objective, dry_run_weights, save_weights, **params):
    """Run BENCHMARK and write the results file and manifest.

    Without --broker (or MEMFARM_BROKER) every item runs here, no server needed.
    With it, items are staged in Redis and run by `memfarm worker` processes.
    """
    cli = ctx.obj
    threads = params.pop("threads")
    if threads and broker:
        raise click.UsageError(FARM_THREADS)
    if threads:  # before any model loads: torch's pool and ONNX Runtime's take it (a vector's last bits may depend
        use_threads(threads)  # on the count, below the tie grid: rankings of one machine stay comparable)
    tuning = [name for name in ("step_size", "objective", "dry_run_weights", "save_weights")
              if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT]
    if tuning and not optimize:
        raise click.UsageError(f"--{tuning[0].replace('_', '-')} only means something with --optimize")
    spec = spec_from(ctx, cli.command, params, farm=bool(broker))
    if not broker and Path(".memfarm", "cluster.json").is_file():  # a farm is up here, and this run is not on it
        from coordinator.cli.cluster import env_line

        click.echo(f"note: running on this machine alone: a cluster is up here (.memfarm/cluster.json) but no "
                   f"--broker or MEMFARM_BROKER is set; to run on it: {env_line('.memfarm')}", err=True)
    if optimize and (spec.retrieval_mode != "full" or spec.system_name != "memoria"):
        raise click.UsageError("--optimize tunes the ranking weights of --system memoria --retrieval-mode full")
    started: list[str] = []  # the farm runs this command staged, the last one being watched
    try:
        for one in spec.ablations():
            if broker:
                from coordinator.cli.farm import watch_and_reduce

                run_id = _submit(cli, broker, one, staged=started)
                results_path = watch_and_reduce(cli, broker, run_id, one.output)
            else:
                results_path = _run_local(cli, one)
            if optimize:
                _optimize(results_path, step_size, objective, dry_run_weights, save_weights)
    except KeyboardInterrupt:
        click.echo(interrupted_line(spec, started[-1] if started else None, farm=bool(broker)), err=True)
        sys.exit(INTERRUPTED_EXIT)
    from coordinator.cli.failures import exit_if_failed

    exit_if_failed(cli)


#: The exit status of a run stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED_EXIT = 130


def interrupted_line(spec, run_id: str | None, farm: bool) -> str:
    """The one line a run stopped by Ctrl-C prints: what is kept, and how to go on."""
    from adapters.defaults import EMBEDDING_STORE_FILE

    if farm and run_id:
        return printable(f"interrupted: run {run_id} goes on on the workers; watch it with `memfarm status {run_id}` "
                         f"and write its results with `memfarm resume {run_id}` (it enqueues what is not done, "
                         "waits and reduces)")
    if farm:
        return ("interrupted while staging: `memfarm runs` lists what reached the farm (`memfarm forget RUN` "
                "removes a run staged in part); the same command stages it afresh")
    if not spec.cache_dir:
        return ("interrupted: nothing is kept (no --cache-dir); with --cache-dir DIR the same command would resume "
                "from the items already done")
    store = (f" and the embedding store ({Path(spec.cache_dir) / EMBEDDING_STORE_FILE})"
             if spec.embedding_store else "")
    return printable(f"interrupted: the items done are kept in the per-item cache under {spec.cache_dir}{store}; "
                     "the same command resumes from them")


FARM_THREADS = "--threads is for local runs: a farm's workers take theirs from `memfarm worker --torch-threads`"


def _run_local(cli, spec) -> Path:
    from adapters.systems import describe
    from coordinator.results.labels import run_label
    from coordinator.running.local_executor import run_local
    from coordinator.running.progress import ItemProgress, QuestionProgress

    misses, bars = [], []

    with ExitStack() as stack:  # the bar's length is known only once the dataset is scanned
        def start(total, system):
            mode = describe(system).get("retrieval_mode")
            click.echo(printable(f"{spec.benchmark}: {total} items ({run_label(system.name, mode)})"), err=True)
            bars.append(stack.enter_context(click.progressbar(
                length=total, label="items", show_eta=True, show_pos=True, file=sys.stderr,
                item_show_func=lambda o: o["item_id"][:16] if o else "")))

        def advance(outcome):
            cache = outcome.get("cache")
            if spec.cache_dir and cache and not cache["hit"] and cache.get("consulted"):
                misses.append(f"{outcome['item_id']}: {cache['reason']}")
            bars[0].label = "items"
            bars[0].update(1, outcome)
            if not live and overall.due(bars[0].pos, bars[0].length):  # no bar where the output is a log
                click.echo(overall.line(bars[0].pos, bars[0].length), err=True)

        inside, overall, live = QuestionProgress(), ItemProgress(), sys.stderr.isatty()

        def asked(item_id, done, total):  # an item of many questions shows them: on the bar, or a line now and then
            line = inside.line(item_id, done, total)
            if not live:
                if total > 1 and inside.due(done, total):  # a one-question item is said by the items' line
                    click.echo(f"  {line}", err=True)
            elif bars:
                bars[0].label = f"items ({line})"
                bars[0].render_progress()

        results, manifest = run_local(spec, on_start=start, on_item=advance, on_question=asked)
    if manifest["cache"]["dir"]:
        cache = manifest["cache"]
        click.echo(f"cache: {cache['hits']} hits, {cache['misses']} rebuilt", err=True)
        for line in misses[:20]:
            click.echo(f"  rebuilt {line}", err=True)
        for reason, count in Counter(cache["not_cached"].values()).most_common():
            click.echo(f"  not cached, {count} of {len(manifest['items'])} items: {reason}", err=True)
        line = encoded_beside_hits(manifest)
        if line:
            click.echo(line, err=True)
    return cli.write_results(results, manifest, spec.output)


def encoded_beside_hits(manifest: dict) -> str | None:
    """Why a run whose items came from the cache still took minutes: the texts its mode reads that no run before
    it had encoded (`full` after `fusion`: the sentence pieces only `full` ranks), by kind."""
    cache = manifest["cache"]
    missed = (set(cache.get("rebuild_reasons") or {}) | set(cache.get("not_cached") or {})
              | {failure.get("item_id") for failure in manifest.get("failures") or []})  # a failed item restored nothing
    restored = [item for item in manifest.get("items") or [] if item["item_id"] not in missed]
    kinds = Counter()
    for item in restored:
        kinds.update({kind: count for kind, count in (item["stats"].get("texts_encoded_by_kind") or {}).items()
                      if kind != "questions" and count})
    if not restored or not kinds:
        return None
    said = ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())
    items = f"the {len(restored)} items" if len(restored) > 1 else "the item"
    return (f"  {items} from the cache still encoded what this mode reads and no earlier run had "
            f"({said}): a mode's first run after another encodes what only it reads; its next run reads them back")


def _submit(cli, broker: str, spec, staged: list[str] | None = None) -> str:
    """Stage and enqueue one run; its id is added to `staged` as soon as it is known."""
    from coordinator.running.farm_run import submit as stage_and_enqueue

    ledger, app = cli.connect(broker)
    bars = []
    with ExitStack() as stack:
        run_id, items = stage_and_enqueue(
            ledger, app, spec, broker,
            on_start=lambda total: bars.append(stack.enter_context(
                click.progressbar(length=total, label="staging", file=sys.stderr))),
            on_item=lambda _: bars[0].update(1))
    if staged is not None:
        staged.append(run_id)
    click.echo(f"run id: {run_id}", err=True)
    click.echo(f"enqueued {len(items)} items of run {run_id}", err=True)
    click.echo(staging_line(ledger.staging_stats, ledger.meta(run_id).get("staging", {}).get("redis_used_memory")),
               err=True)
    return run_id


def staging_line(stats: dict, used_memory: int | None) -> str:
    """One line on what staging stored: sessions once each, the bytes, and the Redis server's memory."""
    mib = 1024 * 1024
    redis_part = f"redis holds {used_memory / mib:.1f} MiB" if used_memory is not None else \
        "redis memory: not readable by this user"
    return (f"staged {stats['session_occurrences']} session occurrences as {stats['sessions_stored']} distinct "
            f"({stats['session_bytes'] / mib:.1f} MiB of sessions, {stats['item_bytes'] / mib:.1f} MiB of items, "
            f"compressed); {redis_part}")


def _optimize(results_path: Path, step_size: float, objective_name: str, dry_run: bool, save_to) -> None:
    from adapters.files import write_json
    from coordinator.results.optimize import optimise, run_weights, tuned_on
    from coordinator.results.run_files import ResultsFile

    results = ResultsFile.read(results_path)
    weights = run_weights(results)
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
    write_json(target, {"weights": report["weights"], "optimisation": report, "tuned_on": tuned_on(results, report)})
    click.echo(f"weights: {target} (use with --weights)")


@main.command("optimize")
@click.argument("results_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--step-size", type=click.FloatRange(0, min_open=True), default=0.02, show_default=True)
@click.option("--objective", default=DEFAULT_OBJECTIVE, show_default=True, help="LEVEL:METRIC@K to maximise.")
@click.option("--held-out", "folds", type=click.IntRange(2), default=None, metavar="FOLDS",
              help="Instead of tuning: deal the items into FOLDS groups, tune on all but one and score that one, "
                   "to see whether a gain carries to data it was not tuned on.")
@click.option("--dry-run-weights", is_flag=True, help="Print the proposed weights, write nothing.")
@click.option("--save-weights", type=click.Path(dir_okay=False), default=None,
              help="Where to write the weights (default: beside the results file).")
@click.option("--json", "json_output", type=click.Path(dir_okay=False), default=None,
              help="With --held-out: also write the check, each fold's items, tuned weights and scores, here.")
def optimize(results_file, step_size, objective, folds, dry_run_weights, save_weights, json_output):
    """Tune the full-mode weights on a finished run's records (no model is loaded), or check with --held-out."""
    if folds is None:
        if json_output:
            raise click.UsageError("--json writes a held-out check: give --held-out FOLDS")
        _optimize(Path(results_file), step_size, objective, dry_run_weights, save_weights)
        return
    from coordinator.results.optimize import held_out, run_weights
    from coordinator.results.run_files import ResultsFile

    results = ResultsFile.read(results_file)
    report = held_out(results["records"], run_weights(results), folds, step_size,
                      objective)
    click.echo(f"held out: {report['items']} items in {report['folds']} folds, {report['questions']} questions; "
               f"each fold scored with the run's weights and with weights tuned on the other folds")
    click.echo(f"{'metric':<24}{'run weights':>12}{'tuned elsewhere':>17}{'change':>9}")
    for name, pair in report["metrics"].items():
        click.echo(f"{name:<24}{pair['before']:>12.4f}{pair['held_out']:>17.4f}{pair['held_out'] - pair['before']:>+9.4f}")
    if json_output:
        from adapters.files import write_json
        from coordinator.benches.common import provenance

        write_json(json_output, {**provenance(), "results_file": str(results_file),
                                 "dataset_checksum": results.get("dataset_checksum"),
                                 "benchmark": results.get("benchmark"), **report})
        click.echo(f"held-out check: {json_output}")


@main.command()
@run_options
@broker_option()
@click.pass_context
def submit(ctx, broker, **params):
    """Stage BENCHMARK's items in Redis and enqueue one task per item; prints the run id."""
    if params.pop("threads"):
        raise click.UsageError(FARM_THREADS)
    spec = spec_from(ctx, ctx.obj.command, params, farm=True)
    for one in spec.ablations():
        click.echo(_submit(ctx.obj, broker, one))

