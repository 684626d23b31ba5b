"""Charts (PNG) and one self-contained HTML report for result files."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from adapters.defaults import K_VALUES
from coordinator.analyze import COMPARE_K


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
    session = [(groups[n].get("session") or {}).get("recall_any@5", 0.0) for n in names]
    turn = [(groups[n].get("turn") or {}).get("recall_any@10", 0.0) for n in names]
    positions = range(len(names))
    ax.bar([p - 0.2 for p in positions], session, width=0.4, label="session R@5")
    ax.bar([p + 0.2 for p in positions], turn, width=0.4, label="turn R@10")
    ax.set_xticks(list(positions), [f"{n}\n(n={groups[n]['evaluable']['session']})" for n in names], fontsize=7,
                  rotation=20)
    ax.set_ylim(0, 1.02)
    ax.set_title(f"By {key[3:].replace('_', ' ')}")
    ax.legend(fontsize=7)
    return _png(fig)


def rank_histogram(results: dict) -> bytes:
    plt = _figure()
    ranks = [r.get("expected_rank") for r in results["records"] if r.get("metrics")]
    fig, ax = plt.subplots(figsize=(6.4, 3.5))
    found = [x for x in ranks if x is not None]
    ax.hist(found, bins=range(1, max(found + [2]) + 2), color="#4a7ab5")
    ax.set_xlabel("rank of the first gold candidate")
    ax.set_ylabel("questions")
    ax.set_title(f"Rank histogram ({len(found)} retrieved, {len(ranks) - len(found)} not retrieved)")
    return _png(fig)


def charts(files: list[dict]) -> dict[str, bytes]:
    out = {"recall_session.png": recall_curves(files, "session"), "recall_turn.png": recall_curves(files, "turn")}
    for index, f in enumerate(files):
        bars = group_bars(f)
        if bars:
            out[f"groups_{index}.png"] = bars
        out[f"ranks_{index}.png"] = rank_histogram(f)
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


def html_report(files: list[dict]) -> str:
    """One HTML document, charts inlined as data URIs: nothing to fetch, nothing to lose."""
    from coordinator.analyze import analyze, compare

    rows = [{**row, "file": Path(row["file"]).name} for row in compare(files, force=True)]
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>memoria-farm report</title><style>",
             "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;"
             "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f3f3f3}"
             "td:first-child,th:first-child{text-align:left}img{max-width:100%;margin:0.5em 0}.note{color:#555}",
             "</style></head><body>", "<h1>memoria-farm report</h1>",
             "<p class='note'>Retrieval metrics (recall_any / ndcg_any over evaluable questions), not answer accuracy.</p>",
             "<h2>Comparison</h2>", "<div id='comparison'>",
             _table(rows, ["file", "benchmark", "system", "mode", "profile", "evaluable"]
                    + [f"R@{k}" for k in COMPARE_K] + ["NDCG@10"]), "</div>", "<h2>Charts</h2><div id='charts'>"]
    for name, data in charts(files).items():
        encoded = base64.b64encode(data).decode()
        parts.append(f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{encoded}'></figure>")
    parts.append("</div>")
    for f in files:
        report = analyze(f)
        parts.append(f"<h2>{html.escape(Path(f['_path']).name)}</h2>")
        rate_rows = [{"measure": n, "rate": e["rate"], "count": e["count"], "of": e["of"]}
                     for n, e in {**report["rates"], **{f"recall@{k}": e for k, e in report["recall_at_k"].items()}}.items()]
        parts.append(_table(rate_rows, ["measure", "rate", "count", "of"]))
        group_rows = [{"group": name, "n": g["evaluable"]["session"],
                       "session R@5": (g.get("session") or {}).get("recall_any@5"),
                       "turn R@10": (g.get("turn") or {}).get("recall_any@10")}
                      for name, g in report["groups"]["values"].items()]
        if group_rows:
            parts.append(_table(group_rows, ["group", "n", "session R@5", "turn R@10"]))
    parts.append("</body></html>")
    return "".join(parts)
