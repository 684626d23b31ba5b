"""The end-of-run table: what a person reads first."""

from __future__ import annotations

TABLE_K = (1, 5, 10)


def metrics_table(results: dict) -> str:
    summary = results["metrics"]["all"]
    if "support" in summary:
        return support_table(results)
    lines = [f"{'level':<8} {'metric':<11}" + "".join(f"{'@' + str(k):>8}" for k in TABLE_K) + f"{'n':>7}"]
    for level in ("session", "turn"):
        values, n = summary.get(level) or {}, summary["evaluable"][level]
        for metric in ("recall_any", "recall_all", "ndcg_any"):
            cells = "".join(f"{values[f'{metric}@{k}']:>8.3f}" if f"{metric}@{k}" in values else f"{'-':>8}"
                            for k in TABLE_K)
            lines.append(f"{level:<8} {metric:<11}{cells}{n:>7}")
    for key, groups in results["metrics"].items():
        if key.startswith("by_"):
            lines.append("")
            lines.append(f"{key[3:]:<28}{'n':>5} {'sess R@5':>9} {'turn R@10':>10}")
            for name, group in groups.items():
                session, turn = group.get("session") or {}, group.get("turn") or {}
                lines.append(f"{name[:28]:<28}{group['evaluable']['session']:>5} "
                             f"{session.get('recall_any@5', float('nan')):>9.3f} {turn.get('recall_any@10', float('nan')):>10.3f}")
    lines.append("")
    lines.append(
        f"questions {results['question_count']}: evaluable {results['retrieval_evaluable']}, "
        f"abstentions {results['abstentions_excluded']}, excluded {results['excluded']}, failed {results['failed']}"
    )
    lines.append("(retrieval metrics, not answer accuracy)")
    return "\n".join(lines)


def support_table(results: dict) -> str:
    """Substring-judged runs (AdaMem episodes): queries passed and stale hits, overall and per group."""
    rows = [("all", results["metrics"]["all"]["support"])]
    for key, groups in results["metrics"].items():
        if key.startswith("by_"):
            rows += [(name, group["support"]) for name, group in groups.items() if "support" in group]
    lines = [f"{results.get('retrieval_mode')}: retrieval support (expected substrings found, none forbidden)",
             f"{'group':<28}{'passed':>10}{'stale hits':>12}"]
    lines += [f"{name[:28]:<28}{s['passed']:>5}/{s['queries']:<4}{s['stale_hits']:>12}" for name, s in rows]
    lines.append(f"questions {results['question_count']}, failed {results['failed']} (retrieval support, not answer accuracy)")
    return "\n".join(lines)
