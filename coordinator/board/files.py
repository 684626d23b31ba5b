"""Which files the board reads: results files named, or found in folders by their first bytes, and what was
skipped. Nothing is read whole before it is known to be a regular results file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from adapters.errors import ResultsError
from coordinator.results.run_files import RESULTS_FORMAT

#: How many bytes of a file in a folder are read to tell a results file from any other JSON.
SNIFF_BYTES = 512
#: The repository's own published figure files (`devtools/docs_figures.py`): JSON, never results, so a folder
#: scan of `results/` leaves them out rather than announce them as skipped on every build.
OWN_PUBLISHED = Path(__file__).resolve().parents[2] / "results" / "published"
#: Folders of a searched folder never entered unless named themselves: the manual's published figure files and
#: the benches' JSON (`memfarm bench ... --output results/bench/...`), neither of them results.
NOT_ENTERED = ("published", "bench")
#: How a skipped path that is no regular file (a FIFO, a socket) is said.
NOT_REGULAR = ": not a regular file, not read"

def find_results(paths: list[str | Path], *, exclude: Path | None = None) -> tuple[list[Path], list[str]]:
    """The results files among `paths` (files, or folders searched recursively), and what was skipped.

    A file named on its own must be a results file (`ResultsFile.read` says why not);
    in a folder, manifests and other JSON (bench files, datasets) are skipped by
    their first bytes without being read whole, and anything that is not a regular
    file (a FIFO, a socket, a device) without being opened for reading, each said
    as `PATH: not a regular file`. `exclude`: a folder never searched (the board
    being written); the repository's own `results/published/` (the manual's figure
    files, never results), and any folder named `published` or `bench` below a
    folder given (figure files, bench outputs), are not entered either unless named
    themselves, so they are not announced as skipped on every build.
    """
    found: dict[Path, None] = {}
    skipped: list[str] = []
    left_out = [p.resolve() for p in (exclude, OWN_PUBLISHED) if p is not None]
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for child in sorted(path.rglob("*.json")):
                resolved = child.resolve()
                if any(resolved == folder or folder in resolved.parents for folder in left_out
                       if folder != path.resolve()):
                    continue
                if any(part in NOT_ENTERED for part in child.relative_to(path).parts[:-1]):
                    continue
                sniffed = _sniff(child)
                if sniffed == "not regular":
                    skipped.append(f"{child}{NOT_REGULAR}")
                elif child.name.endswith(".manifest.json") or sniffed != "results":
                    skipped.append(str(child))
                else:
                    found.setdefault(resolved)
        elif path.is_file():
            found.setdefault(path.resolve())
        elif path.exists():
            raise ResultsError(f"{path}: neither a regular file nor a folder (a FIFO or socket is not read)")
        else:
            raise ResultsError(f"{path}: no such results file or folder")
    return list(found), skipped


def _sniff(path: Path) -> str:
    """"results", "other" or "not regular": the file is opened without blocking (a FIFO would wait for a
    writer forever) and read only if it is a regular file."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "not regular"
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return "other"
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return "not regular"
        head = handle.read(SNIFF_BYTES)
    return "results" if f'"format": "{RESULTS_FORMAT}"'.encode() in head.replace(b'":"', b'": "') else "other"
