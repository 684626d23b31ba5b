"""The code version a worker runs: a hash of the sources that shape records.

A worker refuses items of a run whose code version differs from its own, so
one results file never mixes records made by two versions of the code.
"""

from __future__ import annotations

from pathlib import Path

from memoria.checksums import files_sha256

_ROOT = Path(__file__).resolve().parent.parent
_PACKAGES = ("memoria", "adapters", "workers")

CODE_VERSION = files_sha256(_ROOT, (p for package in _PACKAGES for p in (_ROOT / package).rglob("*.py")))[:16]
