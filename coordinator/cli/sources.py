"""Your own notes and code: ingest a source into a Memoria store (a folder) and ask it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from adapters.errors import MemfarmError
from coordinator.cli.root import main
from memoria import defaults


def _open_store(store: str):
    from memoria import MemoryInterface
    from memoria.snapshot import SNAPSHOT_FILES

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
    from adapters.ingestion.obsidian import ObsidianAdapter

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
    from adapters.ingestion.git_repository import GitRepositoryAdapter

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
