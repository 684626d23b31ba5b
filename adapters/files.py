"""Hashes and JSON files: the small helpers every layer of the harness shares.

`file_sha256` is the engine's (`memoria.checksums`), named here too so that the harness finds its
file helpers in one module.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from adapters.defaults import MAX_JSON_DEPTH
from adapters.errors import MemfarmError
from adapters.jsonstream import nesting_depth
from adapters.redaction import redact
from memoria.checksums import file_sha256

__all__ = ["content_hash", "file_sha256", "read_json", "write_json"]


def content_hash(value) -> str:
    """SHA-256 of a JSON-able value in canonical form."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def read_json(path: str | Path, what: str = "JSON file", error: type[MemfarmError] = MemfarmError,
              top: type | None = None):
    """The JSON value in the file at `path`, read whole.

    Raises `error` (the caller's kind: `DatasetError`, `ResultsError`, ...) naming the file, `what` it
    should hold and what was wrong: missing, unreadable, not UTF-8 JSON, or, with `top` (`dict` or
    `list`), a top level of another type. A byte order mark before the value is no part of it (some
    editors write one). Nesting past `MAX_JSON_DEPTH` is refused before parsing: Python's parser would end
    in a RecursionError."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: {exc.strerror or exc}") from exc
    if nesting_depth(raw) > MAX_JSON_DEPTH:
        raise error(f"{path}: cannot read the {what}: nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both say where
        raise error(f"{path}: cannot read the {what}: not valid UTF-8 JSON ({exc})") from exc
    if top is not None and not isinstance(data, top):
        raise error(f"{path}: the {what} is not {_json_type(top)} (its top level is {_json_type(type(data))})")
    return data


def _json_type(kind: type) -> str:
    for python, name in ((bool, "a boolean"), (dict, "a JSON object"), (list, "a JSON array"), (str, "a string"),
                         ((int, float), "a number"), (type(None), "null")):
        if issubclass(kind, python):
            return name
    return kind.__name__


def write_json(path: str | Path, data, indent: int | None = 1) -> Path:
    """Write JSON next to `path` under a name of this process, then rename: readers never see half a file.

    Every password inside a URL is redacted on the way: no file this program writes holds one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        text = redact(json.dumps(data, ensure_ascii=False, indent=indent))
        # A lone surrogate that slipped past validation is written escaped rather than losing the file.
        tmp.write_bytes(text.encode("utf-8", errors="backslashreplace"))
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
