"""The fault campaign on simulated machines: namespaces, cgroups, real workers, a real redis-server with the
cluster's users and TLS."""

import json

import pytest

from devtools.fleet import unavailable_reason
from tests.helpers import skip_outside_ci

pytestmark = [pytest.mark.server, pytest.mark.slow]


def test_a_faulty_fleet_run_ends_on_its_own_with_nothing_lost_or_counted_twice(tmp_path, capsys):
    reason = unavailable_reason()
    if reason:
        skip_outside_ci(f"the fleet needs what this machine lacks: it {reason}")
    from devtools.fleet_bench import run_fleet_bench

    output = tmp_path / "fleet.json"
    table = run_fleet_bench(questions=10, scale=0.2, workdir=tmp_path / "work", output=output, time_limit=30)
    print(table)
    report = json.loads(output.read_text())
    for key in ("faults_injected", "faults_survived", "records_lost", "duplicates", "faults", "wall_seconds"):
        assert key in report
    assert report["redis"]["tls"] and report["redis"]["coordinator_user"] == "coordinator", report["redis"]
    assert report["redis"]["maxmemory"] > 0, "the cluster's memory cap"
    assert report["records_lost"] == 0 and report["duplicates"] == 0
    assert report["records_equal_local"] and report["failures_named_in_manifest"]
    assert report["unexpected_failures"] == []
    assert report["failed_items"] == report["expected_failures"], "the poison and the slow item fail for good"
    injected = {row["fault"].split(" (")[0] for row in report["faults"] if row["injected"]}
    assert {"SIGKILL of a pool child", "SIGKILL of a whole worker", "Redis SIGKILLed, restarted on its append-only file",
            "poison item", "item over the hard time limit"} <= injected, report["faults"]
    assert report["faults_survived"] == report["faults_injected"]
    assert report["wall_seconds"]["faulty"] > 0 and report["wall_seconds"]["fault_free"] > 0


def test_nothing_of_the_fleet_is_left_behind():
    import subprocess
    from pathlib import Path

    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "hub" not in namespaces and not any(line.startswith("mf") for line in namespaces.splitlines())
    assert not list(Path("/sys/fs/cgroup/memory").glob("memfarm-fleet-*"))
