"""Sentences of a turn, each with its own vector: the `sentence` signal of the `full` mode.

A turn often answers in one clause among several ("Glad you have support! Unconditional
love is so important. Here's a pic of my family camping at the beach."), and one vector
of the whole turn dilutes that clause. Each turn of two pieces or more keeps a vector
per piece; the signal is a candidate's best cosine over the turn and its pieces.

Pieces are the turn's sentences (split after `.`, `!` or `?`, and before a bracketed
aside such as a shared photo's caption), without the speaker's `name: ` opening; a
piece of fewer than `MIN_PIECE_WORDS` words is left out (a "Wow!" says little), and a
turn of more than `max_pieces` pieces has its sentences joined into `max_pieces`
runs of about equal length, so a long turn costs a bounded number of encodings.
"""

from __future__ import annotations

import re

#: Split after a sentence's end, and before a bracketed aside.
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\s+(?=\[)")
#: A piece of fewer words is left out.
MIN_PIECE_WORDS = 3


def without_speaker(text: str, speaker: str) -> str:
    """`text` without its opening `speaker: ` (any case), or unchanged."""
    opening = f"{speaker}: "
    if speaker and text[:len(opening)].lower() == opening.lower():
        return text[len(opening):]
    return text


def split_pieces(text: str, speaker: str = "", max_pieces: int = 8) -> list[str]:
    """The pieces of a turn that get their own vectors; [] when the turn is one piece (its vector suffices)."""
    if max_pieces < 2:
        return []
    pieces = [p.strip() for p in _BOUNDARY.split(without_speaker(text, speaker))]
    pieces = [p for p in pieces if len(p.split()) >= MIN_PIECE_WORDS]
    if len(pieces) < 2:
        return []
    if len(pieces) > max_pieces:
        size = -(-len(pieces) // max_pieces)  # ceiling: at most max_pieces runs
        pieces = [" ".join(pieces[i:i + size]) for i in range(0, len(pieces), size)]
    return pieces
