"""Hashes and JSON files: the small helpers every layer of the harness shares.

`file_sha256` is the engine's (`memoria.checksums`), named here too so that the harness finds its
file helpers in one module.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from adapters.redaction import redact
from memoria.checksums import file_sha256

__all__ = ["content_hash", "file_sha256", "write_json"]


def content_hash(value) -> str:
    """SHA-256 of a JSON-able value in canonical form."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


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
