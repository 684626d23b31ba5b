"""Do two results files pair? One rule, asked by `analyze --compare`, `compare` and the board.

Two runs' numbers line up question by question only where the runs asked the same questions of the same
data and scored them the same way. So two files pair where they agree on every one of `PAIRING`: the
benchmark, the dataset (its checksum), the scoring profile, the corpus the system was given (the profile
whose corpus it was: another profile's numbers on that corpus are not that profile's own) and the set of
question ids. `compare` checks besides that the paired questions hold the same gold.

Which questions are abstentions and which are excluded is the dataset's to decide (under the rules of the profile
whose corpus the run was given, which may count them otherwise), not the run's: two files of one dataset and corpus
that disagree on it contradict each other, and a file that could mark its misses excluded would choose which
questions are compared. `refuse_contradictions` refuses them, naming the questions, wherever files are lined up
(`compare`, `analyze --compare`, the board's grouping), whether or not they pair.
"""

from __future__ import annotations

import hashlib
import json

from adapters.errors import ResultsError
from adapters.records import is_ok

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


#: What the dataset decides of a question, in the words a message uses.
ABSTENTION, EXCLUDED, SCORED = "an abstention", "excluded", "neither abstention nor excluded"
#: Questions a message names at most.
_NAMED = 5


def decisions(results: dict) -> dict[str, str]:
    """{question id: what the dataset decided of it} for every evaluated record of `results` (a failed one says
    nothing of its question): `ABSTENTION`, `EXCLUDED` or `SCORED`."""
    records = results.get("records") if isinstance(results.get("records"), list) else []
    return {str(r.get("question_id")): ABSTENTION if r.get("abstention") else EXCLUDED if r.get("excluded")
            else SCORED for r in records if isinstance(r, dict) and is_ok(r)}


def refuse_contradictions(files: list[tuple[str, dict, dict[str, str]]]) -> None:
    """Refuse files of one dataset that disagree on a question's abstention or exclusion: `files` are (path,
    `pairing_of`, `decisions`); each file is held against the first of its dataset (benchmark and checksum) and
    corpus (the profile whose rules decided), and the first disagreement is said in one line naming both files and
    the questions."""
    first: dict[tuple, tuple[str, dict[str, str]]] = {}
    for path, paired, decided in files:
        dataset = (paired["benchmark"], paired["dataset checksum"], paired["corpus"])
        if dataset not in first:
            first[dataset] = (path, decided)
            continue
        there, theirs = first[dataset]
        differ = sorted(q for q in decided.keys() & theirs.keys() if decided[q] != theirs[q])
        if differ:
            named = "; ".join(f"question {q} is {decided[q]} here, {theirs[q]} there" for q in differ[:_NAMED])
            more = " ..." if len(differ) > _NAMED else ""
            raise ResultsError(f"{path}: {len(differ)} question(s) decided otherwise than in {there}, a file of "
                               f"the same dataset and corpus ({named}{more}); which questions are abstentions or "
                               "excluded is the dataset's to decide, not the run's")


def views(files: list[dict]) -> list[tuple[str, dict, dict[str, str]]]:
    """What `refuse_contradictions` reads of results files as read."""
    return [(str(f.get("_path")), pairing_of(f), decisions(f)) for f in files]
