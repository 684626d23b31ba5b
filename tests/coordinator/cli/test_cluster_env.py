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
