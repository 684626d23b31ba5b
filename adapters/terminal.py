"""Text that is safe to print on a terminal, whatever an id read from a dataset or from Redis holds."""

from __future__ import annotations


def printable(value) -> str:
    """`value` as text that is safe on a terminal: control characters (C0, DEL, C1), line and paragraph
    separators and format characters (bidirectional overrides) shown as escapes, so an id read from a
    dataset or from Redis cannot move the cursor, retitle the window or fake a line."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(value))


def printable_text(text) -> str:
    """Lines of `text` each made `printable`, the line breaks between them kept: a report read from a results
    file whose names carry escapes or a right-to-left override prints them as escapes."""
    return "\n".join(printable(line) for line in str(text).split("\n"))
