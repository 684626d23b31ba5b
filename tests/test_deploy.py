"""The compose file parses, has the services it promises, and only uses commands that exist."""

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from coordinator.cli import main

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_compose_has_the_expected_services(compose):
    services = compose["services"]
    assert set(services) == {"redis", "worker", "flower", "coordinator"}
    redis_command = services["redis"]["command"]
    assert "--requirepass" not in redis_command, "the password stays off argv"
    from coordinator.operations.cluster import ACL_RULES, DEFAULT_USER

    assert f'echo "{DEFAULT_USER}"' in redis_command
    for role, rule in ACL_RULES.items():  # the same users and rules as `memfarm cluster up`
        assert f"user {role} on >$${role.upper()}_PASSWORD {rule}" in redis_command
    assert services["worker"]["environment"]["MEMFARM_BROKER"].startswith("redis://worker:")
    assert services["flower"]["environment"]["MEMFARM_BROKER"].startswith("redis://monitor:")
    assert "noeviction" in redis_command and "--appendonly yes" in redis_command
    assert "--appendfsync everysec" in redis_command and "--dir /data" in redis_command
    assert services["flower"]["ports"] == ["127.0.0.1:5555:5555"]
    assert "MEMFARM_FLOWER_PASSWORD" in services["flower"]["environment"]
    assert services["worker"]["mem_limit"] and "/cache" in services["worker"]["volumes"][0]
    assert services["coordinator"]["restart"] == "no"
    text = re.sub(r"[a-z_]*_password", "", (REPO / "docker-compose.yml").read_text().lower())
    assert "password" not in text and ">$$" in redis_command, "no literal secret in the compose file"


def test_every_memfarm_command_in_compose_exists(compose):
    commands = [s["command"] for s in compose["services"].values() if isinstance(s.get("command"), list)]
    commands.append(["run"])  # what the coordinator is run with, as the header says
    assert commands
    for command in commands:
        path = [word for word in command if not word.startswith("-")][:1]
        result = CliRunner().invoke(main, [*path, "--help"])
        assert result.exit_code == 0, (command, result.output)
        for option in (w.split("=")[0] for w in command if w.startswith("--")):
            assert option in result.output, f"{command[0]} has no option {option}"


def test_the_dockerfile_installs_a_cpu_torch_before_the_package():
    text = (REPO / "Dockerfile").read_text()
    assert text.index("torch==2.13.0") < text.index("pip install .")
    assert re.search(r"ENTRYPOINT \[\"memfarm\"\]", text)
