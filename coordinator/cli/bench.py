"""`memfarm bench ...`: speed, memory and quality benchmarks of the product; each writes JSON under results/bench/."""

from __future__ import annotations

import signal

import click

from coordinator.cli.root import main
from adapters.systems.settings import BY_NAME
from memoria.defaults import DEFAULT_EMBEDDER, EMBEDDER_BACKENDS
from memoria.model_files import PACKAGED_EMBEDDERS


def _exit_on_terminate(signum, frame):
    raise SystemExit(128 + signum)


@main.group()
def bench():
    """Speed and memory benchmarks; each writes JSON under results/bench/."""
    # A bench stopped with SIGTERM unwinds as one stopped with Ctrl-C does, so the Redis servers, workers and
    # `memfarm` children it started are stopped by its own cleanup (`finally` blocks, `measure_memfarm`). The
    # handler before it is put back when the command ends, for a process that runs a bench and goes on.
    before = signal.signal(signal.SIGTERM, _exit_on_terminate)
    if before is not None:  # None: a handler set outside Python, which cannot be put back from here
        click.get_current_context().call_on_close(lambda: signal.signal(signal.SIGTERM, before))


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
@click.option("--embedder", metavar=BY_NAME["embedder"].metavar, default=DEFAULT_EMBEDDER, show_default=True,
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


@bench.command("coldrun")
@click.option("--questions", type=click.IntRange(2), default=6, show_default=True)
@click.option("--scale", type=click.FloatRange(min=0.01), default=0.1, show_default=True,
              help="Haystack size relative to the real file's.")
@click.option("--modes", default="fusion,full,full-nosentence", show_default=True,
              help="Comma-separated: fusion, full, full-nosentence (full without the sentence signal).")
@click.option("--embedder", "embedders", default=DEFAULT_EMBEDDER, show_default=True,
              metavar=",".join(PACKAGED_EMBEDDERS) + ",...", help="Comma-separated embedding models.")
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
@click.option("--embedder", metavar=BY_NAME["embedder"].metavar, default=DEFAULT_EMBEDDER, show_default=True,
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
@click.option("--threads", type=click.IntRange(1), default=None,
              help="torch's threads [default: as torch is set, every core unless the environment says].")
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/batch_rows.json", show_default=True)
def bench_batch_rows(dataset, turns, questions, rounds, threads, output):
    """Encoding speed under each rule for the rows of a batch (rows by width, fixed rows, the rules before),
    side by side."""
    from coordinator.benches.batch_rows import run_batch_rows_bench

    click.echo(run_batch_rows_bench(dataset, turns, questions, rounds, output, threads))


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
              show_default=True, metavar=BY_NAME["embedder"].metavar, help="A model to measure; repeatable.")
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


@bench.command("board")
@click.option("--questions", type=click.IntRange(1), default=500, show_default=True)
@click.option("--runs", type=click.IntRange(1), default=10, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_board", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/board.json", show_default=True)
def bench_board(questions, runs, workdir, output):
    """`memfarm board` over generated runs: build seconds, peak memory, folder size and file count."""
    from coordinator.benches.board_build import run_board_bench

    click.echo(run_board_bench(questions, runs, workdir, output))


@bench.command("floor")
@click.option("--locomo", type=click.Path(exists=True, dir_okay=False), default="../shared/data/locomo_dev5.json",
              show_default=True, help="A LoCoMo file; its first conversation is measured.")
@click.option("--realmem", type=click.Path(exists=True, file_okay=False), default="../shared/data/realmem_dev5",
              show_default=True, help="A folder of RealMem personas; the smallest file is measured.")
@click.option("--realmem-sessions", type=click.IntRange(0), default=50, show_default=True,
              help="Only the persona's first N sessions (0: the whole persona).")
@click.option("--beam", type=click.Path(exists=True, file_okay=False), default="../shared/data/beam_dev",
              show_default=True, help="The BEAM development folder; its chat chats/100K/1 is measured.")
@click.option("--benchmark", "benchmarks", multiple=True, type=click.Choice(["locomo", "longmemeval", "realmem", "beam"]),
              help="Measure only this benchmark's item; repeatable (default: all four).")
@click.option("--threads", type=click.IntRange(1), default=1, show_default=True, help="torch's threads.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_floor", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/floor.json", show_default=True)
def bench_floor(locomo, realmem, realmem_sessions, beam, benchmarks, threads, workdir, output):
    """Each benchmark's item, cold, in each mode: model calls, rows, padding and time against the encoder's floor."""
    from coordinator.benches.floor import run_floor_bench

    click.echo(run_floor_bench(locomo, realmem, beam, realmem_sessions=realmem_sessions or None, threads=threads,
                               workdir=workdir, output=output, progress=click.echo,
                               **({"benchmarks": benchmarks} if benchmarks else {})))


@bench.command("fleet-rate")
@click.option("--questions", type=click.IntRange(2), default=500, show_default=True)
@click.option("--scale", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Haystack size relative to the real file's.")
@click.option("--one-worker-questions", type=click.IntRange(0), default=50, show_default=True,
              help="The first N questions again through one worker alone (0: not run).")
@click.option("--modes", default="fusion,full", show_default=True, help="Comma-separated: fusion, full, full-nosentence.")
@click.option("--workers", type=click.IntRange(1), default=None, help="One-thread workers of the fleet [default: one per core].")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_fleet_rate", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/fleet_rate.json", show_default=True)
def bench_fleet_rate(questions, scale, one_worker_questions, modes, workers, workdir, output):
    """A generated LongMemEval-S file through the farm on one-thread workers, and one worker alone: questions per
    core-hour beside the peer's published rate. Starts its own Redis server and workers."""
    from coordinator.benches.coldrun import MODES
    from coordinator.benches.fleet_rate import run_fleet_bench

    chosen = tuple(dict.fromkeys(m.strip() for m in modes.split(",") if m.strip()))
    unknown = [m for m in chosen if m not in MODES]
    if unknown or not chosen:
        raise click.BadParameter(f"{', '.join(unknown) or 'none given'} (known: {', '.join(MODES)})",
                                 param_hint="--modes")
    click.echo(run_fleet_bench(questions, scale, one_worker_questions, modes=chosen, workers=workers,
                               workdir=workdir, output=output, progress=click.echo))
