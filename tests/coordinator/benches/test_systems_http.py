"""`memfarm bench systems --system URL`: a server gets its row beside the reference, under its one spelling."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.http_support import reference_server

pytestmark = [pytest.mark.server, pytest.mark.slow]


def test_a_server_named_with_system_gets_a_row_against_the_reference(tmp_path, locomo_path):
    one = tmp_path / "one.json"
    one.write_text(json.dumps(json.loads(locomo_path.read_text())[:1]))
    server = reference_server(tmp_path)
    try:
        given = server.url + "/"  # a trailing slash: the same server
        result = CliRunner().invoke(main, ["bench", "systems", "--locomo", str(one), "--questions", "2",
                                           "--scale", "0.02", "--limit", "1", "--system", given,
                                           "--workdir", str(tmp_path / "wd"),
                                           "--output", str(tmp_path / "systems.json")])
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "systems.json").read_text())
    rows = {(r["dataset"], r["system"]): r for r in report["rows"]}
    assert set(rows) == {(d, s) for d in ("locomo", "longmemeval") for s in ("memoria full", server.url)}
    row = rows[("locomo", server.url)]
    assert row["n"] > 0 and 0 <= row["session_recall_any_5"] <= 1 and row["recall_p50_ms"] > 0
    assert row["session_recall_all_5_delta"] is not None and rows[("locomo", "memoria full")]["session_recall_all_5_delta"] is None
    assert server.url in result.output and given not in {r["system"] for r in report["rows"]}
