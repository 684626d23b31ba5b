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
  project's metric code is recomputed and must agree: every expected-text
  metric (session metrics always, turn metrics where the record's gold is
  the expected-text gold), and under the official profile recall_any and
  recall_all at both levels from a turn ranking; an official nDCG is non-zero
  exactly where a gold id is in the top k (its ideal counts repeats of the
  corpus that the record does not keep).

A record that could be checked against its ranking but holds none is refused:
a file stripped of its rankings would otherwise pass unchecked.
"""

from __future__ import annotations

import math
import re

from adapters import metrics as m
from adapters.benchmarks.longmemeval import official
from adapters.defaults import (EXPECTED_TEXT_PROFILE, OFFICIAL_PROFILE, REALMEM_PROFILE, SCORING_PROFILES,
                               profile_name)
from adapters.errors import ResultsError
from coordinator.running.reducer import failure_summary

#: Two computations of one metric agree to this much (a float written to JSON and read back is exact).
TOLERANCE = 1e-9
STATUSES = ("ok", "failed")
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
        if record.get("status", "ok") not in STATUSES:
            raise ResultsError(f"{path}: question {qid}: field status is {record.get('status')!r}, "
                               f"not one of {', '.join(STATUSES)}")
    _check_header(results, path, records)
    profile = profile_name(results.get("scoring_profile"))
    judged_only = bool(records) and all(r.get("judgement") is not None for r in records)
    # a run judged by substrings has no scoring profile: none of its records holds metrics to score
    if profile not in SCORING_PROFILES and not (profile is None and judged_only):
        raise ResultsError(f"{path}: field scoring_profile is {profile!r}, not one of {', '.join(SCORING_PROFILES)}")
    for record in records:
        _check_record(record, path, profile)


def _check_header(results: dict, path: str, records: list[dict]) -> None:
    failed = [r for r in records if r.get("status", "ok") != "ok"]
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
    judged = [r["judgement"] for r in records if r.get("status", "ok") == "ok" and r.get("judgement")]
    given = summary["all"].get("support")
    if judged or given is not None:
        recomputed = _support(judged) if judged else None
        if given != recomputed:
            raise ResultsError(f"{path}: field metrics.all.support is {given!r} but the judged records make "
                               f"it {recomputed!r}")


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
    if record.get("status", "ok") != "ok":
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
    if blocks.get(EXPECTED_TEXT_PROFILE) is not None:
        field = "metrics" if profile == EXPECTED_TEXT_PROFILE else f"metrics_by_profile.{EXPECTED_TEXT_PROFILE}"
        # an empty ranking may have been of sessions, whose turn metrics are null: null is not refused there
        _agree(blocks[EXPECTED_TEXT_PROFILE], _expected_text(ranking[:kept], level, gold, profile, ks),
               f"{where}: field {field}", partial=not ranking)
    if blocks.get(REALMEM_PROFILE) is not None:  # RealMem's gold is the record's own under both its profiles
        field = "metrics" if profile == REALMEM_PROFILE else f"metrics_by_profile.{REALMEM_PROFILE}"
        _agree(blocks[REALMEM_PROFILE], m.realmem_profile(ranking[:kept], {**gold, "scored": True}, level, ks),
               f"{where}: field {field}", partial=not ranking)
    if blocks.get(OFFICIAL_PROFILE) is not None and level == "turn" and profile == OFFICIAL_PROFILE:
        field = "metrics"
        _agree(blocks[OFFICIAL_PROFILE], _official_recalls(ranking, gold, ks), f"{where}: field {field}")
        _check_official_ndcg(blocks[OFFICIAL_PROFILE], ranking, gold, f"{where}: field {field}")


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


def _expected_text(head: list[dict], level: str, gold: dict, profile: str | None, ks) -> dict:
    """The expected-text metrics of the kept candidates (the head of the ranking that profile reads)."""
    sessions = gold["sessions"]
    if level == "turn":
        session_ranking = m.sessions_of([r["turn_id"] for r in head], {r["turn_id"]: r["session_id"] for r in head})
    else:
        session_ranking = [r["session_id"] for r in head]
    out = {"session": m.level_metrics(session_ranking, sessions, ks)}
    # under the official profile the record's turn gold is the official one: only session metrics are the
    # expected-text profile's own there
    if level == "session":
        out["turn"] = None
    elif profile == EXPECTED_TEXT_PROFILE:
        turns = gold["turns"]
        out["turn"] = m.level_metrics([r["turn_id"] for r in head], turns, ks) if turns else None
    return out


def _official_ids(ranking: list[dict], gold_turns: set[str]) -> list[str]:
    """Official ids of a turn ranking: `<session>_<n>`, evidence turns outside the gold marked `noans`."""
    out = []
    for r in ranking:
        sid, _, index = r["turn_id"].rpartition("#")
        if not index.isdigit():
            continue
        out.append(official.turn_id(sid, int(index), r["turn_id"] in gold_turns))
    return out


def _official_recalls(ranking: list[dict], gold: dict, ks) -> dict:
    """recall_any and recall_all of the official profile at both levels, from the turn ranking and turn gold."""
    gold_turns = set(gold["turns"])
    ids = _official_ids(ranking, gold_turns)
    gold_ids = {official.turn_id(t.rpartition("#")[0], int(t.rpartition("#")[2]), True)
                for t in gold_turns if t.rpartition("#")[2].isdigit()}
    # ndcg values cannot be recomputed here; the recalls do not depend on the ideal or the corpus size
    turn = official.flat_metrics(ids, gold_ids, 0, ks)
    session = official.turn_to_session_metrics(ids, gold_ids, 0, len(ids), ks)
    return {"session": _recalls(session), "turn": _recalls(turn)}


def _recalls(values: dict) -> dict:
    return {k: v for k, v in values.items() if not k.startswith("ndcg")}


def _check_official_ndcg(block: dict, ranking: list[dict], gold: dict, where: str) -> None:
    """An official nDCG@k is above 0 exactly where a gold id is in the top k (recall_any@k is 1)."""
    for level in LEVELS:
        values = block.get(level) or {}
        for key, value in values.items():
            name, _, k = key.partition("@")
            hit = values.get(f"recall_any@{k}")
            if name == "ndcg_any" and hit is not None and (value > 0) != (hit == 1):
                raise ResultsError(f"{where}.{level}.{key}: {value!r} disagrees with recall_any@{k} {hit!r} "
                                   "(a gold id in the top k gives a positive nDCG, none gives 0)")


def _agree(stored: dict, recomputed: dict, where: str, partial: bool = False) -> None:
    """Every stored value that was recomputed must equal it; `partial`: only some metrics were."""
    for level, values in recomputed.items():
        mine = stored.get(level)
        if values is None or mine is None:
            if (values is None) != (mine is None) and not partial:
                raise ResultsError(f"{where}.{level}: stored {'null' if mine is None else 'metrics'} but the "
                                   f"record's ranking and gold give {'null' if values is None else 'metrics'}")
            continue
        for key, value in mine.items():
            if key in values and abs(values[key] - value) > TOLERANCE:
                raise ResultsError(f"{where}.{level}.{key}: stored {value!r}, but the record's own ranking and gold "
                                   f"give {values[key]!r}")
