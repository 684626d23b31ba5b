"""The end-of-run table: what a person reads first."""

from __future__ import annotations

from adapters.benchmarks import BENCHMARKS
from adapters.profiles import find_profile
from coordinator.results.labels import run_label

TABLE_K = (1, 5, 10)
#: The order metrics are shown in: the strict one first (on LongMemEval-S session recall_any@5 is saturated,
#: recall_all@5 is what separates systems), recall_any as a diagnostic.
METRIC_ORDER = ("recall_all", "recall_any", "ndcg_any")


def headline_lines(summary: dict, level: str = "session") -> list[str]:
    """Session recall_all@5 with its denominator, then recall_any@5 as the diagnostic it is; at the turn level (a
    benchmark whose gold is finer than its sessions, BEAM's messages), turn recall_any@10 and recall_all@10."""
    if level == "turn":
        return turn_headline_lines(summary)
    session, n = summary.get("session") or {}, (summary.get("evaluable") or {}).get("session", 0)
    strict = session.get("recall_all@5")
    if strict is None:
        return []
    lines = [f"session recall_all@5 {strict:.3f}: {round(strict * n)}/{n} questions with every answer session "
             "in the top 5"]
    if session.get("recall_any@5") is not None:
        lines.append(f"  (diagnostic: session recall_any@5 {session['recall_any@5']:.3f}, any answer session)")
    return lines


def turn_headline_lines(summary: dict) -> list[str]:
    """Turn recall_any@10 with its denominator, then recall_all@10 beside the most any system reaches."""
    turn, n = summary.get("turn") or {}, (summary.get("evaluable") or {}).get("turn", 0)
    found = turn.get("recall_any@10")
    if found is None:
        return []
    lines = [f"turn recall_any@10 {found:.3f}: {round(found * n)}/{n} questions with an evidence turn in the top 10"]
    if turn.get("recall_all@10") is not None:
        ceiling = ((summary.get("ceiling") or {}).get("turn") or {}).get("recall_all@10")
        lines.append(f"  (turn recall_all@10 {turn['recall_all@10']:.3f}, every evidence turn"
                     + (f"; a perfect system reaches {ceiling:.3f})" if ceiling is not None else ")"))
    return lines


def _headline_level(results: dict) -> str:
    """The level the results' benchmark declares its headline at (`Benchmark.headline_level`)."""
    declared = BENCHMARKS.get(str(results.get("benchmark_key")))
    return declared.headline_level if declared is not None else "session"


def tuning_lines(results: dict) -> list[str]:
    """One line where the run's weights were tuned on its own dataset: its numbers are not held out."""
    tuning = results.get("tuning") or {}
    if not tuning.get("tuned_on_this_data"):
        return []
    return [f"TUNED ON THIS DATA: the weights ({tuning['weights_file']}) were tuned on this dataset; "
            "these numbers are not held out"]


def metrics_table(results: dict) -> str:
    summary = results["metrics"]["all"]
    if "support" in summary:
        return support_table(results)
    lines = headline_lines(summary, _headline_level(results)) + tuning_lines(results)
    lines += [""] if lines else []
    lines.append(f"{'level':<8} {'metric':<11}" + "".join(f"{'@' + str(k):>8}" for k in TABLE_K) + f"{'n':>7}")
    for level in ("session", "turn"):
        values, n = summary.get(level) or {}, summary["evaluable"][level]
        for metric in METRIC_ORDER:
            cells = "".join(f"{values[f'{metric}@{k}']:>8.3f}" if f"{metric}@{k}" in values else f"{'-':>8}"
                            for k in TABLE_K)
            lines.append(f"{level:<8} {metric:<11}{cells}{n:>7}")
            ceiling = ((summary.get("ceiling") or {}).get(level) or {}) if metric == "recall_all" else {}
            if ceiling:  # the most any system could reach: a question with more gold sessions than K cannot
                lines.append(f"{'':<8} {'ceiling':<11}" + "".join(
                    f"{ceiling[f'recall_all@{k}']:>8.3f}" if f"recall_all@{k}" in ceiling else f"{'-':>8}"
                    for k in TABLE_K) + f"{'':>7}  (recall_all a perfect system reaches)")
    for key, groups in results["metrics"].items():
        if key.startswith("by_"):
            lines.append("")
            lines.append(f"{key[3:]:<28}{'n':>5} {'sess all@5':>11} {'sess any@5':>11} {'turn R@10':>10}")
            for name, group in groups.items():
                session, turn = group.get("session") or {}, group.get("turn") or {}
                cells = [(session.get("recall_all@5"), 11), (session.get("recall_any@5"), 11),
                         (turn.get("recall_any@10"), 10)]
                lines.append(f"{name[:28]:<28}{group['evaluable']['session']:>5} "
                             + " ".join(f"{v:>{w}.3f}" if v is not None else f"{'-':>{w}}" for v, w in cells))
    lines += profile_lines(results)
    notes = chosen.notes if (chosen := find_profile(results.get("scoring_profile"))) else None
    if results.get("short_rankings") and notes and notes.short_rankings:
        lines.append(f"note: {notes.short_rankings.format(count=results['short_rankings'])}")
    lines.append("")
    lines.append(
        f"questions {results['question_count']}: evaluable {results['retrieval_evaluable']}, "
        f"abstentions {results['abstentions_excluded']}, excluded {results['excluded']}, failed {results['failed']}"
    )
    if results.get("scored_without_gold") and notes and notes.without_gold:
        lines.append(f"  of the evaluable, {notes.without_gold.format(count=results['scored_without_gold'])}")
    lines.append("(retrieval metrics, not answer accuracy)")
    lines += incomplete_lines(results)
    return "\n".join(lines)


def incomplete_lines(results: dict) -> list[str]:
    """One line where the run failed items: its means are over the rest, so it is not the run it claims."""
    if results.get("complete", True):
        return []
    failures = results["failures"]
    named = ", ".join(failures["item_ids"][:5]) + (" ..." if len(failures["item_ids"]) > 5 else "")
    return [f"INCOMPLETE: {failures['items']} items failed ({named}; {failures['questions']} questions"
            + (f", and the questions of {len(failures['items_without_question_ids'])} unread items"
               if failures["items_without_question_ids"] else "")
            + "); every mean above leaves them out"]


def profile_lines(results: dict) -> list[str]:
    """Every profile's headline numbers side by side, with the corpus each was computed on, and the notes their
    declarations give (`adapters.profiles.Notes`)."""
    profiles = results.get("metrics_by_profile") or {}
    if len(profiles) < 2:  # no table of profiles; the one profile's own note, where it has one, still stands
        spec = find_profile(results.get("scoring_profile"))
        return [f"note: {spec.notes.table}"] if spec and spec.notes.table else []
    foreign = [name for name, block in profiles.items() if not block.get("own_corpus")]
    lines = ["", f"{'profile':<22}{'sess all@5':>11}{'sess any@5':>11}{'sess nDCG@10':>13}{'turn R@5':>9}"
             f"{'turn R@10':>10}{'turn nDCG@10':>13}{'n':>6}"]
    for name, block in profiles.items():
        session, turn = block["all"].get("session") or {}, block["all"].get("turn") or {}
        cells = [session.get("recall_all@5"), session.get("recall_any@5"), session.get("ndcg_any@10"),
                 turn.get("recall_any@5"), turn.get("recall_any@10"), turn.get("ndcg_any@10")]
        widths = (11, 11, 13, 9, 10, 13)
        mark = " *" if name in foreign else ""
        lines.append(f"{name + mark:<22}" + "".join(f"{v:>{w}.3f}" if v is not None else f"{'-':>{w}}"
                                                   for v, w in zip(cells, widths))
                     + f"{block['all']['evaluable']['session']:>6}")
    notes = [spec.notes for name in profiles if (spec := find_profile(name))]
    shared = [n.shared for n in notes if n.shared]
    if not foreign and shared:  # one corpus, one gold: what tells the profiles apart
        return lines + [f"note: {note}" for note in shared]
    if foreign:
        chosen = next((n for n, b in profiles.items() if b.get("own_corpus")), results.get("scoring_profile"))
        hints = [spec.notes.foreign for name in foreign if (spec := find_profile(name)) and spec.notes.foreign]
        lines.append(f"* on the {chosen} profile's corpus, not its own: comparable between runs, not citable"
                     + "".join(f" ({hint})" for hint in hints))
    return lines + [f"note: {n.table}" for n in notes if n.table]


def support_table(results: dict) -> str:
    """Substring-judged runs (AdaMem episodes): queries passed and stale hits, overall and per group."""
    rows = [("all", results["metrics"]["all"]["support"])]
    for key, groups in results["metrics"].items():
        if key.startswith("by_"):
            rows += [(name, group["support"]) for name, group in groups.items() if "support" in group]
    lines = [f"{run_label(results.get('system'), results.get('retrieval_mode'))}: retrieval support (expected "
             "substrings found, none forbidden)",
             f"{'group':<28}{'passed':>10}{'stale hits':>12}"]
    lines += [f"{name[:28]:<28}{s['passed']:>5}/{s['queries']:<4}{s['stale_hits']:>12}" for name, s in rows]
    lines.append(f"questions {results['question_count']}, failed {results['failed']} (retrieval support, not answer accuracy)")
    lines += incomplete_lines(results)
    return "\n".join(lines)
