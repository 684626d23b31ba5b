"""One rule for equal scores: scores are compared on a fixed grid, and a tie goes to the lower id.

Two candidates whose scores differ by float noise alone (the last bits of a sum, of a cosine) must not
swap places with the machine, the batch or the order items ran in. Every ranked list of the engine
compares scores rounded to `defaults.TIE_DECIMALS` decimals, and orders the equal ones by the store's
id, which is the position of the memory in what was ingested (for a benchmark, its place in the
haystack), never a benchmark's own session or turn id. The scores themselves are kept unrounded.
"""

from __future__ import annotations

from typing import Iterable

from memoria import defaults


def score_key(score: float) -> float:
    """The score as ranking compares it."""
    return round(float(score), defaults.TIE_DECIMALS)


def best_first(pairs: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
    """`(id, score)` pairs best first; scores equal on the grid ordered by id."""
    return sorted(pairs, key=lambda p: (-score_key(p[1]), p[0]))
