"""The manual's figures: the `fig` and `fig_table` macros, written into the pages and checked against their
files, and the check that no measured figure is typed by hand.

A measured figure in the manual comes from a JSON file committed under `results/published/`, written by the
command recorded in it, so a reader can follow every number to what made it and make it again. The page's
source holds the figure itself, so that it reads on GitHub and in a terminal, beside the macro that made it,
hidden in an HTML comment:

- one value: `[0.836](../results/published/NAME.json)<!-- fig("results/published/NAME.json", "dotted.path") -->`,
  the value linked to its file, then the macro (an all-digit segment indexes a list; `digits=3` by default for
  a float). The value comes first: a line that began with a comment would be raw HTML on GitHub.
- a table: the line `<!-- fig_table("results/published/NAME.json", "dotted.path", columns={"key": "Header"}) -->`,
  a blank line, the Markdown table, a blank line, the line naming the file's command, commit, date, cores and
  load, a blank line and `<!-- /fig_table -->`. The rows are the dicts of that list (a column may be a dotted
  path inside a row; `where={"key": value}` keeps the rows that have those values).

A writer types a new figure as `{{ fig(...) }}` or `{{ fig_table(...) }}` and runs `WRITE_COMMAND`, which writes
every figure of the manual as its file gives it now; `--check` instead lists each one that is not. MkDocs loads
`devtools/mkdocs_hooks.py`, which refuses a page with a figure not as its file gives it (or a `{{ }}` macro not
written out) and renders each figure into the site, linked to its file; this module needs a checkout, so it
lives in `devtools/`, outside the installed package.

The rule for hand-typed figures (`untraceable_figures`), in the words a writer follows: outside a figure,
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
from dataclasses import dataclass
from pathlib import Path

from devtools.figure_values import (FigureError, _escape, find_column, format_value, load_published, lookup,
                                    render_table, source_line)

#: The marker that exempts a paragraph's figures: settings, limits, worked examples, never a measurement.
NOT_MEASURED = "<!-- not measured -->"
#: Fenced blocks of these languages hold commands or formats, not output.
CODE_LANGUAGES = frozenset({"sh", "bash", "console-in", "json", "yaml", "python", "toml", "ini", "lua"})

#: The command that writes every figure of the manual into its page as its file gives it now.
WRITE_COMMAND = "python -m devtools docs-figures --write"

#: A macro typed by a writer and not yet written out: `{{ fig(...) }}`, `{{ fig_table(...) }}`.
_MACRO = re.compile(r"\{\{\s*(?P<name>fig|fig_table)\s*\((?P<arguments>.*?)\)\s*\}\}", re.S)
#: A value written into its page: `[0.836](../results/published/x.json)<!-- fig("...", "...") -->`.
_WRITTEN_FIG = re.compile(r"(?P<written>\[(?:\\.|\[[^\]\n]*\]|[^\\\[\]\n])*\]\([^()\s]*\))"
                          r"<!--\s*fig\s*\((?P<arguments>(?:(?!-->).)*?)\)\s*-->", re.S)
#: A table written into its page, between its macro's comment and `<!-- /fig_table -->`, each on its own line.
_WRITTEN_TABLE = re.compile(r"^<!--\s*fig_table\s*\((?P<arguments>(?:(?!-->).)*?)\)\s*-->[ \t]*\n"
                            r"(?P<written>(?:(?!<!--\s*/?fig_table\b).)*?)^<!--\s*/fig_table\s*-->[ \t]*$",
                            re.M | re.S)
#: Any figure's comment: one that is part of no written figure is refused.
_FIGURE_COMMENT = re.compile(r"<!--\s*(/?fig(?:_table)?)\b")
_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+\1")
_FENCED_BLOCK = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.M | re.S)
_LINK_TARGET = re.compile(r"\]\([^)]*\)|<[^>]*>")
_VERSION = re.compile(r"\b\d+\.\d+\.\d+\b|\b(?:Python|Redis|torch|Celery|MkDocs|Debian|ONNX Runtime|v)\s*\d+(?:\.\d+)+")
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.]*\d)")
_RATIO = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:%|x\b|×)")


@dataclass(frozen=True)
class Figure:
    """One figure of a page: its macro's name and arguments as typed, where it stands, and what the page shows
    for it now (the value's link, or the table and its source line; None for a `{{ }}` macro not written out)."""

    name: str
    arguments: str
    start: int
    end: int
    line: int
    written: str | None = None
    written_line: int = 1

    @property
    def call(self) -> str:
        return f"{self.name}({self.arguments.strip()})"


@dataclass(frozen=True)
class StaleFigure:
    """A figure whose page does not show what its file gives now."""

    page: str
    line: int
    call: str
    written: str | None  # None: a `{{ }}` macro, not written out
    expected: str

    def __str__(self) -> str:
        if self.written is None:
            return f"{self.page}:{self.line}: {{{{ {self.call} }}}} is not written into the page"
        return f"{self.page}:{self.line}: {self.call} is written {self.written!r}, its file gives {self.expected!r}"


def untraceable_figures(markdown: str) -> list[tuple[int, str]]:
    """(line number, line) of every figure typed by hand in `markdown` (see the module's rule)."""
    found = []
    original = markdown.splitlines()
    lines = _without_figures(markdown).splitlines()
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
            found.append((number, original[number - 1]))
    return found


def _without_figures(markdown: str) -> str:
    """`markdown` with every figure (written or a macro) cut out but its line breaks kept, so that what is left
    is what a writer typed, on the same lines."""
    figures, _ = _scan(markdown)
    kept, at = [], 0
    for figure in figures:
        kept += [markdown[at:figure.start], "\n" * markdown.count("\n", figure.start, figure.end)]
        at = figure.end
    return "".join(kept) + markdown[at:]


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


def figures_in(markdown: str, page: str) -> list[Figure]:
    """Every figure of a page outside code, in order: written ones and `{{ }}` macros. A figure's comment that
    belongs to no written figure (its value gone, a table without `<!-- /fig_table -->`) is refused."""
    figures, strays = _scan(markdown)
    if strays:
        line, comment = strays[0]
        raise FigureError(f"{page}:{line}: {comment} belongs to no written figure: a value is written "
                          f"[value](file)<!-- fig(...) -->, a table between <!-- fig_table(...) --> and "
                          f"<!-- /fig_table -->, each on its own line; type the macro as {{{{ fig(...) }}}} or "
                          f"{{{{ fig_table(...) }}}} in its place and run `{WRITE_COMMAND}`")
    return figures


def _scan(markdown: str) -> tuple[list[Figure], list[tuple[int, str]]]:
    """The figures of a page outside code, in order, and (line, comment) of each figure comment that belongs
    to none of them."""
    code = _code_ranges(markdown)

    def in_code(position: int) -> bool:
        return any(start <= position < end for start, end in code)

    def line_of(position: int) -> int:
        return markdown.count("\n", 0, position) + 1

    figures: list[Figure] = []
    taken: list[tuple[int, int]] = []

    def add(match: re.Match, name: str, written: str | None = None, written_at: int = 0) -> None:
        if in_code(match.start()) or any(start <= match.start() < end for start, end in taken):
            return
        figures.append(Figure(name, match.group("arguments"), match.start(), match.end(), line_of(match.start()),
                              written, line_of(written_at)))
        taken.append(match.span())

    for match in _WRITTEN_TABLE.finditer(markdown):
        body = match.group("written")
        add(match, "fig_table", body.strip("\n"), match.start("written") + len(body) - len(body.lstrip("\n")))
    for match in _WRITTEN_FIG.finditer(markdown):
        add(match, "fig", match.group("written"), match.start())
    for match in _MACRO.finditer(markdown):
        add(match, match.group("name"))
    strays = [(line_of(m.start()), f"<!-- {m.group(1)} ... -->") for m in _FIGURE_COMMENT.finditer(markdown)
              if not in_code(m.start()) and not any(start <= m.start() < end for start, end in taken)]
    return sorted(figures, key=lambda figure: figure.start), strays


@dataclass(frozen=True)
class _Rendered:
    """What a figure's file gives for it now: the value's text (fig) or the Markdown table (fig_table)."""

    path: str
    data: dict
    text: str

    def site(self, name: str, link_prefix: str) -> str:
        """The figure as the site shows it: the value linked to its file with the command as the link's
        title, or the table, its source line and that line's style."""
        link = f"{link_prefix}{self.path}"
        if name == "fig":
            return f'[{self.text}]({link} "{_escape(self.data["command"])}")'
        return "\n".join([self.text, "", source_line(self.data, self.path, link), "{: .figure-source }"])

    def shown(self, name: str, page: str) -> str:
        """What the page's source shows for the figure, linked to the file from where the page lies (GitHub
        follows the link): the value, or the table and its source line."""
        link = "../" * page.count("/") + self.path
        if name == "fig":
            return f"[{self.text}]({link})"
        return "\n".join([self.text, "", source_line(self.data, self.path, link)])


def render_figures(markdown: str, root: Path, page: str, link_prefix: str = "") -> tuple[str, set[str]]:
    """`markdown` with every figure (written or a macro) replaced by what the site shows for it, rendered
    from its file now, and the published files it read.

    `link_prefix` leads from the page to the site's root (`../` for a page one folder down)."""
    used: set[str] = set()

    def site(figure: Figure) -> str:
        rendered = _render(figure, root, page)
        used.add(rendered.path)
        return rendered.site(figure.name, link_prefix)

    return _replace(markdown, figures_in(markdown, page), site), used


def write_figures(markdown: str, root: Path, page: str) -> str:
    """`markdown` with every figure written as its file gives it now, each `{{ }}` macro written out."""

    def written(figure: Figure) -> str:
        if "--" in figure.arguments:
            raise FigureError(f"{page}:{figure.line}: {figure.call} holds '--', which would end the comment "
                              "that hides the macro")
        shown = _render(figure, root, page).shown(figure.name, page)
        if figure.name == "fig":
            return f"{shown}<!-- fig({figure.arguments.strip()}) -->"
        if figure.written is None:
            line_start = markdown.rfind("\n", 0, figure.start) + 1
            line_end = markdown.find("\n", figure.end) % (len(markdown) + 1)
            if markdown[line_start:figure.start] or markdown[figure.end:line_end].strip():
                raise FigureError(f"{page}:{figure.line}: {{{{ {figure.call} }}}} must stand alone on its line, "
                                  "from its first column, to be written as a table")
        return f"<!-- fig_table({figure.arguments.strip()}) -->\n\n{shown}\n\n<!-- /fig_table -->"

    return _replace(markdown, figures_in(markdown, page), written)


def stale_figures(markdown: str, root: Path, page: str) -> list[StaleFigure]:
    """Each figure of a page that does not show what its file gives now, or is a `{{ }}` macro not written out,
    with the first line that differs."""
    stale = []
    for figure in figures_in(markdown, page):
        expected = _render(figure, root, page).shown(figure.name, page)
        if figure.written is None:
            stale.append(StaleFigure(page, figure.line, figure.call, None, expected))
        elif figure.written != expected:
            stale.append(_first_difference(figure, expected, page))
    return stale


#: The repository's root, whose docs/ holds the manual's pages.
ROOT = Path(__file__).resolve().parents[1]


def refresh_pages(pages=(), write: bool = False, root: Path = ROOT) -> tuple[list[str], bool]:
    """The figures of `pages` (default: every page under docs/) against their files: with `write`, each page
    rewritten with every figure as its file gives it now; without, one line per figure that is not. Returns
    the lines to print and whether every figure is (now) current; a figure that cannot be rendered is named and
    leaves its page unwritten."""
    files = [Path(p) for p in pages] or sorted((root / "docs").rglob("*.md"))
    report, stale_count, stale_pages, failed = [], 0, 0, False
    for file in files:
        try:
            page = file.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            report.append(f"{file}: not a page of this repository's manual ({root / 'docs'})")
            failed = True
            continue
        markdown = file.read_text(encoding="utf-8")
        try:
            stale = stale_figures(markdown, root, page)
            if write and stale:
                file.write_text(write_figures(markdown, root, page), encoding="utf-8")
                report.append(f"wrote {page}: {len(stale)} figure(s) brought up to date")
        except FigureError as exc:
            report.append(str(exc))
            failed = True
            continue
        if not write and stale:
            report += [str(figure) for figure in stale]
            stale_count, stale_pages = stale_count + len(stale), stale_pages + 1
    if stale_count:
        report.append(f"{stale_count} figure(s) in {stale_pages} page(s) not as their files give them now: "
                      f"run `{WRITE_COMMAND}`")
    elif not failed:
        report.append(f"every figure of {len(files)} page(s) is as its file gives it now")
    return report, not failed and not stale_count


def _first_difference(figure: Figure, expected: str, page: str) -> StaleFigure:
    """The figure's first line that differs from what its file gives (a value: its text, unless only the link
    differs)."""
    if figure.name == "fig":
        written_text, expected_text = (s[1:s.rindex("](")] for s in (figure.written, expected))
        if written_text != expected_text:
            return StaleFigure(page, figure.line, figure.call, written_text, expected_text)
        return StaleFigure(page, figure.line, figure.call, figure.written, expected)
    written_lines, expected_lines = figure.written.splitlines(), expected.splitlines()
    for number, (have, want) in enumerate(zip(written_lines, expected_lines)):
        if have != want:
            return StaleFigure(page, figure.written_line + number, figure.call, have, want)
    number = min(len(written_lines), len(expected_lines))
    have = written_lines[number] if number < len(written_lines) else "(nothing)"
    want = expected_lines[number] if number < len(expected_lines) else "(nothing)"
    return StaleFigure(page, figure.written_line + number, figure.call, have, want)


def _replace(markdown: str, figures: list[Figure], replacement) -> str:
    """`markdown` with each figure's span replaced by `replacement(figure)`."""
    parts, at = [], 0
    for figure in figures:
        parts += [markdown[at:figure.start], replacement(figure)]
        at = figure.end
    return "".join(parts) + markdown[at:]


def _render(figure: Figure, root: Path, page: str) -> _Rendered:
    """What a figure's file gives for it now, or a FigureError naming the page, the file and the path."""
    name = figure.name
    args, kwargs = _arguments(figure.arguments, page)
    if not args or not isinstance(args[0], str):
        raise FigureError(f"{page}: {name}(...) needs the file's path first")
    path = args[0]
    data = load_published(root, path, page)
    if name == "fig":
        if len(args) != 2:
            raise FigureError(f"{page}: fig({path!r}, ...) takes the file and one dotted path")
        value = lookup(data, args[1], path, page)
        return _Rendered(path, data, format_value(value, kwargs.get("digits", 3), path, args[1], page))
    if len(args) != 2 or not isinstance(kwargs.get("columns"), dict) or not kwargs["columns"]:
        raise FigureError(f"{page}: fig_table({path!r}, PATH, columns={{...}}) needs a path and columns")
    rows = lookup(data, args[1], path, page)
    where = kwargs.get("where", {})
    if not isinstance(where, dict):
        raise FigureError(f"{page}: fig_table({path!r}, ...): where= takes {{column: value}}")
    if where and isinstance(rows, list):
        rows = [row for row in rows if isinstance(row, dict)
                and all(find_column(row, key) == value for key, value in where.items())]
        if not rows:
            raise FigureError(f"{page}: {path}: no row of {args[1]!r} has {where}")
    return _Rendered(path, data, render_table(rows, kwargs["columns"], kwargs.get("digits", 3), path, args[1], page))


def _code_ranges(markdown: str) -> list[tuple[int, int]]:
    """Character ranges of fenced blocks and inline code spans, where a macro is text, not a call."""
    ranges = [m.span() for m in _FENCED_BLOCK.finditer(markdown)]
    for span in _CODE_SPAN.finditer(markdown):
        if not any(start <= span.start() < end for start, end in ranges):
            ranges.append(span.span())
    return ranges


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
