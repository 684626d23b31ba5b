"""`memfarm bench ...` that set systems side by side, each run as a whole `memfarm run`: the systems table, the
full mode's ablation, AdaMem's measures, mnem's published rankings, and what a system or a benchmark costs over a
long run (open files, RealMem against LoCoMo, model threads). Registered on `bench` (`coordinator.cli.bench`)."""

from __future__ import annotations

from pathlib import Path

import click

from coordinator.cli.bench import bench
from coordinator.cli.root import broker_option


@bench.command("ablation")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--questions", type=click.IntRange(1), default=30, show_default=True,
              help="Questions of the generated LongMemEval-S file.")
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.3, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_ablation", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/ablation.json", show_default=True)
def bench_ablation(locomo, questions, scale, workdir, output):
    """fusion vs full vs full without each source (and without MMR), on LoCoMo and generated LongMemEval-S."""
    from coordinator.benches.ablation import run_ablation_bench

    click.echo(run_ablation_bench(locomo, questions, scale, workdir, output))


@bench.command("systems")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A LoCoMo file (give it, --realmem, --beam or several).")
@click.option("--questions", type=click.IntRange(1), default=20, show_default=True,
              help="Questions of the generated LongMemEval-S file.")
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.1, show_default=True,
              help="Haystack size of the generated file (1.0: the real file's ~48 sessions a question).")
@click.option("--longmemeval/--no-longmemeval", default=True, show_default=True,
              help="Also run every system on a generated LongMemEval-S file.")
@click.option("--limit", type=click.IntRange(1), default=None,
              help="Only the first N conversations of the LoCoMo file (the generated file is sized by --questions).")
@click.option("--realmem", type=click.Path(exists=True), default=None,
              help="RealMem persona files (a file or a folder, e.g. the development personas): a third dataset.")
@click.option("--realmem-limit", type=click.IntRange(1), default=None, help="Only the first N personas.")
@click.option("--beam", type=click.Path(exists=True), default=None,
              help="BEAM chats (its chats/ folder, a size folder or one chat folder): scored message by message, "
                   "each system against the reference per ability.")
@click.option("--beam-limit", type=click.IntRange(1), default=None, help="Only the first N chats.")
@click.option("--system", "systems", multiple=True, metavar="SYSTEM",
              help="Only these rows (repeatable; the reference always runs): a row's label "
                   "('mnem dense'), or another system, a server (http://HOST:PORT[/PREFIX]) or a Python class, "
                   "as a row of its own.")
@click.option("--reference", default="memoria full", show_default=True, metavar="LABEL",
              help="The row every other row is compared with, question by question (a row's label).")
@click.option("--reuse", is_flag=True,
              help="Read a run from the results file this bench made in --workdir for the same command and dataset "
                   "(same checksum, same commit of the farm) instead of running it again; the folder is not "
                   "emptied. Without it every run is cold.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_systems", show_default=True,
              help="Where each system's results file and manifest are written (emptied first unless --reuse; a "
                   "folder holding anything a bench did not make is refused).")
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/systems.json", show_default=True)
def bench_systems(locomo, questions, scale, longmemeval, limit, realmem, realmem_limit, beam, beam_limit, systems,
                  reference, reuse, workdir, output):
    """Every system and control arm side by side (Memoria's modes, AdaMem, mem0, mnem, MemPalace, bm25s, Qdrant,
    LanceDB, txtai, Engrava, random, recency; `--system` picks) on a LoCoMo file, a generated LongMemEval-S file
    and RealMem personas where given, each against the reference (Memoria full) with paired intervals and
    Holm-adjusted p. Each run is announced as it starts and ends, with its own progress lines under it."""
    from adapters.systems.http_client import is_http_system
    from coordinator.benches.systems import SYSTEMS, run_systems_bench
    from coordinator.running.spec import resolved_system

    if not locomo and not realmem and not beam:
        raise click.UsageError("no dataset: give --locomo, --realmem, --beam or several")
    labels = dict(SYSTEMS)
    only = tuple(s for s in systems if s in labels or not (is_http_system(s) or ":" in s))
    extra = tuple(resolved_system(s) for s in systems if s not in only)
    try:
        click.echo(run_systems_bench(locomo, output, workdir=workdir, questions=questions, scale=scale,
                                     limit=limit, only=only, extra=extra, realmem=realmem,
                                     realmem_limit=realmem_limit, longmemeval=longmemeval, reference=reference,
                                     reuse=reuse, progress=lambda line: click.echo(line, err=True), beam=beam,
                                     beam_limit=beam_limit))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--reference" if "reference" in str(exc) else
                                 "--reuse" if "--reuse" in str(exc) else "--system") from None


@bench.command("beam")
@click.option("--dataset", type=click.Path(exists=True, file_okay=False), required=True,
              help="BEAM chats: the chats/ folder, a size folder or a chat folder (the development chats).")
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N chats.")
@click.option("--system", "systems", multiple=True, metavar="LABEL",
              help="Only these rows (repeatable): bm25s, 'memoria bm25', 'recency arm', 'random arm'; the plain "
                   "BM25 always.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_beam", show_default=True,
              help="Where each system's results file and manifest are written (emptied first; a folder holding anything "
                   "a bench did not make is refused).")
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/beam.json", show_default=True)
def bench_beam(dataset, limit, systems, workdir, output):
    """The cheap systems and the arms on BEAM chats at the message level, per chat size and per ability, beside
    the issue's plain BM25 (rank-bm25's Okapi over lower-cased alphanumeric tokens) over the same messages."""
    from coordinator.benches.beam import run_beam_bench

    try:
        click.echo(run_beam_bench(dataset, output, workdir=workdir, limit=limit, only=tuple(systems)))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--system") from None


@bench.command("open-files")
@click.option("--system", default="mempalace", show_default=True, help="The system to run (a built-in's name).")
@click.option("--questions", type=click.IntRange(4), default=100, show_default=True,
              help="Questions of the generated LongMemEval-S file.")
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.05, show_default=True,
              help="Haystack size of the generated file (1.0: the real file's ~48 sessions a question).")
@click.option("--nofile", type=click.IntRange(32), default=256, show_default=True,
              help="The run's soft limit on open files (`ulimit -n`).")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_open_files", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/open_files.json", show_default=True)
def bench_open_files(system, questions, scale, nofile, workdir, output):
    """A long local run under `ulimit -n NOFILE`, with the open files counted after every item: a system that keeps
    a finished item's store open shows a slope, or runs out of handles."""
    from coordinator.benches.open_files import run_open_files_bench

    try:
        click.echo(run_open_files_bench(system, questions=questions, scale=scale, nofile=nofile, workdir=workdir,
                                        output=output))
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None


@bench.command("threads")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), required=True,
              help="A LoCoMo file; its first conversation is run.")
@click.option("--threads", "threads", type=click.IntRange(1), multiple=True,
              help="A model thread count to run (repeatable; default: 1 and every core).")
@click.option("--mode", default="fusion", show_default=True, help="Memoria's retrieval mode.")
@click.option("--reps", type=click.IntRange(1), default=2, show_default=True, help="Cold runs of each count.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_threads", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/threads.json", show_default=True)
def bench_threads(locomo, threads, mode, reps, workdir, output):
    """One LoCoMo conversation with several model thread counts (`run --threads`), cold and alternating: wall time
    and the load each run began under."""
    from coordinator.benches.threads import run_threads_bench

    click.echo(run_threads_bench(locomo, threads=threads, mode=mode, reps=reps, workdir=workdir, output=output))


@bench.command("realmem-cost")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), required=True,
              help="A LoCoMo file; its first conversation is the yardstick.")
@click.option("--realmem", type=click.Path(exists=True, dir_okay=False), required=True,
              help="One RealMem persona file, cut to as many turns as the conversation holds.")
@click.option("--mode", default="full", show_default=True, help="Memoria's retrieval mode on both sides.")
@click.option("--reps", type=click.IntRange(1), default=2, show_default=True, help="Cold runs of each side.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_realmem_cost", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/realmem_cost.json", show_default=True)
def bench_realmem_cost(locomo, realmem, mode, reps, workdir, output):
    """A RealMem persona next to a LoCoMo conversation of as many turns, cold, alternating: wall per turn and
    peak RSS of each, and their ratio."""
    from coordinator.benches.realmem_cost import run_realmem_cost_bench

    click.echo(run_realmem_cost_bench(locomo, realmem, mode=mode, reps=reps, workdir=workdir, output=output))


@bench.command("beam-scale")
@click.option("--beam", type=click.Path(exists=True, file_okay=False), default="../shared/data/beam_dev",
              show_default=True, help="BEAM's development chats (the folder holding chats/, or chats/ itself).")
@click.option("--part", "parts", multiple=True, metavar="SIZE/N",
              help="A chat joined into the 1M stand-in, in order (repeatable; default: 500K/2 and 500K/5).")
@click.option("--realmem", type=click.Path(exists=True), default="../shared/data/realmem_dev5", show_default=True,
              help="A RealMem persona file, or a folder of them whose smallest file is run.")
@click.option("--realmem-sessions", type=click.IntRange(0), default=0, show_default=True,
              help="Only the persona's first N sessions (0: the whole persona).")
@click.option("--mode", default="full", show_default=True, help="Memoria's retrieval mode on both sides.")
@click.option("--threads", type=click.IntRange(1), default=2, show_default=True, help="The worker's model threads.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_beam_scale", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/beam_scale.json", show_default=True)
def bench_beam_scale(beam, parts, realmem, realmem_sessions, mode, threads, workdir, output):
    """A 1M BEAM stand-in (two 500K chats joined) cold on a farm of one real worker, beside a RealMem persona:
    the worker's peak RSS against the per-worker bound, ms per message against ms per persona turn."""
    from adapters.errors import MemfarmError
    from coordinator.benches.beam_scale import DEFAULT_PARTS, run_beam_scale_bench

    try:
        click.echo(run_beam_scale_bench(beam, realmem, parts=tuple(parts) or DEFAULT_PARTS,
                                        realmem_sessions=realmem_sessions or None, mode=mode, threads=threads,
                                        workdir=workdir, output=output))
    except (MemfarmError, FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


@bench.command("adamem")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A LoCoMo file (for example ../shared/data/locomo_dev5.json); needed by the locomo suite.")
@click.option("--suite", "suites", multiple=True, type=click.Choice(["synthetic", "locomo", "longmemeval"]),
              help="Only these suites (default: all three).")
@click.option("--questions", type=click.IntRange(1), default=30, show_default=True,
              help="Questions of the generated LongMemEval-S file.")
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.1, show_default=True)
@click.option("--longmemeval", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A LongMemEval-S file to use instead of a generated one.")
@click.option("--conversations", type=click.IntRange(1), default=None,
              help="Only the first N conversations of the LoCoMo file.")
@broker_option(required=False)
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_adamem", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/adamem.json", show_default=True)
def bench_adamem(locomo, suites, questions, scale, longmemeval, conversations, broker, workdir, output):
    """The seven AdaMem ablations side by side, with the design's six measures, one table per suite."""
    from coordinator.benches.adamem import SUITES, run_adamem_bench

    suites = suites or SUITES
    if "locomo" in suites and not locomo:
        raise click.UsageError("the locomo suite needs --locomo FILE (or leave it out with --suite)")
    click.echo(run_adamem_bench(locomo, questions, scale, workdir, output, suites=suites, conversations=conversations,
                                broker=broker, longmemeval=longmemeval))


@bench.command("mnem-published")
@click.option("--report", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The --report of `memfarm convert mnem-rankings`.")
@click.option("--scored", type=click.Path(exists=True, dir_okay=False), required=True,
              help="`memfarm score --level session` of the converted rankings.")
@click.option("--run", "run_file", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The farm's own `--system mnem --retrieval-mode dense` run on the same dataset.")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/mnem_published.json",
              show_default=True)
def bench_mnem_published(report, scored, run_file, dataset, output):
    """mnem's published LoCoMo rankings against the farm's own mnem run, question by question, every difference
    with its reason."""
    import json

    from coordinator.benches.common import write_bench
    from coordinator.results.mnem_rankings import reconcile
    from coordinator.results.run_files import ResultsFile

    data = reconcile(json.loads(Path(report).read_text()), ResultsFile.read(scored), ResultsFile.read(run_file),
                     json.loads(Path(dataset).read_text()))
    path = write_bench("mnem-published", {"dataset": dataset, **data}, output)
    for row in data["question_sets"] + data["mnem_figures"] + data["published_vs_run"] + data["difference_reasons"]:
        click.echo("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
    click.echo(f"paired: {data['paired']}")
    click.echo(f"wrote {path}")
