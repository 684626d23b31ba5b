"""One redaction for every secret that could reach a file, Redis or a log: passwords inside URLs.

A password may hold any character (`'`, `@`, `:`, `"`, spaces, ...), percent-encoded
or not, so it is found by the URL's own structure, as `urllib.parse.urlsplit` and
its `.password` read it, never by what a password looks like: the netloc runs from
`scheme://` to the first `/`, `?` or `#`; the userinfo is everything before the
netloc's last `@`; the password is everything in it after the first `:`. A
`password=` query parameter runs to the next `&` or `#`. Both forms are redacted
wherever they stand in a longer text (a command line, a log message).

Where a URL ends inside free text cannot be known (`redis://:pw@host then a@b`
could be one password `pw@host then a`), so the redaction reaches to the last
possible end: it may hide more than the password, never less. A text that is a JSON
document is redacted string by string (each decoded, redacted, encoded again), so
that it stays valid JSON and a quote or backslash in a password is seen as itself.
"""

from __future__ import annotations

import json
import logging
import re

MASK = "***"
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"[?&;]password=", re.IGNORECASE)
#: What a text that may hold a URL password contains (`:\/\/` is how some JSON writers escape `://`).
_URL_MARKERS = ("://", ":\\/\\/")
#: A JSON string literal; in a valid JSON document every `"` outside one opens one.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
#: Where a URL's netloc ends; a line break ends any URL in free text.
_NETLOC_ENDS = "/?#\r\n"
#: Where a URL's path ends (a `?` opens its query), and where its query ends.
_QUERY_STARTS = "?#\r\n"
_QUERY_ENDS = "#\r\n"


def redact(text: str) -> str:
    """`text` with every password inside a URL replaced by `***`."""
    if not any(marker in text for marker in _URL_MARKERS) and "password=" not in text.lower():
        return text
    if text.lstrip()[:1] in ('{', '[', '"'):
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            return _redact_json(text)
    return _mask(text, _password_spans(text))


def _redact_json(text: str) -> str:
    """Each string literal of the JSON document `text` that holds a URL or a `password=`, decoded, redacted
    and encoded again; the rest of the document byte for byte.

    Outside its string literals a JSON document holds no `:` followed by `//` and no `=`, so each marker lies
    in a literal, which opens at the last unescaped `"` before it: only those literals are read."""
    pieces, position, scanned = [], 0, 0
    for marker in _marker_positions(text):
        if marker < scanned:
            continue
        literal = _JSON_STRING.match(text, _opening_quote(text, marker))
        scanned = literal.end()
        value = json.loads(literal.group())
        cleaned = redact(value)
        if cleaned != value:
            pieces += [text[position:literal.start()], json.dumps(cleaned, ensure_ascii=literal.group().isascii())]
            position = literal.end()
    return "".join(pieces) + text[position:]


def _opening_quote(text: str, inside: int) -> int:
    """The index of the `"` that opens the string literal holding index `inside` (a `"` after an odd number
    of backslashes is part of the string)."""
    end = inside
    while True:
        quote = text.rfind('"', 0, end)
        first = quote
        while first > 0 and text[first - 1] == "\\":
            first -= 1
        if (quote - first) % 2 == 0:
            return quote
        end = quote


def _marker_positions(text: str) -> list[int]:
    """Where `text` holds `://` (or its escaped form) or `password=`, in order (str.find: fast on large files)."""
    found = []
    for needle in (*_URL_MARKERS, "="):
        start = text.find(needle)
        while start >= 0:
            if needle != "=":
                found.append(start)
            elif text[max(0, start - 8):start].lower() == "password":
                found.append(start - 8)
            start = text.find(needle, start + 1)
    return sorted(found)


def _first(text: str, stops: str, start: int) -> int:
    """The index of the first character of `stops` in `text` at or after `start`, else len(text)."""
    return min((i for i in (text.find(c, start) for c in stops) if i >= 0), default=len(text))


def _password_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each URL password in `text`: in a userinfo and in a `password=` query parameter."""
    spans = []
    for scheme in _SCHEME.finditer(text):
        start = scheme.end()
        netloc_end = _first(text, _NETLOC_ENDS, start)
        userinfo = text[start:netloc_end].rpartition("@")[0]
        colon = userinfo.find(":")
        if colon >= 0 and colon + 1 < len(userinfo):
            spans.append((start + colon + 1, start + len(userinfo)))
        query = _first(text, _QUERY_STARTS, netloc_end)
        if query < len(text) and text[query] == "?":
            query_end = _first(text, _QUERY_ENDS, query)
            for parameter in _QUERY_PASSWORD.finditer(text, query, query_end):
                end = min(_first(text, "&", parameter.end()), query_end)
                if end > parameter.end():
                    spans.append((parameter.end(), end))
    return spans


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each span (overlapping ones merged) replaced by one `***`."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, position = [], 0
    for start, end in merged:
        pieces += [text[position:start], MASK]
        position = end
    return "".join(pieces) + text[position:]


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's final message (arguments included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True
