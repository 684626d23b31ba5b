"""`memfarm check-system`: the conformance check a vendor runs on their own system before publishing a number."""

from __future__ import annotations

import json
import sys

import click

from coordinator.cli.root import main


@main.command("check-system")
@click.argument("system")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of a table.")
@click.option("--timeout", type=click.FloatRange(0, min_open=True), default=None,
              help="Seconds one call to a server may take (default: MEMFARM_SYSTEM_TIMEOUT, else 30).")
def check_system_command(system, as_json, timeout):
    """Check that SYSTEM keeps the contract, on a small built-in set.

    SYSTEM is a server (http://HOST:PORT[/PREFIX], https://...; a token in MEMFARM_SYSTEM_TOKEN), a built-in
    system or a Python class (path/to/file.py:Class, package.module:Class). Every check passes or fails with
    its reason; latency p50 / p95 per call is shown beside them. The exit status is 1 when a check fails.
    """
    from adapters.systems.conformance import check_system, report_table
    from coordinator.running.spec import resolved_system

    report = check_system(resolved_system(system), timeout=timeout)
    click.echo(json.dumps(report, indent=2) if as_json else report_table(report))
    if not report["passed"]:
        sys.exit(1)
