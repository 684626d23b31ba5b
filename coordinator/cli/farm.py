"""The farm's commands: watch and steer runs (status, requeue, resume, reduce) and run its processes
(worker, flower); `cluster` (cluster.py) starts and stops a whole farm on one machine."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click

from adapters.errors import MemfarmError
from coordinator.cli.root import broker_option, main, pass_cli
from adapters.systems.settings import BY_NAME, Kind
from adapters.threads import use_threads
from memoria.defaults import DEFAULT_EMBEDDER
from workers.farm.config import DEFAULT_CACHE_DIR, ENVIRON


def machine_option(name: str, *, envvar: str | None = "", help: str | None = ""):
    """The option of a per-machine setting a worker holds its own value of (`adapters.systems.settings`): typed,
    spelled and, unless `help` is given, explained as `memfarm run` takes it; read from the variable the worker
    passes it on in (`workers.farm.config.ENVIRON`) unless `envvar` says otherwise; no default (the run's)."""
    setting = BY_NAME[name]
    kinds = {Kind.COUNT: lambda: click.IntRange(setting.minimum), Kind.CHOICE: lambda: click.Choice(setting.choices)}
    return click.option(setting.flag, setting.option, type=kinds[setting.kind]() if setting.kind in kinds else None,
                        envvar=ENVIRON[name] if envvar == "" else envvar, default=None, metavar=setting.metavar,
                        help=setting.help if help == "" else help)


def watch_and_reduce(cli, broker: str, run_id: str, output) -> Path:
    """Follow a run live until it is complete, then write its results file and manifest."""
    from coordinator.running.farm_run import watch
    from coordinator.running.progress import FarmProgress

    ledger, app = cli.connect(broker)
    display = FarmProgress(sys.stderr)
    watch(ledger, app, run_id, on_progress=display.update, detail=True, on_warning=display.warn)
    return reduce_and_write(cli, ledger, run_id, output)


def reduce_and_write(cli, ledger, run_id: str, output) -> Path:
    """Write the run's results file and manifest, then let its keys expire."""
    from coordinator.running.farm_run import expire_reduced, reduce_farm_run

    results, manifest = reduce_farm_run(ledger, run_id)
    path = cli.write_results(results, manifest, output)
    expire_reduced(ledger, run_id)
    return path


@main.command()
@click.argument("run_id")
@broker_option()
@click.option("--watch", "follow", is_flag=True, help="Refresh until the run is complete.")
@click.option("--interval", type=float, default=2.0, show_default=True)
@pass_cli
def status(cli, run_id, broker, follow, interval):
    """Progress of a farm run: done, running, queued, failed, per-worker rates, the slowest items, ETA."""
    from coordinator.running.farm_run import lost_message, progress, recover_lost
    from coordinator.running.progress import FarmProgress, board

    ledger, app = cli.connect(broker)
    display = FarmProgress(sys.stdout, live=follow and sys.stdout.isatty())
    while True:
        for item_id, verdict in recover_lost(ledger, app, run_id).items():
            display.warn(lost_message(item_id, verdict))
        state = progress(ledger, run_id)
        if follow:
            display.update(state)
        else:
            click.echo("\n".join(board(state)))
        if not follow or state["complete"]:
            return
        time.sleep(interval)


@main.command("requeue")
@click.argument("run_id")
@broker_option()
@click.option("--failed", is_flag=True, help="Every failed item, attempts reset (but those a worker refused).")
@click.option("--refused", is_flag=True,
              help="The items a worker refused for what it is (a system it may not run, another code version, "
                   "another model): once the workers are restarted so they take them (--allow-system).")
@click.option("--stale", is_flag=True, help="Items started longer ago than --stale-after.")
@click.option("--stale-after", type=float, default=None, help="Seconds (default: task time limit + 60).")
@pass_cli
def requeue_command(cli, run_id, broker, failed, refused, stale, stale_after):
    """Put failed, refused or stale items of a run back on the queue."""
    from collections import Counter

    from coordinator.running.farm_run import requeue
    from adapters.terminal import printable

    if not failed and not stale and not refused:
        raise click.UsageError("say what to requeue: --failed, --refused and/or --stale")
    ledger, app = cli.connect(broker)
    chosen, left_out = requeue(ledger, app, run_id, failed=failed, stale=stale, stale_after=stale_after,
                               refused=refused)
    click.echo(f"requeued {len(chosen)} items" + (f": {printable(', '.join(chosen[:20]))}" if chosen else ""))
    if left_out:
        reasons = Counter(error.partition(": ")[2] for error in left_out.values())
        click.echo(f"left out {len(left_out)} items a worker refused; the same workers would refuse them again:",
                   err=True)
        for reason, count in reasons.most_common(5):
            click.echo(printable(f"  {count} x {reason}"), err=True)
        click.echo("restart the workers so they take them: with --allow-system for a system they may not run "
                   "(memfarm worker --allow-system ..., or memfarm cluster up --allow-system ...), with this farm's "
                   f"code and model for another version; then: memfarm requeue {printable(run_id)} --refused",
                   err=True)
        raise SystemExit(1)


@main.command("resume")
@click.argument("run_id")
@broker_option()
@click.option("--output", type=click.Path(dir_okay=False), default=None)
@pass_cli
def resume_command(cli, run_id, broker, output):
    """Finish a run whose coordinator died: enqueue what is not done, watch, reduce."""
    from coordinator.running.farm_run import resume

    ledger, app = cli.connect(broker)
    chosen = resume(ledger, app, run_id)
    click.echo(f"re-enqueued {len(chosen)} items not done", err=True)
    watch_and_reduce(cli, broker, run_id, output)
    from coordinator.cli.failures import exit_if_failed

    exit_if_failed(cli)


@main.command("reduce")
@click.argument("run_id")
@broker_option()
@click.option("--output", type=click.Path(dir_okay=False), default=None)
@pass_cli
def reduce_command(cli, run_id, broker, output):
    """Write the results file and manifest of a farm run from its ledger."""
    ledger, _ = cli.connect(broker)
    reduce_and_write(cli, ledger, run_id, output)


@main.command("runs")
@broker_option()
@pass_cli
def runs_command(cli, broker):
    """Every run in this redis: state, counts and age."""
    from coordinator.running.farm_run import run_summaries
    from adapters.terminal import printable

    ledger, _ = cli.connect(broker)
    rows = run_summaries(ledger)
    if not rows:
        click.echo("no runs")
        return
    click.echo(f"{'run':<28} {'state':<9} {'benchmark':<12} {'system':<10} {'done':>9} {'running':>8} "
               f"{'queued':>7} {'failed':>7} {'age':>8} {'expires in':>11}")
    for r in rows:
        if r["state"] == "damaged":
            click.echo(f"{r['run_id']:<28} {'damaged':<9} {printable(r['error'])}")
            continue
        expires = f"{r['ttl_seconds'] / 3600:.1f} h" if r["ttl_seconds"] and r["ttl_seconds"] > 0 else "never"
        # the run's metadata is anyone's with a worker password: a planted name is cut, not printed whole
        benchmark, system = printable(str(r["benchmark"])[:60]), printable(str(r["system"])[:60])
        click.echo(f"{r['run_id']:<28} {r['state']:<9} {benchmark:<12} {system[:10]:<10} "
                   f"{r['done']:>4}/{r['total']:<4} {r['running']:>8} {r['queued']:>7} {r['failed']:>7} "
                   f"{r['age_seconds'] / 3600:>6.1f} h {expires:>11}")


@main.command("forget")
@click.argument("run_id")
@broker_option()
@click.option("--force", is_flag=True, help="Forget a run that is still staging or running.")
@pass_cli
def forget_command(cli, run_id, broker, force):
    """Remove every key of RUN_ID from redis (refuses a run still in progress without --force)."""
    from coordinator.running.farm_run import progress
    from coordinator.running.run_ledger import LedgerValueError

    ledger, _ = cli.connect(broker)
    if not ledger.has_meta(run_id):
        if not ledger.run_keys(run_id):
            raise MemfarmError(f"no run {run_id!r} in this redis")
        # keys with no metadata: nothing can watch, resume or reduce them, nothing in progress to protect
        click.echo(f"forgot run {run_id} (it had no metadata left): {ledger.forget(run_id)} keys removed")
        return
    try:
        state = progress(ledger, run_id, per_worker=False)
    except LedgerValueError as error:
        if not force:
            raise MemfarmError(f"{error}; use --force to forget the run anyway") from None
        state = {"complete": True}
    if not state["complete"] and not force:
        raise MemfarmError(f"run {run_id} is still in progress ({state['finished']}/{state['total']} finished); "
                           "use --force to forget it anyway")
    click.echo(f"forgot run {run_id}: {ledger.forget(run_id)} keys removed")


@main.command("forget-shared-embeddings")
@broker_option()
@pass_cli
def forget_shared_embeddings_command(cli, broker):
    """Remove every vector workers shared through this redis (--shared-embeddings); they expire after 7 days."""
    from workers.farm.shared_vectors import forget_all

    ledger, _ = cli.connect(broker)
    click.echo(f"forgot the shared embeddings: {forget_all(ledger.r)} keys removed; each machine's own store keeps "
               "what it took from them until `memfarm forget-stored-embeddings` runs there")


@main.command("forget-stored-embeddings")
@click.option("--cache-dir", type=click.Path(file_okay=False), envvar=ENVIRON["cache_dir"], default=DEFAULT_CACHE_DIR,
              show_default=True, help="The cache directory whose embedding store is cleaned (a worker's, or a run's).")
@click.option("--all", "everything", is_flag=True, help="Forget every vector, those encoded on this machine too.")
def forget_stored_embeddings_command(cache_dir, everything):
    """Remove from this machine's embedding store what it took from elsewhere: vectors from the farm's shared tier,
    and those of unknown origin (stored before origins were kept); with --all, every vector."""
    from adapters.defaults import EMBEDDING_STORE_FILE
    from memoria.embedding_store import ORIGIN_LOCAL, ORIGIN_SHARED, ORIGIN_UNKNOWN, EmbeddingStore

    path = Path(cache_dir) / EMBEDDING_STORE_FILE
    if not path.is_file():
        raise MemfarmError(f"{path}: no embedding store there (give the --cache-dir its runs or worker used)")
    store = EmbeddingStore(path)
    origins = (ORIGIN_SHARED, ORIGIN_UNKNOWN) + ((ORIGIN_LOCAL,) if everything else ())
    removed = store.forget(origins)
    click.echo(f"{path}: forgot {removed} vectors ({', '.join(origins)}); {store.stats()['vectors']} left")


@main.command()
@broker_option()
@click.option("--cache-dir", type=click.Path(file_okay=False), envvar=ENVIRON["cache_dir"], default=DEFAULT_CACHE_DIR,
              show_default=True)
@click.option("--concurrency", type=click.IntRange(1), default=1, show_default=True)
@click.option("--torch-threads", type=click.IntRange(1), default=1, show_default=True,
              help="Torch threads per worker process.")
@machine_option("max_seq_length")
@machine_option("embedder_backend", envvar=None,
                help="Run the embedder this way whatever a run says; a run staged with another backend is refused.")
@machine_option("embedder", help="This worker's embedding model whatever a run says (default: the run's); a run "
                                 "staged with another model is refused, naming both.")
@click.option("--allow-system", "allowed", multiple=True,
              help="A system besides the built-in ones that this worker may run (file.py:Class or module:Class), "
                   "or a server it may call (http[s]://HOST:PORT: any prefix on that scheme, host and port); "
                   "repeatable. Runs naming any other are refused before anything is imported or called.")
@click.option("--name", default=None, help="Worker name (default: memfarm-<pid>@host).")
@click.option("--loglevel", default="INFO", show_default=True)
def worker(broker, cache_dir, concurrency, torch_threads, max_seq_length, embedder_backend, embedder, allowed, name,
           loglevel):
    """A Celery worker for farm runs (sane defaults for a small machine)."""
    import json

    from coordinator.running.run_ledger import connect
    from coordinator.running.spec import resolved_system

    from adapters.systems.http_client import TOKEN_ENV, is_http_system, origin

    resolved = [resolved_system(a) for a in allowed]
    servers = sorted({origin(a) for a in resolved if is_http_system(a)})
    if os.environ.get(TOKEN_ENV) and len(servers) > 1:  # whoever writes a run to Redis picks which one is called
        shown = ", ".join(f"{scheme}://{host}:{port}" for scheme, host, port in servers)
        raise click.UsageError(f"{TOKEN_ENV} is set and this worker may call {len(servers)} servers ({shown}): a run "
                               "naming one would be sent the token meant for another; start one worker per server, "
                               "each with its own token")
    os.environ[ENVIRON["allowed_systems"]] = json.dumps(resolved)

    os.environ["MEMFARM_BROKER"] = broker
    os.environ[ENVIRON["cache_dir"]] = str(Path(cache_dir).resolve())
    use_threads(torch_threads, keep_omp=True)  # the variable its pool processes and their models read
    if max_seq_length:
        os.environ[ENVIRON["max_seq_length"]] = str(max_seq_length)
    if embedder_backend:
        os.environ[ENVIRON["embedder_backend"]] = embedder_backend
    if embedder:
        from memoria.model_files import embedder_key

        os.environ[ENVIRON["embedder"]] = embedder_key(embedder)  # the checks below check its files before any run
    connect(broker)  # one clear line for a wrong password or a missing server
    _refuse_on_failed_checks(broker, cache_dir, max_seq_length, embedder)
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    from workers.farm.app import make_app

    app = make_app(broker)
    import workers.farm.tasks  # noqa: F401  (registers the task)

    app.worker_main([
        "worker", "--loglevel", loglevel, "--concurrency", str(concurrency), "--pool", "prefork",
        "--hostname", name or f"memfarm-{os.getpid()}@%h", "--task-events", "--without-gossip", "--without-mingle",
    ])


def _refuse_on_failed_checks(broker: str, cache_dir: str, max_seq_length: int | None, embedder: str | None) -> None:
    """The doctor's checks (the model's files read, not loaded): print any WARN or FAIL; refuse on a FAIL."""
    from coordinator.operations.doctor import OK, failed, run_checks

    checks = run_checks(broker=broker, cache_dir=cache_dir, load_model=False, max_seq_length=max_seq_length,
                        browser=False, embedder=embedder, worker=True)
    for check in checks:
        if check.status != OK:
            click.echo(check.line(), err=True)
    if failed(checks):
        raise MemfarmError(f"worker not started: {len(failed(checks))} check(s) failed (memfarm doctor tells more)")


@main.command()
@broker_option(required=False)
@click.option("--cache-dir", type=click.Path(file_okay=False), envvar=ENVIRON["cache_dir"], default=DEFAULT_CACHE_DIR,
              show_default=True, help="The cache directory whose disk is checked.")
@machine_option("max_seq_length", help=None)
@click.option("--quick", is_flag=True, help="Read the model's files instead of loading the model.")
@machine_option("embedder", help=f"The model to check (default: {DEFAULT_EMBEDDER}).")
@click.option("--dataset", type=click.Path(), default=None,
              help="Also check a dataset file, or a folder of them where `run` takes one (RealMem, BEAM): size, "
                   "SHA-256, and whether it is a published file.")
def doctor(broker, cache_dir, max_seq_length, quick, embedder, dataset):
    """Check this machine before a long run: Python, packages, torch, the model, Redis, disk, chromium.

    Each line is OK, WARN or FAIL with the fix; the exit status is 1 when anything FAILs.
    """
    from coordinator.operations.doctor import failed, run_checks

    checks = run_checks(broker=broker, cache_dir=cache_dir, load_model=not quick, max_seq_length=max_seq_length,
                        dataset=dataset, embedder=embedder)
    for check in checks:
        click.echo(check.line())
    bad = failed(checks)
    counts = {status: sum(1 for c in checks if c.status == status) for status in ("OK", "WARN", "FAIL")}
    click.echo(f"{len(checks)} checks: {counts['OK']} OK, {counts['WARN']} WARN, {counts['FAIL']} FAIL")
    if bad:
        sys.exit(1)


@main.command()
@broker_option()
@click.option("--address", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=5555, show_default=True)
@click.option("--no-auth", is_flag=True, help="Run without basic auth (only on a trusted machine).")
def flower(broker, address, port, no_auth):
    """Flower on localhost with basic auth from MEMFARM_FLOWER_USER / MEMFARM_FLOWER_PASSWORD."""
    user, password = os.environ.get("MEMFARM_FLOWER_USER"), os.environ.get("MEMFARM_FLOWER_PASSWORD")
    env = dict(os.environ, MEMFARM_BROKER=broker)
    if no_auth and not _loopback(address):
        raise MemfarmError(f"--no-auth is only allowed on a loopback address, not {address}")
    if not no_auth:
        if not user or not password:
            raise MemfarmError("Flower needs MEMFARM_FLOWER_USER and MEMFARM_FLOWER_PASSWORD (or --no-auth)")
        env["FLOWER_BASIC_AUTH"] = f"{user}:{password}"
    else:
        env.pop("FLOWER_BASIC_AUTH", None)
        env["FLOWER_UNAUTHENTICATED_API"] = "true"
    # The broker URL reaches Flower through MEMFARM_BROKER (read by workers.farm.app), never its command line.
    # Workers send events from their start and ignore control commands, so Flower does not ask them to.
    argv = [sys.executable, "-m", "celery", "-A", "workers.farm.monitor", "flower", f"--address={address}",
            f"--port={port}", "--enable_events=False"]
    os.execve(sys.executable, argv, env)


def _loopback(address: str) -> bool:
    import ipaddress

    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
