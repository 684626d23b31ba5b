"""The board's pages: static HTML written from `data.build_data`, opened from the file system or any server.

Every text that comes from a results file (questions, candidates' turns, ids,
system names, settings, paths) goes through `markup.e` (HTML-escaped, quotes too) and
stands only in element text or a double-quoted attribute; links and file names
are the board's own (`q/00001.html`), never a results file's. Each page carries a
Content-Security-Policy that lets script come only from the board's own
`board.js`, so markup slipped into a page still could not run. The script
touches the page through `textContent` and `dataset` only.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from adapters.errors import ResultsError
from coordinator.results.labels import run_label
from coordinator.board import charts
from coordinator.board.data import OTHER_METRICS
from coordinator.board.markup import count, crumbs, e, group_heading, num, page, seconds, sort_value
from coordinator.board.questions import pair_page, question_page, questions_page
from coordinator.results import verdicts
from coordinator.results.verdicts import p_text

#: The file in a board folder that marks it as one: a folder holding it may be replaced by the next build.
MARKER = ".memfarm-board"
STATIC = ("board.css", "board.js")


def _apart(group: dict) -> str:
    if not group["apart"]:
        return ""
    items = "".join(f'<li>not comparable with <a href="#g{a["group"]}">group {a["group"]}</a>: '
                    f'{e("; ".join(a["differences"]))}</li>' for a in group["apart"])
    return f'<ul class="apart">{items}</ul>'


def _bytes(value) -> str:
    if not value:
        return "–"
    return f"{value / 2 ** 30:.2f} GiB" if value >= 2 ** 30 else f"{value / 2 ** 20:.0f} MiB"


def _pair_cells(row: dict, group: dict) -> str:
    pair = row["pair"] or {}
    if pair.get("top"):
        said, tip = ("leader", "significantly ahead of every other complete run after Holm") if pair.get("leader") \
            else ("#1, not a leader", f'the highest {group["headline"]["kind"]} mean, but not significantly ahead of '
                                      "every other run after Holm: the others are paired with it")
        cls = "lead" if pair.get("leader") else "note"
        return (f'<td class="{cls}" data-v="0" title="{e(tip)}">{e(said)}</td><td data-v=""></td><td data-v=""></td>'
                '<td data-v=""></td>')
    if pair.get("not_paired") or not pair or pair.get("n", 0) == 0:
        reason = pair.get("not_paired") or ("no question scored in both runs" if pair else "no run to pair with")
        return (f'<td class="note" data-v="" title="{e(reason)}">not paired</td><td data-v=""></td>'
                '<td data-v=""></td><td data-v=""></td>')
    low, high = pair["ci95"]
    wins, losses = pair["wins"]["count"], pair["losses"]["count"]
    significant = " sig" if pair["outcome"] in (verdicts.AHEAD, verdicts.BEHIND) else ""
    return (f'<td class="num{significant}" data-v="{sort_value(pair["delta"])}">{pair["delta"]:+.3f}</td>'
            f'<td class="num ci" data-v="{sort_value(low)}">[{low:+.3f}, {high:+.3f}]</td>'
            f'<td class="num{significant}" data-v="{sort_value(pair["p_holm"])}" title="{e(pair["verdict"])}">'
            f'{p_text(pair["p_holm"])}</td>'
            f'<td class="num" data-v="{wins - losses}"><a href="{group["id"]}/{pair_file(1, row["position"])}">'
            f'{wins} / {losses}</a></td>')


def pair_file(first: int, second: int) -> str:
    """The page of two runs of a group (by their places), the higher-placed first."""
    return f"pair-{first}-{second}.html"


def shared_file(table: dict, first: int, second: int) -> str:
    """The page of a run of this group against a run of another group, on the questions both hold."""
    return f"shared-g{table['other']}-{first}-{second}.html"


def verdict_lines(group: dict) -> str:
    """Who leads, in words, and each run's verdict against #1: no run is called the leader unless it is
    significantly ahead of every other complete run after Holm."""
    top, leader, tied = group["top"], group["leader"], group["tied"]
    if top is None:
        return ""
    others = [r for r in group["rows"] if (r["pair"] or {}).get("n")]
    family = others[0]["pair"]["holm_family"] if others else 0
    if leader:
        head = (f'<b>Leader: #1 {e(leader["label"])}</b>, significantly ahead of every other complete run after '
                f'Holm over {count(family, "comparison")}.')
    elif not others:
        head = f'One complete run (#1 {e(top["label"])}): nothing to pair it with, so no leader.'
    else:
        named = ", ".join(f'#{r["position"]} {e(r["label"])}' for r in tied)
        head = (f'<b>No leader: the top runs are not told apart</b> ({named}): none of them is significantly '
                f'behind #1 after Holm over {count(family, "comparison")}.')
    lines = "".join(f'<li class="{e(r["pair"]["outcome"].replace(" ", "-"))}">#{r["position"]}: '
                    f'{e(r["pair"]["verdict"])}</li>' for r in others)
    return (f'<div class="verdicts" id="verdicts-{group["id"]}"><p class="verdict">{head}</p>'
            f'<ul class="verdicts">{lines}</ul><p class="note">{e(verdicts.EXPLAINED)}</p></div>')


def pairs_matrix(group: dict) -> str:
    """Every pair of the group's complete runs: wins / losses of the column's run against the row's, each a link
    to the pair's page (its verdict, adjusted over every pair, in the cell's title)."""
    pairs = group["pairs"]
    if not pairs:
        return ""
    places = sorted({p["first"] for p in pairs} | {p["second"] for p in pairs})
    by = {(p["first"], p["second"]): p for p in pairs}
    labels = {r["position"]: r["label"] for r in group["rows"]}
    head = "".join(f'<th title="{e(labels[j])}">#{j}</th>' for j in places[1:])
    body = []
    for i in places[:-1]:
        cells = []
        for j in places[1:]:
            pair = by.get((i, j))
            if pair is None:
                cells.append("<td></td>")
                continue
            significant = " sig" if pair["outcome"] in (verdicts.AHEAD, verdicts.BEHIND) else ""
            cells.append(f'<td class="num{significant}" title="{e(pair["verdict"])}"><a href="{group["id"]}/'
                         f'{pair_file(i, j)}">{pair["wins"]["count"]} / {pair["losses"]["count"]}</a></td>')
        body.append(f'<tr><th title="{e(labels[i])}">#{i}</th>{"".join(cells)}</tr>')
    return (f'<details class="pairs" id="pairs-{group["id"]}"><summary>Compare any two runs</summary>'
            '<p class="note">Questions the column\'s run wins / loses against the row\'s (bold: significant after '
            f'Holm over every pair of this group, {count(len(pairs), "comparison")}). Click a pair for its verdict and '
            f'the questions where the two differ.</p><table class="pairs"><thead><tr><th></th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>{_shared_links(group)}</details>')


def _shared_links(group: dict) -> str:
    """Links to the runs of other question sets of the same data, compared on the questions both hold."""
    items = []
    for table in group["shared"]:
        links = " · ".join(f'<a href="{group["id"]}/{shared_file(table, p["first"], p["second"])}">'
                           f'#{p["first"]} against its #{p["second"]}</a>' for p in table["pairs"])
        items.append(f'<li>group {table["other"]} ({count(table["shared"], "shared question")}): {links}</li>')
    return (f'<p class="note">Runs of another question set of the same data, on the questions both hold:</p>'
            f'<ul class="shared">{"".join(items)}</ul>' if items else "")


def leaderboard_table(group: dict) -> str:
    """The group's leaderboard, sortable by any column (board.js), its headline metric first among the metrics."""
    headline = group["headline"]
    kind = headline["kind"]
    session, turn = headline["units"]  # each level as the benchmark calls it (BEAM: batch, message)
    coarse = "" if session == "session" else f"{session} "
    head = [("#", "num", "place (complete runs)"), ("system", "text", "system (click: its file and settings)"),
            ("mode", "text", "retrieval mode"),
            ("embedder", "text", "embedding model (none: the system embeds nothing; not disclosed: a server "
                                 "that does not say)"),
            ("settings / commit", "text", "digest of the settings snapshot and system configuration, and the "
                                          "code's commit"),
            ("complete", "text", "did every item run?"),
            ("tuned", "text", "weights tuned on this very dataset: not held out"),
            (headline["header"], "num", f'{headline["words"]}, {headline["role"]}: {headline["meaning"]}'),
            ("95% CI", "num", f"95% bootstrap interval of the {kind} mean"), ("n", "num", "questions scored"),
            (f"{coarse}any@5", "num", f"{session} recall_any@5: any gold {session} in the top 5"),
            (f"{coarse}nDCG @10", "num", f"{session} nDCG@10"),
            (f"{turn} R@10", "num", f"{turn} recall_any@10"),
            ("s/q", "num", "seconds per question: the run's wall time over its questions"),
            ("peak mem", "num", "peak resident memory of the run's process, where recorded"),
            ("Δ", "num", f"{kind} mean minus #1's, over paired questions"),
            ("Δ 95% CI", "num", "paired bootstrap interval of Δ (not adjusted for the other rows)"),
            ("p Holm", "num", f'{headline["test"]} p against #1, Holm-adjusted over this table\'s comparisons (bold: '
                              "significant, below 0.05; the verdict on hover)"),
            ("W / L", "num", "questions won / lost against #1 (click for them)")]
    ths = "".join(f'<th data-kind="{kind}" tabindex="0" title="{e(tip)}">{e(name)}</th>' for name, kind, tip in head)
    body = []
    for row in group["rows"]:
        run = row["run"]
        ci = row["strict_ci95"]
        complete = "yes" if run["complete"] else f'no: {count(run["failures"]["items"], "item")} failed'
        tuned = f'<td class="warn" title="{e(run["tuned"])}">yes</td>' if run["tuned"] else "<td>no</td>"
        label = run_label(run["system"], run["mode"])
        named = "" if row["label"] == label else f'<br><small>{e(run["name"].removesuffix(".json"))}</small>'
        tags = (f' <span class="tag arm" title="control arm ({e(run["arm"])}): knows nothing of the question; '
                'a floor to beat, not a system">arm</span>' if run["arm"] else "") + _copies_tag(run)
        embedder = run["embedder"]
        cells = [f'<td class="num" data-v="{row["position"]}">{row["position"] if run["complete"] else "–"}</td>',
                 f'<td class="wrap"><a href="{group["id"]}/runs.html#run-{row["position"]}">{e(run["system"])}</a>'
                 f'{tags}{named}</td>',
                 f'<td class="wrap">{e(run["mode"])}</td>',
                 f'<td class="wrap" title="{e(embedder)}">{e(embedder.rsplit("/", 1)[-1])}</td>',
                 f'<td><code>{e(run["digest"])}</code><br><code>{e(str(run["commit"])[:12])}</code></td>',
                 f'<td class="{"wrap" if run["complete"] else "wrap warn"}">{e(complete)}</td>', tuned,
                 f'<td class="num strict" data-v="{sort_value(row["strict"])}">{num(row["strict"])}</td>',
                 f'<td class="num ci" data-v="{sort_value(ci[0] if ci else None)}">'
                 f'{f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "–"}</td>',
                 f'<td class="num" data-v="{row["n"]}">{row["n"]}</td>']
        cells += [f'<td class="num" data-v="{sort_value(row[key])}">{num(row[key])}</td>' for key, _, _ in OTHER_METRICS]
        per_question, peak = run["seconds_per_question"], run["peak_rss_bytes"]
        unmeasured = "" if per_question is not None else ' title="not measured"'
        cells += [f'<td class="num" data-v="{sort_value(per_question)}"{unmeasured}>{seconds(per_question)}</td>',
                  f'<td class="num" data-v="{sort_value(peak)}">{_bytes(peak)}</td>', _pair_cells(row, group)]
        body.append(f'<tr data-run="{row["position"]}">{"".join(cells)}</tr>')
    return (f'<div class="scroll"><table class="board sortable" id="board-{group["id"]}"><thead><tr>{ths}</tr>'
            f'</thead><tbody>{"".join(body)}</tbody></table></div>')


def _failed(failures: dict) -> str:
    said = f'no: {count(failures["items"], "item")} failed ({count(failures["questions"], "question")})'
    return said + (f': {", ".join(map(str, failures["item_ids"][:20]))}' if failures.get("item_ids") else "")


def _copies_tag(run: dict) -> str:
    """"2 copies" beside a run that stands for identical results files (their paths on the runs page)."""
    if len(run["copies"]) < 2:
        return ""
    return (f' <span class="tag copies" title="identical results files (the same records but for timings): '
            f'{e(", ".join(run["copies"]))}">{count(len(run["copies"]), "copy", "copies")}</span>')


def _ceiling(group: dict) -> str:
    """The most of its headline metric any system reaches on the group's questions, where the results carry it."""
    value = next((r["run"]["ceiling"] for r in group["rows"] if r["run"]["ceiling"] is not None), None)
    if value is None:
        return ""
    headline = group["headline"]
    return (f'<p class="note ceiling">Ceiling: a perfect system reaches {e(headline["words"])} <b>{num(value)}</b> '
            f'here (a question with more than {headline["k"]} gold {e(headline["unit_plural"])} cannot have them all in its '
            f'top {headline["k"]}).</p>')


def judged_table(group: dict) -> str:
    head = "".join(f'<th data-kind="{k}" tabindex="0">{n}</th>' for n, k in
                   (("#", "num"), ("run", "text"), ("passed", "num"), ("queries", "num"), ("pass rate", "num"),
                    ("stale hits", "num"), ("complete", "text")))
    body = []
    for row in group["rows"]:
        s = row["support"]
        body.append(f'<tr><td class="num" data-v="{row["position"]}">{row["position"]}</td>'
                    f'<td><a href="{group["id"]}/runs.html#run-{row["position"]}">{e(row["label"])}</a>'
                    f'{_copies_tag(row["run"])}</td>'
                    f'<td class="num" data-v="{sort_value(s.get("passed"))}">{e(s.get("passed", "–"))}</td>'
                    f'<td class="num" data-v="{sort_value(s.get("queries"))}">{e(s.get("queries", "–"))}</td>'
                    f'<td class="num" data-v="{sort_value(s.get("pass_rate"))}">{num(s.get("pass_rate"))}</td>'
                    f'<td class="num" data-v="{sort_value(s.get("stale_hits"))}">{e(s.get("stale_hits", "–"))}</td>'
                    f'<td>{"yes" if row["run"]["complete"] else "no"}</td></tr>')
    return (f'<table class="board sortable" id="board-{group["id"]}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _group_section(group: dict, data: dict) -> str:
    parts = [f'<section class="group" id="{group["id"]}"><h2>Group {group["number"]}</h2>',
             f'<p class="key">{group_heading(group)}</p>', _apart(group)]
    if group["judged"]:
        parts += ['<p class="note">Judged by substrings (AdaMem episodes): a query passes when the retrieved text '
                  'holds every expected string and no forbidden one. There are no gold ids to rank against, so '
                  'these runs are not paired.</p>', judged_table(group)]
    else:
        headline = group["headline"]
        parts.append(f'<p class="note">Ordered by {e(headline["words"])}, {e(headline["role"])} '
                     f'({e(headline["meaning"])}), with a 95% bootstrap interval of its mean ({data["resamples"]} '
                     f'resamples, seed {data["seed"]}). Each complete run is paired with #1 question by question: Δ '
                     f'and its paired bootstrap interval, the {headline["test"]} p adjusted by Holm over this table, '
                     'and the questions it wins and loses (click for them). #1 is the leader only where it is '
                     'significantly ahead of every other run. Click a header to sort. Retrieval metrics, not answer '
                     'accuracy.</p>')
        parts.append(_ceiling(group))
        parts.append(leaderboard_table(group))
        parts.append(verdict_lines(group))
        parts.append(pairs_matrix(group))
    parts.append(f'<p class="links"><a href="{group["id"]}/questions.html">Every question</a> (filter by type, '
                 f'missed by all, disagreements; search by id or text) · <a href="{group["id"]}/runs.html">'
                 'Runs: files, commands and settings</a></p>')
    if not group["judged"]:
        parts.append('<div class="charts">' + "".join(
            f'<figure><img src="{group["id"]}/{name}" alt="{e(alt)}" loading="lazy"></figure>'
            for name, alt in charts.chart_names(group)) + "</div>")
    parts.append("</section>")
    return "".join(parts)


def _leader_cell(group: dict) -> str:
    """The groups table's word on who leads: the leader, or the top runs not told apart, or nothing."""
    if group.get("leader"):
        return e(group["leader"]["label"])
    if len(group.get("tied") or []) > 1:
        return "not told apart: " + e(", ".join(r["label"] for r in group["tied"]))
    return "–"


def index_page(data: dict) -> str:
    groups = data["groups"]
    summary = "".join(
        f'<tr><td><a href="#{g["id"]}">Group {g["number"]}</a></td><td>{e(g["benchmark"])}</td>'
        f'<td><code>{e(str(g["dataset_checksum"])[:12])}</code></td><td>{e(g["scoring_profile"])}</td>'
        f'<td class="num">{len(g["question_ids"])}</td><td class="num">{len(g["runs"])}</td>'
        f'<td>{_leader_cell(g)}</td></tr>' for g in groups)
    skipped = (f'<p class="note">{count(len(data["skipped"]), "other JSON file")} in the folders given: not '
               'results, skipped.</p>' if data["skipped"] else "")
    folded = len(data["files"]) - data["runs"]
    copies = (f' ({count(folded, "file")} identical to another, shown once as its copies)' if folded else "")
    body = ['<h1>memoria-farm board</h1>',
            f'<p class="note">{count(data["runs"], "run")} from {count(len(data["files"]), "results file")}'
            f'{copies} in {count(len(groups), "group")}. Runs in one group share benchmark, dataset, scoring '
            'profile and question set, so their questions pair; runs in different groups are never ranked '
            'against each other.</p>', skipped,
            '<table class="groups"><thead><tr><th>group</th><th>benchmark</th><th>dataset</th><th>profile</th>'
            f'<th>questions</th><th>runs</th><th>leader</th></tr></thead><tbody>{summary}</tbody></table>']
    body += [_group_section(g, data) for g in groups]
    return page("memoria-farm board", "".join(body), 0, scripts=True)


def runs_page(group: dict) -> str:
    parts = [crumbs(1, None, f"Group {group['number']} runs"), f"<h1>Group {group['number']}: runs</h1>",
             f'<p class="key">{group_heading(group)}</p>']
    for row in group["rows"]:
        run = row["run"]
        failures = run["failures"]
        parts.append(
            f'<section class="run" id="run-{row["position"]}"><h2>#{row["position"]} {e(row["label"])}</h2><dl>'
            + "".join(f'<dt>{"file" if not n else "identical copy"}</dt><dd><code>{e(path)}</code></dd>'
                      for n, path in enumerate(run["copies"]))
            + (f'<dt>control arm</dt><dd>{e(run["arm"])}: a floor to beat, not a system</dd>' if run["arm"] else "")
            +
            f'<dt>command</dt><dd><code>{e(run["command"])}</code></dd>'
            f'<dt>embedder</dt><dd>{e(run["embedder"])}</dd><dt>commit</dt><dd><code>{e(run["commit"])}</code></dd>'
            f'<dt>settings digest</dt><dd><code>{e(run["digest"])}</code> (SHA-256 of the settings snapshot and the '
            'system configuration)</dd>'
            f'<dt>complete</dt><dd>{"yes" if run["complete"] else e(_failed(failures))}</dd>'
            + (f'<dt>tuned on this data</dt><dd>{e(run["tuned"])}</dd>' if run["tuned"] else "")
            + f'</dl><h3>System configuration</h3><pre>{e(json.dumps(run["settings_system"], indent=1, default=str))}'
              '</pre></section>')
    return page(f"Group {group['number']} runs", "".join(parts), 1)


def _static(name: str) -> bytes:
    return resources.files("coordinator.board").joinpath("static", name).read_bytes()


def check_output(output: str | Path) -> Path:
    """`output` as a folder the board may be written into: new, empty, or a board built before; never a
    symbolic link (the build moves the folder aside and its own into place, which a link would turn against
    its target)."""
    output = Path(output)
    if output.is_symlink():
        raise ResultsError(f"{output}: is a symbolic link; name the board's folder itself as --output")
    ours = (output / MARKER).exists()
    if output.exists() and (not output.is_dir() or (any(output.iterdir()) and not ours)):
        raise ResultsError(f"{output}: exists and is not a board folder (no {MARKER} in it); "
                           "choose an empty or new --output")
    return output


def write_site(data: dict, output: str | Path) -> dict:
    """Write the board into `output` (replacing a board built there before; refusing any other folder that is
    not empty) and return what was written: pages, files and bytes.

    The site is built in a fresh folder beside `output` and moved into place at
    the end, so a failed build leaves the previous board as it was.
    """
    output = check_output(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        _write_all(data, staging)
        if output.exists():
            retired = output.with_name(f".{output.name}.old-{os.getpid()}")
            output.rename(retired)
            staging.rename(output)
            shutil.rmtree(retired)
        else:
            staging.rename(output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = [p for p in output.rglob("*") if p.is_file()]
    return {"output": str(output), "files": len(files), "bytes": sum(p.stat().st_size for p in files),
            "question_pages": sum(len(g["questions"]) for g in data["groups"])}


def _write_all(data: dict, root: Path) -> None:
    root.chmod(0o755)
    (root / MARKER).write_text("built by memfarm board; the next build replaces this folder\n", encoding="utf-8")
    for name in STATIC:
        (root / name).write_bytes(_static(name))
    (root / "index.html").write_text(index_page(data), encoding="utf-8")
    for group in data["groups"]:
        folder = root / group["id"]
        (folder / "q").mkdir(parents=True)
        (folder / "runs.html").write_text(runs_page(group), encoding="utf-8")
        (folder / "questions.html").write_text(questions_page(group), encoding="utf-8")
        questions = group["questions"]
        for index, question in enumerate(questions):
            page = question_page(group, question, questions[index - 1] if index else None,
                                 questions[index + 1] if index + 1 < len(questions) else None)
            (folder / question["page"]).write_text(page, encoding="utf-8")
        if group["judged"]:
            continue
        for pair in group["pairs"]:
            if pair["n"]:
                (folder / pair_file(pair["first"], pair["second"])).write_text(pair_page(group, pair), encoding="utf-8")
        for table in group["shared"]:
            for pair in table["pairs"]:
                if pair["n"]:
                    (folder / shared_file(table, pair["first"], pair["second"])).write_text(
                        pair_page(group, pair, table), encoding="utf-8")
        for name, svg in charts.group_charts(group).items():
            (folder / name).write_text(svg, encoding="utf-8")
