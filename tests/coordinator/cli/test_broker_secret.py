"""No password on a command line: `--broker` with one is refused by every command, benches hand the broker to
their children in the environment, and the compose health check authenticates without an argument."""

import os
import threading
import time
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

import coordinator.cli  # noqa: F401  (every command registers itself on `main`)
from coordinator.cli.root import main

REPO = Path(__file__).resolve().parents[3]
SECRET = "it's-s3cret@pw"
WITH_PASSWORD = f"redis://:{SECRET}@127.0.0.1:1/0"


def _commands_with_broker(group: click.Group, path=()):
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands_with_broker(command, (*path, name))
        elif any(param.name == "broker" for param in command.params):
            yield (*path, name)


COMMANDS = list(_commands_with_broker(main))


def test_the_commands_that_take_a_broker_are_all_found():
    assert {("run",), ("submit",), ("worker",), ("status",), ("doctor",), ("bench", "adamem")} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("url", [WITH_PASSWORD, "rediss://127.0.0.1:1/0?password=p@ss'&db=0"])
def test_a_password_in_broker_is_refused_on_every_command_line(command, url):
    result = CliRunner().invoke(main, [*command, "--broker", url])
    assert result.exit_code == 2, result.output
    assert "carries a password" in result.output and "MEMFARM_BROKER" in result.output
    assert "s3cret" not in result.output and "p@ss'" not in result.output


def test_the_same_url_from_the_environment_and_a_url_without_password_are_taken():
    from_env = CliRunner().invoke(main, ["status", "some-run"], env={"MEMFARM_BROKER": WITH_PASSWORD})
    plain = CliRunner().invoke(main, ["status", "some-run", "--broker", "redis://127.0.0.1:1/0"])
    for result in (from_env, plain):
        assert result.exit_code == 2 and "cannot reach redis at redis://" in result.output, result.output
        assert "carries a password" not in result.output and "s3cret" not in result.output


def test_no_bench_puts_a_broker_among_a_child_s_arguments():
    for source in sorted((REPO / "coordinator" / "benches").glob("*.py")):
        assert '"--broker"' not in source.read_text(encoding="utf-8"), source.name


@pytest.mark.server
def test_a_bench_child_gets_the_broker_in_its_environment_not_its_arguments(redis_server):
    """The child authenticates (it lists the runs) while no process of this test shows the password in /proc."""
    from coordinator.benches.common import measure_memfarm

    done, outcome, seen = threading.Event(), {}, []

    def measure():
        try:
            outcome["value"] = measure_memfarm(["runs"], redis_server.url)
        except Exception as exc:  # reported by the main thread's assertion
            outcome["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=measure)
    thread.start()
    deadline = time.monotonic() + 120
    while not done.wait(0.01) and time.monotonic() < deadline:
        seen += [line for line in _command_lines() if "coordinator.cli" in line]
    thread.join(timeout=5)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["value"][0] > 0, "the child ran and reached the server"
    assert seen, "the child's command line was seen while it ran"
    assert not [line for line in seen if redis_server.password in line]


def _command_lines():
    """The command lines of this process's descendants (other processes on the machine are not ours to judge)."""
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = (Path(entry.path) / "stat").read_text()
                parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    for pid in parents:
        ancestor = parents.get(pid)
        while ancestor not in (None, 0, 1, os.getpid()):
            ancestor = parents.get(ancestor)
        if ancestor == os.getpid():
            try:
                yield (Path(f"/proc/{pid}/cmdline")).read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue


def test_the_compose_health_check_passes_no_password_as_an_argument():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    test = compose["services"]["redis"]["healthcheck"]["test"]
    command = test if isinstance(test, str) else " ".join(test)
    assert 'REDISCLI_AUTH="$MONITOR_PASSWORD" redis-cli --user monitor ping' in command.replace("$$", "$")
    assert " -a " not in f" {command} " and "--pass" not in command and "-u " not in command


def test_an_error_line_shows_control_characters_escaped(tmp_path):
    """A file name carrying a terminal escape reaches the error line escaped, not raw."""
    from click.testing import CliRunner

    from coordinator.cli import main

    bad = tmp_path / "x\x1b]0;owned\x07.json"
    bad.write_text("[1]")
    result = CliRunner().invoke(main, ["analyze", str(bad)])
    assert result.exit_code == 2, result.output
    assert "\x1b" not in result.output and "\\x1b]0;owned\\x07" in result.output
