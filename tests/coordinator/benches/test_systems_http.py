"""`memfarm bench systems --system URL`: a server gets its row beside the built-in systems."""

import json

import pytest
from click.testing import CliRunner

from adapters.errors import SystemUnavailable
from coordinator.benches import systems as bench
from coordinator.cli import main
from tests.http_support import reference_server

pytestmark = pytest.mark.server


def test_a_server_named_with_system_gets_a_row(tmp_path, locomo_path, monkeypatch):
    one = tmp_path / "one.json"
    one.write_text(json.dumps(json.loads(locomo_path.read_text())[:1]))
    real_row = bench.quality_row

    def servers_only(spec, workdir, label):  # the built-in rows are other tests' business: listed as skipped here
        if not spec.system_name.startswith("http://"):
            raise SystemUnavailable("not run by this test")
        return real_row(spec, tmp_path / "rows", label)

    monkeypatch.setattr(bench, "quality_row", servers_only)
    server = reference_server(tmp_path)
    try:
        given = server.url + "/"  # a trailing slash: the same server
        result = CliRunner().invoke(main, ["bench", "systems", "--locomo", str(one), "--system", given,
                                           "--output", str(tmp_path / "systems.json")])
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "systems.json").read_text())
    row = report["rows"][server.url]  # under its one spelling
    assert row["config"]["name"] == "memfarm-reference-lexical" and row["evaluable"] == 150
    assert 0 < row["session_recall_any@10"] <= 1 and row["recall_p50_ms"] > 0
    assert "memoria fusion" in report["skipped"] and server.url not in report["skipped"]
    assert set(report["skipped"].values()) == {"not run by this test"}
    assert server.url in result.output
