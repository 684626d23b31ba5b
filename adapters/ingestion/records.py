"""The normalised record contract shared by every source adapter."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator


def validate_record(record) -> dict:
    """Check `{"text": str, "metadata": dict}` with JSON-compatible metadata; returns the record."""
    if not isinstance(record, dict):
        raise TypeError(f"adapter record must be a dict, got {type(record).__name__}")
    for field in ("text", "metadata"):
        if field not in record:
            raise ValueError(f"adapter record is missing {field!r}")
    if not isinstance(record["text"], str):
        raise TypeError("adapter record 'text' must be a string")
    if not isinstance(record["metadata"], dict):
        raise TypeError("adapter record 'metadata' must be a dict")
    try:
        json.dumps(record["metadata"])
    except (TypeError, ValueError) as exc:
        raise TypeError(f"adapter record metadata is not JSON-compatible: {exc}") from exc
    return record


def load_records(records: Iterable[dict], insert: Callable[[str, dict], object]) -> int:
    """Pass each record to `insert(text, metadata)`; returns how many were passed."""
    if not callable(insert):
        raise TypeError("insert must be callable")
    count = 0
    for record in records:
        insert(record["text"], record["metadata"])
        count += 1
    return count


def existing_folder(path, what: str):
    """`path` as a Path if it is an existing folder; FileNotFoundError / NotADirectoryError naming `what` else."""
    from pathlib import Path

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{what} not found: {path}")
    if not path.is_dir():
        raise NotADirectoryError(f"{what} is not a folder: {path}")
    return path


class SourceAdapter:
    """What every source adapter offers on top of its own iterator of validated records."""

    def iter_records(self) -> Iterator[dict]:
        raise NotImplementedError

    def records(self) -> list[dict]:
        return list(self.iter_records())

    def load(self, insert: Callable[[str, dict], object]) -> int:
        """Pass every record to `insert(text, metadata)` (a non-callable is refused); returns how many."""
        return load_records(self.iter_records(), insert)
