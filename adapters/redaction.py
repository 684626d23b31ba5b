"""One redaction for every secret that could reach a file, Redis or a log: passwords inside URLs.

Covers both forms a Redis URL carries a password in (`scheme://user:password@host`
and a `password=` query parameter), wherever they stand in a longer text
(a command line, a JSON document, a log message).
"""

from __future__ import annotations

import logging
import re

_USERINFO = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s'\"]*):(?P<secret>[^@/\s'\"]+)@", re.IGNORECASE)
_QUERY = re.compile(r"(?P<head>[?&;]password=)(?P<secret>[^&#\s'\"]+)", re.IGNORECASE)
MASK = "***"


def redact(text: str) -> str:
    """`text` with every URL password replaced by `***`."""
    text = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", text)
    return _QUERY.sub(lambda m: f"{m['head']}{MASK}", text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's final message (arguments included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True
