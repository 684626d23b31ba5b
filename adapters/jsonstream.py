"""Stream JSON files without loading them whole: a top-level array, or JSON lines.

A top-level array is read with ijson's C parser (yajl), element by element, so
memory stays bounded by the largest single element, not by the file. Two
things yajl does differently from Python's `json` are handled here so that a
hostile file gets the same treatment: a lone UTF-16 surrogate escape
(`"\\ud800"`), which yajl silently turns into `?` or fails on, reaches the
item as a lone surrogate again (so the item is refused, naming its field);
and a parse error names the file, the element and the byte offset.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import ijson

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

    def read(self, size: int = -1) -> bytes:
        """At most `size` bytes (the C parser reads into a buffer of that size); empty only at the end."""
        if not self.ready:
            self.ready = self._next_body()
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
                return self._rewrite(data)
            keep = _held_back(data)
            body, self.carry = (data[:len(data) - keep], data[len(data) - keep:]) if keep else (data, b"")
            if body:
                return self._rewrite(body)

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
                try:
                    yield number, json.loads(line), None
                except ValueError as exc:
                    yield number, None, f"{path}:{number}: not JSON ({exc.msg})"
        except UnicodeDecodeError as exc:
            raise error(f"{path}: not UTF-8 text ({exc})") from exc
