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


def _makefile_torch_spec() -> str:
    found = re.search(r"^TORCH_SPEC \?= (\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert found, "Makefile: no TORCH_SPEC line"
    return found.group(1)


def test_the_torch_the_suite_runs_on_is_a_cpu_build():
    """`make test` runs in the venv `make setup` built: this is the torch its TORCH_SPEC resolved to."""
    import importlib.metadata

    import torch

    assert torch.version.cuda is None, f"torch {torch.__version__} is a CUDA build (CUDA {torch.version.cuda})"
    cuda_wheels = sorted(d.metadata["Name"] for d in importlib.metadata.distributions()
                         if (d.metadata["Name"] or "").lower().startswith("nvidia-"))
    assert cuda_wheels == [], f"CUDA libraries installed beside torch: {cuda_wheels}"


def test_the_dockerfile_installs_the_makefile_torch_from_the_cpu_index_before_the_package():
    lines = (REPO / "Dockerfile").read_text().splitlines()
    torch_line = next((i for i, line in enumerate(lines) if re.search(r"pip install .*\btorch==", line)), None)
    package_line = next((i for i, line in enumerate(lines) if re.search(r"pip install \.( |$)", line)), None)
    assert torch_line is not None and package_line is not None, "Dockerfile: a torch or a package install is missing"
    words = lines[torch_line].split()
    index = words[words.index("--index-url") + 1] if "--index-url" in words else None
    assert index == "https://download.pytorch.org/whl/cpu", \
        f"Dockerfile line {torch_line + 1}: torch does not come from the CPU index: {lines[torch_line]}"
    assert _makefile_torch_spec() in words, f"Dockerfile line {torch_line + 1}: not the Makefile's {_makefile_torch_spec()}"
    assert torch_line < package_line, "torch must come first, or the package's dependencies pull a CUDA build"
    assert 'ENTRYPOINT ["memfarm"]' in lines
