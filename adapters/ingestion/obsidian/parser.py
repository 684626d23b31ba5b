"""Reads an Obsidian vault: discovery, frontmatter, headings, wiki-links, tags, tasks.

A vault is untrusted content. Nothing outside it is opened (see `adapters.ingestion.confined`),
notes and frontmatter blocks are size-capped, YAML aliases are refused, and one bad note is
reported in `skipped` while the rest of the vault ingests.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import yaml

from adapters.ingestion.confined import ConfinedRoot, RefusedFile, file_kind
from adapters.ingestion.obsidian.models import Note, SkippedFile, Task, WikiLink

logger = logging.getLogger(__name__)

#: Notes larger than this are skipped: prose notes are far smaller, and the whole note is held in memory.
MAX_NOTE_BYTES = 4 * 1024 * 1024
#: A frontmatter block larger than this is not parsed (the note ingests without it): YAML is slow and metadata small.
MAX_FRONTMATTER_BYTES = 64 * 1024

_HIDDEN = (".obsidian", ".trash", ".git")
TEMPLATE_FOLDERS = ("templates", "template", "_templates")
_LINK = re.compile(r"(!?)\[\[([^\[\]\|#\n]*)(?:#([^\[\]\|\n]+))?(?:\|([^\[\]\n]+))?\]\]")
_TAG = re.compile(r"(?<![\w/&#])#([A-Za-z_][\w/-]*)")
_TASK = re.compile(r"^\s*[-*+]\s+\[([ xX])\]\s+(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(\S.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")


class AliasRefusedError(yaml.composer.ComposerError):
    """A YAML alias (`*name`) in frontmatter: refused rather than expanded."""


class _NoAliasSafeLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases.

    An alias lets a few hundred bytes expand to gigabytes ("billion laughs") and a
    self-reference builds a cycle that no JSON metadata can hold; frontmatter never needs one.
    """

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise AliasRefusedError(None, None, "YAML aliases are not allowed in frontmatter",
                                    self.peek_event().start_mark)
        return super().compose_node(parent, index)


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


def load_frontmatter(block: str) -> dict:
    """The frontmatter mapping of `block`; ValueError with the reason when it cannot be used."""
    try:
        data = yaml.load(block, Loader=_NoAliasSafeLoader) or {}
        mapping = _jsonable(data) if isinstance(data, dict) else None
    except AliasRefusedError:
        raise ValueError("frontmatter uses a YAML alias (refused)") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"frontmatter is not valid YAML ({exc.__class__.__name__})") from None
    except RecursionError:
        raise ValueError("frontmatter is nested too deeply") from None
    except (OverflowError, ValueError) as exc:
        raise ValueError(f"frontmatter has a value YAML cannot build ({exc.__class__.__name__})") from None
    if mapping is None:
        raise ValueError("frontmatter is not a mapping")
    return mapping


def split_frontmatter(text: str, max_bytes: int = MAX_FRONTMATTER_BYTES) -> tuple[dict, str, str | None]:
    """(frontmatter, body, error); a malformed or oversized block stays in the body and is reported."""
    if not text.startswith("---"):
        return {}, text, None
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text, None
    size = 0
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            block, body = "\n".join(lines[1:end]), "\n".join(lines[end + 1:])
            try:
                return load_frontmatter(block), body, None
            except ValueError as exc:
                return {}, text, str(exc)
        size += len(lines[end].encode("utf-8", "surrogatepass")) + 1
        if size > max_bytes:
            return {}, text, f"frontmatter larger than {max_bytes} bytes"
    return {}, text, "frontmatter is not closed"


def _hidden(parts) -> bool:
    return any(part.startswith(".") or part in _HIDDEN for part in parts)


def _special_file_reason(entry: os.DirEntry) -> str:
    try:
        return f"not a regular file ({file_kind(entry.stat(follow_symlinks=False).st_mode)})"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"


class ObsidianParser:
    def __init__(self, vault: str | Path, template_folders=TEMPLATE_FOLDERS, max_note_bytes: int = MAX_NOTE_BYTES,
                 max_frontmatter_bytes: int = MAX_FRONTMATTER_BYTES):
        self.vault = Path(vault)
        self.confined = ConfinedRoot(self.vault, "vault")
        self.template_folders = {f.lower() for f in template_folders}
        self.max_note_bytes = max_note_bytes
        self.max_frontmatter_bytes = max_frontmatter_bytes
        self.skipped: list[SkippedFile] = []

    def _discover(self) -> tuple[list[str], list[SkippedFile]]:
        """(vault-relative note paths in path order, what was passed over and why).

        Symlinks are never followed to find notes: one leading outside the vault is refused,
        a folder link inside it would only repeat notes read under their own path (or open a
        hidden folder), and a note link is read under its own name only when its target is
        inside the vault, not hidden and not already a note. FIFOs and devices are refused.
        """
        notes: list[str] = []
        read_as: dict[Path, str] = {}
        links: list[str] = []
        skipped: list[SkippedFile] = []
        folders = [(self.confined.root, PurePosixPath())]
        while folders:
            folder, relative_folder = folders.pop()
            try:
                with os.scandir(folder) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as exc:
                skipped.append(SkippedFile(relative_folder.as_posix(), f"folder cannot be listed ({exc.strerror})"))
                continue
            for entry in entries:
                relative = relative_folder / entry.name
                if entry.is_symlink():
                    if entry.name.endswith(".md") or not _hidden([entry.name]):
                        links.append(relative.as_posix())
                elif entry.is_dir(follow_symlinks=False):
                    if not _hidden([entry.name]):
                        folders.append((folder / entry.name, relative))
                elif entry.name.endswith(".md"):
                    if entry.is_file(follow_symlinks=False):
                        notes.append(relative.as_posix())
                        read_as[folder / entry.name] = relative.as_posix()
                    else:
                        skipped.append(SkippedFile(relative.as_posix(), _special_file_reason(entry)))
        for relative in sorted(links, key=PurePosixPath):
            reason = self._admit_link(relative, read_as)
            if reason is None:
                notes.append(relative)
            elif reason:
                skipped.append(SkippedFile(relative, reason))
        return sorted(notes, key=PurePosixPath), skipped

    def _admit_link(self, relative: str, read_as: dict[Path, str]) -> str | None:
        """Why the symlink at `relative` is not read as a note, '' to pass over it in silence;
        None when it is read, its target then recorded in `read_as`."""
        try:
            target = self.confined.resolve(relative)
            mode = target.lstat().st_mode
        except RefusedFile as exc:
            return str(exc)
        except OSError as exc:
            return f"cannot be resolved ({exc.strerror})"
        target_relative = self.confined.relative(target)
        if stat.S_ISDIR(mode):
            if _hidden(PurePosixPath(target_relative).parts):
                return f"symlinked folder into the hidden folder {target_relative}"
            return f"symlinked folder: its notes are read under {target_relative or 'the vault root'}"
        if not relative.endswith(".md"):
            return ""
        if _hidden(PurePosixPath(target_relative).parts[:-1]):
            return f"symlink into the hidden folder of {target_relative}"
        if target in read_as:
            return f"symlink to {target_relative}, which is read under its own path"
        if not stat.S_ISREG(mode):
            return f"symlink to something that is not a regular file ({file_kind(mode)})"
        read_as[target] = relative
        return None

    def parse(self) -> Iterator[Note]:
        notes, self.skipped = self._discover()
        for relative in notes:
            try:
                raw = self.confined.read_bytes(relative, self.max_note_bytes)
            except RefusedFile as exc:
                logger.warning("%s: skipped, %s", relative, exc)
                self.skipped.append(SkippedFile(relative, str(exc)))
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                logger.warning("%s: skipped, not UTF-8 (%s)", relative, exc.reason)
                self.skipped.append(SkippedFile(relative, f"not valid UTF-8 at byte {exc.start}"))
                continue
            yield self.parse_note(relative, text.replace("\r\n", "\n"))

    def parse_note(self, relative: str, text: str) -> Note:
        """One note; a frontmatter block that cannot be used is left in the body and reported in `skipped`."""
        frontmatter, body, error = split_frontmatter(text, self.max_frontmatter_bytes)
        if error:
            logger.warning("%s: %s", relative, error)
            self.skipped.append(SkippedFile(relative, f"frontmatter skipped, note ingested without it: {error}"))
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
                headings.append({"level": len(heading.group(1)), "text": _heading_text(heading.group(2))})
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


def _heading_text(raw: str) -> str:
    """The text of an ATX heading without its optional closing #s (done in Python: the regex for it backtracks)."""
    return raw.rstrip().rstrip("#").rstrip() or raw[:1]


def _frontmatter_tags(frontmatter: dict) -> list[str]:
    raw = frontmatter.get("tags", frontmatter.get("tag", []))
    if isinstance(raw, str):
        raw = re.split(r"[,\s]+", raw)
    elif not isinstance(raw, (list, dict)):
        raw = [raw] if raw is not None else []
    return [str(t).lstrip("#") for t in raw if str(t).strip()]


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
