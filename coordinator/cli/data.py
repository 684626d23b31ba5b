"""Data commands: generate LongMemEval-S- and M-shaped files, extract the companion file, convert LoCoMo and
published rankings."""

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
        from adapters.generators import longmemeval_m as M

        if scale != 1.0:
            raise click.UsageError("--scale is for --shape s; give --sessions for a smaller M file")
        count = M.write(output, questions, seed=seed, sessions=sessions or M.SESSIONS_PER_QUESTION,
                        distinct_share=distinct_share or M.S.DISTINCT_SESSION_SHARE)
    else:
        from adapters.generators.longmemeval_s import write

        if sessions is not None:
            raise click.UsageError("--sessions is for --shape m; give --scale for a smaller S file")
        count = write(output, questions, seed=seed, scale=scale, distinct_share=distinct_share)
    click.echo(f"wrote {count} questions to {output}")


@main.command("extract-questions")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--output", type=click.Path(dir_okay=False), required=True)
def extract_questions(input_path, output):
    """Write the companion questions file (expected = first turn of the first answer session)."""
    from adapters.benchmarks.longmemeval.reader import extract_questions as extract

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
    from adapters.benchmarks.adamem.episodes import write_episodes
    from adapters.generators.locomo_to_adamem import convert_locomo
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
    from adapters.generators.locomo_to_longmemeval import write

    click.echo(f"wrote {write(source, target)} questions to {target}")


@convert.command("mnem-rankings")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="mnem's per-question LoCoMo file (its benchmarks/results/v0.1.0/jsonl/locomo-session.jsonl).")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The LoCoMo file to map mnem's questions onto (its conversations only are kept).")
@click.option("--output", type=click.Path(dir_okay=False), required=True,
              help="Rankings (JSON lines) for `memfarm score --benchmark locomo --level session`.")
@click.option("--report", type=click.Path(dir_okay=False), default=None,
              help="Also write mnem's own figures on the mapped questions and what it said of each (JSON).")
def convert_mnem_rankings_command(input_path, dataset, output, report):
    """mnem's published LoCoMo rankings as a rankings file: its running question numbers (counted across all ten
    conversations) mapped to the dataset's question ids, its session_<N> to D<N>; every line's gold is checked."""
    import json

    from adapters.files import write_json
    from coordinator.results.mnem_rankings import convert as convert_mnem

    rankings, summary = convert_mnem(input_path, dataset)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text("".join(json.dumps(r) + "\n" for r in rankings), encoding="utf-8")
    click.echo(f"wrote {len(rankings)} rankings to {output} ({summary['left_out_lines']} lines of conversations "
               f"{dataset} does not hold left out)")
    for row in summary["figures"]:
        click.echo(f"mnem's own figures, {row['questions']}: n={row['n']} R@5={row['recall_at_5_flags']} "
                   f"(from its top 5: {row['recall_at_5_from_top5']}) R@10={row['recall_at_10_flags']}")
    if report:
        write_json(report, {"input": str(input_path), "dataset": str(dataset), **summary})
        click.echo(f"report: {report}")
