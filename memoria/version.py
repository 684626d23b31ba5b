"""The version of the code that builds a memory state: a hash of the engine's own sources.

A snapshot made by other code (a changed tokenizer, extractor or index layout)
is not the same state, so caches key on this and rebuild when it changes.
"""

from __future__ import annotations

from pathlib import Path

from memoria.checksums import files_sha256

_HERE = Path(__file__).resolve().parent

BUILD_VERSION = files_sha256(_HERE, _HERE.glob("*.py"))[:16]
