"""What an Obsidian vault is made of, as the parser reads it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WikiLink:
    target: str
    heading: str | None = None
    alias: str | None = None
    embed: bool = False


@dataclass
class Task:
    text: str
    done: bool
    line: int


@dataclass
class Note:
    path: str  # vault-relative, forward slashes
    filename: str
    folder: str
    title: str
    body: str
    frontmatter: dict = field(default_factory=dict)
    headings: list[dict] = field(default_factory=list)
    links: list[WikiLink] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    is_template: bool = False


@dataclass
class SkippedFile:
    path: str
    reason: str
