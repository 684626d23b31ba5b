"""The root `memfarm` group and what every command shares.

The root group builds one `CliContext` (the command line as typed, the broker
and its ledger once connected, and how results are written), turns any harness
error into one readable line, and defines the options several areas share.
"""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path

import click

from adapters.errors import MemfarmError
from adapters.profiles import PROFILES, profile_name
from adapters.terminal import printable, printable_text
from memoria.errors import MemoriaError

logger = logging.getLogger(__name__)


class CliContext:
    """What every command shares: the command line, the farm connection, the results writer."""

    def __init__(self, command: str):
        self.command = command
        self.broker: str | None = None
        self._ledger = None
        self._app = None
        self.failed_items = 0  # items failed in the results files this command wrote: a run then exits non-zero

    def connect(self, broker: str):
        """(ledger, Celery app) for `broker`; one clear error for a wrong password or a missing server."""
        if self._ledger is None or broker != self.broker:
            from coordinator.running.run_ledger import RunLedger, connect
            from workers.farm.app import make_app

            self.broker, self._ledger, self._app = broker, RunLedger(connect(broker)), make_app(broker)
        return self._ledger, self._app

    def write_results(self, run_results: dict, manifest: dict, output: str | Path | None) -> Path:
        """Write the results file and manifest, print the metric table, each reason items failed for, once, and
        both paths."""
        from adapters.benchmarks import BENCHMARKS
        from coordinator.cli.failures import failure_lines
        from coordinator.running.reducer import write_results
        from coordinator.results.report import metrics_table

        results_path, manifest_path = write_results(run_results, manifest, output)
        click.echo(printable_text(metrics_table(run_results)))
        declared = BENCHMARKS.get(str(run_results.get("benchmark_key")))
        if declared and run_results.get("benchmark") != declared.title:  # a generated stand-in says so
            click.echo(printable(f"benchmark: {run_results.get('benchmark')}: not the published {declared.title} "
                                 f"file, so these are not {declared.title} scores"))
        failures = failure_lines(manifest)
        for line in failures:
            click.echo(line, err=True)
        self.failed_items += len({f.get("item_id") for f in manifest.get("failures") or ()})
        click.echo(f"results:  {results_path}\nmanifest: {manifest_path}")
        return results_path


class _Cli(click.Group):
    """Turns any harness or engine error into one readable line and exit status 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (MemfarmError, MemoriaError) as exc:
            click.echo(f"error: {printable(exc)}", err=True)
            sys.exit(2)


@click.group(cls=_Cli)
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.pass_context
def main(ctx, verbose):
    """Benchmark farm for agent-memory retrieval (LongMemEval-S and -M, LoCoMo, RealMem, BEAM, AdaMem episodes;
    `memfarm datasets` lists them)."""
    from adapters.redaction import RedactingFilter, redact
    from memoria.model_files import offline_environment

    offline_environment()  # before any command loads a library that would reach out (a hub, a telemetry host)
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())
    ctx.obj = CliContext(redact("memfarm " + " ".join(shlex.quote(a) for a in sys.argv[1:])))


class ProfileChoice(click.Choice):
    """A registered scoring profile by name, read live; an older name of a profile (its declared alias) is taken as
    that profile."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(PROFILES)

    @choices.setter
    def choices(self, value) -> None:  # click's own constructor assigns it; the registry decides
        pass

    def convert(self, value, param, ctx):
        return super().convert(profile_name(value), param, ctx)


def refuse_password_on_command_line(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A `--broker` callback: a URL with a password is refused when typed as an argument.

    Any local user reads a process's arguments (`ps`, /proc/PID/cmdline); the environment
    (MEMFARM_BROKER) is readable by its owner only. The same URL from the environment is taken."""
    from adapters.redaction import redact

    if value and ctx.get_parameter_source(param.name) == click.core.ParameterSource.COMMANDLINE \
            and redact(value) != value:
        raise click.BadParameter(
            f"{redact(value)} carries a password, which every local user can read on a command line (ps, "
            "/proc): put the URL in the environment variable MEMFARM_BROKER instead and leave out --broker",
            ctx=ctx, param=param)
    return value


def broker_option(required: bool = True):
    return click.option("--broker", envvar="MEMFARM_BROKER", required=required, default=None,
                        callback=refuse_password_on_command_line,
                        help="Redis URL without a password (redis://HOST:6379/0); a URL with its password "
                             "goes in MEMFARM_BROKER, never on the command line.")


pass_cli = click.make_pass_decorator(CliContext)


#: The manual's page for each command (`group sub` for a subcommand); a command not named here takes its
#: group's page (the root's is index.md), and the CLI reference only where no page is given at all. Pages live
#: under docs/, and each names the commands that lead to it.
MANUAL_PAGES = {
    "": "index.md",
    "run": "running.md", "doctor": "installing.md",
    "submit": "farm.md", "status": "farm.md", "requeue": "farm.md", "resume": "farm.md", "reduce": "farm.md",
    "runs": "farm.md", "forget": "farm.md", "worker": "farm.md", "flower": "farm.md", "cluster": "farm.md",
    "forget-shared-embeddings": "embedders.md", "forget-stored-embeddings": "security.md",
    "cluster revoke-machine": "security.md", "cluster flower-login": "farm.md", "cluster renew-certs": "security.md",
    "analyze": "results.md", "compare": "results.md", "score": "results.md", "rankings": "results.md",
    "optimize": "full-mode.md",
    "synth": "datasets.md", "datasets": "datasets.md", "extract-questions": "datasets.md", "convert": "datasets.md",
    "ingest": "sources.md", "recall": "sources.md",
    "bench": "benchmarks.md", "bench embedders": "embedders.md", "bench encoders": "embedders.md",
    "bench batch-rows": "embedders.md", "bench shared-verify": "embedders.md", "bench coldrun": "cost.md",
    "bench floor": "cost.md", "bench fleet-rate": "cost.md",
    "check-system": "http-systems.md",
    "bench systems": "outside-systems.md", "bench mnem-published": "outside-systems.md",
    "convert mnem-rankings": "outside-systems.md",
    "board": "board.md", "bench board": "board.md", "bench beam": "beam.md",
}
#: Where every command's every option is listed, generated from these commands.
CLI_REFERENCE = "reference/cli.md"


def point_at_manual(command: click.Command, path: str = "", page: str = CLI_REFERENCE) -> None:
    """Give `command` and each of its subcommands an epilog naming its manual page, so `--help` leads there."""
    page = MANUAL_PAGES.get(path, page)
    reference = f" Every option: docs/{CLI_REFERENCE}." if page != CLI_REFERENCE else ""
    command.epilog = f"Manual: docs/{page}.{reference}"
    for name, sub in getattr(command, "commands", {}).items():
        point_at_manual(sub, f"{path} {name}".strip(), page)
