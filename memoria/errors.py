"""Specific exceptions: each says what was wrong and where.

The CLI turns any `MemfarmError` into one readable line and a non-zero exit.
"""


class MemfarmError(Exception):
    """Base of every error the project raises on purpose."""


class InvalidBatchError(MemfarmError, ValueError):
    """A batch handed to the engine was rejected before anything was stored."""

    def __init__(self, message: str, position: int | None = None):
        super().__init__(message)
        self.position = position


class LengthMismatchError(InvalidBatchError):
    """texts and metadatas differ in length."""


class InvalidTextError(InvalidBatchError):
    """A text is not a string."""


class EmptyTextError(InvalidBatchError):
    """A text is empty or only whitespace."""


class InvalidMetadataError(InvalidBatchError):
    """A metadata entry is not a JSON-able dict."""


class UnknownModeError(MemfarmError, ValueError):
    """A retrieval mode the engine does not offer."""


class SnapshotError(MemfarmError):
    """A snapshot directory is missing a file or holds an unreadable one."""


class DatasetError(MemfarmError):
    """The dataset file as a whole is unusable (not JSON, not a list, duplicates)."""


class ItemError(MemfarmError):
    """One item of a dataset is malformed; the others can still run."""

    def __init__(self, message: str, item_id: str, field: str | None = None):
        super().__init__(message)
        self.item_id = item_id
        self.field = field


class CacheError(MemfarmError):
    """A cached item failed validation; the caller rebuilds it."""


class ResultsError(MemfarmError):
    """A results or rankings file cannot be read or combined."""
