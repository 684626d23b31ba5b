"""`memfarm cluster`: a farm on one machine without Docker (up, restart, down), and the credentials of the
machines that join it (add-machine, revoke-machine, renew-certs)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from adapters.redaction import redact
from adapters.terminal import printable
from coordinator.cli.root import main
from coordinator.operations.cluster import DEFAULT_REDIS_MAXMEMORY
from coordinator.operations.processes import memfarm_command
from workers.farm.config import DEFAULT_CACHE_DIR


@main.group()
def cluster():
    """A one-machine farm without Docker: redis-server, workers and Flower as child processes."""


@cluster.command("up")
@click.option("--workers", "count", type=click.IntRange(0), default=2, show_default=True,
              help="Workers on this machine (0: only Redis and Flower, a hub for workers elsewhere).")
@click.option("--bind", "address", default="127.0.0.1", show_default=True,
              help="Also listen on this address (a private interface) for workers on other machines.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=".memfarm", show_default=True)
@click.option("--redis-port", type=int, default=None, help="Default: a free port.")
@click.option("--flower-port", type=int, default=5555, show_default=True)
@click.option("--no-flower", is_flag=True)
@click.option("--cache-dir", type=click.Path(file_okay=False), default=DEFAULT_CACHE_DIR, show_default=True)
@click.option("--tls", is_flag=True, help="Redis speaks TLS only, with a private CA and certificates made here.")
@click.option("--redis-maxmemory", "maxmemory", default=DEFAULT_REDIS_MAXMEMORY, show_default=True,
              help="Redis's memory cap (Redis's notation: 2gb, 512mb); full, it refuses writes and evicts nothing.")
@click.option("--allow-system", "allowed", multiple=True,
              help="A system besides the built-in ones that this machine's workers may run (file.py:Class or "
                   "module:Class) or a server they may call (http[s]://HOST:PORT), passed to each `memfarm worker`; "
                   "repeatable. Without it they refuse a run of any other system.")
def cluster_up(count, address, state_dir, redis_port, flower_port, no_flower, cache_dir, tls, maxmemory, allowed):
    """Start redis-server (users with passwords, optionally TLS), N workers and Flower; prints the broker URL."""
    from coordinator.operations.cluster import up
    from coordinator.running.spec import resolved_system

    state = up(Path(state_dir), workers=count, redis_port=redis_port, flower_port=None if no_flower else flower_port,
               cache_dir=cache_dir, tls=tls, address=address, maxmemory=maxmemory,
               allowed=[resolved_system(name) for name in allowed])
    for name in state["settings"].get("allowed_systems") or ():
        click.echo(printable(f"workers may also run: {name}"))
    click.echo(f"broker: {redact(state['broker'])} (password in {state_dir}/cluster.json)")
    if "remote_worker" in state["brokers"]:
        click.echo(f"workers on other machines: the 'remote_worker' URL in {state_dir}/cluster.json"
                   + (f" with {state_dir}/tls/ca.crt, client.crt and client.key" if tls else ""))
    # the password is never printed: a line to paste would leave it in the shell's history
    click.echo(f"to use it in this shell: {env_line(state_dir)}")
    if state.get("flower"):
        click.echo(f"flower: http://127.0.0.1:{state['flower']['port']} (user {state['flower']['user']}; "
                   f"its password: {typed_memfarm()} cluster flower-login --state-dir {shlex.quote(state_dir)})")
    click.echo(f"logs: {state_dir}/logs")


@cluster.command("env")
@click.option("--state-dir", type=click.Path(file_okay=False), default=".memfarm", show_default=True)
def cluster_env(state_dir):
    """Print the shell lines that point this shell at the cluster (the broker URL with its password, the TLS
    files), for `eval "$(memfarm cluster env)"`: the password reaches the environment, never the history."""
    import json
    import shlex

    state_file = Path(state_dir) / "cluster.json"
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
        broker = state["broker"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise click.ClickException(f"{state_file}: no cluster state to read ({type(exc).__name__}: {exc}); "
                                   "start one with `memfarm cluster up`") from None
    click.echo(f"export MEMFARM_BROKER={shlex.quote(str(broker))}")
    for name, path in (state.get("tls") or {}).items():
        click.echo(f"export {shlex.quote(str(name))}={shlex.quote(str(path))}")


def typed_memfarm() -> str:
    """This very memfarm as a shell types it, found whatever the PATH: its script's absolute path, or this
    interpreter running the package. A line that names `memfarm` alone fails in a shell whose PATH lacks the venv,
    and inside `eval "$(...)"` that failure is silent."""
    script = Path(sys.argv[0])
    if script.name == "memfarm" and script.is_file():
        return shlex.quote(str(script.absolute()))
    return shlex.join(memfarm_command())


def env_line(state_dir: str | Path) -> str:
    """The line that points a shell at the cluster of `state_dir`, to be typed as printed."""
    return f'eval "$({typed_memfarm()} cluster env --state-dir {shlex.quote(str(Path(state_dir).absolute()))})"'


@cluster.command("flower-login")
@click.option("--state-dir", type=click.Path(file_okay=False), default=".memfarm", show_default=True)
def cluster_flower_login(state_dir):
    """Print Flower's address, user and password (basic auth), for a browser: asked for, never printed by `up`."""
    import json

    state_file = Path(state_dir) / "cluster.json"
    try:
        flower = json.loads(state_file.read_text(encoding="utf-8"))["flower"]
        line = f"flower: http://127.0.0.1:{int(flower['port'])}  user: {flower['user']}  password: {flower['password']}"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise click.ClickException(f"{state_file}: no Flower in the cluster state ({type(exc).__name__}: {exc}); "
                                   "start one with `memfarm cluster up`") from None
    click.echo(printable(line))


@cluster.command("restart")
@click.option("--state-dir", type=click.Path(file_okay=False), default=".memfarm", show_default=True)
def cluster_restart(state_dir):
    """Start again what of the cluster is dead (Redis alone after it crashed, everything after a reboot): the
    same port, users, certificates and append-only data; live workers and Flower reconnect by themselves."""
    from coordinator.operations.cluster import restart

    state, started = restart(Path(state_dir))
    click.echo(f"restarted {', '.join(started)}; broker: {state['broker']}")
    click.echo("runs in flight: `memfarm resume RUN` enqueues what is not done (`memfarm runs` lists them)")


@cluster.command("add-machine")
@click.argument("name")
@click.option("--state-dir", type=click.Path(file_okay=False), default=".memfarm", show_default=True)
def cluster_add_machine(name, state_dir):
    """A worker machine's own Redis user (worker-NAME) and, with --tls, client certificate, in STATE_DIR/machines/NAME."""
    from coordinator.operations.cluster import add_machine

    folder = add_machine(Path(state_dir), name)
    click.echo(f"machine {name}: copy {folder} to it (keep it 0700), then in that folder "
               "`set -a; . ./worker.env; set +a; memfarm worker --cache-dir /var/cache/memfarm`")


@cluster.command("revoke-machine")
@click.argument("name")
@click.option("--state-dir", type=click.Path(file_okay=False), default=".memfarm", show_default=True)
def cluster_revoke_machine(name, state_dir):
    """Delete a machine's Redis user (its connections close at once) and its folder."""
    from coordinator.operations.cluster import revoke_machine

    revoked = revoke_machine(Path(state_dir), name)
    click.echo(f"revoked machine {name}: Redis user {revoked['user']} deleted, its connections closed")


@cluster.command("renew-certs")
@click.option("--state-dir", type=click.Path(file_okay=False), default=".memfarm", show_default=True)
@click.option("--new-ca", is_flag=True, help="Also a new CA (made anyway when the CA would expire within a year).")
def cluster_renew_certs(state_dir, new_ca):
    """New server and client certificates from the cluster's CA; a running Redis loads them at once."""
    from coordinator.operations.cluster import renew_certificates

    renewed = renew_certificates(Path(state_dir), new_ca=new_ca)
    for name, expiry in renewed["certificates"].items():
        click.echo(f"{name}: valid until {expiry['not_after']}")
    if renewed["new_ca"]:
        click.echo(f"a new CA: copy {state_dir}/tls/ca.crt and each machine's folder to its machine again")
    elif any(name.startswith("machines/") for name in renewed["certificates"]):
        click.echo(f"copy each {state_dir}/machines/NAME/client.crt and client.key to its machine")


@cluster.command("down")
@click.option("--state-dir", type=click.Path(file_okay=False), default=".memfarm", show_default=True)
def cluster_down(state_dir):
    """Stop every process `cluster up` started, by PID."""
    from coordinator.operations.cluster import down

    stopped = down(Path(state_dir))
    click.echo(f"stopped {len(stopped)} processes")
