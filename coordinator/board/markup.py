"""What every page of the board shares: escaping, the page frame with its Content-Security-Policy, the
breadcrumbs and the line that names a group.

`e` is the one way a text from a results file reaches a page: HTML-escaped, quotes
included, so it can stand in element text or a double-quoted attribute and never
become markup. Links and file names are the board's own, never a results file's.
"""

from __future__ import annotations

from html import escape

#: Script only from the board's own board.js, style only from board.css, pictures only from the board's files:
#: markup that slipped into a page could still run nothing.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; base-uri 'none'; "
       "form-action 'none'")


def e(value) -> str:
    return escape(str(value), quote=True)


def num(value, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 run`, `2 runs`, `0 runs`: a number with its noun in the number that agrees (`plural` where adding an
    s is wrong: `count(2, "copy", "copies")`)."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def seconds(value) -> str:
    """Seconds per question with the digits that say something at any size: 12.3, 0.84, 0.0042; "–" where
    not measured, and never a 0.00 for a run that did take time."""
    if value is None:
        return "–"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 0.01 or value == 0:
        return f"{value:.2f}"
    return f"{value:.2g}"


def sort_value(value) -> str:
    """The `data-v` a sortable cell sorts by: a number, or empty for none (sorted last)."""
    return "" if value is None else repr(float(value))


def page(title: str, body: str, depth: int, scripts: bool = False) -> str:
    up = "../" * depth
    script = f'<script src="{up}board.js"></script>' if scripts else ""
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{e(title)}</title><link rel=\"stylesheet\" href=\"{up}board.css\">{script}</head>"
            f"<body>{body}</body></html>")


def crumbs(depth: int, group: dict | None = None, extra: str = "") -> str:
    up = "../" * depth
    parts = [f'<a href="{up}index.html">Board</a>']
    if group:
        parts.append(f'<a href="{up}index.html#{group["id"]}">Group {group["number"]}</a>')
        parts.append(f'<a href="{"../" * (depth - 1)}questions.html">Questions</a>')
    if extra:
        parts.append(e(extra))
    return '<nav class="crumbs">' + " › ".join(parts) + "</nav>"


def group_heading(group: dict) -> str:
    profile = group["scoring_profile"] if group["corpus"] == group["scoring_profile"] else \
        f'{group["scoring_profile"]} on the {group["corpus"]} corpus'
    return (f'{e(group["benchmark"])} · dataset <code>{e(str(group["dataset_checksum"])[:12])}</code> · '
            f'profile {e(profile)} · {len(group["question_ids"])} questions '
            f'(set <code>{e(group["question_set"][:12])}</code>)')

