"""`memfarm check-system`: the conformance check a vendor runs on their own system before publishing a number."""

from __future__ import annotations

import json
import sys

import click

from coordinator.cli.root import main


@main.command("check-system")
@click.argument("system", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of a table.")
@click.option("--timeout", type=click.FloatRange(0, min_open=True), default=None,
              help="Seconds one call to a server may take (default: MEMFARM_SYSTEM_TIMEOUT, else 30).")
@click.option("--output", type=click.Path(dir_okay=False), default=None,
              help="Also write the report as JSON here, with the command, commit, machine and load that made it.")
@click.option("--print-contract", is_flag=True,
              help="Print the wire format a server implements (OpenAPI 3, YAML) and check nothing.")
def check_system_command(system, as_json, timeout, output, print_contract):
    """Check that SYSTEM keeps the contract, on a small built-in set.

    SYSTEM is a server (http://HOST:PORT[/PREFIX], https://...; a token in MEMFARM_SYSTEM_TOKEN), a built-in
    system or a Python class (path/to/file.py:Class, package.module:Class). Every check passes or fails with
    its reason; latency p50 / p95 per call is shown beside them. The exit status is 1 when a check fails.
    What a server implements: `--print-contract` (OpenAPI 3).
    """
    from adapters.systems.conformance import check_system, report_table
    from coordinator.running.spec import resolved_system

    if print_contract:
        from importlib.resources import files

        click.echo(files("adapters.systems").joinpath("http-systems.openapi.yaml").read_text(encoding="utf-8"), nl=False)
        return
    if not system:
        raise click.UsageError("give the SYSTEM to check (or --print-contract)")

    report = check_system(resolved_system(system), timeout=timeout)
    click.echo(json.dumps(report, indent=2) if as_json else report_table(report))
    if output:
        from coordinator.benches.common import write_bench

        click.echo(f"wrote {write_bench('check-system', report, output)}", err=True)
    if not report["passed"]:
        sys.exit(1)
