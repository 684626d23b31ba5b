"""The board's pictures as SVG text: recall@K curves, the headline metric per question type, cost against quality.

Written here rather than by matplotlib: a few hundred bytes each, sharp at any
size, and quick enough for a board of many groups. Every label is escaped; the
pages show them through `<img>`, where an SVG never runs script anyway.
"""

from __future__ import annotations

import math
from html import escape

#: Ten colours that stay apart for readers with the common colour-vision deficiencies (Tableau 10).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")
WIDTH, HEIGHT = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 52, 210, 30, 48
LEGEND_CHARS = 28
#: A legend entry wraps over at most this many lines (a name past them, far longer than any system's, is cut).
LEGEND_LINES = 6
LEGEND_LINE_HEIGHT = 13
#: The K of a group's recall@K curves.
K_CURVE = (1, 3, 5, 10, 30, 50)


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _e(value) -> str:
    return escape(str(value), quote=True)


def _clip(text: str, chars: int = LEGEND_CHARS) -> str:
    text = str(text)
    return text if len(text) <= chars else text[:chars - 1] + "…"


def wrap(text: str, chars: int = LEGEND_CHARS, lines: int = LEGEND_LINES) -> list[str]:
    """`text` in lines of at most `chars` characters, broken after a space, `/`, `-`, `_` or `.` where one falls
    in the second half of a line and anywhere otherwise; past `lines` lines the last one ends in an ellipsis."""
    text, out = str(text), []
    while text:
        if len(text) <= chars:
            out.append(text)
            break
        cut = max(text.rfind(mark, chars // 2, chars) for mark in " /-_.")
        cut = cut + 1 if cut > 0 else chars
        out.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if len(out) > lines:
        out = out[:lines - 1] + [_clip(out[lines - 1] + " " + out[lines], chars)]
    return out or [""]


def _frame(title: str, x_label: str, y_label: str, body: list[str], legend: list[tuple[str, str, bool]],
           below: int = 0) -> str:
    """The chart around `body`: title, axes' names, plot box and legend; `below` more pixels under the plot for
    tick labels of several lines."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    entries = [(wrap(label), fill, dashed) for label, fill, dashed in legend]
    lines = sum(len(text) for text, _, _ in entries) + max(0, len(entries) - 1) * 0.25
    height = max(HEIGHT + below, math.ceil(TOP + 8 + lines * LEGEND_LINE_HEIGHT + 10))  # a long legend: taller
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">',
             f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
             f'<text x="{LEFT}" y="20" font-size="13" font-weight="bold">{_e(title)}</text>',
             f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT + below - 10}" text-anchor="middle">{_e(x_label)}</text>',
             f'<text transform="translate(14 {TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
             f'{_e(y_label)}</text>',
             f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    parts += body
    y, x = TOP + 8.0, WIDTH - RIGHT + 14
    for text, fill, dashed in entries:  # each entry wraps over its own lines, whole: never cut at one line
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        parts.append(f'<line x1="{x}" y1="{y:.1f}" x2="{x + 18}" y2="{y:.1f}" stroke="{fill}" stroke-width="3"{dash}/>')
        spans = "".join(f'<tspan x="{x + 24}" dy="{0 if n == 0 else LEGEND_LINE_HEIGHT}">{_e(line)}</tspan>'
                        for n, line in enumerate(text))
        parts.append(f'<text class="legend" x="{x + 24}" y="{y + 4:.1f}">{spans}</text>')
        y += (len(text) + 0.25) * LEGEND_LINE_HEIGHT
    parts.append("</svg>")
    return "".join(parts)


def _y(value: float) -> float:
    plot_h = HEIGHT - TOP - BOTTOM
    return TOP + plot_h * (1.0 - max(0.0, min(1.0, value)))


def _y_grid() -> list[str]:
    plot_w = WIDTH - LEFT - RIGHT
    out = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = _y(tick)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
    return out


def _log_x(value: float, low: float, high: float) -> float:
    plot_w = WIDTH - LEFT - RIGHT
    if high <= low:
        return LEFT + plot_w / 2
    return LEFT + plot_w * (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))


def recall_curves(title: str, y_label: str, series: list[dict]) -> str:
    """One line per series (`label`, `colour`, `points`: [(K, value)], optional `dashed`) on a log K axis."""
    ks = sorted({k for s in series for k, _ in s["points"]})
    body = _y_grid()
    if ks:
        low, high = ks[0], ks[-1]
        for k in ks:
            x = _log_x(k, low, high)
            body.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{k}</text>')
        for s in series:
            points = " ".join(f"{_log_x(k, low, high):.1f},{_y(v):.1f}" for k, v in s["points"] if v is not None)
            dash = ' stroke-dasharray="5 3"' if s.get("dashed") else ""
            body.append(f'<polyline points="{points}" fill="none" stroke="{s["colour"]}" stroke-width="2"{dash}/>')
            body += [f'<circle cx="{_log_x(k, low, high):.1f}" cy="{_y(v):.1f}" r="3" fill="{s["colour"]}"/>'
                     for k, v in s["points"] if v is not None]
    legend = [(s["label"], s["colour"], bool(s.get("dashed"))) for s in series]
    return _frame(title, "K (log scale)", y_label, body, legend)


#: Tick labels of the bars chart: at most this many lines each, in this font size (px) and line height.
TICK_LINES, TICK_FONT, TICK_LINE_HEIGHT = 3, 10, 11
#: The average width of a character of the tick labels' sans-serif font, in px, as the labels are measured.
TICK_CHAR_WIDTH = 5.8


def tick_labels(categories: list[str], chars: int, lines: int = TICK_LINES) -> list[list[str]]:
    """Each category's label in at most `lines` lines of `chars` characters (`wrap`: broken after `-`, `_`, `/`,
    `.` or a space), all different: where two would read the same (a name past the lines, cut with an ellipsis),
    each of those is numbered by its place (`3: single-…`), so no two bars share a label."""
    wrapped = [wrap(category, chars, lines) for category in categories]
    joined = [" ".join(label) for label in wrapped]
    for index, label in enumerate(wrapped):
        if joined.count(joined[index]) > 1:
            wrapped[index] = wrap(f"{index + 1}: {categories[index]}", chars, lines)
    return wrapped


def grouped_bars(title: str, y_label: str, categories: list[str], series: list[dict]) -> str:
    """Bars per category, one per series (`label`, `colour`, `values` aligned with `categories`, None: no bar).
    Category names wrap under their bars (`tick_labels`); each carries its full name as an SVG `<title>`."""
    plot_w = WIDTH - LEFT - RIGHT
    body = _y_grid()
    slot = plot_w / max(1, len(categories))
    width = slot * 0.8 / max(1, len(series))
    base = _y(0.0)
    ticks = tick_labels(categories, max(4, int(slot / TICK_CHAR_WIDTH)))
    for c, category in enumerate(categories):
        start = LEFT + c * slot + slot * 0.1
        for s_index, s in enumerate(series):
            value = s["values"][c]
            if value is None:
                continue
            top = _y(value)
            body.append(f'<rect x="{start + s_index * width:.1f}" y="{top:.1f}" width="{max(width - 1, 1):.1f}" '
                        f'height="{max(base - top, 0.5):.1f}" fill="{s["colour"]}"/>')
        centre = LEFT + c * slot + slot / 2
        spans = "".join(f'<tspan x="{centre:.1f}" dy="{0 if n == 0 else TICK_LINE_HEIGHT}">{_e(line)}</tspan>'
                        for n, line in enumerate(ticks[c]))
        body.append(f'<text class="tick" x="{centre:.1f}" y="{HEIGHT - BOTTOM + 14}" text-anchor="middle" '
                    f'font-size="{TICK_FONT}"><title>{_e(category)}</title>{spans}</text>')
    return _frame(title, "question type", y_label, body, [(s["label"], s["colour"], False) for s in series],
                  below=(TICK_LINES - 1) * TICK_LINE_HEIGHT)


#: The width of a character of a dot's tag in the cost chart, in px (11 px sans-serif), and a tag's height.
TAG_CHAR_WIDTH, TAG_HEIGHT = 6.5, 12


def place_tags(dots: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """(x, y, text) of each dot's tag so that no two tags overlap: dots that sit within a tag's height of each
    other share one tag (`#1, #3`); each tag goes right of its dot, or the first of a few nearby places that
    overlaps no dot and no tag placed before (left of the dot, above, below), in the order the dots are given."""
    clusters: list[list] = []
    for x, y, text in dots:
        near = next((c for c in clusters if abs(c[0] - x) < 8 and abs(c[1] - y) < 8), None)
        if near:
            near[2].append(text)
        else:
            clusters.append([x, y, [text]])
    placed = [(x - 6, y - 6, x + 6, y + 6) for x, y, _ in dots]  # a tag covers no dot either
    out = []
    for x, y, texts in clusters:
        text = ", ".join(texts)
        width = len(text) * TAG_CHAR_WIDTH
        right_edge = WIDTH - RIGHT
        tries = [(x + 9, y + 4), (x - 9 - width, y + 4), (x + 9, y - 10), (x + 9, y + 18), (x - 9 - width, y - 10),
                 (x - 9 - width, y + 18), (x + 9, y - 24), (x + 9, y + 32)]
        tries = [(tx, ty) for tx, ty in tries if tx >= LEFT and tx + width <= right_edge] or tries
        for tx, ty in tries:
            box = (tx, ty - TAG_HEIGHT + 2, tx + width, ty + 2)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                break
        else:
            tx, ty = tries[0]
            box = (tx, ty - TAG_HEIGHT + 2, tx + width, ty + 2)
        placed.append(box)
        out.append((tx, ty, text))
    return out


def cost_quality(title: str, points: list[dict], value_name: str = "session recall_all@5") -> str:
    """One dot per run: `seconds` per question (log axis) against its headline `value` (`value_name`), in its
    `colour`."""
    plot_w = WIDTH - LEFT - RIGHT
    body = _y_grid()
    known = [p for p in points if p.get("seconds") and p.get("value") is not None]
    if known:
        low, high = min(p["seconds"] for p in known), max(p["seconds"] for p in known)
        low, high = (low / 2, high * 2) if low == high else (low / 1.2, high * 1.2)
        decade = 10.0 ** math.floor(math.log10(low))
        while decade <= high:
            for step in (1, 2, 5):
                tick = decade * step
                if low <= tick <= high:
                    x = _log_x(tick, low, high)
                    body.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM}" stroke="#eee"/>')
                    body.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{tick:g}</text>')
            decade *= 10
        dots = []
        for p in known:
            x = _log_x(p["seconds"], low, high)
            body.append(f'<circle cx="{x:.1f}" cy="{_y(p["value"]):.1f}" r="6" fill="{p["colour"]}" '
                        'stroke="#333" stroke-width="0.5"/>')
            dots.append((x, _y(p["value"]), str(p.get("tag", ""))))
        body += [f'<text class="tag" x="{x:.1f}" y="{y:.1f}">{_e(text)}</text>' for x, y, text in place_tags(dots)]
    elif points:
        body.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{TOP + 40}" text-anchor="middle">no run records its '
                    'seconds per question</text>')
    legend = [(p["label"], p["colour"], False) for p in points]
    return _frame(title, "seconds per question (the run's wall time over its questions; log scale)",
                  value_name, body, legend)


def chart_names(group: dict) -> list[tuple[str, str]]:
    """The SVG files of a ranked group (`group_charts`) and what each shows, as the page names them."""
    headline = group["headline"]
    session, turn = headline["units"]
    return [("recall_all_session.svg", f"{session} recall_all@K per run"),
            ("recall_any_session.svg", f"{session} recall_any@K per run"),
            ("recall_any_turn.svg", f"{turn} recall_any@K per run"),
            ("by_type.svg", f'{headline["words"]} per question type per run'),
            ("cost.svg", f'seconds per question against {headline["words"]}')]


def group_charts(group: dict) -> dict[str, str]:
    """The SVG files of a ranked group, by file name."""
    rows, headline = group["rows"], group["headline"]
    session, turn = (unit.capitalize() for unit in headline["units"])
    words = headline["words"][:1].upper() + headline["words"][1:]
    tags = [(f"#{r['position']} {r['label']}", colour(i)) for i, r in enumerate(rows)]

    def curve(level: str, name: str) -> list[dict]:
        return [{"label": label, "colour": fill,
                 "points": [(k, (r["run"]["summary"].get(level) or {}).get(f"{name}@{k}")) for k in K_CURVE
                            if (r["run"]["summary"].get(level) or {}).get(f"{name}@{k}") is not None]}
                for (label, fill), r in zip(tags, rows)]

    types = sorted({q["type"] for q in group["questions"]})
    per_type = []
    for index, ((label, fill), _) in enumerate(zip(tags, rows)):
        values = []
        for kind in types:
            got = [q["answers"][index].get("strict") for q in group["questions"]
                   if q["type"] == kind and q["answers"][index]["status"] == "scored"]
            got = [v for v in got if v is not None]
            values.append(sum(got) / len(got) if got else None)
        per_type.append({"label": label, "colour": fill, "values": values})
    points = [{"label": label, "colour": fill, "tag": f"#{r['position']}", "seconds": r["run"]["seconds_per_question"],
               "value": r["strict"]} for (label, fill), r in zip(tags, rows)]
    return {
        "recall_all_session.svg": recall_curves(
            f"{session} recall_all@K" + (" (strict)" if headline["kind"] == "strict" else ""), "recall_all@K",
            curve("session", "recall_all")),
        "recall_any_session.svg": recall_curves(f"{session} recall_any@K", "recall_any@K",
                                                curve("session", "recall_any")),
        "recall_any_turn.svg": recall_curves(f"{turn} recall_any@K", "recall_any@K", curve("turn", "recall_any")),
        "by_type.svg": grouped_bars(f"{words} per question type", f'{headline["name"]}@{headline["k"]}', types,
                                    per_type),
        "cost.svg": cost_quality("Cost against quality", points, headline["words"]),
    }
