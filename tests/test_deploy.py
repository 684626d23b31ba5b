"""The compose file parses, has the services it promises, and only uses commands that exist."""

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from coordinator.cli import main
from tests.helpers import skip_outside_ci

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_compose_has_the_expected_services(compose):
    services = compose["services"]
    assert set(services) == {"redis", "worker", "flower", "coordinator"}
    redis_command = services["redis"]["command"]
    assert "--requirepass" not in redis_command, "the password stays off argv"
    from coordinator.operations.redis_users import ACL_RULES, DEFAULT_USER

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


def _dockerfile_arg(lines: list[str], name: str) -> str:
    found = [line.split("=", 1)[1] for line in lines if line.startswith(f"ARG {name}=")]
    assert len(found) == 1, f"Dockerfile: {len(found)} lines `ARG {name}=...`"
    return found[0]


def test_the_dockerfile_installs_the_makefile_torch_from_the_cpu_index_before_the_package():
    """By default (no build argument) torch is the Makefile's, from the PyTorch CPU index; `compose-check`
    passes a local wheel and a base image instead, through the same two arguments."""
    lines = (REPO / "Dockerfile").read_text().splitlines()
    torch_line = next((i for i, line in enumerate(lines) if re.search(r"pip install .*\$TORCH\b", line)), None)
    package_line = next((i for i, line in enumerate(lines) if re.search(r'pip install "\.\$\{EXTRAS\}"( |$)', line)), None)
    assert torch_line is not None and package_line is not None, "Dockerfile: a torch or a package install is missing"
    words = lines[torch_line].split()
    assert words[words.index("--index-url") + 1] == '"$TORCH_INDEX"', lines[torch_line]
    assert _dockerfile_arg(lines, "TORCH_INDEX") == "https://download.pytorch.org/whl/cpu"
    assert _dockerfile_arg(lines, "TORCH") == _makefile_torch_spec()
    assert torch_line < package_line, "torch must come first, or the package's dependencies pull a CUDA build"
    assert _dockerfile_arg(lines, "BASE_IMAGE") == "python:3.11-slim"
    assert "FROM ${BASE_IMAGE}" in lines
    assert 'ENTRYPOINT ["memfarm"]' in lines


def test_the_image_takes_the_projects_extras_only_when_asked():
    """`--build-arg EXTRAS=[mpnet]` adds an extra the project declares; by default the package alone."""
    import tomllib

    lines = (REPO / "Dockerfile").read_text().splitlines()
    assert _dockerfile_arg(lines, "EXTRAS") == ""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = re.findall(r"EXTRAS=\[(\w+)\]", (REPO / "Dockerfile").read_text() + (REPO / "README.md").read_text())
    assert named and all(name in extras for name in named), (named, sorted(extras))


def test_compose_images_default_to_the_public_ones_and_can_be_local(compose):
    services = compose["services"]
    assert services["redis"]["image"] == "${MEMFARM_REDIS_IMAGE:-redis:7}"
    for name in ("worker", "flower", "coordinator"):
        assert services[name]["build"]["args"] == {"BASE_IMAGE": "${MEMFARM_BASE_IMAGE:-python:3.11-slim}"}
        assert services[name]["image"] == "${MEMFARM_IMAGE:-memoria-farm:latest}"


def test_the_coordinator_container_writes_results_as_the_host_user(compose):
    coordinator = compose["services"]["coordinator"]
    assert coordinator["user"] == "${MEMFARM_UID:-1000}:${MEMFARM_GID:-1000}"
    assert "${MEMFARM_RESULTS:-./results}:/app/results" in coordinator["volumes"]
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "chmod 1777 /app/results" in dockerfile and "ENV HOME=/tmp" in dockerfile, \
        "an arbitrary uid needs a writable results folder and home"


def test_compose_redis_persists_like_cluster_up(compose, monkeypatch, tmp_path):
    """The flags `memfarm cluster up` starts redis-server with (captured from `start_redis` itself) are on the
    compose Redis's command line too, and its memory cap in the config."""
    from coordinator.operations import processes
    from coordinator.operations.cluster import DEFAULT_REDIS_MAXMEMORY

    captured = []

    def spawn(command, *args, **kwargs):
        captured.append(command)
        raise RuntimeError("captured")

    monkeypatch.setattr(processes, "spawn", spawn)
    monkeypatch.setattr(processes.shutil, "which", lambda name: "/usr/bin/redis-server")
    with pytest.raises(RuntimeError, match="captured"):
        processes.start_redis(tmp_path / "redis", 6390, None, tmp_path / "redis.log", acl="user default off\n")
    command = captured[0]
    flags = {command[i]: command[i + 1] for i in range(len(command) - 1) if command[i] in
             ("--appendonly", "--appendfsync", "--maxmemory-policy", "--save")}
    assert set(flags) == {"--appendonly", "--appendfsync", "--maxmemory-policy", "--save"}
    redis_command = compose["services"]["redis"]["command"]
    for flag, value in flags.items():
        assert f"{flag} {value or chr(34) * 2}" in redis_command, f"compose Redis lacks `{flag} {value}`"
    assert f'echo "maxmemory {DEFAULT_REDIS_MAXMEMORY}"' in redis_command


def test_the_build_context_leaves_out_the_venv_results_and_git():
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "results", "cache", "data", ".memfarm"} <= ignored
    assert not ignored & {"wheels", "memoria", "adapters", "workers", "coordinator", "pyproject.toml", "README.md"}


def test_ci_runs_the_suite_the_manual_build_and_the_compose_check():
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines() if line.strip().startswith("make")]
    assert ci == ["make test", "make docs", "make compose-check"]
    assert re.search(r"^compose-check:\n\tbash tools/compose-check$", (REPO / "Makefile").read_text(), re.M)


def test_the_compose_check_snapshot_shows_forwarding_the_forward_policy_and_the_bridge():
    """What `tools/compose-check` compares before and after (and fails on a difference) holds the three
    settings a Docker engine changes, read from the live system."""
    import shutil
    import subprocess

    if shutil.which("ip") is None:
        skip_outside_ci("no `ip` command (iproute2)")
    out = subprocess.run(["bash", str(REPO / "tools" / "compose-check"), "--snapshot"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert f"net.ipv4.ip_forward={Path('/proc/sys/net/ipv4/ip_forward').read_text().strip()}" in out
    assert any(line.startswith("FORWARD policy=") for line in out)
    bridge = "present" if Path("/sys/class/net/docker0").exists() else "absent"
    assert f"docker0={bridge}" in out
    assert any(line.startswith("bridges:") for line in out)


def test_the_compose_check_refuses_a_non_root_user_before_changing_anything():
    import os
    import shutil
    import subprocess

    command = ["bash", str(REPO / "tools" / "compose-check")]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            skip_outside_ci("no setpriv (util-linux) to run the check as another user")
        command = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", *command]
    done = subprocess.run(command, capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 1 and "run as root" in done.stderr, done.stderr
