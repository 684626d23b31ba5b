"""The manual's figures: the `fig` and `fig_table` macros, and the check that no measured figure is typed by hand.

A measured figure in the manual is rendered at build time from a JSON file committed under
`results/published/`, written by the command recorded in it, so a reader can follow every number to what
made it and make it again. MkDocs loads this module as a hook (`hooks:` in `mkdocs.yml`); it needs a
checkout, so it lives in `devtools/`, outside the installed package.

- `{{ fig("results/published/NAME.json", "dotted.path") }}`: one value (an all-digit segment indexes a
  list; `digits=3` by default for a float), linked to the file.
- `{{ fig_table("results/published/NAME.json", "dotted.path", columns={"key": "Header"}) }}`: a table whose
  rows are the dicts of that list (a column may be a dotted path inside a row; `where={"key": value}` keeps
  the rows that have those values), and under it one line naming the file's command, commit, date, cores
  and load.

The rule for hand-typed figures (`untraceable_figures`), in the words a writer follows: outside a macro,
a Markdown table may hold no decimal number (`0.836`, `1.75x`), and a line of text may hold no decimal
number, percentage or ratio (`12 %`, `3x`) unless its paragraph carries the marker `<!-- not measured -->`
(a setting, a limit, a worked example). Code is exempt: inline code, and fenced blocks of commands or
formats (`sh`, `bash`, `json`, `yaml`, `python`, `toml`, `ini`); any other fenced block (program output)
is checked like text. A version number (two dots, or after Python, Redis, torch, Celery, MkDocs,
Debian, ONNX Runtime) is not a figure.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

#: Where every figure's file lives, relative to the repository root.
PUBLISHED = "results/published/"
#: What a file must record so that a figure in it can be traced and made again.
PROVENANCE = ("command", "commit", "created", "cores", "load")
#: The marker that exempts a paragraph's figures: settings, limits, worked examples, never a measurement.
NOT_MEASURED = "<!-- not measured -->"
#: Fenced blocks of these languages hold commands or formats, not output.
CODE_LANGUAGES = frozenset({"sh", "bash", "console-in", "json", "yaml", "python", "toml", "ini", "lua"})

_MACRO = re.compile(r"\{\{\s*(fig|fig_table)\s*\((.*?)\)\s*\}\}", re.S)
_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+\1")
_FENCED_BLOCK = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.M | re.S)
_LINK_TARGET = re.compile(r"\]\([^)]*\)|<[^>]*>")
_VERSION = re.compile(r"\b\d+\.\d+\.\d+\b|\b(?:Python|Redis|torch|Celery|MkDocs|Debian|ONNX Runtime|v)\s*\d+(?:\.\d+)+")
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.]*\d)")
_RATIO = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:%|x\b|×)")


class FigureError(Exception):
    """A figure that cannot be rendered or traced: names the page, the file and the path."""


def untraceable_figures(markdown: str) -> list[tuple[int, str]]:
    """(line number, line) of every figure typed by hand in `markdown` (see the module's rule)."""
    found = []
    lines = markdown.splitlines()
    exempt = _exempt_paragraph_lines(lines)
    fence = None  # (marker, checked) while inside a fenced block
    for number, line in enumerate(lines, 1):
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence = (opening.group(1), opening.group(2).lower() not in CODE_LANGUAGES)
            continue
        if fence is not None and line.strip().startswith(fence[0]):
            fence = None
            continue
        if fence is not None and not fence[1]:
            continue
        text = _LINK_TARGET.sub("]", _CODE_SPAN.sub("", _MACRO.sub("", line)))
        text = _VERSION.sub("", text)
        is_table = fence is None and text.lstrip().startswith("|")
        if not (_DECIMAL.search(text) or _RATIO.search(text)):
            continue
        if is_table or number not in exempt:
            found.append((number, line))
    return found


def _exempt_paragraph_lines(lines: list[str]) -> set[int]:
    """Line numbers of the paragraphs (blank-line separated) that carry the marker; never a table's lines."""
    exempt, paragraph = set(), []
    for number, line in enumerate([*lines, ""], 1):
        if line.strip():
            paragraph.append(number)
            continue
        if any(NOT_MEASURED in lines[n - 1] for n in paragraph):
            exempt.update(n for n in paragraph if not lines[n - 1].lstrip().startswith("|"))
        paragraph = []
    return exempt


def render_figures(markdown: str, root: Path, page: str, link_prefix: str = "") -> tuple[str, set[str]]:
    """`markdown` with every macro replaced by its rendering, and the published files it read.

    `link_prefix` leads from the page to the site's root (`../` for a page one folder down)."""
    used: set[str] = set()
    protected = _code_ranges(markdown)

    def replace(match: re.Match) -> str:
        if any(start <= match.start() < end for start, end in protected):
            return match.group(0)  # a macro shown as code, in a page that explains the macros
        name, arguments = match.group(1), match.group(2)
        args, kwargs = _arguments(arguments, page)
        if not args or not isinstance(args[0], str):
            raise FigureError(f"{page}: {name}(...) needs the file's path first")
        path = args[0]
        data = load_published(root, path, page)
        used.add(path)
        link = f"{link_prefix}{path}"
        if name == "fig":
            if len(args) != 2:
                raise FigureError(f"{page}: fig({path!r}, ...) takes the file and one dotted path")
            value = lookup(data, args[1], path, page)
            text = format_value(value, kwargs.get("digits", 3), path, args[1], page)
            return f'[{text}]({link} "{_escape(data["command"])}")'
        if len(args) != 2 or not isinstance(kwargs.get("columns"), dict) or not kwargs["columns"]:
            raise FigureError(f"{page}: fig_table({path!r}, PATH, columns={{...}}) needs a path and columns")
        rows = lookup(data, args[1], path, page)
        where = kwargs.get("where", {})
        if not isinstance(where, dict):
            raise FigureError(f"{page}: fig_table({path!r}, ...): where= takes {{column: value}}")
        if where and isinstance(rows, list):
            rows = [row for row in rows if isinstance(row, dict)
                    and all(_find(row, key) == value for key, value in where.items())]
            if not rows:
                raise FigureError(f"{page}: {path}: no row of {args[1]!r} has {where}")
        return render_table(rows, kwargs["columns"], kwargs.get("digits", 3), data, path, args[1], page, link)

    return _MACRO.sub(replace, markdown), used


def _code_ranges(markdown: str) -> list[tuple[int, int]]:
    """Character ranges of fenced blocks and inline code spans, where a macro is text, not a call."""
    ranges = [m.span() for m in _FENCED_BLOCK.finditer(markdown)]
    for span in _CODE_SPAN.finditer(markdown):
        if not any(start <= span.start() < end for start, end in ranges):
            ranges.append(span.span())
    return ranges


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


def render_table(rows, columns: dict, digits: int, data: dict, path: str, dotted: str, page: str, link: str) -> str:
    """A Markdown table of `rows` (a list of flat dicts) in `columns` order, and the line that says where it
    came from."""
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise FigureError(f"{page}: {path}: {dotted!r} is not a non-empty list of objects")
    keys = list(columns)
    values = []
    for number, row in enumerate(rows):
        absent = [k for k in keys if _find(row, k) is _ABSENT]
        if absent:
            raise FigureError(f"{page}: {path}: row {number} of {dotted!r} has no {', '.join(absent)}")
        values.append([_find(row, k) for k in keys])
    # a cell with no value (a ratio of a row to itself) is a dash, not the word null
    cells = [["—" if v is None else format_value(v, digits, path, f"{dotted}.{n}.{k}", page)
              for k, v in zip(keys, row)] for n, row in enumerate(values)]
    numeric = [all(row[i] is None or isinstance(row[i], (int, float)) and not isinstance(row[i], bool)
                   for row in values)
               for i in range(len(keys))]
    lines = ["| " + " | ".join(str(columns[k]) for k in keys) + " |",
             "| " + " | ".join("---:" if n else "---" for n in numeric) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    load = data["load"]
    if isinstance(load, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in load):
        load = " / ".join(f"{x:.2f}" for x in load)
    else:
        load = _text(json.dumps(load) if isinstance(load, (list, dict)) else load)
    name = _text(path.rsplit("/", 1)[-1])
    lines += ["", f"Source: [{name}]({link}), written by {_code(data['command'])} at commit "
                  f"{_code(str(data['commit'])[:12])} on {_text(data['created'])}, "
                  f"{_text(data['cores'])} cores, load average {load}.", "{: .figure-source }"]
    return "\n".join(lines)


_ABSENT = object()


def _find(row: dict, key: str):
    """A column's value in a row: the key itself, else a dotted path into the row (`wins.count`)."""
    if key in row:
        return row[key]
    value = row
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def _arguments(text: str, page: str) -> tuple[list, dict]:
    """The literal arguments of a macro call, parsed without running anything."""
    try:
        call = ast.parse(f"f({text})", mode="eval").body
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except (SyntaxError, ValueError) as exc:
        raise FigureError(f"{page}: macro arguments {text.strip()!r} are not literals ({exc})") from None
    if "digits" in kwargs and (not isinstance(kwargs["digits"], int) or not 0 <= kwargs["digits"] <= 9):
        raise FigureError(f"{page}: digits= must be an integer from 0 to 9")
    return args, kwargs


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
