"""Reads an Obsidian vault: discovery, frontmatter, headings, wiki-links, tags, tasks."""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import yaml

from adapters.sources.obsidian.models import Note, SkippedFile, Task, WikiLink

logger = logging.getLogger(__name__)

_HIDDEN = (".obsidian", ".trash", ".git")
TEMPLATE_FOLDERS = ("templates", "template", "_templates")
_LINK = re.compile(r"(!?)\[\[([^\]\|#]*)(?:#([^\]\|]+))?(?:\|([^\]]+))?\]\]")
_TAG = re.compile(r"(?<![\w/&#])#([A-Za-z_][\w/-]*)")
_TASK = re.compile(r"^\s*[-*+]\s+\[([ xX])\]\s+(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def split_frontmatter(text: str) -> tuple[dict, str, str | None]:
    """(frontmatter, body, error); a malformed block stays in the body and is reported."""
    if not text.startswith("---"):
        return {}, text, None
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text, None
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            block, body = "\n".join(lines[1:end]), "\n".join(lines[end + 1:])
            try:
                data = yaml.safe_load(block) or {}
            except yaml.YAMLError as exc:
                return {}, text, f"frontmatter is not valid YAML ({exc.__class__.__name__})"
            if not isinstance(data, dict):
                return {}, text, "frontmatter is not a mapping"
            return _jsonable(data), body, None
    return {}, text, "frontmatter is not closed"


class ObsidianParser:
    def __init__(self, vault: str | Path, template_folders=TEMPLATE_FOLDERS):
        self.vault = Path(vault)
        self.template_folders = {f.lower() for f in template_folders}
        self.skipped: list[SkippedFile] = []

    def discover(self) -> list[Path]:
        """Markdown files of the vault, sorted, outside hidden and system folders."""
        found = []
        for path in sorted(self.vault.rglob("*.md")):
            relative = path.relative_to(self.vault)
            if any(part.startswith(".") or part in _HIDDEN for part in relative.parts[:-1]) or not path.is_file():
                continue
            found.append(path)
        return found

    def parse(self) -> Iterator[Note]:
        self.skipped = []
        for path in self.discover():
            relative = path.relative_to(self.vault).as_posix()
            try:
                text = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                logger.warning("%s: skipped, not UTF-8 (%s)", relative, exc.reason)
                self.skipped.append(SkippedFile(relative, f"not valid UTF-8 at byte {exc.start}"))
                continue
            yield self.parse_note(relative, text.replace("\r\n", "\n"))

    def parse_note(self, relative: str, text: str) -> Note:
        frontmatter, body, error = split_frontmatter(text)
        if error:
            logger.warning("%s: %s", relative, error)
        path = Path(relative)
        folder = path.parent.as_posix() if path.parent.as_posix() != "." else ""
        headings, tags, tasks = [], [], []
        in_fence = False
        for number, line in enumerate(body.split("\n"), start=1):
            if _FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            heading = _HEADING.match(line)
            if heading:
                headings.append({"level": len(heading.group(1)), "text": heading.group(2)})
                continue
            task = _TASK.match(line)
            if task:
                tasks.append(Task(text=task.group(2).strip(), done=task.group(1) != " ", line=number))
            tags += [t for t in _TAG.findall(_strip_code(line))]
        tags = list(dict.fromkeys(_frontmatter_tags(frontmatter) + tags))
        links = [WikiLink(target=m.group(2).strip(), heading=(m.group(3) or None), alias=(m.group(4) or None),
                          embed=m.group(1) == "!") for m in _LINK.finditer(_without_fences(body))]
        is_template = (
            any(part.lower() in self.template_folders for part in path.parts[:-1])
            or bool(frontmatter.get("template")) or "template" in tags
        )
        title = str(frontmatter.get("title") or path.stem)
        return Note(path=relative, filename=path.name, folder=folder, title=title, body=body.strip(),
                    frontmatter=frontmatter, headings=headings, links=links, tags=tags, tasks=tasks,
                    is_template=is_template)


def _frontmatter_tags(frontmatter: dict) -> list[str]:
    raw = frontmatter.get("tags", frontmatter.get("tag", []))
    if isinstance(raw, str):
        raw = re.split(r"[,\s]+", raw)
    return [str(t).lstrip("#") for t in raw or [] if str(t).strip()]


def _strip_code(line: str) -> str:
    return re.sub(r"`[^`]*`", "", line)


def _without_fences(body: str) -> str:
    out, in_fence = [], False
    for line in body.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            out.append(_strip_code(line))
    return "\n".join(out)
