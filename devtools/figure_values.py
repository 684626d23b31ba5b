"""A published file's values as the manual shows them: the file read and checked (`load_published`), a dotted
path looked up in it, a value or a table formatted, the line naming the command that wrote it, and every string
from a file escaped so that it reads as text in a page (`devtools.docs_figures` writes and checks the figures)."""

from __future__ import annotations

import json
import re
from pathlib import Path

#: Where every figure's file lives, relative to the repository root.
PUBLISHED = "results/published/"
#: What a file must record so that a figure in it can be traced and made again.
PROVENANCE = ("command", "commit", "created", "cores", "load")


class FigureError(Exception):
    """A figure that cannot be rendered or traced: names the page, the file and the path."""


def load_published(root: Path, path: str, page: str) -> dict:
    """The JSON object of a published file, refused unless it is under results/published/ and records where
    it came from."""
    if not path.startswith(PUBLISHED) or ".." in Path(path).parts or not path.endswith(".json"):
        raise FigureError(f"{page}: {path}: a figure's file must be a .json under {PUBLISHED}")
    file = root / path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FigureError(f"{page}: {path}: no such file (a figure whose source is gone)") from None
    except (OSError, ValueError) as exc:
        raise FigureError(f"{page}: {path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise FigureError(f"{page}: {path}: not a JSON object")
    missing = [key for key in PROVENANCE if data.get(key) in (None, "")]
    if missing:
        raise FigureError(f"{page}: {path}: records no {', '.join(missing)}, so its figures cannot be traced")
    return data


def lookup(data, dotted: str, path: str, page: str):
    """The value at `dotted` (an all-digit segment indexes a list)."""
    value = data
    for depth, key in enumerate(dotted.split(".")):
        where = ".".join(dotted.split(".")[:depth + 1])
        if isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise FigureError(f"{page}: {path}: no value at {where!r}")
    return value


def format_value(value, digits: int, path: str, dotted: str, page: str) -> str:
    """A number as the page shows it: floats to `digits` decimals, integers with thousands separators."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value and abs(value) < 0.5 * 10 ** -digits:
            return f"{value:.0e}"  # a p-value of 2e-17 is not 0.000
        return f"{value:.{digits}f}"
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return "[" + ", ".join(format_value(v, digits, path, dotted, page) for v in value) + "]"
    raise FigureError(f"{page}: {path}: the value at {dotted!r} is not a number or text")


def render_table(rows, columns: dict, digits: int, path: str, dotted: str, page: str) -> str:
    """A Markdown table of `rows` (a list of flat dicts) in `columns` order."""
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise FigureError(f"{page}: {path}: {dotted!r} is not a non-empty list of objects")
    keys = list(columns)
    values = []
    for number, row in enumerate(rows):
        absent = [k for k in keys if find_column(row, k) is _ABSENT]
        if absent:
            raise FigureError(f"{page}: {path}: row {number} of {dotted!r} has no {', '.join(absent)}")
        values.append([find_column(row, k) for k in keys])
    # a cell with no value (a ratio of a row to itself) is a dash, not the word null
    cells = [["—" if v is None else format_value(v, digits, path, f"{dotted}.{n}.{k}", page)
              for k, v in zip(keys, row)] for n, row in enumerate(values)]
    numeric = [all(row[i] is None or isinstance(row[i], (int, float)) and not isinstance(row[i], bool)
                   for row in values)
               for i in range(len(keys))]
    lines = ["| " + " | ".join(str(columns[k]) for k in keys) + " |",
             "| " + " | ".join("---:" if n else "---" for n in numeric) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def source_line(data: dict, path: str, link: str) -> str:
    """The line under a table that says where it came from: its file (linked), command, commit, date, cores
    and load."""
    load = data["load"]
    if isinstance(load, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in load):
        load = " / ".join(f"{x:.2f}" for x in load)
    else:
        load = _text(json.dumps(load) if isinstance(load, (list, dict)) else load)
    name = _text(path.rsplit("/", 1)[-1])
    return (f"Source: [{name}]({link}), written by {_code(data['command'])} at commit "
            f"{_code(str(data['commit'])[:12])} on {_text(data['created'])}, "
            f"{_text(data['cores'])} cores, load average {load}.")


_ABSENT = object()


def find_column(row: dict, key: str):
    """A column's value in a row: the key itself, else a dotted path into the row (`wins.count`)."""
    if key in row:
        return row[key]
    value = row
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


#: Characters that Markdown (with attr_list and tables) reads as markup, escaped by a backslash in `_text`.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]|])")
#: Line breaks and other control characters: a published string stays on its one line of the page.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _text(value) -> str:
    """A string from a published file as plain text in a page: HTML's `<`, `>` and `&` as entities and
    Markdown's markup characters escaped, on one line, so a name such as `<img src=x onerror=...>` or
    `*x*{: onclick=...}` shows as what it says and never becomes an element or an attribute of the manual."""
    text = _CONTROL.sub(" ", str(value))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def _escape(text: str) -> str:
    """A link's title: a quote would end it early; the title is an attribute, which Markdown escapes."""
    return _CONTROL.sub(" ", str(text)).replace('"', "'")


def _code(text: str) -> str:
    """`text` as inline code, fenced by more backticks than it holds, on one line (a blank line would end the
    code span and let the rest be read as markup)."""
    text = _CONTROL.sub(" ", str(text))
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}" if len(fence) > 1 else f"`{text}`"
