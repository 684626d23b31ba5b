"""`python -m devtools ...`: developer tools that need a checkout, root or the test suite.

They stay out of the installed package; `make bench-mutation` and `make bench-fleet` run them.
"""

from __future__ import annotations

import click


@click.group()
def devtools():
    """Developer benches: mutation testing and the fleet fault campaign."""


@devtools.command("fleet")
@click.option("--questions", type=click.IntRange(4), default=12, show_default=True)
@click.option("--scale", type=click.FloatRange(0.01, 1.0), default=0.05, show_default=True)
@click.option("--workers", type=click.IntRange(3), default=3, show_default=True)
@click.option("--time-limit", type=click.IntRange(10), default=40, show_default=True,
              help="Hard time limit per item on the fleet, seconds.")
@click.option("--workdir", type=click.Path(file_okay=False), default="cache/bench_fleet", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/fleet.json", show_default=True)
def bench_fleet(questions, scale, workers, time_limit, workdir, output):
    """A fault campaign on simulated machines (namespaces, cgroups; needs root): a faulty run next to a clean one."""
    from devtools.fleet_bench import run_fleet_bench

    click.echo(run_fleet_bench(questions, scale, workdir, output, workers=workers, time_limit=time_limit))


@devtools.command("mutation")
@click.option("--output", type=click.Path(dir_okay=False), default="results/bench/mutation.json", show_default=True)
@click.option("--area", "areas", multiple=True,
              help="Only these areas (metrics, official profile, RRF, gold, abstention, ledger (Python)); "
                   "default: all.")
@click.option("--lua-limit", type=click.IntRange(0), default=None,
              help="At most N Lua mutants of the ledger's scripts (0: none; default: all).")
@click.option("--timeout", type=click.IntRange(60), default=3600, show_default=True, help="Seconds for mutmut.")
@click.option("--keep", is_flag=True, help="Keep the scratch copy (to inspect a survivor with mutmut show).")
def bench_mutation(output, areas, lua_limit, timeout, keep):
    """Mutation testing of the scoring and ledger code: mutants made, killed, survived, survivors listed."""
    from devtools.mutation import PYTHON_SCOPE, mutation_bench, render

    unknown = [a for a in areas if a not in PYTHON_SCOPE]
    if unknown:
        raise click.UsageError(f"unknown area {unknown[0]!r}; choose from {', '.join(PYTHON_SCOPE)}")
    scope = {a: PYTHON_SCOPE[a] for a in areas} if areas else None
    report = mutation_bench(output, scope=scope, lua_limit=lua_limit, timeout=timeout, keep=keep)
    click.echo(render(report))
    click.echo(f"wrote {output}")


if __name__ == "__main__":
    devtools()
