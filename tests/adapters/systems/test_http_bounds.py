"""What a server can make of a run: a flood of hits, an info nested deep or past a float's range, labels kept by
their prefix, a URL that cannot be sent. Each is refused in one line, and the run's own files stay readable."""

import json
import logging

import pytest
from click.testing import CliRunner

from adapters.errors import MemfarmError
from adapters.systems.http_client import HttpClient, HttpSystemError, canonical_url, parse_url
from coordinator.cli import main
from tests.helpers import write_dataset
from tests.http_support import wire_server

pytestmark = pytest.mark.server


@pytest.fixture()
def server(tmp_path):
    started = []

    def start(mode, *args):
        one = wire_server(tmp_path, mode, *args)
        started.append(one)
        return one

    yield start
    for one in started:
        one.stop()


def _run(tmp_path, system, out="out.json", questions=3):
    data = write_dataset(tmp_path / "d.json", questions=questions, seed=5, scale=0.03)
    return CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", system,
                                     "--output", str(tmp_path / out)])


def test_a_server_flooding_its_answers_fails_each_item_once_with_a_count(server, tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("MEMFARM_SYSTEM_RETRIES", "0")
    flood = server("flood", "--flood", "20000")  # ids never ingested, well under the 8 MiB bound
    with caplog.at_level(logging.WARNING):
        result = _run(tmp_path, flood.url)
    results = json.loads((tmp_path / "out.json").read_text())
    records = results["records"]
    assert results["complete"] is False and [r["status"] for r in records] == ["failed"] * 3, result.output
    assert all("retrieve: field hits: returned 20,000 hits for " in r["error"] for r in records)
    assert (tmp_path / "out.json").stat().st_size < 200_000  # the flood stays out of the results file
    flooded = [r for r in caplog.records if "ghost-" in r.getMessage() or "output rejected" in r.getMessage()]
    assert len(flooded) <= 3


@pytest.mark.parametrize("mode, args, said", [
    ("deep-info", ("--depth", "900"), r"info: the answer nests 901 levels deep \(at most 20\)"),
    ("deep-info", ("--depth", "30"), r"info: field config(\.a){19}: nests more than 20 levels deep"),
    ("inf-info", (), r"info: field config\.limit: inf is not a finite number"),
])
def test_an_info_no_reader_could_read_back_is_refused_naming_its_field(server, tmp_path, mode, args, said):
    bad = server(mode, *args)
    with pytest.raises(HttpSystemError, match=said):
        HttpClient(bad.url).info()
    result = _run(tmp_path, bad.url)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: system "), result.output
    assert not (tmp_path / "out.json").exists()


def test_check_system_fails_a_server_that_keeps_two_labels_of_one_item_in_one_pool(server):
    # a retry or a second run of one item is a label with the same `item-<12 hex>` part and another suffix
    result = CliRunner().invoke(main, ["check-system", server("prefix").url, "--json"])
    verdicts = {c["check"]: c["passed"] for c in json.loads(result.stdout)["checks"]}
    assert result.exit_code == 1 and verdicts["labels isolated in flight"] is False, verdicts
    assert verdicts["reset isolates"] is False


@pytest.mark.parametrize("url, said", [
    ("http://127.0.0.1:9/pfad/ü", "the path may hold ASCII letters"),
    ("http://127.0.0.1:9/a b", "the path may hold ASCII letters"),
    ("http://a..b:9/", "the host is neither an IP address nor a valid (IDNA) name"),
    ("http://" + "x" * 70 + ".example:9", "the host is neither"),
    ("http://exa\x00mple:9", "the host is neither"),
])
def test_a_url_that_cannot_be_sent_is_refused_in_one_line(tmp_path, url, said):
    with pytest.raises(MemfarmError, match=said.replace("(", r"\(").replace(")", r"\)")):
        parse_url(url)
    for args in (["check-system", url], ["run", "longmemeval", "--dataset",
                                         str(write_dataset(tmp_path / "d.json", questions=1)), "--system", url]):
        result = CliRunner().invoke(main, args)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and said in lines[0], result.output
        assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception,
                                                                                            SystemExit)


def test_an_international_host_is_written_and_sent_in_its_ascii_form():
    assert canonical_url("http://Bücher.example/v1/") == "http://xn--bcher-kva.example:80/v1"
    assert canonical_url("http://[::0001]:8080/%C3%BC") == "http://[::1]:8080/%C3%BC"
