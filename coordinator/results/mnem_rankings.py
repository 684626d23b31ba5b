"""mnem's published per-question LoCoMo rankings as a rankings file `memfarm score` takes.

mnem's LoCoMo harness (its `benchmarks/results/v0.1.0/jsonl/locomo-session.jsonl`)
writes one line per question it asked: `qid` is `<sample_id>#<n>` with `n` counting
the questions of all ten conversations together, `top5` the first five sessions
(`session_<N>`, each ranked by its best turn among the 50 turns retrieved), `gold`
the evidence sessions, `hit_at_5` / `hit_at_10` its verdicts. It asks a question
only when one of its evidence ids names a turn of the conversation exactly as
written (`D8:6; D9:17` names none), adversarial questions (category 5) included.

So the `k`-th line of a conversation is that conversation's `k`-th question
passing that rule: the conversion replays the rule on the dataset, needs no
other conversation, and checks every line's `gold` against the question it maps
to (a mismatch is an error naming the line). Lines of conversations the dataset
does not hold are left out, counted and read no further.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from adapters.errors import ResultsError
from adapters.benchmarks.locomo.reader import CATEGORIES, conversation_id
from coordinator.results.labels import run_label

_SESSION = re.compile(r"^session_(\d+)$")
_QID = re.compile(r"^(?P<sample>.+)#(?P<n>\d+)$")


def mnem_questions(conversation: dict, index: int) -> list[dict]:
    """The questions mnem's harness asks of one LoCoMo conversation, in order: (farm question id, category,
    mnem's gold sessions)."""
    body = conversation.get("conversation") or {}
    session_of: dict[str, str] = {}
    number = 1
    while f"session_{number}" in body:  # mnem walks session_1, session_2, ... until one is missing
        for turn in body[f"session_{number}"] or []:
            if isinstance(turn, dict) and turn.get("dia_id") and str(turn.get("text") or "").strip():
                session_of[turn["dia_id"]] = f"session_{number}"
        number += 1
    cid = conversation_id(conversation, index)
    asked = []
    for position, qa in enumerate(conversation.get("qa") or []):
        evidence = qa.get("evidence") or []
        gold = {session_of[e] for e in evidence if isinstance(e, str) and e in session_of}
        if gold:
            asked.append({"question_id": f"{cid}:q{position}", "category": qa.get("category"),
                          "gold": sorted(gold)})
    return asked


def read_mnem_lines(path: str | Path) -> dict[str, list[tuple[int, int, dict]]]:
    """mnem's lines by conversation: (its running number, the file's line number, the line), in running order."""
    by_sample: dict[str, list[tuple[int, int, dict]]] = defaultdict(list)
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ResultsError(f"{path}:{line_number}: not JSON ({exc.msg})") from None
            match = _QID.match(str(row.get("qid", ""))) if isinstance(row, dict) else None
            if not match or not isinstance(row.get("top5"), list) or not isinstance(row.get("gold"), list):
                raise ResultsError(f"{path}:{line_number}: expected qid '<sample_id>#<n>', a list top5 and a list gold")
            by_sample[match["sample"]].append((int(match["n"]), line_number, row))
    for rows in by_sample.values():
        rows.sort()
    return by_sample


def farm_session(session_key: str, path, line_number: int) -> str:
    match = _SESSION.match(str(session_key))
    if not match:
        raise ResultsError(f"{path}:{line_number}: session {session_key!r} is not session_<N>")
    return f"D{int(match[1])}"


def convert(mnem_path: str | Path, dataset_path: str | Path) -> tuple[list[dict], dict]:
    """(one `{question_id, ranked}` per mapped question, a report: mnem's own figures on those questions, per
    question what mnem said, and how many lines name conversations the dataset does not hold)."""
    conversations = json.loads(Path(dataset_path).read_text(encoding="utf-8"))
    by_sample = read_mnem_lines(mnem_path)
    rankings, questions = [], []
    used = set()
    for index, conversation in enumerate(conversations):
        cid = conversation_id(conversation, index)
        rows = by_sample.get(cid, [])
        asked = mnem_questions(conversation, index)
        if not rows:
            continue
        used.add(cid)
        if len(rows) != len(asked):
            raise ResultsError(f"{mnem_path}: conversation {cid} has {len(rows)} lines, but mnem's rule asks "
                               f"{len(asked)} of its questions in {dataset_path}: another version of the dataset?")
        for (_, line_number, row), question in zip(rows, asked):
            if sorted(row["gold"]) != question["gold"]:
                raise ResultsError(f"{mnem_path}:{line_number}: gold {sorted(row['gold'])} is not the gold "
                                   f"{question['gold']} of {question['question_id']} in {dataset_path}")
            ranked = [farm_session(s, mnem_path, line_number) for s in row["top5"]]
            rankings.append({"question_id": question["question_id"], "ranked": ranked})
            questions.append({"question_id": question["question_id"], "mnem_qid": row["qid"],
                              "category": question["category"],
                              "category_name": CATEGORIES.get(question["category"], str(question["category"])),
                              "mnem_category_name": row.get("qtype"), "mnem_gold": [farm_session(s, mnem_path, line_number)
                                                                                   for s in question["gold"]],
                              "top5": ranked, "hit_at_5": int(row.get("hit_at_5", 0)),
                              "hit_at_10": int(row.get("hit_at_10", 0))})
    left_out = sum(len(rows) for sample, rows in by_sample.items() if sample not in used)
    return rankings, {"questions": questions, "left_out_lines": left_out,
                      "figures": mnem_figures(questions)}


def mnem_figures(questions: list[dict]) -> list[dict]:
    """mnem's R@5 / R@10 on the mapped questions, two ways: from its own hit flags, and R@5 recomputed from its
    top-5 against its gold; all of them (as mnem counts) and without category 5 (as the farm counts)."""
    rows = []
    for scope, chosen in (("as mnem counts (adversarial included)", questions),
                          ("without category 5 (adversarial)", [q for q in questions if q["category"] != 5])):
        n = len(chosen)
        recomputed = sum(1 for q in chosen if set(q["top5"]) & set(q["mnem_gold"]))
        rows.append({"questions": scope, "n": n,
                     "recall_at_5_flags": round(sum(q["hit_at_5"] for q in chosen) / n, 4) if n else None,
                     "recall_at_5_from_top5": round(recomputed / n, 4) if n else None,
                     "recall_at_10_flags": round(sum(q["hit_at_10"] for q in chosen) / n, 4) if n else None})
    return rows


#: A session whose best turn scores within this cosine of the fifth session's changes place at the least nudge.
NEAR_TIE = 0.01


def reconcile(report: dict, scored: dict, run: dict, locomo: list[dict]) -> dict:
    """Question by question: mnem's published top 5 (`report` from `convert`, `scored` from `memfarm score` on the
    converted file) against the farm's own mnem run (`run`, a results file of the same dataset), with a reason
    for every question whose session hit@5 differs."""
    from coordinator.results.compare import paired

    published = {q["question_id"]: q for q in report["questions"]}
    farm_scored = {r["question_id"]: r for r in scored["records"]}
    ran = {r["question_id"]: r for r in run["records"]}
    captions = _caption_turns(locomo)

    def evaluable(record):
        return record is not None and record.get("status", "ok") == "ok" and record.get("metrics")

    mnem_ids = set(published)
    farm_ids = {q for q, r in farm_scored.items() if evaluable(r)}
    both = sorted(mnem_ids & farm_ids)
    same_gold = [q for q in both if sorted(published[q]["mnem_gold"]) == sorted(farm_scored[q]["expected_ids"])]
    reproduced = [q for q in same_gold
                  if published[q]["hit_at_5"] == farm_scored[q]["metrics"]["session"]["recall_any@5"]]
    sets = [{"set": "questions mnem asks in the development conversations", "n": len(mnem_ids)},
            {"set": "of those, category 5 (adversarial): mnem scores them, the farm counts them as abstentions",
             "n": sum(1 for q in mnem_ids if published[q]["category"] == 5)},
            {"set": "questions the farm evaluates", "n": len(farm_ids)},
            {"set": "farm-evaluable questions mnem never asks (evidence written as 'D:11:26', 'D8:6; D9:17')",
             "n": len(farm_ids - mnem_ids)},
            {"set": "mnem asks, the farm excludes, not adversarial",
             "n": sum(1 for q in mnem_ids - farm_ids if published[q]["category"] != 5)},
            {"set": "both evaluate", "n": len(both)},
            {"set": "both evaluate, with the same gold sessions", "n": len(same_gold)},
            {"set": "same gold, memfarm score's session hit@5 equals mnem's hit_at_5", "n": len(reproduced)}]
    pub_hit = {q: float(published[q]["hit_at_5"]) for q in both}
    run_hit = {q: (ran[q]["metrics"]["session"]["recall_any@5"] if evaluable(ran.get(q)) else None) for q in both}
    farm_pub_hit = {q: farm_scored[q]["metrics"]["session"]["recall_any@5"] for q in both}
    comparison = paired(farm_pub_hit, run_hit, hit_or_miss=True)
    differences = []
    for q in both:
        if run_hit[q] is None or run_hit[q] == farm_pub_hit[q]:
            continue
        differences.append({"question_id": q, "published_hit_at_5": int(farm_pub_hit[q]), "run_hit_at_5": int(run_hit[q]),
                            "published_top5": " ".join(published[q]["top5"]),
                            "run_top5": " ".join(_sessions(ran[q])[:5]), "gold": " ".join(farm_scored[q]["expected_ids"]),
                            **_reason(ran[q], farm_scored[q]["expected_ids"], published[q]["top5"], captions)})
    reasons: dict[str, int] = {}
    for row in differences:
        reasons[row["reason"]] = reasons.get(row["reason"], 0) + 1
    top5_same = sum(1 for q in both if evaluable(ran.get(q)) and _sessions(ran[q])[:5] == published[q]["top5"])
    return {"run": {"file": run.get("_path"), "retrieval_mode": (run.get("settings_system") or {}).get("retrieval_mode"),
                    "items": sorted({r["item_id"] for r in run["records"]}),
                    "questions_compared": comparison["n"]},
            "question_sets": sets, "mnem_figures": report["figures"],
            "published_vs_run": [{"ranking": "published (mnem's file, memfarm score)", "n": comparison["n"],
                                  "session_recall_any_5": _mean(comparison["baseline_value"])},
                                 {"ranking": f"farm run, {run_label(run.get('system'), run.get('retrieval_mode'))}",
                                  "n": comparison["n"],
                                  "session_recall_any_5": _mean(comparison["system_value"])}],
            "paired": {"n": comparison["n"], "delta": _mean(comparison["delta"]),
                       "ci95_low": _mean((comparison["ci95"] or [None])[0]),
                       "ci95_high": _mean((comparison["ci95"] or [None, None])[1]),
                       "p_value": comparison["p_value"], "test": comparison["test"],
                       "run_wins": comparison["wins"]["count"], "run_losses": comparison["losses"]["count"],
                       "same_top5_order": top5_same, "same_hit": comparison["ties"]["count"]},
            "difference_reasons": [{"reason": k, "questions": v} for k, v in sorted(reasons.items())],
            "differences": differences}


def _mean(value):
    return None if value is None else round(float(value), 4)


def _sessions(record: dict) -> list[str]:
    return list(dict.fromkeys(c["metadata"]["session_id"] for c in record.get("candidates", [])))


def _session_scores(record: dict) -> dict[str, float]:
    best: dict[str, float] = {}
    for c in record.get("candidates", []):
        sid = c["metadata"]["session_id"]
        best.setdefault(sid, float(c["score"]))
    return best


def _caption_turns(locomo: list[dict]) -> set[tuple[str, str]]:
    """(conversation, dia_id) of every turn that shares a photo: the farm's text adds the caption, mnem's does not."""
    turns = set()
    for index, conversation in enumerate(locomo):
        cid = conversation_id(conversation, index)
        for key, value in (conversation.get("conversation") or {}).items():
            if _SESSION.match(key) and isinstance(value, list):
                turns |= {(cid, t.get("dia_id")) for t in value if isinstance(t, dict) and t.get("blip_caption")}
    return turns


def _reason(record: dict, gold: list[str], published_top5: list[str], captions: set) -> dict:
    """Why the run's hit@5 differs from the published one, from what the run shows: a photo turn in a session either
    ranking puts first (the farm's text carries the caption, mnem's does not), its score margin at the fifth session,
    the depth of its turn list."""
    scores = _session_scores(record)
    order = list(scores)
    cid = record["item_id"]
    fifth = scores[order[4]] if len(order) >= 5 else None
    sixth = scores[order[5]] if len(order) >= 6 else None
    best_gold = max((scores[g] for g in gold if g in scores), default=None)
    margin = None
    if fifth is not None and best_gold is not None:
        boundary = sixth if best_gold >= fifth else fifth
        margin = round(abs(best_gold - boundary), 4) if boundary is not None else None
    contested = set(order[:5]) | set(published_top5) | set(gold)
    captioned = any(c["metadata"].get("caption") or (cid, c["metadata"].get("turn_id")) in captions
                    for c in record.get("candidates", []) if c["metadata"]["session_id"] in contested)
    if captioned:
        reason = ("a photo turn in a contested session: the farm's text of it carries the photo's caption, "
                  "mnem's does not, so its vector differs")
    elif best_gold is None:
        reason = "a gold session is beyond the run's 50 turns (depth of the turn list)"
    elif margin is not None and margin < NEAR_TIE:
        reason = f"near tie at the fifth session (cosine margin under {NEAR_TIE})"
    else:
        reason = "no caption, no tie and no depth difference seen in the run"
    return {"reason": reason, "margin_at_fifth": margin}
