"""The harness's JSON files: one reader that names the file and what was wrong, one atomic writer that redacts."""

import json

import pytest

from adapters.errors import DatasetError, MemfarmError, ResultsError
from adapters.files import read_json, write_json


def test_read_json_returns_the_value_and_ignores_a_byte_order_mark(tmp_path):
    path = tmp_path / "w.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"weights": {"bm25": 0.5}}).encode())
    assert read_json(path, "weights file", top=dict) == {"weights": {"bm25": 0.5}}


def test_a_missing_file_is_named(tmp_path):
    path = tmp_path / "absent.json"
    with pytest.raises(ResultsError) as caught:
        read_json(path, "results file", ResultsError)
    assert str(caught.value) == f"{path}: cannot read the results file: No such file or directory"


@pytest.mark.parametrize("content", [b"{ broken", b"", b"[1, 2] trailing", b'{"a": "\xff"}'])
def test_bad_json_is_named_with_where_it_breaks(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(DatasetError) as caught:
        read_json(path, "questions file", DatasetError)
    message = str(caught.value)
    assert message.startswith(f"{path}: cannot read the questions file: not valid UTF-8 JSON (")
    assert "line 1" in message or "position" in message


@pytest.mark.parametrize("content, top, found", [("[1, 2]", dict, "a JSON array"), ('{"a": 1}', list, "a JSON object"),
                                                 ('"text"', dict, "a string"), ("3.5", list, "a number"),
                                                 ("null", dict, "null"), ("true", dict, "a boolean")])
def test_a_wrong_top_level_type_is_named(tmp_path, content, top, found):
    path = tmp_path / "shape.json"
    path.write_text(content)
    wanted = "a JSON object" if top is dict else "a JSON array"
    with pytest.raises(MemfarmError) as caught:
        read_json(path, "cluster state", top=top)
    assert str(caught.value) == f"{path}: the cluster state is not {wanted} (its top level is {found})"


def test_without_top_any_json_value_is_returned(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    assert read_json(path) == [1, 2]


def test_write_json_redacts_a_password_inside_a_url_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "deep" / "out.json"
    data = {"broker": "redis://coordinator:s3cret-pass@hub:6379/0", "note": "rediss://:other@h/1 and plain text"}
    write_json(path, data)
    text = path.read_text(encoding="utf-8")
    assert "s3cret-pass" not in text and "other" not in text
    assert json.loads(text) == {"broker": "redis://coordinator:***@hub:6379/0",
                                "note": "rediss://:***@h/1 and plain text"}
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]


def test_write_json_replaces_a_file_whole(tmp_path):
    path = tmp_path / "out.json"
    write_json(path, {"a": list(range(1000))})
    write_json(path, {"b": "é"})
    assert read_json(path, top=dict) == {"b": "é"}


def test_a_file_nested_past_the_limit_is_named_not_a_recursion_error(tmp_path):
    from adapters.defaults import MAX_JSON_DEPTH

    path = tmp_path / "weights.json"
    path.write_text('{"w": ' + "[" * 100_000 + "]" * 100_000 + ', "note": "[[[[[["}')
    with pytest.raises(ResultsError, match=f"weights.json: cannot read the weights file: nested more than "
                                           f"{MAX_JSON_DEPTH} levels deep"):
        read_json(path, "weights file", ResultsError)
    fits = tmp_path / "fits.json"
    fits.write_text("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    assert read_json(fits) == json.loads(fits.read_text())
