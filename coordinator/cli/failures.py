"""What a run's failed items say, once per reason: printed under its table, and the exit status they give."""

from __future__ import annotations

import re
import sys
from collections import Counter

from adapters.terminal import printable

#: The exit status of a run that wrote its results with items failed (a usage error is 2, Ctrl-C 130).
FAILED_ITEMS_EXIT = 1
_REFUSED_BY = re.compile(r"^refused by [^:]*: ")


def reason_of(error: str | None) -> str:
    """An item's error as one line the same for every item it stopped: its first line, without the worker that
    refused it (each worker names itself)."""
    text = (error or "").strip()
    line = text.splitlines()[0] if text else "no error recorded"
    return _REFUSED_BY.sub("refused by the worker: ", line)


def failure_lines(manifest: dict) -> list[str]:
    """One line on how many items failed, then each distinct reason once with its count of items; none if none."""
    reasons: dict[str, str] = {}
    for failure in manifest.get("failures") or ():  # one per question: an item is counted once, by its first
        reasons.setdefault(failure.get("item_id"), reason_of(failure.get("error")))
    if not reasons:
        return []
    total = len(manifest.get("items") or ()) or len(reasons)
    lines = [f"{len(reasons)} of {total} items failed (the table leaves them out; every error in the manifest's "
             "failures):"]
    for reason, count in Counter(reasons.values()).most_common():
        lines.append(printable(f"  {count} item{'s' if count != 1 else ''}: {reason}"))
    return lines


def exit_if_failed(cli) -> None:
    """A run whose results leave out failed items ends with a non-zero status, once every file is written."""
    if cli.failed_items:
        sys.exit(FAILED_ITEMS_EXIT)
