"""Is a results file what it says it is? Checked before any verdict is drawn from it.

`compare` pairs questions across files and believes their per-question
metrics; a file edited by hand, damaged, or written by something else could
make it print a wrong verdict. `check_results` refuses such a file, naming
the file, the question and the field:

- every record has a question id of its own (a repeated id would let one
  copy silently win) and a known status; a failed record carries no metrics;
- the header agrees with the records: `complete`, `failed`, `question_count`
  and the failure summary are worked out again from the records;
- every metric value is a finite number in [0, 1] under a known name;
- a question left unscored (null metrics) says why: an abstention, an
  exclusion, or a judged record;
- a judged record's judgement is whole and agrees with itself (passed
  exactly where nothing expected is missing and nothing forbidden found), and
  the header's support (queries, passed, stale hits, pass rate) is worked out
  again from those judgements: the board shows these numbers as they stand;
- the header's mean metrics, which the board shows beside the paired ones,
  are finite numbers in [0, 1] under known names;
- what can be recomputed from the record's own ranking and gold with the
  project's metric code is recomputed and must agree: each profile says what
  (`ScoringProfile.recheck`; the expected-text one: session metrics always,
  turn metrics where the record's gold is its own; the official one: recall
  at both levels from a turn ranking, and an nDCG non-zero exactly where a
  gold id is in the top k).

A record that could be checked against its ranking but holds none is refused:
a file stripped of its rankings would otherwise pass unchecked.
"""

from __future__ import annotations

import math
import re

from adapters import metrics as m
from adapters.errors import ResultsError
from adapters.records import STATUSES, is_ok, status_of
from coordinator.results import summary
from coordinator.results.failures import failure_summary
from adapters.profiles import PROFILES, TOLERANCE, Scored, profile_name

LEVELS = ("session", "turn")
_KEY = re.compile(r"^([a-z_]+)@([1-9][0-9]{0,5})$")


def check_results(results: dict) -> None:
    """Refuse `results` (a loaded results file) where it contradicts itself; see the module's docstring."""
    path = results.get("_path") or "results file"
    records = results.get("records")
    if not isinstance(records, list):
        raise ResultsError(f"{path}: field records is not a list")
    seen: dict[str, int] = {}
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise ResultsError(f"{path}: record {index}: not an object")
        qid = record.get("question_id")
        if not isinstance(qid, str) or not qid:
            raise ResultsError(f"{path}: record {index}: field question_id is {qid!r}, not a non-empty string")
        if qid in seen:
            raise ResultsError(f"{path}: question {qid}: listed twice (records {seen[qid]} and {index}); "
                               "which copy counts is not the file's to leave open")
        seen[qid] = index
        if status_of(record) not in STATUSES:
            raise ResultsError(f"{path}: question {qid}: field status is {record.get('status')!r}, "
                               f"not one of {', '.join(STATUSES)}")
    _check_header(results, path, records)
    _check_tuning(results.get("tuning"), path)
    profile = profile_name(results.get("scoring_profile"))
    judged_only = bool(records) and all(r.get("judgement") is not None for r in records)
    # a run judged by substrings has no scoring profile: none of its records holds metrics to score
    if profile not in PROFILES and not (profile is None and judged_only):
        raise ResultsError(f"{path}: field scoring_profile is {profile!r}, not one of {', '.join(PROFILES)}")
    for record in records:
        _check_record(record, path, profile)
    _check_means(results, path, records)


#: The `tuning` block's fields (`optimize.tuning_record` writes them): name -> (required, test of its value, what it
#: must be). Every reader of the block (the run's table, analyze, compare, the board, bench systems) reads these.
_TUNING_FIELDS = {
    "weights_file": (True, lambda v: isinstance(v, str), "a text"),
    "tuned_on_this_data": (True, lambda v: type(v) is bool, "true or false"),
    "tuned_on": (False, lambda v: v is None or isinstance(v, dict), "an object or null"),
    "label": (False, lambda v: v is None or isinstance(v, str), "a text or null"),
    "items_tuned_on": (False, lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v),
                       "a list of texts"),
}


def _check_tuning(tuning, path: str) -> None:
    """The run's `tuning` block: null, or an object whose every field `_TUNING_FIELDS` names is of its type."""
    if tuning is None:
        return
    if not isinstance(tuning, dict):
        raise ResultsError(f"{path}: field tuning is {type(tuning).__name__}, not an object or null")
    for name, (required, test, said) in _TUNING_FIELDS.items():
        if name not in tuning:
            if required:
                raise ResultsError(f"{path}: field tuning.{name} is missing")
            continue
        if not test(tuning[name]):
            raise ResultsError(f"{path}: field tuning.{name} is {_said(tuning[name])}, not {said}")


def _said(value) -> str:
    """A value as a message names it, cut short (a hostile file's value may be long)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_header(results: dict, path: str, records: list[dict]) -> None:
    failed = [r for r in records if not is_ok(r)]
    if "complete" in results and results["complete"] is not (not failed):
        raise ResultsError(f"{path}: field complete is {results['complete']!r} but {len(failed)} of its "
                           f"{len(records)} records failed")
    for field, count in (("failed", len(failed)), ("question_count", len(records))):
        if field in results and (type(results[field]) is not int or results[field] != count):
            raise ResultsError(f"{path}: field {field} is {results[field]!r} but the records make it {count}")
    if results.get("failures") is not None:
        recomputed = failure_summary(records, results.get("benchmark_key"))
        if results["failures"] != recomputed:
            raise ResultsError(f"{path}: field failures does not match the failed records "
                               f"(they make it {recomputed['items']} items: "
                               f"{', '.join(recomputed['item_ids'][:5]) or 'none'})")
    _check_summary(results.get("metrics"), path, records)


def _check_summary(summary, path: str, records: list[dict]) -> None:
    """The header's means (`metrics.all`, `metrics.by_*`): finite numbers in [0, 1], and the support of judged
    records exactly what the records' judgements give."""
    if summary is None:
        return
    if not isinstance(summary, dict) or not isinstance(summary.get("all"), dict):
        raise ResultsError(f"{path}: field metrics is not an object with an 'all' block")
    blocks = [("metrics.all", summary["all"])]
    for key, groups in summary.items():
        if key.startswith("by_"):
            if not isinstance(groups, dict) or not all(isinstance(b, dict) for b in groups.values()):
                raise ResultsError(f"{path}: field metrics.{key} is not an object of blocks")
            blocks += [(f"metrics.{key}.{name}", block) for name, block in groups.items()]
    for where, block in blocks:
        _check_block({level: block.get(level) for level in LEVELS}, f"{path}: field {where}")
        if "support" in block:
            _check_support(block["support"], f"{path}: field {where}.support")
    for record in records:
        if record.get("judgement") is not None:
            where = f"{path}: question {record['question_id']}: field judgement"
            _check_judgement(record["judgement"], where)
    judged = [r["judgement"] for r in records if is_ok(r) and r.get("judgement")]
    given = summary["all"].get("support")
    if judged or given is not None:
        recomputed = _support(judged) if judged else None
        if given != recomputed:
            raise ResultsError(f"{path}: field metrics.all.support is {given!r} but the judged records make "
                               f"it {recomputed!r}")


#: Fields of the header's means that every reader reads: a header without them is refused, not read as empty.
_MEANS_REQUIRED = ("all", "evaluable")


def _check_means(results: dict, path: str, records: list[dict]) -> None:
    """The header's counts, and every mean, denominator and ceiling of `metrics` and of each `metrics_by_profile`
    block, computed again from the records by the functions the reducer wrote them with (`summary`); a value the
    records do not give, or give otherwise, is refused naming the field and both values. A field the header leaves
    out (an older file's turn ceiling) is shown by no reader, but the means' denominators are never left out."""
    profile = results.get("scoring_profile")
    for field, count in summary.counts(records, profile).items():
        if field in results and (type(results[field]) is not int or results[field] != count):
            raise ResultsError(f"{path}: field {field} is {_said(results[field])} but the records make it {count}")
    if results.get("metrics") is not None:
        recomputed = summary.summarize(records, _group_key(results["metrics"]))
        _agrees(results["metrics"], recomputed, f"{path}: field metrics")
    blocks = results.get("metrics_by_profile")
    if blocks is None:
        return
    if not isinstance(blocks, dict) or not all(isinstance(b, dict) for b in blocks.values()):
        raise ResultsError(f"{path}: field metrics_by_profile is not an object of blocks")
    shared = summary.shares_corpus(results.get("benchmark_key"))
    for name, block in blocks.items():
        recomputed = {"own_corpus": shared or name == profile, "corpus": profile,
                      **summary.summarize(records, _group_key(block), name)}
        _agrees(block, recomputed, f"{path}: field metrics_by_profile.{name}")


def _group_key(block: dict) -> str:
    """The fields a header's block groups its records by (`by_question_type`, ...), as the reducer is given them."""
    return ",".join(key[3:] for key in block if isinstance(key, str) and key.startswith("by_"))


def _agrees(given, recomputed, where: str) -> None:
    """`given` (the header's) holds only what `recomputed` (the records') holds, each number within `TOLERANCE`."""
    if isinstance(recomputed, dict):
        if not isinstance(given, dict):
            raise ResultsError(f"{where} is {_said(given)} but the records make it an object")
        for key, value in given.items():
            if key not in recomputed:
                raise ResultsError(f"{where}.{key} is {_said(value)} but the records give no such field")
            _agrees(value, recomputed[key], f"{where}.{key}")
        missing = [key for key in _MEANS_REQUIRED if key in recomputed and key not in given]
        if missing:
            raise ResultsError(f"{where}.{missing[0]} is missing; the records make it {_said(recomputed[missing[0]])}")
        if where.endswith(".evaluable") and given.keys() != recomputed.keys():
            raise ResultsError(f"{where} is {_said(given)} but the records make it {_said(recomputed)}")
        return
    numbers = all(type(v) in (int, float) for v in (given, recomputed))
    if not (abs(given - recomputed) <= TOLERANCE if numbers else type(given) is type(recomputed)
            and given == recomputed):
        raise ResultsError(f"{where} is {_said(given)} but the records make it {recomputed!r}")


def _check_support(support, where: str) -> None:
    """Counts that are whole numbers no larger than the queries, and the pass rate that they give."""
    if not isinstance(support, dict):
        raise ResultsError(f"{where}: not an object")
    for key in ("queries", "passed", "stale_hits"):
        value = support.get(key)
        if type(value) is not int or value < 0:
            raise ResultsError(f"{where}.{key}: {value!r} is not a count (a whole number, 0 or more)")
    for key in ("passed", "stale_hits"):
        if support[key] > support["queries"]:
            raise ResultsError(f"{where}.{key}: {support[key]} is more than its {support['queries']} queries")
    rate = support.get("pass_rate")
    expected = support["passed"] / support["queries"] if support["queries"] else None
    if rate is None and expected is None:
        return
    if type(rate) not in (int, float) or not math.isfinite(rate) or expected is None \
            or abs(rate - expected) > TOLERANCE:
        raise ResultsError(f"{where}.pass_rate: {rate!r} is not passed over queries "
                           f"({support['passed']}/{support['queries']})")


def _check_judgement(judgement, where: str) -> None:
    """{passed, missing, forbidden_found}: passed exactly where no expected text is missing and no forbidden
    text was found."""
    if not isinstance(judgement, dict):
        raise ResultsError(f"{where}: not an object")
    for key in ("missing", "forbidden_found"):
        value = judgement.get(key)
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise ResultsError(f"{where}.{key}: not a list of texts")
    passed = judgement.get("passed")
    if type(passed) is not bool:
        raise ResultsError(f"{where}.passed: {passed!r} is not true or false")
    if passed != (not judgement["missing"] and not judgement["forbidden_found"]):
        raise ResultsError(f"{where}.passed: {passed!r} contradicts its missing and forbidden_found texts")


def _support(judged: list[dict]) -> dict:
    """The support the reducer writes for these judgements (`reducer._support`), counted again."""
    passed = sum(j["passed"] for j in judged)
    stale = sum(1 for j in judged if j["forbidden_found"])
    return {"queries": len(judged), "passed": passed, "stale_hits": stale, "pass_rate": passed / len(judged)}


def _check_record(record: dict, path: str, profile: str | None) -> None:
    qid = record["question_id"]
    where = f"{path}: question {qid}"
    if not is_ok(record):
        if record.get("metrics") is not None:
            raise ResultsError(f"{where}: field metrics is set on a failed record")
        return
    stored = record.get("metrics")
    _check_block(stored, f"{where}: field metrics")
    by_profile = record.get("metrics_by_profile")
    if by_profile is not None:
        if not isinstance(by_profile, dict):
            raise ResultsError(f"{where}: field metrics_by_profile is not an object")
        for name, block in by_profile.items():
            _check_block(block, f"{where}: field metrics_by_profile.{name}")
        if profile in by_profile and by_profile[profile] != stored:
            raise ResultsError(f"{where}: field metrics differs from metrics_by_profile.{profile}, "
                               "the file's own scoring profile")
    if stored is None:
        if not (record.get("abstention") or record.get("excluded") or record.get("judgement")):
            raise ResultsError(f"{where}: field metrics is null but the question is no abstention, "
                               "exclusion or judged query; a question cannot leave the pairs unexplained")
        return
    ranking, kept, level = _ranking(record, where)
    ks = _ks(stored, by_profile)
    gold = record.get("gold")
    if not isinstance(gold, dict) or not all(isinstance(gold.get(k), list) for k in ("sessions", "turns")):
        raise ResultsError(f"{where}: field gold is missing or malformed; its metrics cannot be checked")
    blocks = {**(by_profile or {}), profile: stored}
    for name, spec in PROFILES.items():  # a profile this version does not know is not checked against its ranking
        if blocks.get(name) is None:
            continue
        field = "metrics" if name == profile else f"metrics_by_profile.{name}"
        spec.recheck(blocks[name], Scored(spec.read(ranking, kept), not ranking, level, gold, name == profile, ks),
                     f"{where}: field {field}")


def _check_block(block, where: str) -> None:
    """A metrics block: null, or {level: null | {NAME@K: number in [0, 1]}}."""
    if block is None:
        return
    if not isinstance(block, dict) or set(block) - set(LEVELS):
        raise ResultsError(f"{where}: not an object of session and turn metrics")
    for level, values in block.items():
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ResultsError(f"{where}.{level}: not an object")
        for key, value in values.items():
            match = _KEY.match(key) if isinstance(key, str) else None
            if not match or match.group(1) not in m.METRIC_NAMES:
                raise ResultsError(f"{where}.{level}: unknown metric {key!r}")
            if type(value) not in (int, float) or not math.isfinite(value) or not 0 <= value <= 1:
                raise ResultsError(f"{where}.{level}.{key}: {value!r} is not a number in [0, 1]")


def _ks(stored: dict, by_profile: dict | None) -> tuple[int, ...]:
    """Every k a metric of the record is stored at (blocks already checked)."""
    blocks = [stored] + [b for b in (by_profile or {}).values() if b]
    return tuple(sorted({int(key.partition("@")[2]) for block in blocks for values in block.values() if values
                         for key in values}))


def _ranking(record: dict, where: str) -> tuple[list[dict], int, str]:
    """The record's whole ranking as native ids (`ranking` where it was kept past the candidates), how many of
    them are the kept candidates, and its level."""
    candidates = record.get("candidates")
    if not isinstance(candidates, list) or not all(isinstance(c, dict) and isinstance(c.get("metadata"), dict)
                                                   for c in candidates):
        raise ResultsError(f"{where}: field candidates is missing or malformed; its metrics cannot be checked")
    ids = [c["metadata"] for c in candidates]
    # a ranking of turns carries turn ids; an empty one is read as turns, whose metrics are all 0 or null
    level = "turn" if any(i.get("turn_id") for i in ids) or not ids else "session"
    whole = record.get("ranking")
    if whole is not None:
        if not isinstance(whole, list) or not all(isinstance(t, str) for t in whole):
            raise ResultsError(f"{where}: field ranking is not a list of turn ids")
        if [i.get("turn_id") for i in ids] != whole[:len(ids)]:
            raise ResultsError(f"{where}: field ranking does not begin with the candidates")
        ids = ids + [{"turn_id": t, "session_id": t.rpartition("#")[0]} for t in whole[len(ids):]]
        level = "turn"
    for i in ids:
        if not isinstance(i.get("session_id"), str) or (level == "turn" and not isinstance(i.get("turn_id"), str)):
            raise ResultsError(f"{where}: field candidates: a candidate without its native ids")
    return ids, len(candidates), level
