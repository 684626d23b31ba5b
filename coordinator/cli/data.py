"""Data commands: generate LongMemEval-S- and M-shaped files, extract the companion file, convert LoCoMo."""

from __future__ import annotations

from pathlib import Path

import click

from coordinator.cli.root import main


@main.group()
def synth():
    """Generate benchmark-shaped files."""


@synth.command("longmemeval")
@click.option("--questions", type=click.IntRange(1), default=50, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--shape", type=click.Choice(["s", "m"]), default="s", show_default=True,
              help="s: LongMemEval-S (~48 sessions a question); m: LongMemEval-M (~476), written as a stream.")
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=1.0, show_default=True,
              help="S only: share of the ~48 sessions per haystack (1.0 = full scale).")
@click.option("--sessions", type=click.IntRange(8), default=None,
              help="M only: sessions a question (default 476, the published file's).")
@click.option("--distinct-share", type=click.FloatRange(0.01, 0.99), default=None,
              help="Share of session occurrences that are distinct, which sizes the shared filler pool "
                   "(M default 0.804, S's measured share; lower repeats sessions more).")
@click.option("--output", type=click.Path(dir_okay=False), required=True)
def synth_longmemeval(questions, seed, shape, scale, sessions, distinct_share, output):
    """A LongMemEval-shaped file: schema, type mix, abstentions and quirks of the real one."""
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    if shape == "m":
        from adapters import longmemeval_synth_m as M

        if scale != 1.0:
            raise click.UsageError("--scale is for --shape s; give --sessions for a smaller M file")
        count = M.write(output, questions, seed=seed, sessions=sessions or M.SESSIONS_PER_QUESTION,
                        distinct_share=distinct_share or M.S.DISTINCT_SESSION_SHARE)
    else:
        from adapters.longmemeval_synth import write

        if sessions is not None:
            raise click.UsageError("--sessions is for --shape m; give --scale for a smaller S file")
        count = write(output, questions, seed=seed, scale=scale, distinct_share=distinct_share)
    click.echo(f"wrote {count} questions to {output}")


@main.command("extract-questions")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--output", type=click.Path(dir_okay=False), required=True)
def extract_questions(input_path, output):
    """Write the companion questions file (expected = first turn of the first answer session)."""
    from adapters.longmemeval import extract_questions as extract

    Path(output).parent.mkdir(parents=True, exist_ok=True)
    click.echo(f"wrote {extract(input_path, output)} questions to {output}")


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
    from adapters.errors import DatasetError

    episodes = convert_locomo(source, expected=expected, top_k=top_k)
    if not any(e["queries"] for e in episodes):
        raise DatasetError(f"{source}: no query to convert (no question with evidence that names a turn); "
                           f"{target} is not written")
    count = write_episodes(episodes, target)
    click.echo(f"wrote {count} episodes ({sum(len(e['queries']) for e in episodes)} queries) to {target}")


@convert.command("locomo-longmemeval")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.argument("target", type=click.Path(dir_okay=False))
def convert_locomo_longmemeval_command(source, target):
    """LoCoMo conversations as a LongMemEval-format file: one question per LoCoMo question, its conversation as
    the haystack, speakers as user / assistant roles, evidence sessions as answer sessions."""
    from adapters.locomo_longmemeval import write

    click.echo(f"wrote {write(source, target)} questions to {target}")
