"""The streaming array reader: the C parser's answers made equal to Python's `json` where it matters."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters import jsonstream
from adapters.errors import DatasetError
from adapters.jsonstream import iter_array, iter_json_lines

_LONE = re.compile("[\ud800-\udfff]")


def _write(tmp_path, raw: bytes | str):
    path = tmp_path / "a.json"
    path.write_bytes(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw)
    return path


def test_lone_surrogate_escapes_reach_the_item_as_lone_surrogates(tmp_path):
    # yajl alone turns "\ud800" into "?" and fails on "\udc80"; Python's json keeps both, and the dataset
    # adapters refuse such an item naming its field, so the reader must hand them on
    path = _write(tmp_path, r'[{"t": "a\ud800b", "\udc80k": ["x\udc80"]}, {"ok": "\ud83d\ude00 fine"}]')
    first, second = list(iter_array(path))
    assert _LONE.search(first["t"]) and first["t"][0] == "a" and first["t"][2] == "b"
    key = next(iter(first))
    assert key == "t" and _LONE.search(next(k for k in first if k != "t"))
    assert _LONE.search(first[next(k for k in first if k != "t")][0])
    assert second == {"ok": "\U0001F600 fine"}  # a real pair is one character, untouched


def test_an_escaped_backslash_before_u_is_text_not_an_escape(tmp_path):
    path = _write(tmp_path, json.dumps(["\\ud800", "\\\\\ud83d\ude00"], ensure_ascii=True))
    assert list(iter_array(path)) == json.loads(path.read_text())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(["a", "\\", "u", "\"", "\ud83d", "\ude00", "\ud800", "\udfff",
                                                    "é", "\U0001F600", " "]), max_size=30), min_size=1, max_size=8),
       st.integers(1, 23))
def test_any_text_survives_any_chunk_cut(tmp_path_factory, texts, chunk):
    """Every string json writes reads back equal, with each lone surrogate as a lone surrogate, whatever the cut."""
    path = tmp_path_factory.mktemp("js") / "a.json"
    path.write_text(json.dumps(texts))
    expected = json.loads(path.read_text())
    original = jsonstream._CHUNK
    jsonstream._CHUNK = chunk
    try:
        got = list(iter_array(path))
    finally:
        jsonstream._CHUNK = original
    assert [_LONE.sub("\udc80", t) for t in got] == [_LONE.sub("\udc80", t) for t in expected]


@pytest.mark.parametrize("raw, words", [
    (b'[{"a": 1}, {"b": ', "not valid JSON in element 1"),
    (b'[{"a": 1}, {"b": NaN}]', "element 1.*NaN, Infinity"),
    (b"[1, 123456789012345678901234567890]", "element 1.*outside the 64-bit range"),
    (b'[{"a": "\xff"}]', "not UTF-8 text in element 0"),
    (b'[1, 2] trailing', "after the array's end"),
    (b'\xef\xbb\xbf\xef\xbb\xbf[1]', "found not a JSON array"),  # one byte order mark is skipped, not two
    (b'\xef\xbb\xbf{"a": 1}', "found a JSON object"),
    (b'  {"a": 1}', "found a JSON object"),
    (b"   ", "found empty"),
])
def test_unusable_files_name_file_element_and_position(tmp_path, raw, words):
    path = _write(tmp_path, raw)
    with pytest.raises(DatasetError, match=words) as caught:
        list(iter_array(path))
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message


def test_a_byte_order_mark_before_the_array_or_the_first_line_is_skipped(tmp_path):
    assert list(iter_array(_write(tmp_path, b'\xef\xbb\xbf [{"a": "\\ud800"}, 2]'))) == [{"a": "\udc80"}, 2]
    lines = tmp_path / "l.jsonl"
    lines.write_bytes(b'\xef\xbb\xbf{"a": 1}\n{"b": 2}\n')
    assert [value for _, value, _ in iter_json_lines(lines, DatasetError)] == [{"a": 1}, {"b": 2}]


def test_elements_before_a_damaged_one_are_yielded(tmp_path):
    path = _write(tmp_path, b'[{"a": 1}, {"b": 2}, {"c": ]')
    seen = []
    with pytest.raises(DatasetError, match="element 2"):
        for element in iter_array(path):
            seen.append(element)
    assert seen == [{"a": 1}, {"b": 2}]


def test_a_genuine_noncharacter_next_to_a_lone_surrogate_stays_itself(tmp_path):
    """The stand-in for a lone surrogate is a noncharacter absent from the file, so an element that really
    holds U+FDD0 (raw or escaped) keeps it, and only the hostile element carries a lone surrogate."""
    path = _write(tmp_path, '[{"t": "\ufdd0 raw"}, {"t": "\\ufdd1 escaped"}, {"t": "lone \\ud800"}, '
                            '{"k": {"\\ud800": 1, "\\ud800": 2}}, {"t": "after \ufdd2"}]')
    first, second, third, fourth, fifth = iter_array(path)
    assert first == {"t": "\ufdd0 raw"} and second == {"t": "\ufdd1 escaped"} and fifth == {"t": "after \ufdd2"}
    assert _LONE.search(third["t"]) and not _LONE.search(first["t"] + second["t"] + fifth["t"])
    assert len(fourth["k"]) == 1 and _LONE.search(next(iter(fourth["k"])))


def test_a_long_run_of_backslashes_is_read_in_linear_time(tmp_path):
    """A string of backslashes is valid JSON; the chunk-end logic must not rescan the run per backslash."""
    import time

    texts = ["\\" * 400_000, "x\\" * 100_000 + "\ud800"]
    path = tmp_path / "b.json"
    path.write_text(json.dumps(texts))
    started = time.perf_counter()
    got = list(iter_array(path))
    assert got[0] == texts[0] and got[1][:-1] == texts[1][:-1] and _LONE.search(got[1])
    # a bound, not a timing target: quadratic handling took minutes on a run this long
    assert time.perf_counter() - started < 20


def test_an_element_nested_too_deeply_is_one_clear_error(tmp_path):
    path = _write(tmp_path, "[" + "[" * 5000 + '"\\ud800"' + "]" * 5000 + "]")
    with pytest.raises(DatasetError, match="element 0 is nested too deeply"):
        list(iter_array(path))
