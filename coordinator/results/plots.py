"""Charts (PNG) and one self-contained HTML report for result files."""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path

from adapters.defaults import K_VALUES
from adapters.percentile import percentile
from coordinator.results.analyze import COMPARE_K


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    _figure().close(fig)
    return buffer.getvalue()


def recall_curves(files: list[dict], level: str) -> bytes:
    plt = _figure()
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for f in files:
        values = f["metrics"]["all"].get(level) or {}
        ks = [k for k in K_VALUES if f"recall_any@{k}" in values]
        ax.plot(ks, [values[f"recall_any@{k}"] for k in ks], marker="o",
                label=f"{Path(f['_path']).stem} (n={f['metrics']['all']['evaluable'][level]})")
    ax.set_xscale("log")
    ax.set_xticks(list(K_VALUES), [str(k) for k in K_VALUES])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("K")
    ax.set_ylabel(f"{level} recall_any@K")
    ax.set_title(f"{level.capitalize()} recall_any@K")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


def group_bars(results: dict) -> bytes | None:
    key = next((k for k in results["metrics"] if k.startswith("by_")), None)
    groups = results["metrics"].get(key) or {}
    if not groups:
        return None
    plt = _figure()
    fig, ax = plt.subplots(figsize=(6.4, 4))
    names = list(groups)
    strict = [(groups[n].get("session") or {}).get("recall_all@5", 0.0) for n in names]
    session = [(groups[n].get("session") or {}).get("recall_any@5", 0.0) for n in names]
    turn = [(groups[n].get("turn") or {}).get("recall_any@10", 0.0) for n in names]
    positions = range(len(names))
    ax.bar([p - 0.27 for p in positions], strict, width=0.27, label="session recall_all@5")
    ax.bar(list(positions), session, width=0.27, label="session R@5 (any)")
    ax.bar([p + 0.27 for p in positions], turn, width=0.27, label="turn R@10")
    ax.set_xticks(list(positions), [f"{n}\n(n={groups[n]['evaluable']['session']})" for n in names], fontsize=7,
                  rotation=20)
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{_name(results)}: by {key[3:].replace('_', ' ')}")
    ax.legend(fontsize=7)
    return _png(fig)


def _name(results: dict) -> str:
    """The file a per-file chart shows, as its title names it."""
    return Path(str(results.get("_path", "results"))).name


def rank_histogram(results: dict) -> bytes:
    plt = _figure()
    ranks = [r.get("expected_rank") for r in results["records"] if r.get("metrics")]
    fig, ax = plt.subplots(figsize=(6.4, 3.5))
    found = [x for x in ranks if x is not None]
    ax.hist(found, bins=range(1, max(found + [2]) + 2), color="#4a7ab5")
    ax.set_xlabel("rank of the first gold candidate")
    ax.set_ylabel("questions")
    ax.set_title(f"{_name(results)}: rank histogram ({len(found)} retrieved, {len(ranks) - len(found)} not retrieved)")
    return _png(fig)


def difference_chart(table: dict) -> bytes:
    """Each paired difference (system minus baseline) with its interval, one row per metric and system."""
    plt = _figure()
    rows = [c for c in table["comparisons"] if c["n"]]
    fig, ax = plt.subplots(figsize=(6.4, max(2.2, 0.45 * len(rows) + 1.2)))
    for position, c in enumerate(rows):
        low, high = c["ci95"]
        colour = "#4a7ab5" if c["p_holm"] < 0.05 else "#8c8c8c"
        ax.errorbar(c["delta"], position, xerr=[[c["delta"] - low], [high - c["delta"]]], fmt="o", color=colour,
                    capsize=4)
    ax.axvline(0.0, color="#b5524a", linewidth=1)
    ax.set_yticks(range(len(rows)), [f"{c['metric']}\n{c['system']} (n={c['n']})" for c in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"difference from {table['baseline']} ({int(table['confidence'] * 100)}% paired bootstrap "
                  "interval; blue: p_holm < 0.05)")
    ax.set_title("Paired differences against the baseline")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _worker_colours(items: list[dict]) -> dict[str, str]:
    palette = ("#4a7ab5", "#d0743c", "#5a9e5a", "#b5524a", "#8a6bb5", "#8c7b54", "#c26fa6", "#6f6f6f")
    names = sorted({t["worker"] for t in items if t.get("worker")})
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def farm_workers_chart(farm: dict) -> bytes:
    """Items finished per worker process over the run's time (a step line each)."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    colours = _worker_colours(farm["items"])
    for worker, colour in colours.items():
        ends = sorted(t["finished_s"] for t in farm["items"]
                      if t.get("worker") == worker and t.get("state") == "done" and t.get("finished_s") is not None)
        ax.step([0.0, *ends], range(len(ends) + 1), where="post", color=colour, label=f"{worker} ({len(ends)})")
    ax.set_xlabel("seconds since the run was submitted")
    ax.set_ylabel("items done")
    ax.set_title("Items per worker over time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


def farm_timeline_chart(farm: dict) -> bytes:
    """Per item: time queued (grey) then time running (the worker's colour), in the order items started."""
    plt = _figure()
    items = sorted((t for t in farm["items"] if t.get("started_s") is not None), key=lambda t: t["started_s"])
    fig, ax = plt.subplots(figsize=(6.4, max(2.5, 0.22 * len(items) + 1)))
    colours = _worker_colours(items)
    for row, t in enumerate(items):
        queued = t["queued_s"] if t.get("queued_s") is not None else t["started_s"]
        ax.barh(row, t["started_s"] - queued, left=queued, color="#cfcfcf")
        if t.get("finished_s") is not None:
            ax.barh(row, t["finished_s"] - t["started_s"], left=t["started_s"], color=colours.get(t["worker"]))
    ax.set_yticks(range(len(items)), [t["item_id"][:14] for t in items], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the run was submitted (grey: queued, colour: running, by worker)")
    ax.set_title("Queue wait and run time per item")
    return _png(fig)


def charts(files: list[dict]) -> dict[str, bytes]:
    out = {"recall_session.png": recall_curves(files, "session"), "recall_turn.png": recall_curves(files, "turn")}
    for index, f in enumerate(files):
        bars = group_bars(f)
        if bars:
            out[f"groups_{index}.png"] = bars
        out[f"ranks_{index}.png"] = rank_histogram(f)
        if (f.get("farm") or {}).get("items"):
            out[f"farm_workers_{index}.png"] = farm_workers_chart(f["farm"])
            out[f"farm_timeline_{index}.png"] = farm_timeline_chart(f["farm"])
    return out


def write_plots(files: list[dict], directory: str | Path) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in charts(files).items():
        (directory / name).write_bytes(data)
        written.append(directory / name)
    return written


def _table(rows: list[dict], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return html.escape(str(value)) if value is not None else "-"


def _image(name: str, data: bytes) -> str:
    return f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{base64.b64encode(data).decode()}'></figure>"


def farm_section(farm: dict, index: int, chart_data: dict[str, bytes]) -> str:
    """A farm run at a glance: workers, items over time, queue wait against run time, retries and failures."""
    items = farm["items"]
    waits = [t["queue_wait_ms"] for t in items if t.get("queue_wait_ms") is not None]
    runs = [t["run_ms"] for t in items if t.get("run_ms") is not None]
    worker_rows = [{"worker": name, "items": w["items"], "questions": w["questions"],
                    "run s": w["run_ms"] / 1000, "s per item": (w["run_ms"] / 1000 / w["items"]) if w["items"] else None}
                   for name, w in sorted(farm.get("workers", {}).items())]
    lost = farm.get("lost_attempts") or {}
    retry_rows = [{"item": t["item_id"], "attempts": t["attempts"], "lost attempts": lost.get(t["item_id"], 0),
                   "state": t["state"], "worker": t["worker"]}
                  for t in items if t["attempts"] > 1 or lost.get(t["item_id"])]
    failure_rows = [{"item": f["item_id"], "attempts": f["attempts"], "error": f["error"][:200]}
                    for f in farm.get("failures", [])]
    parts = [f"<section id='farm-{index}'><h2>Farm run {html.escape(str(farm.get('run_id')))}</h2>",
             f"<p class='note'>{len(items)} items on {len(worker_rows)} workers; queue wait median "
             f"{_median(waits) / 1000:.1f} s, run time median {_median(runs) / 1000:.1f} s; "
             f"max attempts {farm.get('max_attempts')}.</p>",
             "<h3>Workers</h3>", _table(worker_rows, ["worker", "items", "questions", "run s", "s per item"]),
             _image(f"farm_workers_{index}", chart_data[f"farm_workers_{index}.png"]),
             _image(f"farm_timeline_{index}", chart_data[f"farm_timeline_{index}.png"]),
             f"<h3>Retries ({len(retry_rows)})</h3>",
             _table(retry_rows, ["item", "attempts", "lost attempts", "state", "worker"]) if retry_rows
             else "<p class='note'>Every item ran once.</p>",
             f"<h3>Failures ({len(failure_rows)})</h3>",
             _table(failure_rows, ["item", "attempts", "error"]) if failure_rows
             else "<p class='note'>No item failed.</p>",
             "</section>"]
    return "".join(parts)


def _median(values: list[float]) -> float:
    return percentile(values, 0.5) if values else 0.0


def paired_section(files: list[dict]) -> str:
    """`memfarm compare`'s table (the strict metric first) and a chart of each difference with its interval; or
    why the files cannot be paired."""
    from adapters.errors import ResultsError
    from coordinator.results.compare import compare_files, paired_count

    if len(files) < 2:
        return ""
    head = "<h2>Paired comparison</h2><div id='paired'>"
    try:
        table = compare_files(files)
    except ResultsError as exc:
        return head + f"<p class='note'>Not paired: {html.escape(str(exc))}</p></div>"
    rows = [{"metric": c["metric"], "system": c["system"], "n": c["n"], "baseline": c["baseline_value"],
             "system value": c["system_value"], "delta": f"{c['delta']:+.3f}" if c["n"] else None,
             "95% interval": f"[{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]" if c["n"] else None,
             "p": f"{c['p_value']:.2g}" if c["n"] else None, "p_holm": f"{c['p_holm']:.2g}" if c["n"] else None,
             "W/L/T": f"{c['wins']['count']}/{c['losses']['count']}/{c['ties']['count']}", "test": c["test"]}
            for c in table["comparisons"]]
    tuned = "".join(f"<p class='note'>{html.escape(label)}: tuned on this data (its weights were tuned on this "
                    "dataset; its numbers are not held out).</p>" for label in table.get("tuned_on_this_data", {}))
    return "".join([
        head, f"<p class='note'>Baseline {html.escape(table['baseline'])}; {html.escape(paired_count(table))}; paired "
        f"bootstrap {table['resamples']} resamples, seed {table['seed']}; p: exact McNemar (hit or miss) or sign-flip "
        "test (nDCG); p_holm: adjusted by Holm's method over each metric's comparisons. The interval is not "
        "adjusted: one that excludes 0 beside a p_holm above 0.05 does not tell the systems apart.</p>", tuned,
        _table(rows, ["metric", "system", "n", "baseline", "system value", "delta", "95% interval", "p", "p_holm",
                      "W/L/T", "test"]),
        _image("paired differences", difference_chart(table)) if any(c["n"] for c in table["comparisons"]) else "",
        "</div>"])


def board_link(board: str | Path, report: str | Path) -> str:
    """A paragraph that links the report to the board of every run (`memfarm board`), relative to the report's
    folder so that both can move together; where no board is built yet, the command that builds one."""
    index = Path(board) / "index.html"
    if not index.is_file():
        return (f"<p class='note' id='board'>Every run side by side, with a page per question: "
                f"<code>memfarm board results --output {html.escape(str(board))}</code> builds the board.</p>")
    href = Path(os.path.relpath(index.resolve(), Path(report).resolve().parent)).as_posix()
    return (f"<p class='note' id='board'>Every run side by side, with a page per question: "
            f"<a href='{html.escape(href)}'>the board</a> ({html.escape(str(board))}).</p>")


def html_report(files: list[dict], board: str | None = None) -> str:
    """One HTML document, charts inlined as data URIs: nothing to fetch, nothing to lose; `board`: a paragraph
    (`board_link`) that points to the board of every run."""
    from coordinator.results.analyze import analyze, compare

    rows = [{**row, "file": Path(row["file"]).name} for row in compare(files, force=True)]
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>memoria-farm report</title><style>",
             "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;"
             "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f3f3f3}"
             "td:first-child,th:first-child{text-align:left}img{max-width:100%;margin:0.5em 0}.note{color:#555}",
             "</style></head><body>", "<h1>memoria-farm report</h1>", board or "",
             "<p class='note'>Retrieval metrics over evaluable questions, not answer accuracy. all@5: session "
             "recall_all@5, every answer session in the top 5 (the strict metric); R@K: session recall_any@K, any "
             "answer session in the top K (a diagnostic: saturated on LongMemEval-S).</p>",
             "<h2>Comparison</h2>", "<div id='comparison'>",
             _table(rows, ["file", "benchmark", "system", "mode", "profile", "evaluable", "all@5"]
                    + [f"R@{k}" for k in COMPARE_K] + ["NDCG@10"]), "</div>", paired_section(files),
             "<h2>Charts</h2><div id='charts'>"]
    chart_data = charts(files)
    for name in ("recall_session.png", "recall_turn.png"):  # every file on one chart; the others sit with their file
        parts.append(_image(name, chart_data[name]))
    parts.append("</div>")
    for index, f in enumerate(files):
        if (f.get("farm") or {}).get("items"):
            parts.append(farm_section(f["farm"], index, chart_data))
        report = analyze(f)
        parts.append(f"<h2>{html.escape(Path(f['_path']).name)}</h2>")
        parts += [f"<p class='note tuned'>{html.escape(line)}</p>" for line in report["tuned"]]
        for name in (f"groups_{index}.png", f"ranks_{index}.png"):
            if name in chart_data:
                parts.append(_image(f"{name} of {_name(f)}", chart_data[name]))
        rate_rows = [{"measure": n, "rate": e["rate"], "count": e["count"], "of": e["of"]}
                     for n, e in {**report["rates"], **{f"recall@{k}": e for k, e in report["recall_at_k"].items()}}.items()]
        parts.append(_table(rate_rows, ["measure", "rate", "count", "of"]))
        group_rows = [{"group": name, "n": g["evaluable"]["session"],
                       "session all@5": (g.get("session") or {}).get("recall_all@5"),
                       "session R@5": (g.get("session") or {}).get("recall_any@5"),
                       "turn R@10": (g.get("turn") or {}).get("recall_any@10")}
                      for name, g in report["groups"]["values"].items()]
        if group_rows:
            parts.append(_table(group_rows, ["group", "n", "session all@5", "session R@5", "turn R@10"]))
    parts.append("</body></html>")
    return "".join(parts)
