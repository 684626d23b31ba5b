"""Reading results: `analyze` result files, `compare` systems question by question, `score` anyone's rankings,
export a run's own `rankings`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from adapters.defaults import K_VALUES
from adapters.errors import MemfarmError
from adapters.benchmarks import BENCHMARKS, default_profile
from coordinator.cli.benchmark_choice import BenchmarkChoice
from adapters.terminal import printable, printable_text
from coordinator.cli.root import ProfileChoice, main
from coordinator.results.compare import DEFAULT_METRICS, DEFAULT_PERMUTATIONS, DEFAULT_RESAMPLES, DEFAULT_SEED


@main.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--compare", "do_compare", is_flag=True,
              help="One row per file: session recall_all@5, R@1/3/5/10 and NDCG@10.")
@click.option("--force", is_flag=True, help="Compare files of different benchmarks or profiles anyway.")
@click.option("--explain", type=click.IntRange(1), default=None,
              help="Under the analysis, the N worst questions explained (with --json: its \"explain\" field).")
@click.option("--questions", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Companion questions file for --explain.")
@click.option("--all", "all_files", is_flag=True, help="Summarise every results JSON in --results-dir as JSON.")
@click.option("--results-dir", type=click.Path(file_okay=False), default="results", show_default=True)
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None, help="Write PNG charts here.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None, help="Write one HTML report.")
@click.option("--board", "board_dir", type=click.Path(file_okay=False), default="results/board", show_default=True,
              help="The board (`memfarm board`) the HTML report links to.")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON.")
@click.option("--csv", "csv_file", type=click.Path(dir_okay=False), default=None,
              help="Also write a CSV here: one row per metric, group, level and depth of each file; with --compare, "
                   "one row per file.")
@click.option("--profile", type=ProfileChoice(), default=None,
              help="Read the files under this scoring profile (every run computes all of its benchmark's).")
def analyze(files, do_compare, force, explain, questions, all_files, results_dir, plot_dir, html_file, board_dir,
            as_json, csv_file, profile):
    """Read result files (and nothing else) and report on them."""
    from coordinator.results import analyze as analysis
    from coordinator.results.run_files import ResultsFile

    if csv_file and (all_files or explain):
        raise click.UsageError("--csv writes the analysis or the --compare table, not --all or --explain")
    if all_files:
        click.echo(json.dumps(analysis.summarize_directory(results_dir), indent=1))
        return
    # a glob such as results/locomo_*.json also names each run's manifest, which sits beside it: passed over, said
    manifests = [f for f in files if f.endswith(".manifest.json")]
    files = [f for f in files if not f.endswith(".manifest.json")]
    if manifests:
        click.echo(f"skipped {len(manifests)} manifest(s) (a run's reproducibility record, not its results): "
                   f"{', '.join(manifests[:3])}{' ...' if len(manifests) > 3 else ''}", err=True)
    if not files:
        raise click.UsageError("name at least one results file (or use --all)")
    loaded = [analysis.under_profile(ResultsFile.read(f), profile) for f in files]
    if do_compare:
        rows = analysis.compare(loaded, force=force)
        click.echo(json.dumps(rows, indent=1) if as_json else printable_text(analysis.render_compare(rows)))
        if csv_file:
            from coordinator.cli.csv_tables import write_rows

            click.echo(f"csv: {write_rows(csv_file, rows)}", err=True)
    elif explain:
        companion = None
        if questions:
            from adapters.benchmarks.longmemeval.reader import load_companion

            companion = load_companion(questions)
        for results in loaded:  # the analysis, and under it the worst questions explained
            report, worst = analysis.analyze(results), analysis.explain(results, explain, companion)
            click.echo(json.dumps({**report, "explain": worst}, indent=1, default=str) if as_json else
                       printable_text(analysis.render_analysis(report) + f"\n\nthe {explain} worst questions\n"
                                      + analysis.render_explain(worst)))
    else:
        for results in loaded:
            report = analysis.analyze(results)
            click.echo(json.dumps(report, indent=1, default=str) if as_json
                       else printable_text(analysis.render_analysis(report)))
        if csv_file:
            from coordinator.cli.csv_tables import metric_rows, write_rows

            click.echo(f"csv: {write_rows(csv_file, [row for r in loaded for row in metric_rows(r)])}", err=True)
    if plot_dir or html_file:
        from coordinator.results import plots

        if plot_dir:
            for path in plots.write_plots(loaded, plot_dir):
                click.echo(f"chart: {path}", err=True)
        if html_file:
            Path(html_file).parent.mkdir(parents=True, exist_ok=True)
            Path(html_file).write_text(plots.html_report(loaded, plots.board_link(board_dir, html_file)),
                                       encoding="utf-8")
            click.echo(f"report: {html_file}", err=True)


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--metric", "metrics", multiple=True, metavar="LEVEL:NAME@K",
              help=f"A metric to compare (repeatable; default {', '.join(DEFAULT_METRICS)}).")
@click.option("--resamples", type=click.IntRange(100), default=DEFAULT_RESAMPLES, show_default=True,
              help="Paired bootstrap resamples of the questions.")
@click.option("--permutations", type=click.IntRange(100), default=DEFAULT_PERMUTATIONS, show_default=True,
              help="Random sign flips of the randomisation test (graded metrics such as nDCG).")
@click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seed of the bootstrap and the sign flips.")
@click.option("--count-failed-as-miss", is_flag=True,
              help="Pair an incomplete run anyway, scoring each of its failed questions as a miss (0).")
@click.option("--json", "json_output", type=click.Path(dir_okay=False), default=None,
              help="Also write the table, with the question ids of every win, loss and tie, as JSON here.")
@click.option("--csv", "csv_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the table as CSV here: one row per metric and system (wins, losses and ties as counts, "
                   "the interval as ci95_low and ci95_high).")
def compare(files, metrics, resamples, permutations, seed, count_failed_as_miss, json_output, csv_file):
    """Compare systems question by question: FILES are results files, the first the baseline.

    Paired differences with bootstrap intervals, exact McNemar (hit or miss) or sign-flip (graded)
    p-values, Holm-adjusted over each metric's comparisons, and under the table a verdict per row: who
    retrieves better, or not told apart. Refuses files of another dataset, profile or question set.
    """
    from adapters.files import write_json
    from coordinator.results import compare as comparison
    from coordinator.results.run_files import ResultsFile

    if len(files) < 2:
        raise click.UsageError("name a baseline results file and at least one more")
    for metric in metrics:
        try:
            comparison.parse_metric(metric)
        except MemfarmError as exc:
            raise click.BadParameter(str(exc), param_hint="--metric") from None
    table = comparison.compare_files([ResultsFile.read(f) for f in files],
                                     metrics or DEFAULT_METRICS, resamples=resamples, seed=seed,
                                     permutations=permutations, count_failed_as_miss=count_failed_as_miss)
    click.echo(printable_text(comparison.render_comparison(table)))
    if json_output:
        try:
            json.dumps(table, allow_nan=False)
        except ValueError as exc:
            raise MemfarmError(f"{json_output}: the table holds a value JSON cannot write ({exc}); nothing written") \
                from None
        from coordinator.benches.common import provenance

        write_json(json_output, {**provenance(), **table})  # what made it, so a figure quoted from it is traced
        click.echo(f"comparison: {json_output}")
    if csv_file:
        from coordinator.cli.csv_tables import write_rows

        click.echo(f"comparison csv: {write_rows(csv_file, table['comparisons'])}")


@main.command()
@click.option("--benchmark", type=BenchmarkChoice(ranked=True), default="longmemeval", show_default=True)
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--rankings", type=click.Path(exists=True, dir_okay=False), required=True,
              help='JSON lines: {"question_id": ..., "ranked": [ids, best first]}.')
@click.option("--level", type=click.Choice(["session", "turn"]), default="session", show_default=True)
@click.option("--scoring-profile", "--profile", "scoring_profile", type=ProfileChoice(),
              default=None,
              help="The profile of the closing table and `metrics` (every profile is computed). "
                   "Default: longmemeval-official for longmemeval, expected-text otherwise.")
@click.option("--questions", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Companion questions file (LongMemEval turn gold).")
@click.option("--output", type=click.Path(dir_okay=False), default=None)
@click.pass_context
def score(ctx, benchmark, dataset, rankings, level, scoring_profile, questions, output):
    """Score a rankings file from any system with the metric code of the runs."""
    from adapters.files import file_sha256
    from adapters.benchmarks.contract import companion_of
    from coordinator.running.reducer import reduce_run
    from coordinator.results.score import score_rankings
    from dataclasses import replace

    from coordinator.running.spec import RunSpec

    cli = ctx.obj
    scoring_profile = scoring_profile or default_profile(benchmark)
    if questions and companion_of(BENCHMARKS[benchmark].reader) is None:  # asked of its declaration, not its name
        raise click.UsageError(f"--questions is a companion file of a benchmark that reads one; {benchmark} reads none")
    if scoring_profile not in BENCHMARKS[benchmark].profiles:
        raise click.UsageError(f"--profile {scoring_profile} does not apply to {benchmark}; "
                               f"its profiles: {', '.join(BENCHMARKS[benchmark].profiles)}")
    started = time.perf_counter()
    spec = RunSpec(benchmark=benchmark, dataset=dataset, questions=questions, scoring_profile=scoring_profile,
                   system="rankings", output=output, command=cli.command)
    adapter = spec.open_dataset()
    adapter.scan()
    outcomes, report = score_rankings(adapter, rankings, level, scoring_profile, K_VALUES)
    for problem in report["problems"]:
        click.echo(f"warning: {problem}", err=True)
    if report["dropped_ids"]:
        click.echo(f"warning: {report['dropped_ids']} ranked ids are not in the {level} corpus of their question, "
                   f"or repeat an entry already ranked, and were dropped (first: "
                   f"{'; '.join(report['dropped_examples'])}); is --level right?", err=True)
    if report["missing"]:
        click.echo(f"warning: {len(report['missing'])} questions have no ranking and score 0 "
                   f"(first: {', '.join(report['missing'][:5])})", err=True)
    context = spec.context(
        system_config={"name": "rankings", "retrieval_mode": f"score-{level}", "rankings": str(Path(rankings).resolve()),
                       "rankings_sha256": file_sha256(rankings)},
        embedding_signature=None)
    context = replace(context, top_k=None, rendering=None, arguments=dict(ctx.params))
    results, manifest = reduce_run(outcomes, context, elapsed_seconds=time.perf_counter() - started)
    manifest["rankings"] = report
    cli.write_results(results, manifest, output)


@main.command()
@click.argument("results_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--level", type=click.Choice(["session", "turn"]), default="session", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), required=True)
def rankings(results_file, level, output):
    """Export a run's own rankings as JSON lines, the input of `memfarm score` (to check a number anywhere)."""
    from coordinator.results.run_files import ResultsFile
    from coordinator.results.score import export_rankings

    lines = export_rankings(ResultsFile.read(results_file), level)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    click.echo(f"wrote {len(lines)} rankings to {output}")


@main.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--output", type=click.Path(file_okay=False), required=True,
              help="The board's folder (replaced if it holds an earlier board; any other non-empty folder is refused).")
@click.option("--resamples", type=click.IntRange(100), default=DEFAULT_RESAMPLES, show_default=True,
              help="Bootstrap resamples of every interval.")
@click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seed of the bootstrap.")
@click.option("--serve", is_flag=True, help="Then show the board on http://127.0.0.1:PORT until interrupted.")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="The port of --serve (default 8765; 0: any free port).")
def board(results, output, resamples, seed, serve, port):
    """A static leaderboard site of RESULTS (results files, or folders searched for them), a page per question.

    One leaderboard per group of runs whose questions pair (benchmark, dataset, scoring profile, question set),
    each run paired with #1 as `memfarm compare` pairs them (#1 is the leader only where significantly ahead of
    every other run), and a page per pair of runs. Opens from the file system.
    """
    from coordinator.board.build import DEFAULT_PORT, build_board, make_server

    built = build_board(list(results), output, resamples=resamples, seed=seed)
    for line in built["not_regular"]:
        click.echo(f"skipped {printable(line)}", err=True)
    others = built["skipped"] - len(built["not_regular"])
    click.echo(f"board: {_count(built['runs'], 'run')} in {_count(built['groups'], 'group')}, "
               f"{_count(built['question_pages'], 'question page')}, {_count(built['files'], 'file')}, "
               f"{built['bytes'] / 2 ** 20:.1f} MiB in {built['seconds']:.1f} s"
               + (f" (skipped, not results files: {_count(others, 'JSON file')})" if others else ""))
    index = Path(output).resolve() / "index.html"
    click.echo(f"open:  {index.as_uri()}")
    if serve:
        server = make_server(output, DEFAULT_PORT if port is None else port)
        click.echo(f"serving http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()


def _count(n: int, noun: str) -> str:
    """`1 run`, `2 runs`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
