"""What a system's answer may put in a results file: known ids, once each, at most top_k, finite numbers.

Every system's answer passes here, in-process or behind HTTP. A few stray hits (an id the system made up, a
repeat, one hit too many) are dropped and said in the record; an answer past `MAX_REJECTED_HITS` of them is no
ranking to score but a flood, and fails its item once, with a count: a line per dropped hit would carry the
flood into the log and the results file (838,851 lines for three questions).
"""

from __future__ import annotations

import logging
import math
from itertools import islice

from adapters.errors import MemfarmError

logger = logging.getLogger(__name__)

#: Hits of one answer the runner drops and names (ids never ingested, repeats) before the item fails instead.
MAX_REJECTED_HITS = 20
#: Deepest a hit's diagnostics may nest, the hit counting as 1 (readers refuse a results file past 100).
MAX_HIT_DEPTH = 20


class SystemOutputError(MemfarmError):
    """A system's answer is not a ranking the runner can score; `field` names the part that was wrong."""

    def __init__(self, problem: str, field: str = "hits"):
        self.field = field
        super().__init__(f"system output rejected: {problem}")


def most_hits(top_k: int, docs: int) -> int:
    """The most hits an answer may hold: all the item's docs (or top_k, if more) and a few strays."""
    return max(top_k, docs) + MAX_REJECTED_HITS


def count_problem(returned: int, top_k: int, docs: int) -> str | None:
    """Why an answer of `returned` hits is a flood, or None."""
    if returned <= most_hits(top_k, docs):
        return None
    return f"returned {returned:,} hits for {top_k:,} asked (the item has {docs:,} docs)"


def clean_hits(hits, known, top_k: int) -> tuple[list[dict], list[str]]:
    """Keep well-formed hits of known docs, once each, at most top_k; say what was dropped.

    A number that is not finite (NaN, infinity) in a kept hit is written as null and said: the ranking is the
    order, not the scores, and a results file holds JSON only. SystemOutputError for a flood."""
    most = most_hits(top_k, len(known))
    if not isinstance(hits, (list, tuple)):  # a generator may never end: read one past the bound, no more
        hits = list(islice(iter(hits or ()), most + 1))
    if len(hits) > most:
        raise SystemOutputError(count_problem(len(hits), top_k, len(known)))
    kept, seen, problems, rejected = [], set(), [], 0
    for position, hit in enumerate(hits):
        external_id = hit.get("external_id") if isinstance(hit, dict) else None
        if external_id not in known or external_id in seen:
            rejected += 1
            if rejected <= MAX_REJECTED_HITS:
                why = "unknown" if external_id not in known else "duplicate"
                problems.append(f"hit {position}: {why} id {_shown(external_id)} dropped")
        else:
            seen.add(external_id)
            kept.append(hit)
    if rejected > MAX_REJECTED_HITS:
        raise SystemOutputError(f"{rejected:,} of {len(hits):,} hits were ids never ingested or repeated "
                                f"(at most {MAX_REJECTED_HITS} are dropped and the rest scored)")
    if len(kept) > top_k:
        problems.append(f"{len(kept)} hits for top_k={top_k}: truncated")
        kept = kept[:top_k]
    kept, not_finite = _finite_hits(kept)
    if not_finite:
        problems.append(f"{len(not_finite)} numbers of the hits were not finite, written as null, "
                        f"e.g. {not_finite[0]}")
    if problems:
        logger.warning("system output rejected: %s", "; ".join(problems))
    return kept, problems


def _shown(external_id) -> str:
    text = repr(external_id)
    return text if len(text) <= 80 else text[:77] + "..."


def _finite_hits(hits: list[dict]) -> tuple[list[dict], list[str]]:
    """The hits with every non-finite float written as None, and where each was (`hits[3].score`)."""
    found: list[str] = []
    cleaned = [_finite(hit, f"hits[{position}]", 1, found) for position, hit in enumerate(hits)]
    return cleaned, found


def _finite(value, where: str, depth: int, found: list[str]):
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        found.append(f"{where} {value!r}")
        return None
    if not isinstance(value, (dict, list, tuple)):
        return value
    if depth > MAX_HIT_DEPTH:
        raise SystemOutputError(f"{where} nests more than {MAX_HIT_DEPTH} levels deep", field=where)
    if isinstance(value, dict):
        return {key: _finite(item, f"{where}.{key}", depth + 1, found) for key, item in value.items()}
    return [_finite(item, f"{where}[{n}]", depth + 1, found) for n, item in enumerate(value)]
