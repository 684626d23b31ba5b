"""Starting, awaiting and stopping the farm's processes: real redis-servers, real workers, real process groups."""

import os
import stat
import socket
import sys
import time

import pytest
import redis

from adapters.errors import MemfarmError
from coordinator.operations.processes import (free_port, group_members, process_alive, spawn, start_redis,
                                              stop_group, wait_ready)
from tests.farm_support import REPO, wait_for

pytestmark = pytest.mark.server

#: A leader that starts a child which ignores SIGTERM, says `up <child pid>`, and sleeps: a group that only
#: SIGKILL, sent to the whole group, ends.
STUBBORN = """
import signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
                          "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('armed', flush=True); time.sleep(600)"],
                         stdout=subprocess.PIPE, text=True)
child.stdout.readline()
print("up", child.pid, flush=True)
time.sleep(600)
"""


def _stubborn(tmp_path, **options):
    child = spawn([sys.executable, "-c", STUBBORN], tmp_path / "stubborn.log", name="stubborn", ready_line="up ",
                  **options)
    child.wait_ready(timeout=30)
    return child, int(child.output().split("up ", 1)[1].split()[0])


def test_stop_ends_the_whole_group_even_a_child_that_ignores_sigterm(tmp_path):
    leader, grandchild = _stubborn(tmp_path)
    assert set(group_members(leader.pid)) == {leader.pid, grandchild}
    started = time.monotonic()
    assert leader.stop(grace_seconds=1.0) is True
    assert time.monotonic() - started < 8, "SIGKILL comes after the grace period, not after the child gives up"
    assert not process_alive(grandchild), "the child that ignored SIGTERM outlived the stop"
    assert group_members(leader.pid) == [] and leader.returncode is not None
    assert leader.stop() is False, "a group that is gone is not stopped twice"


def test_stopping_by_pid_alone_ends_the_group(tmp_path):
    """What `memfarm cluster down` does: it has only the PIDs of `cluster.json`, not the process objects."""
    leader, grandchild = _stubborn(tmp_path)
    assert stop_group(leader.pid, grace_seconds=1.0) is True
    assert not process_alive(grandchild) and not process_alive(leader.pid)


def test_kill_group_is_sigkill_to_every_member(tmp_path):
    leader, grandchild = _stubborn(tmp_path)
    leader.kill_group()
    assert not process_alive(grandchild) and group_members(leader.pid) == []
    assert leader.returncode == -9


def test_a_prefix_runs_first_and_execs_the_command_in_the_same_process(tmp_path):
    """The fleet's prefix: a shell that writes its own PID somewhere, then execs the command."""
    pid_file = tmp_path / "pid"
    leader, grandchild = _stubborn(tmp_path, prefix=("sh", "-c", 'echo $$ > "$0" && exec "$@"', str(pid_file)))
    assert int(pid_file.read_text()) == leader.pid, "the stopped group's leader is the command, not a shell"
    leader.stop(grace_seconds=1.0)
    assert not process_alive(grandchild)


def test_readiness_counts_only_what_this_start_wrote(tmp_path):
    log = tmp_path / "again.log"
    log.write_text("celery@old ready.\n")  # a previous start's line, kept in the appended log
    child = spawn([sys.executable, "-c", "import time; time.sleep(600)"], log, name="quiet", ready_line="ready.")
    try:
        with pytest.raises(MemfarmError, match=f"quiet not ready after 1s; see {log}"):
            wait_ready([child], timeout=1)
    finally:
        child.kill_group()


def test_a_process_that_exits_before_it_is_ready_is_named_at_once(tmp_path):
    log = tmp_path / "dies.log"
    child = spawn([sys.executable, "-c", "raise SystemExit(3)"], log, name="dies", ready_line="ready.")
    started = time.monotonic()
    with pytest.raises(MemfarmError, match=f"dies exited \\(status 3\\) before it was ready; see {log}"):
        wait_ready([child], timeout=30)
    assert time.monotonic() - started < 20, "an exit is not waited out to the timeout"


def test_redis_answers_when_start_returns_with_its_password_kept_off_the_command_line(tmp_path):
    port, password = free_port(), "pw-never-on-argv"
    server = start_redis(tmp_path / "redis", port, password, tmp_path / "redis.log")
    try:
        # one try, no client-side retries: the server answers the moment start_redis returns, and asks
        # for the password
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"PING\r\n")
            assert raw.recv(100).startswith(b"-NOAUTH"), "start_redis returned before the server took commands"
        client = redis.Redis(port=port, password=password, socket_connect_timeout=1)
        assert client.ping()
        assert password not in " ".join(server.args)  # redis-server rewrites its /proc title: ask what was run
        assert oct((tmp_path / "redis" / "redis.conf").stat().st_mode)[-3:] == "600"
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        client.set("kept", "1")
        client.bgrewriteaof()  # the append-only file on disk now holds the key
        wait_for(lambda: client.info("persistence")["aof_rewrite_in_progress"] == 0, timeout=30, interval=0.05,
                 what="the AOF rewrite")
    finally:
        server.kill_group()
    assert not process_alive(server.pid)
    again = start_redis(tmp_path / "redis", port, password, tmp_path / "redis.log")
    try:
        assert redis.Redis(port=port, password=password).get("kept") == b"1", "the restart replayed its data"
    finally:
        again.kill_group()
    assert (tmp_path / "redis.log").read_text().count("Ready to accept connections") == 2


def test_redis_that_cannot_start_is_a_clear_error(tmp_path):
    busy = start_redis(tmp_path / "one", free_port(), None, tmp_path / "one.log")
    try:
        port = int(busy.args[busy.args.index("--port") + 1])
        with pytest.raises(MemfarmError, match=f"exited .* before it was ready; see {tmp_path / 'two.log'}"):
            start_redis(tmp_path / "two", port, None, tmp_path / "two.log")
    finally:
        busy.kill_group()


@pytest.mark.slow
def test_a_real_worker_is_ready_then_stopped_with_its_pool(redis_server, tmp_path):
    from coordinator.operations.processes import start_worker

    worker = start_worker(redis_server.url, "w1", tmp_path / "cache", tmp_path / "w1.log",
                          dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO)
    worker.wait_ready(timeout=120)
    pool = worker.children()
    assert pool, "a ready worker has its pool processes"
    assert redis_server.password not in " ".join(worker.args) + open(f"/proc/{worker.pid}/cmdline").read()
    worker.stop()
    assert worker.returncode is not None and group_members(worker.pid) == []
    assert not any(process_alive(pid) for pid in pool), "a pool process outlived its worker's stop"



def test_a_logs_folder_made_for_a_process_and_its_log_are_the_owners_only(tmp_path):
    log = tmp_path / "state" / "logs" / "worker1.log"
    child = spawn([sys.executable, "-c", "print('hello')"], log, name="hello")
    child.wait(timeout=30)
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and "hello" in log.read_text()
