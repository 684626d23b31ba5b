"""Stream JSON files without loading them whole: a top-level array, or JSON lines.

A top-level array is read with ijson's C parser (yajl), element by element, so
memory stays bounded by the largest single element, not by the file. Two
things yajl does differently from Python's `json` are handled here so that a
hostile file gets the same treatment: a lone UTF-16 surrogate escape
(`"\\ud800"`), which yajl silently turns into `?` or fails on, reaches the
item as a lone surrogate again (so the item is refused, naming its field);
and a parse error names the file, the element and the byte offset.

yajl itself has no limit on nesting, and ijson's path of prefixes costs memory that grows
with the square of the depth (a 100 KB file nested 50,000 deep took 6 GB). So the bytes are
measured before the parser sees them: nesting past `MAX_JSON_DEPTH`, or one element holding
more than `MAX_ELEMENT_CONTAINERS` objects and arrays, stops the read at that byte with an
error naming the element. The measure runs on a skeleton of the bytes (quotes and brackets,
made by `bytes.translate`), so it costs a fraction of the parse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path

import ijson

from adapters.defaults import MAX_ELEMENT_CONTAINERS, MAX_JSON_DEPTH
from adapters.errors import DatasetError

_CHUNK = 1 << 20
_WHITESPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
#: A `\uXXXX` escape of a UTF-16 surrogate, with the whole run of backslashes before it (an odd run is an escape);
#: anchored at the run's start, so a long run of backslashes is scanned once, not once per backslash.
_SURROGATE = re.compile(rb"(?<!\\)(\\+)u([dD][89a-fA-F][0-9a-fA-F]{2})")
_ANY_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
#: Stand-ins for a lone surrogate on its way through yajl: Unicode's noncharacters U+FDD0..U+FDEF, reserved
#: for internal use. The one used is one that occurs nowhere in the file, so every occurrence in an element
#: is a rewritten escape, turned back into a lone surrogate.
_NONCHARACTERS = [chr(code) for code in range(0xFDD0, 0xFDF0)]
_NONCHARACTER_BYTES = re.compile(rb"\xef\xb7[\x90-\xaf]")  # U+FDD0..U+FDEF in UTF-8
_NONCHARACTER_ESCAPE = re.compile(rb"\\u[fF][dD](?:[dD][0-9a-fA-F]|[eE][0-9a-fA-F])")
_LONE = "\udc80"
#: `bytes.translate` deletes every byte but quotes and brackets: what nesting is measured on.
_NOT_STRUCTURE = bytes(code for code in range(256) if code not in b'"[]{}')
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1
#: Escaped quotes a body may hold before one regex pass is cheaper than a loop over them.
_FEW_ESCAPED_QUOTES = 64
_ESCAPES = re.compile(rb'\\[\\"]')
_BACKSLASH_QUOTE = re.compile(rb'\\"')
#: Escapes, quotes and brackets: the exact (slower) reading that says where a limit was crossed.
_TOKENS = re.compile(rb'\\.|["\[\]{}]', re.S)


def _unused_noncharacter(path: Path) -> str:
    """A noncharacter that occurs nowhere in the file, raw or escaped (read once, only for a hostile file)."""
    present, tail = set(), b""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            data = tail + block
            present.update(m.group().decode() for m in _NONCHARACTER_BYTES.finditer(data))
            present.update(chr(int(m.group()[2:], 16)) for m in _NONCHARACTER_ESCAPE.finditer(data))
            tail = data[-6:]
    for char in _NONCHARACTERS:
        if char not in present:
            return char
    raise DatasetError(f"{path}: holds a lone surrogate escape and every noncharacter U+FDD0..U+FDEF; "
                       "it cannot be read safely")


class _SurrogateGuard:
    """A binary reader that rewrites lone surrogate escapes into a stand-in before yajl sees them."""

    def __init__(self, handle, path: Path):
        self.handle = handle
        self.path = path
        self.stand_in: str | None = None  # chosen at the first lone surrogate
        self.carry = b""  # the end of the last chunk, held back while it could be half an escape
        self.ready = b""  # rewritten bytes not yet handed to the parser
        self.position = 0  # bytes handed to the parser
        self.measured = 0  # bytes measured by the gauge
        self.gauge = _Gauge(MAX_JSON_DEPTH, MAX_ELEMENT_CONTAINERS)
        self.refused: _Refused | None = None  # a limit crossed: the parser gets the bytes before it, then this

    def read(self, size: int = -1) -> bytes:
        """At most `size` bytes (the C parser reads into a buffer of that size); empty only at the end."""
        if not self.ready and self.refused is None:
            self.ready = self._next_body()
        if not self.ready and self.refused is not None:
            raise self.refused
        if size is None or size < 0 or size >= len(self.ready):
            answer, self.ready = self.ready, b""
        else:
            answer, self.ready = self.ready[:size], self.ready[size:]
        self.position += len(answer)
        return answer

    def _next_body(self) -> bytes:
        while True:
            chunk = self.handle.read(_CHUNK)
            data = self.carry + chunk if self.carry else chunk
            if not chunk:  # the end of the file: what was held back is whole
                self.carry = b""
                return self._measured(self._rewrite(data))
            keep = _held_back(data)
            body, self.carry = (data[:len(data) - keep], data[len(data) - keep:]) if keep else (data, b"")
            if body:
                return self._measured(self._rewrite(body))

    def _measured(self, body: bytes) -> bytes:
        """`body`, or the part of it before a crossed limit (the limit then raised at the next read)."""
        crossed = self.gauge.measure(body) if body else None
        if crossed is not None:
            offset, problem = crossed
            self.refused = _Refused(self.measured + offset, problem)
            body = body[:offset]
        self.measured += len(body)
        return body

    def _rewrite(self, body: bytes) -> bytes:
        if not _ANY_SURROGATE.search(body):  # the common case, and the fastest test found (a regex, not `in`)
            return body
        spans, matches = [], [m for m in _SURROGATE.finditer(body) if len(m.group(1)) % 2 == 1]
        index = 0
        while index < len(matches):
            match, value = matches[index], int(matches[index].group(2), 16)
            follower = matches[index + 1] if index + 1 < len(matches) else None
            if (value < 0xDC00 and follower is not None and follower.start() == match.end()
                    and len(follower.group(1)) == 1 and int(follower.group(2), 16) >= 0xDC00):
                index += 2  # a high and a low surrogate: one character, which yajl reads right
                continue
            spans.append(match.end() - 6)
            index += 1
        if not spans:
            return body
        if self.stand_in is None:
            self.stand_in = _unused_noncharacter(self.path)
        escape = f"\\u{ord(self.stand_in):04x}".encode()
        out = bytearray(body)
        for start in spans:
            out[start:start + 6] = escape
        return bytes(out)


def _held_back(data: bytes) -> int:
    """How many bytes at the end of `data` to keep for the next read, so that no escape, no surrogate pair
    and no run of backslashes is cut: at least 12 (a whole pair), more where an escape spans that cut."""
    if len(data) <= 12:
        return len(data)
    cut = len(data) - 12
    start = _run_start(data, max(0, cut - 24))  # a run's parity needs the whole run
    escapes = [(m.start(), m.end(), int(m.group(2), 16))
               for m in _SURROGATE.finditer(data, start) if len(m.group(1)) % 2 == 1]
    for (s1, e1, high), (s2, e2, low) in zip(escapes, escapes[1:]):
        if high < 0xDC00 <= low and s2 == e1 and e2 - s2 == 6 and s1 < cut < e2:
            cut = s1  # a pair: both halves go together
    for s1, e1, _ in escapes:
        if s1 < cut < e1:
            cut = s1
    return len(data) - _run_start(data, cut)


def _run_start(data: bytes, position: int) -> int:
    """`position`, moved back to the start of the run of backslashes that ends there (if any)."""
    head = data[max(0, position - 64):position]
    stripped = head.rstrip(b"\\")
    if stripped or position <= 64:
        return position - (len(head) - len(stripped))
    return position - (len(data[:position]) - len(data[:position].rstrip(b"\\")))  # a very long run


def _restore(value, stand_in: str):
    """`value` with each stand-in turned back into a lone surrogate."""
    if isinstance(value, str):
        return value.replace(stand_in, _LONE) if stand_in in value else value
    if isinstance(value, list):
        return [_restore(v, stand_in) for v in value]
    if isinstance(value, dict):
        return {_restore(k, stand_in): _restore(v, stand_in) for k, v in value.items()}
    return value


def _structure(body: bytes) -> bytes:
    """The quotes and brackets of `body`, in order, without its escaped quotes (`\\"`, after an odd run of
    backslashes). `body` never ends inside a run of backslashes (`_held_back` keeps a run whole)."""
    pieces, start, seen = [], 0, 0
    for match in _BACKSLASH_QUOTE.finditer(body):  # a regex finds these faster than bytes.find
        quote = match.end() - 1
        if (quote - _run_start(body, quote)) % 2 == 0:
            continue  # an escaped backslash, then a real quote
        seen += 1
        if seen > _FEW_ESCAPED_QUOTES:  # many: one pass that drops every escaped backslash and quote
            pieces.append(_ESCAPES.sub(b"", body[start:]).translate(None, _NOT_STRUCTURE))
            return b"".join(pieces)
        pieces.append(body[start:quote].translate(None, _NOT_STRUCTURE))
        start = quote + 1
    if not pieces:
        return body.translate(None, _NOT_STRUCTURE)
    pieces.append(body[start:].translate(None, _NOT_STRUCTURE))
    return b"".join(pieces)


def nesting_depth(data: bytes) -> int:
    """How deep a whole JSON text nests its objects and arrays (the top level is 1; brackets in strings do
    not count), measured without parsing it."""
    brackets = b"".join(_structure(data).split(b'"')[0::2])
    return max(accumulate(map(_STEP.__getitem__, brackets), initial=0))


class _Refused(Exception):
    """The bytes crossed a limit at `offset`; the parser was given only what came before."""

    def __init__(self, offset: int, problem: str):
        super().__init__(problem)
        self.offset, self.problem = offset, problem


class _Gauge:
    """The nesting depth, and the objects and arrays of the current element of the top-level array, kept
    across the bodies of one file. The common case is measured on each body's skeleton; only a body that
    crosses a limit is read token by token, to say where."""

    def __init__(self, max_depth: int, max_containers: int):
        self.max_depth, self.max_containers = max_depth, max_containers
        self.depth = 0
        self.in_string = False
        self.containers = 0  # opened inside the current element so far

    def measure(self, body: bytes) -> tuple[int, str] | None:
        """None, or (the offset in `body` where a limit is crossed, what was crossed)."""
        parts = _structure(body).split(b'"')
        brackets = b"".join(parts[1::2] if self.in_string else parts[0::2])
        depths = list(accumulate(map(_STEP.__getitem__, brackets), initial=self.depth))
        open_count = self._containers_left_open(depths)
        if max(depths) > self.max_depth or open_count is None:
            crossed = self._locate(body)
            if crossed is not None:
                return crossed
        self.depth, self.containers = depths[-1], open_count or 0
        self.in_string ^= len(parts) % 2 == 0
        return None

    def _containers_left_open(self, depths: list[int]) -> int | None:
        """The containers of the element still open after these depths, or None when an element holds too
        many. Between two returns to depth 1 lies one whole element."""
        count, last = self.containers, 0
        while True:
            try:
                end = depths.index(1, last + 1)
            except ValueError:
                break
            if count + (end - last + depths[end] - depths[last]) // 2 > self.max_containers:
                return None
            count, last = 0, end
        count += (len(depths) - 1 - last + depths[-1] - depths[last]) // 2
        return count if count <= self.max_containers else None

    def _locate(self, body: bytes) -> tuple[int, str] | None:
        depth, in_string, count = self.depth, self.in_string, self.containers
        for token in _TOKENS.finditer(body):
            char = token.group()[0]
            if char == 0x5C:  # an escape: two bytes, never the end of a string
                continue
            if char == 0x22:
                in_string = not in_string
            elif in_string:
                continue
            elif char in b"[{":
                depth += 1
                count += depth >= 2
                if depth > self.max_depth:
                    return token.start(), f"is nested more than {self.max_depth} levels deep"
                if count > self.max_containers:
                    return token.start(), f"holds more than {self.max_containers} objects and arrays"
            else:
                depth -= 1
                if depth <= 1:
                    count = 0
        return None


def _first_byte(handle) -> bytes:
    while True:
        block = handle.read(4096)
        if not block:
            return b""
        stripped = block.lstrip(_WHITESPACE)
        if stripped:
            return stripped[:1]


def iter_array(path: str | Path) -> Iterator[object]:
    """Yield each element of the JSON array in `path`, in order."""
    path = Path(path)
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot open ({exc.strerror})") from exc
    with handle:
        start = len(_BOM) if handle.read(len(_BOM)) == _BOM else 0  # a byte order mark some editors write
        handle.seek(start)
        first = _first_byte(handle)
        if first != b"[":
            kind = "empty" if not first else ("a JSON object" if first == b"{" else "not a JSON array")
            raise DatasetError(f"{path}: expected a JSON array of items, found {kind}")
        handle.seek(start)
        guard = _SurrogateGuard(handle, path)
        index = 0
        try:
            for element in ijson.items(guard, "item", use_float=True, buf_size=_CHUNK):
                yield element if guard.stand_in is None else _restore(element, guard.stand_in)
                index += 1
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise DatasetError(_parse_problem(path, index, guard.position, exc)) from None
        except _Refused as refused:
            raise DatasetError(f"{path}: element {index} {refused.problem} (at byte {start + refused.offset}); "
                               "no benchmark item comes near that, so the file is refused") from None
        except RecursionError:
            raise DatasetError(f"{path}: element {index} is nested too deeply to read") from None


def _parse_problem(path: Path, index: int, position: int, exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"{path}: not UTF-8 text in element {index} (within the first {position} bytes)"
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "UTF8" in message:
        return f"{path}: not UTF-8 text in element {index} (within the first {position} bytes)"
    if "trailing garbage" in message:
        return f"{path}: not valid JSON after the array's end ({index} elements)"
    if "integer overflow" in message:
        message += " (an integer outside the 64-bit range the C parser reads)"
    elif "invalid char" in message:
        message += " (NaN, Infinity and bare words are not JSON)"
    return f"{path}: not valid JSON in element {index} (within the first {position} bytes): {message}"


def iter_json_lines(path: str | Path, error: type[Exception]) -> Iterator[tuple[int, object, str | None]]:
    """`(line number, value, problem)` for every non-blank line; `problem` says why a line is not JSON.

    A file that cannot be read at all raises `error` naming it.
    """
    path = Path(path)
    try:
        handle = open(path, encoding="utf-8-sig")  # a byte order mark before the first line is no part of it
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror})") from exc
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                if nesting_depth(line.encode("utf-8", "surrogatepass")) > MAX_JSON_DEPTH:
                    yield number, None, f"{path}:{number}: nested more than {MAX_JSON_DEPTH} levels deep"
                    continue
                try:
                    yield number, json.loads(line), None
                except ValueError as exc:
                    yield number, None, f"{path}:{number}: not JSON ({exc.msg})"
        except UnicodeDecodeError as exc:
            raise error(f"{path}: not UTF-8 text ({exc})") from exc
