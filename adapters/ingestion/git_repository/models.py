"""What a local Git repository is made of, as the parser reads it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RepositoryInfo:
    name: str
    root: str
    commit: str | None
    branch: str | None
    file_count: int


@dataclass
class DirectoryInfo:
    path: str  # repository-relative, "" for the root
    files: list[str] = field(default_factory=list)
    subdirectories: list[str] = field(default_factory=list)


@dataclass
class FileInfo:
    path: str
    size: int
    language: str | None
    text: str


@dataclass
class SymbolInfo:
    path: str
    name: str
    qualified_name: str
    symbol_type: str  # class, function, method, async_function, async_method
    line_start: int
    line_end: int
    parent: str | None
    bases: list[str] = field(default_factory=list)
    docstring: str | None = None
    source: str = ""


@dataclass
class SkippedFile:
    path: str
    reason: str
