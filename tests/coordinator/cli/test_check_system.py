"""`memfarm check-system` on real servers (the reference one, its leaky variant, a wrong one) and Python classes."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.http_support import reference_server, wire_server

SPY = Path(__file__).resolve().parents[2] / "adapters" / "systems" / "spy_system.py"
CHECKS = ["info", "calls answered", "ids round-trip", "labels isolated", "labels isolated in flight",
          "reset isolates", "top_k respected", "no unknown or repeated ids", "same ranking twice", "finite scores"]


#: Keeps its docs apart from its reset, but answers across labels, with a stranger, a repeat, too many, a NaN.
SLOPPY = """
class Sloppy:
    name = "sloppy"

    def __init__(self):
        self.docs = []

    def reset(self):
        self.docs = []

    def ingest(self, docs):
        self.docs += [d["external_id"] for d in docs]

    def retrieve(self, label, query, top_k):
        hits = [{"external_id": "answer_leak_1", "score": 9.0}] + [{"external_id": i, "score": 1.0} for i in self.docs]
        return hits + hits[1:2] + [{"external_id": i, "score": float("nan")} for i in self.docs[:1]]
"""


def _check(*args):
    result = CliRunner().invoke(main, ["check-system", *args])
    return result.exit_code, result.stdout


def _verdicts(report):
    return {c["check"]: c["passed"] for c in report["checks"]}


@pytest.mark.server
def test_the_reference_server_conforms_and_its_leaky_variant_does_not(tmp_path):
    servers = [reference_server(tmp_path), reference_server(tmp_path, "--leaky")]
    try:
        code, output = _check(servers[0].url, "--output", str(tmp_path / "check.json"))
        assert code == 0, output
        written = json.loads((tmp_path / "check.json").read_text())
        assert written["command"] and written["commit"] and written["passed"] is True and written["load"]
        assert [c["check"] for c in written["checks"]] == CHECKS
        rows = [line for line in output.splitlines() if line.split("  ")[0].strip() in CHECKS]
        assert len(rows) == len(CHECKS) and all("pass" in row.split()[2:4] or " pass " in row for row in rows)
        assert output.rstrip().endswith("conforms")
        for call in ("info", "reset", "ingest", "retrieve"):
            assert f"latency {call}" in output

        code, output = _check(servers[1].url, "--json")
        assert code == 1
        report = json.loads(output)
        verdicts = _verdicts(report)
        assert verdicts.pop("reset isolates") is False and all(verdicts.values()), verdicts
        reason = next(c["detail"] for c in report["checks"] if c["check"] == "reset isolates")
        assert "hits of ids ingested before the reset" in reason
        assert report["passed"] is False and report["info"]["config"]["reset"] == "ignored (leaky variant)"
        assert {n["call"] for n in report["latency_ms"]} == {"info", "reset", "ingest", "retrieve"}
        assert all(0 < n["p50_ms"] <= n["p95_ms"] and n["calls"] >= 1 for n in report["latency_ms"])
    finally:
        for server in servers:
            server.stop()


@pytest.mark.server
def test_a_server_that_behaves_only_for_labels_unlike_a_run_s_does_not_pass(tmp_path):
    # it leaks across labels and ignores reset for labels shaped like a run's: the check must look like a run
    server = wire_server(tmp_path, "cheat")
    try:
        code, output = _check(server.url, "--json")
        verdicts = _verdicts(json.loads(output))
        assert code == 1 and verdicts["labels isolated in flight"] is False and verdicts["reset isolates"] is False
    finally:
        server.stop()


@pytest.mark.server
def test_a_server_busy_once_on_reset_ingest_and_retrieve_passes_as_a_run_would_get_through(tmp_path):
    server = wire_server(tmp_path, "flaky")  # 503 on the first reset and the second ingest, 429 on the first retrieve
    try:
        code, output = _check(server.url, "--json")
        report = json.loads(output)
        assert code == 0 and all(_verdicts(report).values()), report["checks"]
        calls = [c["call"] for c in server.requests()]
        # 3 fillings of a label, each in two calls; the busy one: its label reset and filled again
        assert calls.count("ingest") > 6 and calls.count("reset") >= 4
    finally:
        server.stop()


@pytest.mark.server
@pytest.mark.parametrize("mode, same", [("jitter", True), ("shuffle", False)])
def test_the_same_ranking_allows_float_rounding_of_scores_but_not_another_order(tmp_path, mode, same):
    server = wire_server(tmp_path, mode)
    try:
        code, output = _check(server.url, "--json")
        verdicts = _verdicts(json.loads(output))
        assert verdicts["same ranking twice"] is same and (code == 0) is same, verdicts
    finally:
        server.stop()


@pytest.mark.server
def test_a_server_whose_ingest_replaces_rather_than_adds_does_not_pass(tmp_path):
    # a run sends a long conversation in batches of 256: such a server would keep only the last one
    server = wire_server(tmp_path, "replace")
    try:
        code, output = _check(server.url, "--json")
        verdicts = _verdicts(json.loads(output))
        assert code == 1 and verdicts["ids round-trip"] is False, verdicts
    finally:
        server.stop()


@pytest.mark.server
def test_a_wrong_answer_fails_the_check_naming_the_call_and_field(tmp_path):
    server = wire_server(tmp_path, "wrong-shape")
    try:
        code, output = _check(server.url, "--json")
    finally:
        server.stop()
    assert code == 1
    report = json.loads(output)
    calls = next(c for c in report["checks"] if c["check"] == "calls answered")
    assert calls["passed"] is False and "retrieve: field hits[0].score: expected a finite number" in calls["detail"]
    assert _verdicts(report)["ids round-trip"] is None  # not run: its answers never came


def test_a_python_class_is_checked_through_the_same_contract(tmp_path, monkeypatch):
    monkeypatch.setenv("SPY_LOG", str(tmp_path / "spy.jsonl"))
    code, output = _check(f"{SPY}:SpySystem")
    assert code == 0, output
    assert "labels isolated in flight   -       not applicable" in output

    sloppy = tmp_path / "sloppy.py"
    sloppy.write_text(SLOPPY)
    code, output = _check(f"{sloppy}:Sloppy", "--json")
    assert code == 1
    report = json.loads(output)
    verdicts = _verdicts(report)
    assert verdicts["no unknown or repeated ids"] is False and verdicts["top_k respected"] is False
    assert verdicts["finite scores"] is False and verdicts["labels isolated"] is False
    assert verdicts["reset isolates"] is True and verdicts["same ranking twice"] is True
    detail = next(c["detail"] for c in report["checks"] if c["check"] == "no unknown or repeated ids")
    assert "unknown ids, e.g. 'answer_leak_1'" in detail and "repeated within one answer" in detail

    crashing = _check(f"{SPY}:Misbehaving")  # its retrieve fails once nothing is ingested
    assert crashing[0] == 1 and "calls answered              FAIL    IndexError" in crashing[1]


@pytest.mark.server
def test_the_timeout_of_a_call_is_an_option(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMFARM_SYSTEM_RETRIES", "0")
    server = wire_server(tmp_path, "slow", "--delay", "3")
    try:
        code, output = _check(server.url, "--timeout", "0.3", "--json")
    finally:
        server.stop()
    assert code == 1
    calls = next(c for c in json.loads(output)["checks"] if c["check"] == "calls answered")
    assert calls["detail"].endswith("retrieve: no answer within 0.3 s")
