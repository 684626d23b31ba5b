"""`memfarm bench ...`: speed, memory and quality benchmarks of the product; each writes JSON under results/bench/."""

from __future__ import annotations

from pathlib import Path

import click

from coordinator.cli.root import broker_option, main
from memoria.defaults import DEFAULT_EMBEDDER, EMBEDDER_BACKENDS


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
    from coordinator.benches.engine import run_engine_bench

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
    from coordinator.benches.longmemeval import run_longmemeval_bench

    click.echo(run_longmemeval_bench(questions, scale, rss_questions, workdir, output))


@bench.command("locomo")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_locomo", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/locomo.json", show_default=True)
@click.option("--embedder", metavar="minilm|mpnet|PATH", default=DEFAULT_EMBEDDER, show_default=True,
              help="The embedding model of every run.")
def bench_locomo(dataset, workdir, output, embedder):
    """dense, bm25, raw and fusion on one LoCoMo file, side by side."""
    from coordinator.benches.locomo import run_locomo_bench

    click.echo(run_locomo_bench(dataset, workdir, output, embedder=embedder))


@bench.command("farm")
@click.option("--questions", type=click.IntRange(2), default=20, show_default=True)
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.1, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_farm", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/farm.json", show_default=True)
def bench_farm(questions, scale, workdir, output):
    """Farm vs local (warm and cold), 2 workers vs 1, broker overhead; starts its own redis and workers."""
    from coordinator.benches.farm_vs_local import run_farm_bench

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
    from coordinator.benches.ablation import run_ablation_bench

    click.echo(run_ablation_bench(locomo, questions, scale, workdir, output))


@bench.command("systems")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--questions", type=click.IntRange(2), default=20, show_default=True,
              help="Questions of the generated LongMemEval-S file.")
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.1, show_default=True,
              help="Haystack size of the generated file (1.0: the real file's ~48 sessions a question).")
@click.option("--limit", type=click.IntRange(1), default=None,
              help="Only the first N conversations of the LoCoMo file (the generated file is sized by --questions).")
@click.option("--realmem", type=click.Path(exists=True), default=None,
              help="RealMem persona files (a file or a folder, e.g. the development personas): a third dataset.")
@click.option("--realmem-limit", type=click.IntRange(1), default=None, help="Only the first N personas.")
@click.option("--system", "systems", multiple=True, metavar="SYSTEM",
              help="Only these rows (repeatable; memoria full, the reference, always runs): a row's label "
                   "('mnem dense'), or another system, a server (http://HOST:PORT[/PREFIX]) or a Python class, "
                   "as a row of its own.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_systems", show_default=True,
              help="Where each system's results file and manifest are written (emptied first).")
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/systems.json", show_default=True)
def bench_systems(locomo, questions, scale, limit, realmem, realmem_limit, systems, workdir, output):
    """Every system and control arm side by side (Memoria's modes, AdaMem, mem0, mnem, MemPalace, bm25s, Qdrant,
    LanceDB, txtai, Engrava, random, recency; `--system` picks) on a LoCoMo file, a generated LongMemEval-S file
    and RealMem personas where given, each against Memoria full with paired intervals and Holm-adjusted p."""
    from adapters.systems.http_client import is_http_system
    from coordinator.benches.systems import SYSTEMS, run_systems_bench
    from coordinator.running.spec import resolved_system

    labels = dict(SYSTEMS)
    only = tuple(s for s in systems if s in labels or not (is_http_system(s) or ":" in s))
    extra = tuple(resolved_system(s) for s in systems if s not in only)
    try:
        click.echo(run_systems_bench(locomo, output, workdir=workdir, questions=questions, scale=scale,
                                     limit=limit, only=only, extra=extra, realmem=realmem,
                                     realmem_limit=realmem_limit))
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


@bench.command("coldrun")
@click.option("--questions", type=click.IntRange(2), default=6, show_default=True)
@click.option("--scale", type=click.FloatRange(min=0.01), default=0.1, show_default=True,
              help="Haystack size relative to the real file's.")
@click.option("--modes", default="fusion,full,full-nosentence", show_default=True,
              help="Comma-separated: fusion, full, full-nosentence (full without the sentence signal).")
@click.option("--embedder", "embedders", default=DEFAULT_EMBEDDER, show_default=True,
              metavar="minilm,mpnet,...", help="Comma-separated embedding models.")
@click.option("--backends", default="torch", show_default=True, help="Comma-separated: torch, onnx, onnx-int8.")
@click.option("--m-sessions", type=click.IntRange(0), default=0, show_default=True,
              help="Also one LongMemEval-M question of this many sessions (476: full size), cold, in full mode.")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Also measure each backend's session R@5 / turn R@10 on this LoCoMo file (e.g. locomo_dev5.json).")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_coldrun", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/coldrun.json", show_default=True)
@click.option("--rounds", type=click.IntRange(1), default=2, show_default=True,
              help="Slices of the questions each variant runs in turn, so load changes hit every variant alike.")
def bench_coldrun(questions, scale, modes, embedders, backends, m_sessions, locomo, workdir, output, rounds):
    """Cold LongMemEval-S runs per mode, embedding model and backend, side by side."""
    from coordinator.benches.coldrun import run_coldrun_bench

    def listed(value, name, known=None):
        items = [v.strip() for v in value.split(",") if v.strip()]
        wrong = [v for v in items if known is not None and v not in known]
        if not items or wrong:
            raise click.BadParameter(f"{', '.join(wrong) or 'nothing'} not among {', '.join(known or [])}"
                                     if known else "give at least one", param_hint=name)
        return tuple(dict.fromkeys(items))

    from coordinator.benches.coldrun import MODES

    click.echo(run_coldrun_bench(questions, scale, workdir, output, locomo=locomo, rounds=rounds,
                                 modes=listed(modes, "--modes", MODES), embedders=listed(embedders, "--embedder"),
                                 backends=listed(backends, "--backends", EMBEDDER_BACKENDS),
                                 m_sessions=m_sessions))


@bench.command("encoders")
@click.option("--rounds", type=click.IntRange(1), default=3, show_default=True,
              help="Rounds; in each, every backend encodes every bucket in turn. The median round is reported.")
@click.option("--threads", type=click.IntRange(1), default=2, show_default=True)
@click.option("--tokens-per-bucket", type=click.IntRange(64), default=20000, show_default=True,
              help="About how many tokens each length bucket holds.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_encoders", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/encoders.json", show_default=True)
@click.option("--embedder", metavar="minilm|mpnet|PATH", default=DEFAULT_EMBEDDER, show_default=True,
              help="The embedding model measured.")
def bench_encoders(rounds, threads, tokens_per_bucket, workdir, output, embedder):
    """Texts per second of torch, onnx and onnx-int8 by text length, side by side."""
    from coordinator.benches.encoders import run_encoders_bench

    click.echo(run_encoders_bench(output, rounds=rounds, threads=threads, workdir=workdir,
                                  per_bucket_tokens=tokens_per_bucket, embedder=embedder))


@bench.command("staging")
@click.option("--questions", type=click.IntRange(1), default=500, show_default=True)
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=1.0, show_default=True)
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Stage this file instead of a generated one.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_staging", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/staging.json", show_default=True)
def bench_staging(questions, scale, dataset, workdir, output):
    """`memfarm submit` of a full-scale file: peak RSS, seconds, Redis memory, sessions stored once."""
    from coordinator.benches.staging import run_staging_bench

    click.echo(run_staging_bench(questions, scale, workdir, output, dataset=dataset))


@bench.command("shared-embeddings")
@click.option("--questions", type=click.IntRange(2), default=16, show_default=True)
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.3, show_default=True)
@click.option("--workers", type=click.IntRange(2), default=4, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_shared", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/shared_embeddings.json",
              show_default=True)
def bench_shared_embeddings(questions, scale, workers, workdir, output):
    """A cold farm run on N workers with and without --shared-embeddings."""
    from coordinator.benches.shared_embeddings import run_shared_embeddings_bench

    click.echo(run_shared_embeddings_bench(questions, scale, workers, workdir, output))


@bench.command("shared-verify")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False), required=True, help="A LoCoMo file.")
@click.option("--conversations", type=click.IntRange(1), default=2, show_default=True)
@click.option("--turns", type=click.IntRange(1), default=300, show_default=True, help="Turns per conversation.")
@click.option("--questions", type=click.IntRange(0), default=20, show_default=True,
              help="Questions per conversation.")
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/shared_verify.json",
              show_default=True)
def bench_shared_verify(dataset, conversations, turns, questions, output):
    """What checking shared vectors costs a machine (shares side by side) and what a forged tier meets."""
    from coordinator.benches.shared_verify import run_shared_verify_bench

    click.echo(run_shared_verify_bench(dataset, conversations, turns, questions, output))


@bench.command("batch-rows")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False), required=True, help="A LoCoMo file.")
@click.option("--turns", type=click.IntRange(16), default=400, show_default=True)
@click.option("--questions", type=click.IntRange(1), default=40, show_default=True)
@click.option("--rounds", type=click.IntRange(1), default=3, show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/batch_rows.json", show_default=True)
def bench_batch_rows(dataset, turns, questions, rounds, output):
    """Encoding speed with a fixed number of rows per batch, next to the rule before, side by side."""
    from coordinator.benches.batch_rows import run_batch_rows_bench

    click.echo(run_batch_rows_bench(dataset, turns, questions, rounds, output))


@bench.command("longmemeval-m")
@click.option("--questions", type=click.IntRange(1), default=500, show_default=True,
              help="Questions of the generated M file that is staged (500: the full file, about 2.6 GB).")
@click.option("--cold-questions", type=click.IntRange(1), default=4, show_default=True,
              help="Questions of the small M files run cold on the farm.")
@click.option("--workers", type=click.IntRange(2), default=4, show_default=True)
@click.option("--sharing", "shares", multiple=True, type=click.FloatRange(0.01, 0.99),
              help="Distinct share of session occurrences of the small files (default: S's 0.804, then 0.3).")
@click.option("--sessions", type=click.IntRange(8), default=None, help="Sessions a question (default 476).")
@click.option("--cold-sessions", type=click.IntRange(8), default=None,
              help="Sessions a question of the small files run on the farm (default: --sessions).")
@click.option("--no-claims-variant/--skip-no-claims-variant", default=True, show_default=True,
              help="Also run shared vectors without claims (the design before them).")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_longmemeval_m", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/longmemeval_m.json", show_default=True)
def bench_longmemeval_m(questions, cold_questions, workers, shares, sessions, cold_sessions, no_claims_variant, workdir,
                        output):
    """The full LongMemEval-M run: generation, staging, cold M questions on 1 and N workers, the projection."""
    from coordinator.benches.longmemeval_m import run_longmemeval_m_bench

    click.echo(run_longmemeval_m_bench(questions, cold_questions, workers, list(shares) or [0.804, 0.3], workdir,
                                       output, no_claims_variant=no_claims_variant, sessions=sessions,
                                       cold_sessions=cold_sessions))


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


@bench.command("determinism")
@click.option("--questions", type=click.IntRange(2), default=8, show_default=True,
              help="Questions of the generated LongMemEval-S file.")
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.05, show_default=True)
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Also run the variants on this LoCoMo file (e.g. locomo_dev5.json).")
@click.option("--locomo-items", type=click.IntRange(1), default=2, show_default=True,
              help="Conversations of the LoCoMo file used.")
@click.option("--retrieval-mode", "mode", type=click.Choice(["fusion", "full", "dense"]), default="fusion",
              show_default=True)
@click.option("--speed-rounds", type=click.IntRange(1), default=3, show_default=True,
              help="Rounds of the encoder timing (ordinary against canonical batches); the median is reported.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_determinism", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/determinism.json", show_default=True)
def bench_determinism(questions, scale, locomo, locomo_items, mode, speed_rounds, workdir, output):
    """Rankings here and on 1 or 3 workers, store on or off, cold or warm, items shuffled: identical?"""
    from coordinator.benches.determinism import run_determinism_bench

    click.echo(run_determinism_bench(questions, scale, locomo, locomo_items, mode, speed_rounds, workdir, output))


@bench.command("embedders")
@click.option("--embedder", "embedders", multiple=True, default=(DEFAULT_EMBEDDER, "mpnet"),
              show_default=True, metavar="minilm|mpnet|PATH", help="A model to measure; repeatable.")
@click.option("--backend", "backends", multiple=True, type=click.Choice(EMBEDDER_BACKENDS),
              default=("torch",), show_default=True, help="A backend to measure each model with; repeatable.")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Measure each mode's quality on this LoCoMo file (e.g. ../shared/data/locomo_dev5.json).")
@click.option("--conversations", type=click.IntRange(1), default=None,
              help="Only the first N conversations of the LoCoMo file (a quick look).")
@click.option("--mode", "modes", multiple=True, default=("dense", "fusion", "full"), show_default=True)
@click.option("--lengths", default="16,64,256", show_default=True, help="Token lengths whose speed is measured.")
@click.option("--texts-per-length", type=click.IntRange(4), default=32, show_default=True)
@click.option("--rounds", type=click.IntRange(1), default=3, show_default=True)
@click.option("--threads", type=click.IntRange(1), default=2, show_default=True)
@click.option("--longmemeval-questions", type=click.IntRange(0), default=0, show_default=True,
              help="Also time a cold run on a generated LongMemEval-S file of this many questions (0: not).")
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=1.0, show_default=True,
              help="Haystack size of that file relative to the real one's.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_embedders", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/embedders.json", show_default=True)
def bench_embedders(embedders, backends, locomo, conversations, modes, lengths, texts_per_length, rounds, threads,
                    longmemeval_questions, scale, workdir, output):
    """Each embedding model and backend: texts/s by length, peak RSS, quality of each mode, cost per 500 questions."""
    from coordinator.benches.embedders import run_embedders_bench

    try:
        token_lengths = [int(part) for part in lengths.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected whole numbers separated by commas, got {lengths!r}",
                                 param_hint="--lengths") from None
    click.echo(run_embedders_bench(embedders=embedders, backends=backends, locomo=locomo, conversations=conversations,
                                   modes=modes, lengths=token_lengths, per_length=texts_per_length, rounds=rounds,
                                   threads=threads, longmemeval_questions=longmemeval_questions, scale=scale,
                                   workdir=workdir, output=output))


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
    from coordinator.results.analyze import load_results
    from coordinator.results.mnem_rankings import reconcile

    data = reconcile(json.loads(Path(report).read_text()), load_results(scored), load_results(run_file),
                     json.loads(Path(dataset).read_text()))
    path = write_bench("mnem-published", {"dataset": dataset, **data}, output)
    for row in data["question_sets"] + data["mnem_figures"] + data["published_vs_run"] + data["difference_reasons"]:
        click.echo("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
    click.echo(f"paired: {data['paired']}")
    click.echo(f"wrote {path}")


@bench.command("board")
@click.option("--questions", type=click.IntRange(1), default=500, show_default=True)
@click.option("--runs", type=click.IntRange(1), default=10, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_board", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/board.json", show_default=True)
def bench_board(questions, runs, workdir, output):
    """`memfarm board` over generated runs: build seconds, peak memory, folder size and file count."""
    from coordinator.benches.board_build import run_board_bench

    click.echo(run_board_bench(questions, runs, workdir, output))
