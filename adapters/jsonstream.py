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
#: A `\uXXXX` escape of a UTF-16 surrogate, with the backslashes before it (an even run means it is an escape).
_SURROGATE = re.compile(rb"(\\+)u([dD][89a-fA-F][0-9a-fA-F]{2})")
_ANY_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
#: What a lone surrogate escape is rewritten to on its way to yajl: a noncharacter, reserved for internal use,
#: of the same length (6 bytes), turned back into a lone surrogate in the element that holds it.
_STAND_IN = b"\\ufdd0"
_STAND_IN_CHAR = "\ufdd0"
_LONE = "\udc80"


class _SurrogateGuard:
    """A binary reader that rewrites lone surrogate escapes before yajl sees them and counts them."""

    def __init__(self, handle):
        self.handle = handle
        self.carry = b""  # the end of the last chunk, held back while it could be half an escape
        self.ready = b""  # rewritten bytes not yet handed to the parser
        self.position = 0  # bytes handed to the parser
        self.rewritten = 0

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
        self.rewritten += len(spans)
        out = bytearray(body)
        for start in spans:
            out[start:start + 6] = _STAND_IN
        return bytes(out)


def _held_back(data: bytes) -> int:
    """How many bytes at the end of `data` to keep for the next read, so that no escape, no surrogate pair
    and no run of backslashes is cut: at least 12 (a whole pair), more where an escape spans that cut."""
    if len(data) <= 12:
        return len(data)
    cut = len(data) - 12
    start = max(0, cut - 24)
    while start > 0 and data[start - 1:start] == b"\\":  # a run's parity needs the whole run
        start -= 1
    escapes = [(m.start(), m.end(), int(m.group(2), 16))
               for m in _SURROGATE.finditer(data, start) if len(m.group(1)) % 2 == 1]
    for (s1, e1, high), (s2, e2, low) in zip(escapes, escapes[1:]):
        if high < 0xDC00 <= low and s2 == e1 and e2 - s2 == 6 and s1 < cut < e2:
            cut = s1  # a pair: both halves go together
    for s1, e1, _ in escapes:
        if s1 < cut < e1:
            cut = s1
    while cut > 0 and data[cut - 1:cut] == b"\\":
        cut -= 1
    return len(data) - cut


def _restore(value, guard: _SurrogateGuard):
    """`value` with each stand-in turned back into a lone surrogate (only while rewritten ones are unclaimed)."""
    if isinstance(value, str):
        if _STAND_IN_CHAR in value:
            guard.rewritten -= value.count(_STAND_IN_CHAR)
            return value.replace(_STAND_IN_CHAR, _LONE)
        return value
    if isinstance(value, list):
        return [_restore(v, guard) for v in value]
    if isinstance(value, dict):
        return {_restore(k, guard): _restore(v, guard) for k, v in value.items()}
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
        first = _first_byte(handle)
        if first != b"[":
            kind = "empty" if not first else ("a JSON object" if first == b"{" else "not a JSON array")
            raise DatasetError(f"{path}: expected a JSON array of items, found {kind}")
        handle.seek(0)
        guard = _SurrogateGuard(handle)
        index = 0
        try:
            for element in ijson.items(guard, "item", use_float=True, buf_size=_CHUNK):
                yield _restore(element, guard) if guard.rewritten > 0 else element
                index += 1
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise DatasetError(_parse_problem(path, index, guard.position, exc)) from None


def _parse_problem(path: Path, index: int, position: int, exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"{path}: not UTF-8 text in element {index} (within the first {position} bytes)"
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "UTF8" in message:
        return f"{path}: not UTF-8 text in element {index} (within the first {position} bytes)"
    if "trailing garbage" in message:
        return f"{path}: not valid JSON after the array's end (after element {index - 1})"
    if "integer overflow" in message:
        message += " (an integer past 64 bits)"
    elif "invalid char" in message:
        message += " (NaN, Infinity and bare words are not JSON)"
    return f"{path}: not valid JSON in element {index} (within the first {position} bytes): {message}"


def iter_json_lines(path: str | Path, error: type[Exception]) -> Iterator[tuple[int, object, str | None]]:
    """`(line number, value, problem)` for every non-blank line; `problem` says why a line is not JSON.

    A file that cannot be read at all raises `error` naming it.
    """
    path = Path(path)
    try:
        handle = open(path, encoding="utf-8")
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
