"""A system behind HTTP against real server processes: the four calls, the errors, the retries, the token."""

import json
import time

import pytest
from click.testing import CliRunner

from adapters.errors import MemfarmError
from adapters.systems import make_system
from adapters.systems.http_client import HttpClient, HttpSystemError, canonical_url, origin, parse_url
from adapters.systems.http_system import HttpSystem
from coordinator.cli import main
from coordinator.operations.processes import free_port
from tests.http_support import TOKEN, reference_server, wire_server

pytestmark = pytest.mark.server


def _docs(label, n, start=0):
    return [{"external_id": f"{label}-{i:06d}", "label": label, "text": f"shared words and word{i}",
             "props": {"turn_index": i}} for i in range(start, start + n)]


@pytest.fixture()
def server(request, tmp_path):
    started = []

    def start(mode, *args, **kwargs):
        one = wire_server(tmp_path, mode, *args, **kwargs)
        started.append(one)
        return one

    yield start
    for one in started:
        one.stop()


def test_a_system_url_has_one_spelling_and_carries_no_secret():
    assert canonical_url("HTTP://LocalHost/v1/") == "http://localhost:80/v1"
    assert canonical_url("https://h.example:8443") == "https://h.example:8443"
    assert origin("https://h.example/a/b") == ("https", "h.example", 443)
    assert make_system("http://127.0.0.1:9/x").url == "http://127.0.0.1:9/x"  # built without a call
    for bad, said in (("http://user:pw@h:1", "no user or password"), ("http://h:1/?key=s", "no query"),
                      ("ftp://h", "expected http://"), ("http://h:99999", "not a URL")):
        with pytest.raises(MemfarmError, match=said) as caught:
            parse_url(bad)
        assert "pw" not in str(caught.value)


def test_the_four_calls_against_the_reference_server(tmp_path):
    reference = reference_server(tmp_path, "--prefix", "/v1")
    try:
        client = HttpClient(reference.url)
        info = client.info()
        assert info["name"] == "memfarm-reference-lexical" and info["config"]["wire_version"] == 1
        system = HttpSystem(reference.url)
        system.reset()
        system.ingest([{**d, "text": t} for d, t in zip(_docs("L", 2), ("a violin recital", "a pottery class"))])
        assert [h["external_id"] for h in system.retrieve("L", "the violin", 5)] == ["L-000000"]
        assert system.config["info"] == info and system.config["url"] == reference.url
        assert set(client.latencies) == {"info"} and {"reset", "ingest", "retrieve"} <= set(system.client.latencies)
        with pytest.raises(HttpSystemError, match=r"retrieve: HTTP 400: field top_k: expected a whole number") as caught:
            client.retrieve("L", "x", 0)  # the server's own error text, and no retry for a 4xx
        assert "tries" not in str(caught.value) and len(client.latencies["retrieve"]) == 1
    finally:
        reference.stop()


def test_each_item_has_a_label_of_its_own_and_the_previous_one_is_freed(server):
    good = server("good")
    first, second = HttpSystem(good.url), HttpSystem(good.url)
    for system in (first, second):  # two workers on one item of one run
        system.reset()
        system.ingest(_docs("item-1", 3))
        assert len(system.retrieve("item-1", "shared", 10)) == 3
    first.reset()
    first.ingest(_docs("item-2", 2))
    calls = good.requests()
    ingested = [c["label"] for c in calls if c["call"] == "ingest"]
    assert len(set(ingested)) == 3 and all(label.startswith("item-") for label in ingested)
    assert ingested[0] != ingested[1], "two systems on the same item never share a label"
    freed = [c["label"] for c in calls if c["call"] == "reset"]
    assert freed == [ingested[0], ingested[1], ingested[0], ingested[2]]  # reset before ingest; the old one freed


def test_a_slow_server_times_out_naming_the_call(server):
    slow = server("slow", "--delay", "4")
    client = HttpClient(slow.url, timeout=0.5, retries=1, backoff=0.05)
    started = time.monotonic()
    with pytest.raises(HttpSystemError, match=r"retrieve: no answer within 0.5 s \(after 2 tries\)"):
        client.retrieve("L", "q", 3)
    assert time.monotonic() - started < 3
    assert [c["call"] for c in slow.requests()] == ["retrieve", "retrieve"]


def test_the_timeout_bounds_the_whole_call_even_headers_that_drip(server):
    dripping = server("drip")  # a header byte every 0.1 s: each socket read returns in time, the answer never ends
    client = HttpClient(dripping.url, timeout=0.5, retries=0)
    started = time.monotonic()
    with pytest.raises(HttpSystemError, match=r"retrieve: no (whole )?answer within 0.5 s") as caught:
        client.retrieve("L", "q", 3)
    assert time.monotonic() - started < 3 and caught.value.retryable


def test_a_5xx_or_429_once_is_retried_and_an_ingest_failing_midway_starts_the_item_again(server):
    flaky = server("flaky")
    system = HttpSystem(flaky.url, retries=2, ingest_batch=2)
    system.reset()
    system.ingest(_docs("L", 5))
    hits = system.retrieve("L", "shared words", 10)
    assert sorted(h["external_id"] for h in hits) == [f"L-{i:06d}" for i in range(5)]
    calls = [(c["call"], c["docs"]) for c in flaky.requests()]
    assert calls == [("reset", 0), ("reset", 0),  # 503, then again
                     ("ingest", 2), ("ingest", 2),  # the second batch answered 503: the item again
                     ("reset", 0), ("ingest", 2), ("ingest", 2), ("ingest", 1),
                     ("retrieve", 0), ("retrieve", 0)]  # 429, then again


@pytest.mark.parametrize("mode, said", [
    ("wrong-shape", r"retrieve: field hits\[0\]\.score: expected a finite number, got 'high'"),
    ("oversized", r"retrieve: the answer is over 8388608 bytes"),
    ("nan-score", r"retrieve: the answer is not JSON \(NaN is not JSON\)"),
    ("deep", r"retrieve: the answer nests 200,001 levels deep \(at most 20\)"),
])
def test_a_wrong_answer_fails_naming_the_call_and_is_not_retried(server, mode, said):
    bad = server(mode)
    system = HttpSystem(bad.url)
    system.reset()
    system.ingest(_docs("L", 2))
    with pytest.raises(HttpSystemError, match=said):
        system.retrieve("L", "shared", 3)
    assert [c["call"] for c in bad.requests()].count("retrieve") == 1


def test_a_server_that_dies_fails_the_call_after_its_retries(server):
    dying = server("dies", "--die-after", "1")
    client = HttpClient(dying.url, retries=2, backoff=0.05)
    client.retrieve("L", "q", 3)
    with pytest.raises(HttpSystemError, match=r"retrieve: no answer \(.*\) \(after 3 tries\)") as caught:
        client.retrieve("L", "q", 3)
    assert caught.value.retryable and not dying.alive()


def test_the_token_is_sent_from_the_environment_and_shown_nowhere(server, monkeypatch):
    guarded = server("good", token=TOKEN)
    monkeypatch.setenv("MEMFARM_SYSTEM_TOKEN", TOKEN)
    system = HttpSystem(guarded.url)
    system.reset()
    system.ingest(_docs("L", 2))
    system.retrieve("L", "shared", 2)
    assert system.config["token"] is True and TOKEN not in json.dumps(system.config)
    calls = guarded.requests()
    assert len(calls) == 4 and all(c["token_ok"] for c in calls)


def test_a_token_a_server_echoes_back_reaches_no_manifest_or_error(server, monkeypatch):
    echoing = server("echo-token", token=TOKEN)  # its info config and its 401 error repeat the Authorization header
    monkeypatch.setenv("MEMFARM_SYSTEM_TOKEN", TOKEN)
    system = HttpSystem(echoing.url)
    config = json.dumps(system.config)
    assert TOKEN not in config and "Bearer" in config  # the rest of what it said is kept
    with pytest.raises(HttpSystemError, match="HTTP 401: refused Bearer") as caught:
        system.retrieve("L", "q", 3)
    assert TOKEN not in str(caught.value)
    assert system.retrieve("L", "echo", 3) == [{"external_id": "Bearer ***", "score": 1.0}]


def test_a_server_down_before_the_run_stops_it_with_one_line(tmp_path, monkeypatch, locomo_path):
    monkeypatch.setenv("MEMFARM_SYSTEM_RETRIES", "1")
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(locomo_path), "--system", url,
                                       "--output", str(tmp_path / "never.json")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: system {url} info: no answer (ConnectionRefusedError")
    assert not (tmp_path / "never.json").exists()


def test_a_url_with_a_password_is_refused_without_echoing_it(tmp_path, locomo_path):
    result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(locomo_path), "--system",
                                       "http://me:hunter2@127.0.0.1:9"])
    assert result.exit_code == 2 and "MEMFARM_SYSTEM_TOKEN" in result.output and "hunter2" not in result.output


@pytest.mark.parametrize("url", ["http://me:hunter2#x@127.0.0.1:9", "http://me:hunter2/x@127.0.0.1:9",
                                 "http://me:hun@ter2@127.0.0.1:9", "http://127.0.0.1:9/?token=hunter2",
                                 "http://127.0.0.1:9/#hunter2", "ftp://me:hunter2@127.0.0.1:9"])
def test_a_refused_url_is_named_without_its_secret(url):
    # a password holding / ? or # ends a parser's host part early: the rest read as a port, quoted in its error
    with pytest.raises(MemfarmError) as caught:
        parse_url(url)
    assert "hunter2" not in str(caught.value) and "127.0.0.1:9" in str(caught.value)


def test_a_worker_with_a_token_may_call_one_server_only(monkeypatch):
    # one token for two allowed servers: a run staged naming the other one would carry the token there
    monkeypatch.setenv("MEMFARM_SYSTEM_TOKEN", TOKEN)
    result = CliRunner().invoke(main, ["worker", "--broker", "redis://127.0.0.1:9/0", "--allow-system",
                                       "http://127.0.0.1:8077/v1", "--allow-system", "http://127.0.0.1:8078"])
    assert result.exit_code == 2 and "may call 2 servers" in result.output and TOKEN not in result.output


def test_a_worker_calls_only_the_servers_it_was_allowed(monkeypatch):
    from workers.farm.tasks import refusal_before_import
    from workers.version import CODE_VERSION

    meta = {"code_version": CODE_VERSION, "system": "http://127.0.0.1:8077/v1", "system_settings": {}}
    monkeypatch.setenv("MEMFARM_ALLOWED_SYSTEMS", json.dumps(["http://127.0.0.1:8077"]))
    assert refusal_before_import(meta) is None
    for allowed in ([], ["http://127.0.0.1:8078"], ["https://127.0.0.1:8077"], ["http://localhost:8077"]):
        monkeypatch.setenv("MEMFARM_ALLOWED_SYSTEMS", json.dumps(allowed))
        assert "may not call http://127.0.0.1:8077 (start it with --allow-system" in refusal_before_import(meta)
    monkeypatch.setenv("MEMFARM_ALLOWED_SYSTEMS", json.dumps(["http://127.0.0.1:8077"]))
    assert "system_settings: expected an object" in refusal_before_import({**meta, "system_settings": "x"})


def test_an_info_of_the_wrong_shape_names_its_field(server):
    with pytest.raises(HttpSystemError, match=r"info: field name: expected a non-empty string"):
        HttpClient(server("bad-info").url).info()


def test_a_token_a_header_cannot_carry_is_refused_without_showing_it(server, monkeypatch):
    good = server("good")
    monkeypatch.setenv("MEMFARM_SYSTEM_TOKEN", "line\nbreak-s3cr3t")
    with pytest.raises(MemfarmError, match="a character a header cannot carry") as caught:
        HttpClient(good.url).info()
    assert "s3cr3t" not in str(caught.value) and good.requests() == []


def test_a_server_dying_mid_run_fails_the_items_it_would_answer_and_the_run_still_reports(server, tmp_path,
                                                                                         monkeypatch):
    from tests.helpers import write_dataset

    monkeypatch.setenv("MEMFARM_SYSTEM_RETRIES", "0")
    dying = server("dies", "--die-after", "1")
    data = write_dataset(tmp_path / "d.json", questions=3, seed=5, scale=0.03)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", dying.url,
                                       "--output", str(tmp_path / "out.json")])
    assert result.exit_code == 1, result.output  # the files are written, and a run with failed items does not pass
    records = json.loads((tmp_path / "out.json").read_text())["records"]
    assert [r["status"] for r in records] == ["ok", "failed", "failed"]
    assert "retrieve: no answer (RemoteDisconnected" in records[1]["error"]
    assert "reset: no answer (ConnectionRefusedError" in records[2]["error"]  # the next item, before its ingest


@pytest.mark.parametrize("name, value", [("MEMFARM_SYSTEM_TIMEOUT", "soon"), ("MEMFARM_SYSTEM_TIMEOUT", "0"),
                                         ("MEMFARM_SYSTEM_TIMEOUT", "nan"), ("MEMFARM_SYSTEM_RETRIES", "-1")])
def test_a_wrong_timeout_or_retry_count_is_named(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(MemfarmError, match=f"{name}='{value}': expected a number of at least"):
        HttpSystem("http://127.0.0.1:9")


def test_a_score_past_float_range_is_not_a_finite_number():
    from adapters.systems.http_client import finite_number

    assert finite_number(1) and finite_number(-2.5) and not finite_number(10 ** 400)
    assert not finite_number(True) and not finite_number("1") and not finite_number(float("inf"))


def test_a_server_is_given_exactly_what_an_in_process_system_is_given(server, tmp_path, monkeypatch, locomo_path):
    from pathlib import Path

    one = tmp_path / "one.json"
    one.write_text(json.dumps(json.loads(locomo_path.read_text())[:1]))
    spy = Path(__file__).with_name("spy_system.py")
    monkeypatch.setenv("SPY_LOG", str(tmp_path / "spy.jsonl"))
    wire = server("good", "--bodies")
    for system, out in ((f"{spy}:SpySystem", "spy.json"), (wire.url, "wire.json")):
        result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(one), "--system", system,
                                           "--output", str(tmp_path / out)])
        assert result.exit_code == 0, result.output
    seen = [json.loads(line) for line in (tmp_path / "spy.jsonl").read_text().splitlines()]
    spy_docs = [{k: d[k] for k in ("external_id", "text", "props")} for e in seen if e["kind"] == "ingest"
                for d in e["payload"]]
    spy_asks = [(e["payload"]["query"], e["payload"]["top_k"]) for e in seen if e["kind"] == "retrieve"]
    calls = wire.requests()
    wire_docs = [d for c in calls if c["call"] == "ingest" for d in c["body"]["docs"]]
    wire_asks = [(c["body"]["query"], c["body"]["top_k"]) for c in calls if c["call"] == "retrieve"]
    assert wire_docs == spy_docs and len(wire_docs) > 400
    assert wire_asks == spy_asks and len(wire_asks) == 199
    labels = {e["payload"][0]["label"] for e in seen if e["kind"] == "ingest"}
    wire_labels = {c["body"]["label"] for c in calls if c["call"] != "info"}
    assert len(wire_labels) == 1 and next(iter(wire_labels)).startswith(next(iter(labels)) + ".")
    records = json.loads((tmp_path / "wire.json").read_text())["records"]
    assert {r["diagnostics"]["system"]["wire_label"] for r in records} == wire_labels
    assert all(set(c["body"]) == {"label", "query", "top_k"} for c in calls if c["call"] == "retrieve")


def test_a_worker_refuses_a_server_that_changed_since_the_run_was_staged(server):
    from types import SimpleNamespace

    from tests.workers.farm.test_refusals import staged_run
    from workers.farm.tasks import incompatibility

    good = server("good")
    staged = HttpSystem(good.url).info
    system = HttpSystem(good.url)
    assert incompatibility(staged_run(None, system_config={"info": staged}), system) is None
    for changed, said in (({**staged, "version": "0.2"}, "version changed"),
                          ({**staged, "config": {"mode": "other"}}, "config changed")):
        reason = incompatibility(staged_run(None, system_config={"info": changed}), system)
        assert reason.startswith(f"server {good.url} now answers info wire-good 0.1, the run was staged against "
                                 f"wire-good {changed['version']} ({said})")
    assert incompatibility(staged_run(None), SimpleNamespace()) is None  # not a server: not asked


def test_https_is_verified_against_the_trusted_authorities(server, tmp_path, monkeypatch):
    from coordinator.operations.certificates import make_certificates

    tls = make_certificates(tmp_path / "tls")
    secure = server("good", "--tls-cert", tls["server.crt"], "--tls-key", tls["server.key"])
    assert secure.url.startswith("https://127.0.0.1:")
    with pytest.raises(HttpSystemError, match=r"info: no answer \(SSLCertVerificationError") as caught:
        HttpClient(secure.url).info()
    assert not caught.value.retryable and "tries" not in str(caught.value)
    monkeypatch.setenv("SSL_CERT_FILE", tls["ca.crt"])  # the private CA trusted, as OpenSSL reads it
    system = HttpSystem(secure.url)
    system.reset()
    system.ingest(_docs("L", 3))
    assert len(system.retrieve("L", "shared", 2)) == 2 and system.config["url"] == secure.url
