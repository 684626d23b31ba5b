"""The code version a worker runs: a hash of the sources that shape records.

A worker refuses items of a run whose code version differs from its own, so
one results file never mixes records made by two versions of the code.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_PACKAGES = ("memoria", "adapters", "workers")


def _code_version() -> str:
    digest = hashlib.sha256()
    for package in _PACKAGES:
        for path in sorted((_ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(_ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


CODE_VERSION = _code_version()
