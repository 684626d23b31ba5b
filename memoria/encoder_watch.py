"""The one documented hook into the sentence-transformer: a bench installs a watcher to see every call.

The torch encoder (`memoria.canonical_batches.encode_sentence_transformer`) tells each installed watcher, after
each call, what it ran: the texts it was given (stripped, as the model read them), their token lengths, each
batch's padded width and rows (real and filled), and the seconds the call took. With no watcher installed the
encoder does nothing more than look at an empty list, so production runs are unchanged. `memfarm bench floor`
is its user; a watcher never changes what is encoded or returned.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

#: The watchers installed now (`watching`); the encoder reads this list on every call.
WATCHERS: list["EncoderWatcher"] = []


@dataclass(frozen=True)
class EncoderCall:
    """One call to the encoder: `texts` and their token `lengths` (truncated to the window), `batches` as
    `(width, real_rows, rows_run)` for each forward pass, and the call's `seconds` (tokenizing included)."""

    texts: tuple[str, ...]
    lengths: tuple[int, ...]
    batches: tuple[tuple[int, int, int], ...]
    seconds: float


class EncoderWatcher(Protocol):
    def called(self, call: EncoderCall) -> None: ...


@contextmanager
def watching(watcher: EncoderWatcher):
    """Inside, `watcher.called(call)` hears every encoder call of this process; removed on the way out."""
    WATCHERS.append(watcher)
    try:
        yield watcher
    finally:
        WATCHERS.remove(watcher)


def tell(call: EncoderCall) -> None:
    """Hand `call` to every installed watcher (the encoder calls this only when one is installed)."""
    for watcher in list(WATCHERS):
        watcher.called(call)
