"""The harness's own exceptions: each says what was wrong and where.

The CLI turns any `MemfarmError` (and the engine's `MemoriaError`) into one
readable line and a non-zero exit.
"""


class MemfarmError(Exception):
    """Base of every error the harness raises on purpose."""


class DatasetError(MemfarmError):
    """The dataset file as a whole is unusable (not JSON, not a list, duplicates)."""


class ResultsError(MemfarmError):
    """A results or rankings file cannot be read or combined."""


class SystemUnavailable(MemfarmError):
    """An optional system whose package is not installed."""
