"""The engine's own exceptions: each says what was wrong and where.

Memoria stands alone; a harness that embeds it catches `MemoriaError`.
"""


class MemoriaError(Exception):
    """Base of every error the engine raises on purpose."""


class InvalidBatchError(MemoriaError, ValueError):
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


class UnknownModeError(MemoriaError, ValueError):
    """A retrieval mode the engine does not offer."""


class SnapshotError(MemoriaError):
    """A snapshot directory is missing a file or holds an unreadable one."""


class SettingsError(MemoriaError, ValueError):
    """A setting of the engine (memoria.settings.MemoriaSettings) has a value it cannot use."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"Memoria setting {field}: {problem}")
        self.field, self.problem = field, problem
