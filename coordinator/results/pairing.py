"""Do two results files pair? One rule, asked by `analyze --compare`, `compare` and the board.

Two runs' numbers line up question by question only where the runs asked the same questions of the same
data and scored them the same way. So two files pair where they agree on every one of `PAIRING`: the
benchmark, the dataset (its checksum), the scoring profile, the corpus the system was given (the profile
whose corpus it was: another profile's numbers on that corpus are not that profile's own) and the set of
question ids. `compare` checks besides that the paired questions hold the same gold.
"""

from __future__ import annotations

import hashlib
import json

#: What two results files must agree on to pair, in the order a reader checks.
PAIRING = ("benchmark", "dataset checksum", "scoring profile", "corpus", "question set")


def question_set(ids: list[str]) -> str:
    """The digest of a set of question ids, of the ids as one JSON list: joined by newlines, `a`, `b` and
    `a\\nb` would share one and their runs be paired."""
    return hashlib.sha256(json.dumps(sorted(ids)).encode()).hexdigest()


def pairing_of(results: dict) -> dict:
    """What `results` (a results file as read) says of each of `PAIRING`: the benchmark's key (its title in a
    file without one), the dataset checksum, the scoring profile, the corpus (the profile's own in a file
    written before files named it) and the digest of its question ids."""
    records = results.get("records") if isinstance(results.get("records"), list) else []
    return {"benchmark": results.get("benchmark_key") or results.get("benchmark"),
            "dataset checksum": results.get("dataset_checksum"),
            "scoring profile": results.get("scoring_profile"),
            "corpus": results.get("corpus") or results.get("scoring_profile"),
            "question set": question_set([str(r.get("question_id")) for r in records if isinstance(r, dict)])}


def differences(mine: dict, theirs: dict) -> list[tuple[str, object, object]]:
    """Where two files' pairings (`pairing_of`) disagree, as (what, mine, theirs) in the order of `PAIRING`;
    empty where the files pair."""
    return [(name, mine[name], theirs[name]) for name in PAIRING if mine[name] != theirs[name]]
