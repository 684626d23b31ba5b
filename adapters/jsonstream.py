"""Stream JSON files without loading them whole: a top-level array, or JSON lines.

Memory stays bounded by the largest single element, not by the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from adapters.errors import DatasetError

_CHUNK = 1 << 22
_WHITESPACE = " \t\r\n"


def iter_array(path: str | Path) -> Iterator[object]:
    """Yield each element of the JSON array in `path`, in order."""
    path = Path(path)
    try:
        handle = open(path, "r", encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot open ({exc.strerror})") from exc
    decoder = json.JSONDecoder()
    with handle:
        buffer, offset, eof = "", 0, False

        def fill() -> bool:
            nonlocal buffer, offset, eof
            try:
                chunk = handle.read(_CHUNK)
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{path}: not UTF-8 text ({exc})") from exc
            if not chunk:
                eof = True
                return False
            buffer = buffer[offset:] + chunk
            offset = 0
            return True

        def skip_whitespace() -> str:
            nonlocal offset
            while True:
                while offset < len(buffer) and buffer[offset] in _WHITESPACE:
                    offset += 1
                if offset < len(buffer):
                    return buffer[offset]
                if not fill():
                    return ""

        first = skip_whitespace()
        if first != "[":
            kind = "empty" if not first else ("a JSON object" if first == "{" else "not a JSON array")
            raise DatasetError(f"{path}: expected a JSON array of items, found {kind}")
        offset += 1
        index = 0
        while True:
            char = skip_whitespace()
            if char == "]":
                return
            if index > 0:
                if char != ",":
                    raise DatasetError(f"{path}: not valid JSON after element {index - 1} (expected ',' or ']')")
                offset += 1
                skip_whitespace()
            while True:
                try:
                    element, end = decoder.raw_decode(buffer, offset)
                    if end < len(buffer) or eof:
                        break
                    fill()  # a number cut at the buffer's end would parse short
                    continue
                except json.JSONDecodeError as exc:
                    if eof or not fill():
                        raise DatasetError(f"{path}: not valid JSON in element {index}: {exc.msg}") from exc
            offset = end
            yield element
            index += 1


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
