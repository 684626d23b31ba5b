"""The board's question pages: every question of a group with filters, one page per question with each run's
top candidates and its gold marked, and two runs side by side on the questions both scored."""

from __future__ import annotations

from coordinator.board.run_view import SHOWN_CANDIDATES, natural_key
from coordinator.board.markup import count, crumbs, e, group_heading, num, page
from coordinator.results.verdicts import EXPLAINED, p_text


#: Shown where every run failed the question's item, so that no results file holds its text.
_UNREAD = "(not in any results file: every run failed this question's item)"


def _mark(answer: dict) -> tuple[str, str]:
    """(class, symbol) of a run's value of its group's headline metric on one question."""
    if answer["status"] == "failed":
        return "failed", "failed"
    if answer.get("strict") is None:
        return "none", "–"
    return ("hit", "✓") if answer["strict"] else ("miss", "✗")


def _asked(headline: dict) -> str:
    """The headline as a question of one run: `every gold session into its top 5`."""
    k, unit = headline["k"], headline["unit"]
    return {"recall_all": f"every gold {unit} into its top {k}", "recall_any": f"a gold {unit} into its top {k}"}.get(
        headline["name"], f"a gold {unit} into its top {k} ({headline['name']} above 0)")


def questions_page(group: dict) -> str:
    rows, headline = group["rows"], group["headline"]
    types = sorted({q["type"] for q in group["questions"]})
    legend = "".join(f'<li><b>#{r["position"]}</b> {e(r["label"])}</li>' for r in rows)
    heads = "".join(f'<th title="{e(r["label"])}">#{r["position"]}</th>' for r in rows)
    body = []
    for q in group["questions"]:
        cells = "".join(f'<td class="{_mark(a)[0]}">{_mark(a)[1]}</td>' for a in q["answers"])
        text = str(q["text"] or "")
        body.append(f'<tr data-type="{e(q["type"])}" data-missed="{int(q["missed_by_all"])}" '
                    f'data-disagree="{int(q["disagree"])}"><td><a href="{q["page"]}">{e(q["id"])}</a></td>'
                    f'<td>{e(q["type"])}</td><td class="qtext">{e(text[:300])}</td>{cells}</tr>')
    options = "".join(f'<option value="{e(t)}">{e(t)}</option>' for t in types)
    missed = sum(q["missed_by_all"] for q in group["questions"])
    disagree = sum(q["disagree"] for q in group["questions"])
    controls = ('<div class="filters" id="filters">'
                '<label>Search <input type="search" id="search" placeholder="id or words of the question"></label>'
                f'<label>Type <select id="type"><option value="">every type</option>{options}</select></label>'
                f'<label><input type="checkbox" id="missed"> missed by all ({missed})</label>'
                f'<label><input type="checkbox" id="disagree"> runs disagree ({disagree})</label>'
                '<span id="shown"></span></div>')
    parts = [crumbs(1, None, f"Group {group['number']} questions"),
             f"<h1>Group {group['number']}: every question</h1>", f'<p class="key">{group_heading(group)}</p>',
             f'<p class="note">Each cell: did the run get {e(_asked(group["headline"]))} ({e(headline["named"])})? '
             '✓ yes, ✗ no, – not scored (an abstention or a question without gold), failed: the item failed. '
             f'Runs as on the leaderboard:</p><ol class="runs">{legend}</ol>', controls,
             f'<table class="questions" id="questions"><thead><tr><th>id</th><th>type</th><th>question</th>{heads}'
             f'</tr></thead><tbody>{"".join(body)}</tbody></table>']
    return page(f"Group {group['number']} questions", "".join(parts), 1, scripts=True)


def _ranks(answer: dict) -> str:
    def one(pair, what):
        first, last = pair
        if first is None:
            return f"no gold {what} among the {answer['kept']} kept"
        return (f"first gold {what} at rank {first}, "
                + (f"every gold {what} by rank {last}" if last is not None else f"not every gold {what} among the "
                   f"{answer['kept']} kept"))
    parts = [one(answer["session_ranks"], "session")]
    if answer["turn_ranks"] != (None, None) or answer.get("turn_recall_any@10") is not None:
        parts.append(one(answer["turn_ranks"], "turn"))
    return "; ".join(parts)


def _overview(rows: list[dict], answers: list[dict], headline: dict) -> str:
    """One line per run: its headline mark and where the gold sat, linking to its candidates below."""
    lines = []
    for row, answer in zip(rows, answers):
        cls, symbol = _mark(answer)
        if answer["status"] == "failed":
            ranks = ["", "", "", ""]
        else:
            ranks = [e(v if v is not None else "–") for v in (*answer["session_ranks"], *answer["turn_ranks"])]
        lines.append(f'<tr><td><a href="#run-{row["position"]}">#{row["position"]} {e(row["label"])}</a></td>'
                     f'<td class="{cls}">{symbol}</td>' + "".join(f'<td class="num">{r}</td>' for r in ranks) + "</tr>")
    return (f'<table class="overview"><thead><tr><th>run</th><th>{e(headline["header"])}</th>'
            '<th>first gold session</th><th>every gold session by</th><th>first gold turn</th><th>every gold turn by</th></tr></thead>'
            f'<tbody>{"".join(lines)}</tbody></table>')


def _values(answer: dict, headline: dict) -> str:
    """A run's values on one question: its headline, then session recall_any@5 and turn recall_any@10 (a value the
    headline already gave is not said twice), each level as the benchmark calls it."""
    session, turn = headline["units"]
    named = f'{headline["name"]}@{headline["k"]}'
    said = [(f'{named}' if headline["unit"] == "session" else f'{headline["unit"]} {named}', answer["strict"])]
    for metric, label, key in (("session:recall_any@5", "recall_any@5" if session == "session" else
                                f"{session} recall_any@5", "session_recall_any@5"),
                               ("turn:recall_any@10", f"{turn} recall@10", "turn_recall_any@10")):
        if metric != headline["metric"]:
            said.append((label, answer[key]))
    return ", ".join(f"{label} {num(value)}" for label, value in said)


def question_page(group: dict, question: dict, previous: dict | None, following: dict | None) -> str:
    rows = group["rows"]
    nav = []
    if previous:
        nav.append(f'<a href="{previous["number"]:05d}.html" rel="prev">← previous</a>')
    if following:
        nav.append(f'<a href="{following["number"]:05d}.html" rel="next">next →</a>')
    gold_s = ", ".join(f"<code>{e(s)}</code>" for s in question["gold_sessions"]) or "none"
    gold_t = ", ".join(f"<code>{e(t)}</code>" for t in question["gold_turns"]) or "none"
    status = ("abstention (not scored)" if question["abstention"] else
              f"excluded: {e(question['excluded'])}" if question["excluded"] else "scored")
    parts = [crumbs(2, group, question["id"]), f'<p class="pager">{" · ".join(nav)}</p>',
             f'<h1>Question <code>{e(question["id"])}</code></h1>',
             f'<blockquote class="question">{e(question["text"]) if question["text"] is not None else _UNREAD}'
             '</blockquote><dl>'
             f'<dt>type</dt><dd>{e(question["type"])}</dd>'
             f'<dt>expected answer</dt><dd>{e("–" if question["expected"] is None else question["expected"])}</dd>'
             f'<dt>gold sessions</dt><dd>{gold_s}</dd><dt>gold turns</dt><dd>{gold_t}</dd>'
             f'<dt>status</dt><dd>{status}</dd></dl>',
             _overview(rows, question["answers"], group["headline"]),
             '<p class="note">Per run, its top ' + str(SHOWN_CANDIDATES) + ' candidates: <span class="gold-turn">'
             '★ a gold turn</span>, <span class="gold-session">◆ a turn of a gold session</span>. Session ranks count '
             'each session once, at its first turn, as the session metrics do. A score is the system\'s own; a system '
             'may reorder its list after scoring (Memoria <code>full</code> diversifies its head with MMR), so the '
             'order, not the score, is what is measured.</p>']
    for row, answer in zip(rows, question["answers"]):
        cls, symbol = _mark(answer)
        head = f'<h2 class="{cls}">#{row["position"]} {e(row["label"])} <span class="mark">{symbol}</span></h2>'
        if answer["status"] == "failed":
            parts.append(f'<section class="answer" id="run-{row["position"]}" data-run="{row["position"]}">{head}'
                         f'<p class="warn">the item '
                         f'failed: {e(answer["error"])}</p></section>')
            continue
        lines = []
        for c in answer["top"]:
            mark = {"turn": ("gold-turn", "★"), "session": ("gold-session", "◆")}.get(c["gold"], ("", ""))
            score = c["score"] if isinstance(c["score"], (int, float)) else None
            lines.append(f'<tr class="{mark[0]}"><td class="num">{e(c["rank"])}</td><td class="gold">{mark[1]}</td>'
                         f'<td><code>{e(c["session"])}</code></td><td><code>{e(c["turn"])}</code></td>'
                         f'<td class="num">{num(score)}</td><td class="ctext">{e(c["text"])}</td></tr>')
        values = _values(answer, group["headline"])
        parts.append(f'<section class="answer" id="run-{row["position"]}" data-run="{row["position"]}">{head}'
                     f'<p class="ranks">{e(_ranks(answer))}. {e(values)}.</p>'
                     '<table class="candidates"><thead><tr><th>rank</th><th>gold</th><th>session</th><th>turn</th>'
                     f'<th>score</th><th>text</th></tr></thead><tbody>{"".join(lines)}</tbody></table></section>')
    return page(f"Question {question['id']}", "".join(parts), 2)


def pair_page(group: dict, pair: dict, shared: dict | None = None) -> str:
    """Two runs on the questions both scored: the counts, the verdict and the questions where they differ, each
    linking to its question page. `pair` is an entry of `data.all_pairs` (two runs of the group) or, with
    `shared` (a `data.shared_pairs` table), a run of this group against a run of another question set."""
    by_id = {q["id"]: q for q in group["questions"]}
    rows = {r["position"]: r for r in group["rows"]}

    def listing(ids: list[str]) -> str:
        if not ids:
            return '<p class="note">none</p>'
        ids = sorted(ids, key=natural_key)  # q2 before q11 before q100, as a reader counts
        lines = "".join(f'<tr><td><a href="{by_id[i]["page"]}">{e(i)}</a></td><td>{e(by_id[i]["type"])}</td>'
                        f'<td class="qtext">{e(str(by_id[i]["text"] or "")[:300])}</td></tr>' for i in ids)
        return f'<table class="questions"><thead><tr><th>id</th><th>type</th><th>question</th></tr></thead>' \
               f'<tbody>{lines}</tbody></table>'

    first, second = pair["baseline"], pair["system"]
    if shared is None:
        first, second = f'#{pair["first"]} {first}', f'#{pair["second"]} {second}'
        family = f'every pair of this group\'s complete runs ({count(pair["holm_family"], "comparison")})'
        scope = (f'{count(pair["n"], "question")} scored by both of the group\'s {len(group["question_ids"])}')
    else:
        family = (f'every pair of a run of group {shared["group"]} with a run of group {shared["other"]} '
                  f'({count(pair["holm_family"], "comparison")})')
        scope = (f'{count(shared["shared"], "question")} both question sets hold ({shared["only_here"]} only in group '
                 f'{shared["group"]}, {shared["only_there"]} only in group {shared["other"]}, left out), '
                 f'{pair["n"]} of them scored by both')
    low, high = pair["ci95"]
    title = f"{first} against {second}"
    parts = [crumbs(1, group, title), f"<h1>{e(first)} against {e(second)}</h1>",
             f'<p class="key">{group_heading(group)}</p>',
             f'<p class="verdict"><b>{e(pair["verdict"])}</b></p>',
             f'<p>{e(group["headline"]["metric"])} on the {scope}: {pair["baseline_value"]:.3f} against '
             f'{pair["system_value"]:.3f}, Δ {pair["delta"]:+.3f} [{low:+.3f}, {high:+.3f}], p {p_text(pair["p_value"])}'
             f' ({e(pair["test"])}), Holm-adjusted {p_text(pair["p_holm"])} over {family}; '
             f'{pair["wins"]["count"]} won by {e(second)}, {pair["losses"]["count"]} won by {e(first)}, '
             f'{count(pair["ties"]["count"], "tie")}.</p>']
    top_pair = (rows.get(pair["second"]) or {}).get("pair") if shared is None and pair["first"] == 1 else None
    if top_pair and top_pair.get("verdict"):
        parts.append(f'<p class="note">On the leaderboard, against #1 alone (Holm over '
                     f'{count(top_pair["holm_family"], "comparison")}): {e(top_pair["verdict"])}</p>')
    parts.append(f'<p class="note">{e(EXPLAINED)} Only the questions where the two differ are listed; the '
                 f'{count(pair["ties"]["count"], "tie")} and questions either run did not score are not.</p>')
    parts += [f'<h2 id="wins">Won by {e(second)}, lost by {e(first)} ({pair["wins"]["count"]})</h2>',
              listing(pair["wins"]["question_ids"]),
              f'<h2 id="losses">Lost by {e(second)}, won by {e(first)} ({pair["losses"]["count"]})</h2>',
              listing(pair["losses"]["question_ids"])]
    return page(title, "".join(parts), 1)
