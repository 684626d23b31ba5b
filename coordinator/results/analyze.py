"""The analyzer: reads result files only (never a memory system, never a model).

Every function takes parsed results and returns plain data; `render_*`
functions turn that data into text. Rates always carry their denominator.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from pathlib import Path

from adapters.defaults import K_VALUES
from adapters.errors import ResultsError
from adapters.percentile import percentile
from adapters.records import is_ok
from adapters.terminal import printable as shown
from coordinator.results import pairing
from coordinator.results.measures_table import MEASURES_NOTE, cell, render_rows, row_of
from coordinator.results.report import METRIC_ORDER, headline_lines, tuning_lines
from coordinator.results.run_files import ResultsFile

RANK_BUCKETS = ((1, 1), (2, 3), (4, 5), (6, 10), (11, 30), (31, 50))
COMPARE_K = (1, 3, 5, 10)


def under_profile(results: dict, profile: str | None) -> dict:
    """The results as they read under another scoring profile (None: as written).

    Every record's `metrics` and the summary become that profile's; `corpus`
    keeps the profile whose corpus the run gave its system, so that numbers
    computed on different corpora are never lined up unawares.
    """
    results = {**results, "corpus": results.get("corpus") or results.get("scoring_profile")}
    if profile is None or profile == results.get("scoring_profile"):
        return results
    blocks = results.get("metrics_by_profile") or {}
    if profile not in blocks:
        raise ResultsError(f"{results.get('_path')}: no metrics under profile {profile!r} "
                           f"(it has {', '.join(blocks) or 'only ' + str(results.get('scoring_profile'))})")
    metrics = {k: v for k, v in blocks[profile].items() if k not in ("own_corpus", "corpus")}
    records = [{**r, "metrics": (r.get("metrics_by_profile") or {}).get(profile)} for r in results["records"]]
    return {**results, "scoring_profile": profile, "metrics": metrics, "records": records,
            "retrieval_evaluable": metrics["all"]["evaluable"]["session"]}


def _rate(count: int, total: int) -> dict:
    return {"rate": (count / total) if total else None, "count": count, "of": total}


def _distribution(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"n": len(values), "min": min(values), "p25": percentile(values, 0.25), "median": percentile(values, 0.5),
            "p75": percentile(values, 0.75), "max": max(values), "mean": statistics.fmean(values)}


def analyze(results: dict) -> dict:
    """Every section for one results file."""
    records = [r for r in results["records"] if is_ok(r)]
    scored = [r for r in records if r.get("metrics")]
    n = len(scored)
    ranks = [r.get("expected_rank") for r in scored]
    buckets = {f"{lo}" if lo == hi else f"{lo}-{hi}": sum(1 for x in ranks if x is not None and lo <= x <= hi)
               for lo, hi in RANK_BUCKETS}
    buckets["not retrieved"] = sum(1 for x in ranks if x is None)
    systems = [r.get("diagnostics", {}).get("system", {}) for r in records]
    accounted, unaccounted = [], []
    for record, diag in zip(records, systems):
        inside = (diag.get("embed_ms") or 0.0) + (diag.get("wait_ms") or sum((diag.get("source_ms") or {}).values()))
        accounted.append(inside)
        unaccounted.append(max(0.0, (record.get("runtime_ms") or 0.0) - inside))
    sources = Counter()
    for diag in systems:
        sources["submitted"] += len(diag.get("sources_submitted", []))
        sources["completed"] += len(diag.get("sources_completed", []))
        sources["pending"] += len(diag.get("sources_pending", []))
        sources["failed"] += len(diag.get("sources_failed", {}))
    mmr = [d["ranking"]["mmr"] for d in systems if d.get("ranking", {}).get("mmr")]
    group_key = next((k for k in results["metrics"] if k.startswith("by_")), None)
    return {
        "file": results.get("_path"),
        "benchmark": results["benchmark"],
        "retrieval_mode": results.get("retrieval_mode"),
        "system": results.get("system"),
        "scoring_profile": results.get("scoring_profile"),
        "corpus": results.get("corpus") or results.get("scoring_profile"),
        "questions": results["question_count"],
        "evaluable": n,
        "abstentions": results.get("abstentions_excluded", 0),
        "failed": results.get("failed", 0),
        "rates": {"retrieved": _rate(sum(1 for x in ranks if x is not None), n),
                  "top1": _rate(sum(1 for x in ranks if x == 1), n),
                  "top3": _rate(sum(1 for x in ranks if x is not None and x <= 3), n)},
        "final_score": {"top1": _distribution([r["candidates"][0]["final_score"] for r in scored
                                               if r.get("candidates") and r["candidates"][0].get("final_score") is not None]),
                        "all": _distribution([c["final_score"] for r in scored for c in r.get("candidates", [])
                                              if c.get("final_score") is not None])},
        "rank_buckets": {name: _rate(count, n) for name, count in buckets.items()},
        "rank_histogram": dict(sorted(Counter(x for x in ranks if x is not None).items())),
        "average_candidates": statistics.fmean(len(r.get("candidates", [])) for r in records) if records else 0.0,
        "timing_ms": {"runtime": _distribution([r.get("runtime_ms") or 0.0 for r in records]),
                      "accounted": sum(accounted), "unaccounted": sum(unaccounted)},
        "policies": dict(Counter(d.get("policy", "?") for d in systems)),
        "finish_reasons": dict(Counter(d.get("finish_reason", "?") for d in systems)),
        "sources": dict(sources),
        "scheduler_wait_ms": _distribution([d["wait_ms"] for d in systems if "wait_ms" in d]),
        "mmr": {"recalls": len(mmr), "applied": sum(1 for m in mmr if m.get("applied")),
                "mean_moved": statistics.fmean(m.get("moved", 0) for m in mmr) if mmr else 0.0,
                "max_shift": max((m.get("max_shift", 0) for m in mmr), default=0)},
        "recall_at_k": {k: _rate(sum(1 for x in ranks if x is not None and x <= k), n) for k in K_VALUES},
        "official": results["metrics"]["all"],
        # weights tuned on this very dataset make numbers that are not held out: said under the headline, as a run says
        "tuned": tuning_lines(results),
        "phases_ms": results.get("phases_ms") or {},
        "embedding_store": results.get("embedding_store") or {},
        "groups": {"key": group_key[3:] if group_key else None,
                   "values": results["metrics"].get(group_key, {}) if group_key else {}},
        "more_groups": {k[3:]: v for k, v in results["metrics"].items() if k.startswith("by_") and k != group_key},
        "measures": row_of(results) if results.get("measures") else None,
    }


def _fmt_rate(entry: dict) -> str:
    return f"{entry['rate']:.3f} ({entry['count']}/{entry['of']})" if entry["rate"] is not None else f"- (0/{entry['of']})"


def render_analysis(report: dict) -> str:
    lines = [f"== {shown(report['file'])}",
             f"{shown(report['benchmark'])} | system {shown(report['system'])} | "
             + (f"mode {shown(report['retrieval_mode'])} | " if report["retrieval_mode"] is not None else "")
             + f"profile {shown(report['scoring_profile'])}"
             + (f" (on the {shown(report['corpus'])} corpus, not its own)"
                if report["corpus"] != report["scoring_profile"] else "")
             + f" | {report['questions']} questions, {report['evaluable']} evaluable, "
             f"{report['abstentions']} abstentions, {report['failed']} failed",
             *headline_lines(report["official"]), *report["tuned"],
             "", "retrieved / top-1 / top-3 (first gold turn, else gold session)"]
    lines += [f"  {name:<10} {_fmt_rate(entry)}" for name, entry in report["rates"].items()]
    lines.append("")
    lines.append("final score distribution")
    for name, dist in report["final_score"].items():
        if dist:
            lines.append(f"  {name:<5} n={dist['n']} min={dist['min']:.4f} median={dist['median']:.4f} "
                         f"max={dist['max']:.4f} mean={dist['mean']:.4f}")
    lines += ["", "rank buckets"] + [f"  {name:<14} {_fmt_rate(e)}" for name, e in report["rank_buckets"].items()]
    lines += ["", f"average candidates per question: {report['average_candidates']:.1f}"]
    timing = report["timing_ms"]
    if timing["runtime"]:
        lines.append(f"timing: median {timing['runtime']['median']:.2f} ms per question; accounted "
                     f"{timing['accounted']:.0f} ms, unaccounted {timing['unaccounted']:.0f} ms in all")
    lines.append(f"policies: {report['policies']}   finish reasons: {report['finish_reasons']}")
    lines.append(f"sources: {report['sources']}")
    if report["scheduler_wait_ms"]:
        lines.append(f"scheduler wait: median {report['scheduler_wait_ms']['median']:.2f} ms, "
                     f"max {report['scheduler_wait_ms']['max']:.2f} ms")
    mmr = report["mmr"]
    lines.append(f"MMR: applied on {mmr['applied']}/{mmr['recalls']} recalls, mean moved {mmr['mean_moved']:.1f}, "
                 f"max shift {mmr['max_shift']}")
    phases = {k: v for k, v in report["phases_ms"].items() if v}
    if phases:
        total = sum(phases.values())
        lines += ["", f"time by phase ({total / 1000:.1f} s over every item)"]
        lines += [f"  {name[:-3]:<9} {value / 1000:>9.1f} s  {100 * value / total:>5.1f}%" for name, value in phases.items()]
        store = report["embedding_store"]
        if store.get("texts_encoded") or store.get("texts_served"):
            lines.append(f"  texts encoded {store['texts_encoded']}, served from the embedding store "
                         f"{store['texts_served']}")
    lines += ["", "Recall@K (first gold)"] + [f"  @{k:<3} {_fmt_rate(e)}" for k, e in report["recall_at_k"].items()]
    lines += ["", "official metrics (evaluable: session "
              f"{report['official']['evaluable']['session']}, turn {report['official']['evaluable']['turn']})"]
    for level in ("session", "turn"):
        values = report["official"].get(level) or {}
        cells = "  ".join(f"{m}@{k}={values[f'{m}@{k}']:.3f}" for m in METRIC_ORDER
                          for k in (1, 5, 10) if f"{m}@{k}" in values)
        lines.append(f"  {level:<8} {cells}")
    if report.get("measures"):
        lines += ["", f"AdaMem measures ({MEASURES_NOTE})"]
        lines += render_rows({shown(report["retrieval_mode"]): report["measures"]})
    groups = ({report["groups"]["key"]: report["groups"]["values"]} if report["groups"]["key"] else {})
    for key, values in {**groups, **report.get("more_groups", {})}.items():
        lines += ["", f"by {shown(key)}"]
        for name, group in values.items():
            session, turn = group.get("session") or {}, group.get("turn") or {}
            cells = [("session all@5", session.get("recall_all@5")), ("any@5", session.get("recall_any@5")),
                     ("turn R@10", turn.get("recall_any@10"))]
            lines.append(f"  {shown(name):<28} n={group['evaluable']['session']:<4} "
                         + "  ".join(f"{label} {value:.3f}" if value is not None else f"{label} -"
                                     for label, value in cells)
                         + f" (n={group['evaluable']['turn']})")
    return "\n".join(lines)


def compare(files: list[dict], force: bool = False) -> list[dict]:
    """One row per file; refuses to line up files that do not pair (`pairing`) unless forced, and files of one
    dataset that disagree on which questions are abstentions or excluded even then (`pairing.refuse_contradictions`)."""
    pairing.refuse_contradictions(pairing.views(files))
    first = pairing.pairing_of(files[0]) if files else {}
    for other in files[1:] if not force else ():
        differ = pairing.differences(pairing.pairing_of(other), first)
        if differ:
            raise ResultsError(f"{other.get('_path')} differs from {files[0].get('_path')} in "
                               + "; ".join(f"{name} {_short(mine)} against {_short(theirs)}"
                                           for name, mine, theirs in differ)
                               + "; their numbers do not line up (use --force to compare anyway)")
    rows = []
    for f in files:
        session = f["metrics"]["all"].get("session") or {}
        rows.append({"file": f["_path"], "benchmark": f["benchmark"], "system": f.get("system"),
                     "mode": f.get("retrieval_mode"), "profile": f.get("scoring_profile"),
                     "evaluable": f["metrics"]["all"]["evaluable"]["session"],
                     "all@5": session.get("recall_all@5"),
                     **{f"R@{k}": session.get(f"recall_any@{k}") for k in COMPARE_K},
                     "NDCG@10": session.get("ndcg_any@10"),
                     "measures": row_of(f) if f.get("measures") else None})
    return rows


def _short(value) -> str:
    text = shown(str(value))
    return text[:12] if len(text) == 64 else text


def render_compare(rows: list[dict]) -> str:
    head = f"{'file':<40} {'system':<8} {'mode':<7} {'profile':<20} {'n':>5}{'all@5':>7}" + "".join(
        f"{'R@' + str(k):>7}" for k in COMPARE_K) + f"{'NDCG@10':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{shown(Path(r['file']).name)[:40]:<40} {shown(r['system'])[:8]:<8} "
                     f"{shown(r['mode']):<7} {shown(r['profile']):<20} {r['evaluable']:>5}"
                     + cell(r["all@5"], 7)
                     + "".join(cell(r[f'R@{k}'], 7) for k in COMPARE_K)
                     + cell(r["NDCG@10"], 9))
    modes = [shown(r["mode"]) for r in rows if r.get("measures")]
    measured = {(shown(r["mode"]) if modes.count(shown(r["mode"])) == 1 else shown(Path(r["file"]).name)):
                r["measures"] for r in rows if r.get("measures")}
    if measured:  # AdaMem's ablations lined up by the design's six measures
        lines += ["", f"AdaMem measures ({MEASURES_NOTE})"] + render_rows(measured)
    return "\n".join(lines)


def _signals(candidate: dict) -> dict[str, float]:
    diag = candidate.get("diagnostics") or {}
    values = dict((diag.get("ranking") or {}).get("signals") or {})
    for source, found in (diag.get("sources") or {}).items():
        values[f"{source}_score"] = found.get("score", 0.0)
    values["score"] = candidate.get("score") or 0.0
    values["final_score"] = candidate.get("final_score") or 0.0
    if (diag.get("ranking") or {}).get("mmr_score") is not None:
        values["mmr_score"] = diag["ranking"]["mmr_score"]
    return values


def explain(results: dict, worst: int, questions: dict[str, dict] | None = None) -> dict:
    """The worst questions: never retrieved, or retrieved but outranked, with signal-by-signal comparisons."""
    scored = [r for r in results["records"] if r.get("metrics")]
    never = [r for r in scored if r.get("expected_rank") is None]
    outranked = sorted((r for r in scored if (r.get("expected_rank") or 1) > 1), key=lambda r: -r["expected_rank"])
    chosen = (never + outranked)[:worst]
    advantage: dict[str, list[float]] = defaultdict(list)
    entries = []
    for record in chosen:
        companion = (questions or {}).get(record["question_id"], {})
        entry = {"question_id": record["question_id"], "query": record.get("query"),
                 "expected": companion.get("expected", record.get("expected")), "expected_rank": record.get("expected_rank"),
                 "kind": "never retrieved" if record.get("expected_rank") is None else "outranked",
                 "gold_sessions": record.get("gold", {}).get("sessions", record.get("expected_ids"))}
        if record.get("candidates"):
            entry["winner"] = {"id": record["candidates"][0]["id"], "text": record["candidates"][0]["text"][:160]}
        if entry["kind"] == "outranked":
            winner = _signals(record["candidates"][0])
            expected = _signals(record["candidates"][record["expected_rank"] - 1])
            names = sorted(set(winner) | set(expected))
            entry["signals"] = {n: {"winner": winner.get(n, 0.0), "expected": expected.get(n, 0.0)} for n in names}
            for n in names:
                advantage[n].append(winner.get(n, 0.0) - expected.get(n, 0.0))
        entries.append(entry)
    return {"never_retrieved": len(never), "outranked": len(outranked), "evaluable": len(scored), "worst": entries,
            "average_signal_advantage": {n: statistics.fmean(v) for n, v in sorted(advantage.items())},
            "near_misses": len([e for e in entries if e["kind"] == "outranked"])}


def render_explain(report: dict) -> str:
    lines = [f"never retrieved: {report['never_retrieved']}/{report['evaluable']}   "
             f"outranked: {report['outranked']}/{report['evaluable']}"]
    for e in report["worst"]:
        lines.append("")
        where = (f"its first gold at rank {e['expected_rank']}" if e["expected_rank"] is not None
                 else "no gold in its ranking")
        lines.append(f"[{e['kind']}] {shown(e['question_id'])} ({where}): {shown(e['query'])}")
        lines.append(f"  expected: {shown(e['expected'])[:160]}")
        if e.get("winner"):
            lines.append(f"  winner:   {shown(e['winner']['text'])}")
        for name, pair in (e.get("signals") or {}).items():
            lines.append(f"    {name:<16} winner {pair['winner']:>9.4f}   expected {pair['expected']:>9.4f}")
    if report["average_signal_advantage"]:
        lines += ["", f"average signal advantage of the winner over {report['near_misses']} near misses:"]
        lines += [f"  {n:<16} {v:+.4f}" for n, v in report["average_signal_advantage"].items()]
    return "\n".join(lines)


def summarize_directory(directory: str | Path) -> dict:
    """Every results JSON under `directory` (manifests and benchmarks aside), summarised."""
    summary, skipped = {}, {}
    for path in sorted(Path(directory).glob("*.json")):
        if path.name.endswith(".manifest.json") or path.name.endswith(".weights.json"):
            continue
        try:
            results = ResultsFile.read(path)
        except ResultsError as exc:
            skipped[path.name] = str(exc)
            continue
        session = results["metrics"]["all"].get("session") or {}
        turn = results["metrics"]["all"].get("turn") or {}
        summary[path.name] = {
            "benchmark": results["benchmark"], "system": results.get("system"), "mode": results.get("retrieval_mode"),
            "profile": results.get("scoring_profile"), "questions": results["question_count"],
            "evaluable": results["retrieval_evaluable"], "abstentions": results.get("abstentions_excluded"),
            "session": {k: session.get(k) for k in ("recall_all@5", "recall_any@5", "recall_any@10", "ndcg_any@10")},
            "turn": {k: turn.get(k) for k in ("recall_any@5", "recall_any@10", "ndcg_any@10")},
            "commit": results.get("commit"), "elapsed_seconds": results.get("elapsed_seconds"),
        }
    return {"directory": str(directory), "files": summary, "skipped": skipped}
