"""The version of the code that builds a memory state: a hash of the engine's own sources.

A snapshot made by other code (a changed tokenizer, extractor or index layout)
is not the same state, so caches key on this and rebuild when it changes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def _sources_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


BUILD_VERSION = _sources_hash()
