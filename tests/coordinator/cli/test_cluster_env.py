"""`memfarm cluster env`: the broker URL reaches the shell through eval, never through a line a person pastes."""

import json
import os
import subprocess

from click.testing import CliRunner

from coordinator.cli import main


def test_env_prints_lines_a_shell_evaluates_into_the_broker_and_tls_files(tmp_path):
    broker = "redis://coordinator:p'w $x@127.0.0.1:7000/0"  # a quote and a dollar must survive the shell
    (tmp_path / "cluster.json").write_text(json.dumps({"broker": broker, "tls": {"MEMFARM_TLS_CA": "/a b/ca.crt"}}))
    result = CliRunner().invoke(main, ["cluster", "env", "--state-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    shell = subprocess.run(["sh", "-c", result.output + '\nprintf "%s\\n%s" "$MEMFARM_BROKER" "$MEMFARM_TLS_CA"'],
                           capture_output=True, text=True, env={"PATH": os.environ["PATH"]}, timeout=30)
    assert shell.stdout.split("\n") == [broker, "/a b/ca.crt"], shell


def test_env_without_a_cluster_says_so_in_one_line(tmp_path):
    result = CliRunner().invoke(main, ["cluster", "env", "--state-dir", str(tmp_path / "none")])
    assert result.exit_code == 1 and "cluster.json: no cluster state to read" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_the_line_cluster_up_prints_works_as_typed_in_a_shell_whose_path_lacks_memfarm(tmp_path):
    """`cluster up` prints the line to paste; typed in a shell with no venv on its PATH, from another folder, it
    must still set the broker (a bare `memfarm` fails there, and silently inside eval)."""
    from coordinator.cli.cluster import env_line

    state = tmp_path / "state dir"
    state.mkdir()
    (state / "cluster.json").write_text(json.dumps({"broker": "redis://coordinator:pw@127.0.0.1:7000/0"}))
    line = env_line(state)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shell = subprocess.run(["bash", "-c", f'set -e\n{line}\nprintf "%s" "$MEMFARM_BROKER"'], capture_output=True,
                           text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, cwd=elsewhere, timeout=120)
    assert shell.stdout == "redis://coordinator:pw@127.0.0.1:7000/0", shell


def test_flower_login_prints_the_password_only_when_asked(tmp_path):
    (tmp_path / "cluster.json").write_text(json.dumps({"broker": "redis://x@127.0.0.1:1/0",
                                                       "flower": {"port": 5555, "user": "memfarm", "password": "s3"}}))
    result = CliRunner().invoke(main, ["cluster", "flower-login", "--state-dir", str(tmp_path)])
    assert result.exit_code == 0 and result.output.strip() == ("flower: http://127.0.0.1:5555  user: memfarm  "
                                                               "password: s3")
    missing = CliRunner().invoke(main, ["cluster", "flower-login", "--state-dir", str(tmp_path / "none")])
    assert missing.exit_code == 1 and "no Flower in the cluster state" in missing.output


def test_a_run_without_a_broker_beside_a_cluster_says_it_runs_here_alone(tmp_path, monkeypatch):
    from tests.helpers import write_dataset

    data = write_dataset(tmp_path / "lme.json", questions=1, seed=3, scale=0.02)
    (tmp_path / ".memfarm").mkdir()
    (tmp_path / ".memfarm" / "cluster.json").write_text(json.dumps({"broker": "redis://x@127.0.0.1:1/0"}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMFARM_BROKER", raising=False)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "recency",
                                       "--output", str(tmp_path / "out.json")])
    assert result.exit_code == 0, result.output
    assert "running on this machine alone: a cluster is up here" in result.output and "cluster env" in result.output
