"""The streaming array reader: the C parser's answers made equal to Python's `json` where it matters."""

from __future__ import annotations

import json
import re
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters import jsonstream
from adapters.defaults import MAX_ELEMENT_CONTAINERS, MAX_JSON_DEPTH
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
    with pytest.raises(DatasetError, match=f"element 0 is nested more than {MAX_JSON_DEPTH} levels deep"):
        list(iter_array(path))


def test_deep_nesting_is_refused_before_the_parser_spends_memory_on_it(tmp_path):
    """ijson's memory grows with the square of the depth (6 GB at 50,000 levels); 4,000 levels show it. The
    elements before the deep one are yielded, and the error names the deep one."""
    deep = 4000
    head = '[{"question_id": "a"}, {"question_id": "b"}, {"question_id": '
    path = _write(tmp_path, head + "[" * deep + "]" * deep + "}]")
    crossing = len(head) + MAX_JSON_DEPTH - 2  # the bracket that opens one level too many (array, object: 2)
    seen = []
    tracemalloc.start()
    try:
        with pytest.raises(DatasetError, match=rf"a.json: element 2 is nested more than {MAX_JSON_DEPTH} levels "
                                               rf"deep \(at byte {crossing}\)"):
            for element in iter_array(path):
                seen.append(element)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen == [{"question_id": "a"}, {"question_id": "b"}]
    assert peak < 8_000_000  # reading the whole depth took over 40 MB


def test_nesting_at_the_limit_is_read(tmp_path):
    depth = MAX_JSON_DEPTH - 1  # the top-level array is the first level
    path = _write(tmp_path, "[" + "[" * depth + "]" * depth + "]")
    assert list(iter_array(path)) == json.loads(path.read_text())


def test_an_element_with_too_many_objects_and_arrays_is_refused_while_streaming(tmp_path):
    """A million one-turn sessions are two million small containers; the element is refused at the byte
    that crosses the limit, never built whole."""
    sessions = MAX_ELEMENT_CONTAINERS // 2 + 1
    path = tmp_path / "many.json"
    path.write_text('[{"question_id": "ok", "haystack_sessions": [[{"content": "x"}]]}, '
                    '{"question_id": "many", "haystack_sessions": [' + ", ".join(['[{"content": "x"}]'] * sessions)
                    + "]}]")
    seen = []
    tracemalloc.start()
    try:
        with pytest.raises(DatasetError, match=f"many.json: element 1 holds more than {MAX_ELEMENT_CONTAINERS} "
                                               "objects and arrays"):
            for element in iter_array(path):
                seen.append(element)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [e["question_id"] for e in seen] == ["ok"]
    assert peak < 200_000_000
    fits = tmp_path / "fits.json"
    fits.write_text('[{"s": [' + ", ".join(["[]"] * (MAX_ELEMENT_CONTAINERS - 2)) + "]}]")
    assert len(next(iter(iter_array(fits)))["s"]) == MAX_ELEMENT_CONTAINERS - 2


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


def _containers(value) -> int:
    children = value if isinstance(value, list) else value.values() if isinstance(value, dict) else ()
    return int(isinstance(value, (list, dict))) + sum(map(_containers, children))


_TRICKY = st.text(alphabet=st.sampled_from(["[", "]", "{", "}", '"', "\\", "a", "\n"]), max_size=8)
_NESTED = st.recursive(_TRICKY | st.integers(0, 9),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY, inner, max_size=3),
                       max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(_NESTED, max_size=4), st.integers(1, 17), st.integers(2, 5), st.integers(1, 6))
def test_limits_count_real_nesting_only_whatever_the_cut(tmp_path_factory, elements, chunk, max_depth, max_count):
    """Brackets, quotes and backslashes inside strings never count; a file is refused exactly when one of
    its elements nests past the limit or holds too many containers, naming that element, at any cut."""
    path = tmp_path_factory.mktemp("js") / "a.json"
    path.write_text(json.dumps(elements))
    over = [i for i, e in enumerate(elements) if 1 + _depth(e) > max_depth or _containers(e) > max_count]
    saved = jsonstream._CHUNK, jsonstream.MAX_JSON_DEPTH, jsonstream.MAX_ELEMENT_CONTAINERS
    jsonstream._CHUNK, jsonstream.MAX_JSON_DEPTH, jsonstream.MAX_ELEMENT_CONTAINERS = chunk, max_depth, max_count
    try:
        if over:
            with pytest.raises(DatasetError, match=f"element {over[0]} "):
                list(iter_array(path))
        else:
            assert list(iter_array(path)) == elements
    finally:
        jsonstream._CHUNK, jsonstream.MAX_JSON_DEPTH, jsonstream.MAX_ELEMENT_CONTAINERS = saved
    assert jsonstream.nesting_depth(path.read_bytes()) == _depth(elements)


@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_many_escaped_quotes_around_brackets_never_count_as_nesting(tmp_path, chunk):
    """Past a few dozen escaped quotes in one read, they are dropped in one regex pass: the same answer."""
    text = '\\"[{' * 500 + '\\\\"' + "]" * 3 + '\\\\\\"' * 200
    path = tmp_path / "q.json"
    path.write_text(json.dumps([{"t": text}, [[["x"]]], {"t": text}]))
    assert jsonstream.nesting_depth(path.read_bytes()) == 4
    saved = jsonstream._CHUNK, jsonstream.MAX_JSON_DEPTH
    jsonstream._CHUNK = chunk
    try:
        assert list(iter_array(path)) == json.loads(path.read_text())
        jsonstream.MAX_JSON_DEPTH = 3
        with pytest.raises(DatasetError, match="element 1 is nested more than 3 levels deep"):
            list(iter_array(path))
    finally:
        jsonstream._CHUNK, jsonstream.MAX_JSON_DEPTH = saved


def test_a_deeply_nested_line_is_a_named_problem_not_a_crash(tmp_path):
    lines = tmp_path / "r.jsonl"
    lines.write_text('{"question_id": "a", "ranked": []}\n{"question_id": ' + "[" * 50_000 + "]" * 50_000
                     + ', "ranked": []}\n{"question_id": "[[[[", "ranked": ["{{"]}\n')
    got = list(iter_json_lines(lines, DatasetError))
    assert [(n, v) for n, v, _ in got] == [(1, {"question_id": "a", "ranked": []}), (2, None),
                                           (3, {"question_id": "[[[[", "ranked": ["{{"]})]
    assert got[1][2] == f"{lines}:2: nested more than {MAX_JSON_DEPTH} levels deep"
