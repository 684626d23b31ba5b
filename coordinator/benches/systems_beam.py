"""BEAM's rows in `memfarm bench systems`: scored message by message (BEAM's evidence names messages; the farm's
turn level) and by batch (its session level), each system against the reference per ability, question by question.

A chat's questions probe ten abilities; the table's means mix them, so every ability is compared on its own
questions too: for each ability and metric, the paired interval and the Holm-adjusted p over that ability's
comparisons (every system against the reference on that metric), as `memfarm compare` would give on those
questions alone. Abstention questions name no message and are left out, as everywhere.
"""

from __future__ import annotations

from adapters.terminal import printable

#: BEAM's table, message level first (at 10: the chats are long and a question may name many messages), then the
#: batch level; as a results file spells them, and their column names.
BEAM_METRICS = (("turn:recall_any@10", "message_recall_any_10"), ("turn:recall_all@10", "message_recall_all_10"),
                ("turn:ndcg_any@10", "message_ndcg_10"), ("session:recall_any@5", "batch_recall_any_5"))
#: What each ability is compared on.
ABILITY_METRICS = (("turn:recall_any@10", "message_recall_any_10"), ("turn:ndcg_any@10", "message_ndcg_10"))


def add_abilities(rows: list[dict], loaded: list[dict], labels: list[str], resamples: int) -> None:
    """Each row's `abilities`: per ability, its mean on each metric and, for a row that is not the reference, the
    difference from the reference with its interval, its Holm-adjusted p over the ability's comparisons and the
    verdict."""
    from coordinator.results.compare import compare_files
    from coordinator.results.verdicts import outcome, verdict

    if not rows:  # every system skipped: nothing to compare
        return
    abilities = sorted({r.get("question_type") for r in loaded[0]["records"]
                        if r.get("metrics") and r.get("question_type")})
    for row in rows:
        row["abilities"] = {}
    for ability in abilities:
        views = [{**results, "records": [r for r in results["records"] if r.get("question_type") == ability]}
                 for results in loaded]
        by_key = {}
        if len(views) > 1:
            table = compare_files(views, [m for m, _ in ABILITY_METRICS], resamples=resamples,
                                  count_failed_as_miss=True, checked=True)
            for position, entry in enumerate(table["comparisons"]):
                by_key[(labels[1 + position % (len(labels) - 1)], entry["metric"])] = entry
        for row, view in zip(rows, views):
            scored = [r for r in view["records"] if r.get("metrics")]
            cell = {"n": len(scored)}
            for metric, column in ABILITY_METRICS:
                level, _, name = metric.partition(":")
                # a question without this level's score is left out, as the paired test beside it leaves it out
                values = [value for r in scored if (value := (r["metrics"].get(level) or {}).get(name)) is not None]
                cell[column] = round(sum(values) / len(values), 4) if values else None
                entry = by_key.get((row["system"], metric))
                if entry:
                    low, high = entry.get("ci95") or (None, None)
                    cell[f"{column}_delta"] = round(entry["delta"], 4) if entry.get("delta") is not None else None
                    cell[f"{column}_ci95"] = [low, high]
                    cell[f"{column}_p_holm"] = entry.get("p_holm")
                    cell[f"{column}_holm_family"] = entry.get("holm_family")
                    cell[f"{column}_verdict"] = verdict({**entry, "baseline": labels[0], "system": row["system"]})
                    cell[f"{column}_outcome"] = outcome(entry)
            row["abilities"][ability] = cell


def beam_table(rows: list[dict]) -> list[str]:
    """BEAM's block: a line per system (message metrics, the reference's difference, cost), the ceiling, then each
    ability's message recall_any@10 per system, marked + or - where its verdict against the reference is ahead or
    behind after Holm over the ability's comparisons."""
    from coordinator.results.verdicts import p_text

    lines = [f"{'dataset':<12}{'system':<16}{'n':>5}{'mR@10':>7}{'Δ mR@10 [95% CI]':>26}{'p_holm':>8}{'mAll@10':>8}"
             f"{'mnDCG10':>8}{'bR@5':>7}{'ms/msg':>9}{'p50 ms':>8}{'RSS MiB':>9}"]
    for r in rows:
        delta = (f"{r['message_recall_any_10_delta']:+.3f} [{r['message_recall_any_10_ci_low']:+.3f},"
                 f"{r['message_recall_any_10_ci_high']:+.3f}]" if r["message_recall_any_10_delta"] is not None
                 else "reference")
        p = p_text(r["message_recall_any_10_p_holm"]) if r.get("message_recall_any_10_p_holm") is not None else "-"
        mark = (" *" if r.get("arm") else " †" if r.get("tuned_on_this_data") else "") + (
            " !" if not r.get("complete", True) else "")
        lines.append(printable(
            f"{r['dataset']:<12}{r['system'] + mark:<16}{r['n']:>5}{_cell(r['message_recall_any_10'], 7)}{delta:>26}"
            f"{p:>8}{_cell(r['message_recall_all_10'], 8)}{_cell(r['message_ndcg_10'], 8)}"
            f"{_cell(r['batch_recall_any_5'], 7)}{r['ingest_ms_per_turn'] or 0:>9.2f}{r['recall_p50_ms'] or 0:>8.2f}"
            f"{r['peak_rss_mib']:>9.1f}"))
    ceiling = rows[0].get("message_recall_all_10_ceiling") if rows else None
    if ceiling is not None:
        lines.append(f"{'beam':<12}{'(ceiling of mAll@10: a question naming more than 10 messages cannot reach it)'} "
                     f"{ceiling:.3f}")
    abilities = list(rows[0].get("abilities") or {}) if rows else []
    if abilities:
        names = [r["system"][:11] for r in rows]
        lines += ["", "message recall_any@10 by ability (+/-: ahead of/behind the reference after Holm over the "
                      "ability's comparisons)", f"{'ability':<28}{'n':>4}" + "".join(f"{n:>12}" for n in names)]
        for ability in abilities:
            cells = []
            for r in rows:
                cell = r["abilities"][ability]
                sign = _sign(cell)
                cells.append(f"{_cell(cell['message_recall_any_10'], 11)}{sign}")
            lines.append(printable(f"{ability[:27]:<28}{rows[0]['abilities'][ability]['n']:>4}" + "".join(cells)))
    return lines


def _cell(value, width: int) -> str:
    return f"{value:>{width}.3f}" if value is not None else f"{'-':>{width}}"


def _sign(cell: dict) -> str:
    """+ or - where the ability's verdict is ahead or behind (`verdicts.outcome`), blank otherwise."""
    from coordinator.results.verdicts import AHEAD, BEHIND

    return {AHEAD: "+", BEHIND: "-"}.get(cell.get("message_recall_any_10_outcome"), " ")
