"""The OpenAPI file of the HTTP contract: one text in the docs and in the package, and the reference server's
real answers and the requests memfarm sends fit its schemas."""

import json
import math
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from adapters.systems.http_client import HttpClient
from coordinator.cli import main
from tests.http_support import REPO, reference_server

PACKAGED = REPO / "adapters" / "systems" / "http-systems.openapi.yaml"
DOCS = REPO / "docs" / "http-systems.openapi.yaml"


def _spec():
    return yaml.safe_load(PACKAGED.read_text())


def _problems(value, schema, spec, where="$") -> list[str]:
    """What in `value` breaks `schema` (the part of OpenAPI 3 the contract uses: $ref, type, required,
    properties, items, minLength, maxLength, minimum, maxItems)."""
    if "$ref" in schema:
        node = spec
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        return _problems(value, node, spec, where)
    kinds = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float)}
    kind = schema.get("type")
    if kind and (not isinstance(value, kinds[kind]) or isinstance(value, bool)):
        return [f"{where}: expected {kind}, got {type(value).__name__}"]
    if kind == "number" and not math.isfinite(value):
        return [f"{where}: not finite"]
    found = []
    if isinstance(value, dict):
        found += [f"{where}.{name}: missing" for name in schema.get("required", []) if name not in value]
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                found += _problems(value[name], sub, spec, f"{where}.{name}")
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", math.inf):
            found.append(f"{where}: over {schema['maxItems']} items")
        for n, item in enumerate(value):
            found += _problems(item, schema.get("items", {}), spec, f"{where}[{n}]")
    if isinstance(value, str) and not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", math.inf):
        found.append(f"{where}: length {len(value)} out of bounds")
    if kind == "integer" and value < schema.get("minimum", -math.inf):
        found.append(f"{where}: below {schema['minimum']}")
    return found


def test_the_docs_and_the_package_hold_the_same_contract_and_the_cli_prints_it():
    assert DOCS.read_text() == PACKAGED.read_text()
    assert list(_spec()["paths"]) == ["/info", "/reset", "/ingest", "/retrieve"]
    printed = CliRunner().invoke(main, ["check-system", "--print-contract"])
    assert printed.exit_code == 0 and printed.output == PACKAGED.read_text()


def test_the_validator_sees_a_wrong_answer():
    spec = _spec()
    hits = {"$ref": "#/components/schemas/RetrieveResponse"}
    assert _problems({"hits": [{"external_id": "a", "score": 1}]}, hits, spec) == []
    assert _problems({"hits": [{"external_id": 3, "score": "x"}]}, hits, spec) == [
        "$.hits[0].external_id: expected string, got int", "$.hits[0].score: expected number, got str"]
    assert _problems({}, {"$ref": "#/components/schemas/Info"}, spec) == [f"$.{n}: missing" for n in
                                                                          ("name", "version", "config")]


@pytest.mark.server
def test_the_reference_server_and_memfarm_speak_the_contract(tmp_path, monkeypatch):
    spec = _spec()
    schemas = spec["components"]["schemas"]
    sent = []
    real_call = HttpClient._call

    def spy(self, call, method, body, limit):  # what memfarm sends, checked below against the requests' schemas
        sent.append((call, body))
        answer = real_call(self, call, method, body, limit)
        sent.append((call + " answer", answer))
        return answer

    monkeypatch.setattr(HttpClient, "_call", spy)
    server = reference_server(tmp_path)
    try:
        code = CliRunner().invoke(main, ["check-system", server.url]).exit_code
    finally:
        server.stop()
    assert code == 0
    wanted = {"info answer": "Info", "reset": "ResetRequest", "ingest": "IngestRequest", "retrieve": "RetrieveRequest",
              "retrieve answer": "RetrieveResponse"}
    checked = 0
    for call, body in sent:
        if call in wanted:
            assert _problems(body, schemas[wanted[call]], spec) == [], (call, json.dumps(body)[:300])
            checked += 1
    assert {call for call, _ in sent} >= set(wanted) and checked > 50
    assert all(body == {} for call, body in sent if call in ("reset answer", "ingest answer"))
