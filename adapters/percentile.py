"""The one percentile of the harness: nearest rank, as latency tables and distributions report it.

Definition: for `n` values sorted ascending, the `q`-quantile (0 <= q <= 1) is the value at 1-based rank
`max(1, ceil(q * n))`. It is always one of the values (never an interpolation), so the median of
[1, 2, 3, 4] is 2 and of [1, 2, 3] is 2; q = 0 gives the minimum, q = 1 the maximum. An empty list has no
percentile: the result is None, and a caller that prints it shows "-".
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float | None:
    """The nearest-rank `q`-quantile of `values`, or None when there are none."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"a quantile lies in [0, 1], not {q!r}")
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]
