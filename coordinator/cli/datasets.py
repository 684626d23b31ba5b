"""`memfarm datasets`: the benchmarks the farm knows and their files' checksums; `datasets verify PATH` names what
a file or folder is."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from adapters.terminal import printable
from coordinator.cli.root import main

#: A benchmark with more known files than this shows its first few; --files lists every one.
SHOWN_FILES = 4


@main.group(invoke_without_command=True)
@click.option("--files", "every_file", is_flag=True, help="List every known file (BEAM's development set has dozens).")
@click.pass_context
def datasets(ctx, every_file):
    """The benchmarks the farm knows: title, item, where to get each, and its files' published SHA-256."""
    if ctx.invoked_subcommand is not None:
        return
    from adapters.benchmarks import BENCHMARKS
    from coordinator.operations.datasets import known_files

    files = known_files()
    for name, benchmark in BENCHMARKS.items():
        click.echo(printable(f"{name}: {benchmark.title}, one {benchmark.item_unit} an item; from {benchmark.source}"))
        own = [known for known in files if known.benchmark == name]
        for known in own if every_file else own[:SHOWN_FILES]:
            size = f", {known.size:,} bytes" if known.size else ""
            click.echo(printable(f"  {known.kind}: {known.name}{size}, sha256 {known.sha256}"))
        if not own:
            click.echo("  no file known by checksum")
        elif len(own) > SHOWN_FILES and not every_file:
            more = len(own) - SHOWN_FILES
            click.echo(f"  and {more} more file{'s' if more != 1 else ''} (memfarm datasets --files lists each)")
    click.echo("check a file or folder: memfarm datasets verify PATH")


@datasets.command("verify")
@click.argument("path", type=click.Path(exists=True))
def verify_command(path):
    """Name what PATH (a file, or every JSON file under a folder) is: a known release, the development subset, a
    generated file or unknown, by SHA-256. Exit status 1 when any file is unknown."""
    from coordinator.operations.datasets import summary, verify

    verdicts = verify(path)
    root = Path(path)
    for verdict in verdicts:
        click.echo(printable(verdict.line(root if root.is_dir() else None)))
    if len(verdicts) > 1:
        click.echo(summary(verdicts))
    if any(not verdict.known for verdict in verdicts):
        sys.exit(1)
