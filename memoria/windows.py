"""Turn windows: overlapping runs of consecutive turns, embedded as one text each.

A single short turn ("Yes, last weekend!") often says little on its own; the
turns around it say what it is about. A window holds `size` consecutive turns
of one session (windows start every `size - overlap` turns), written with each
turn's speaker and, once at the top, the session's date, so the embedding sees
who said what and when. A window hit credits every turn it holds; a turn keeps
the best score of the windows it is in.

Sessions are told apart by what the harness may pass in metadata (`label`,
`session_index`, `date`); rows without any of them form one run per label.
"""

from __future__ import annotations

from memoria.ties import best_first


def session_key(metadata: dict) -> tuple:
    """Which session a memory belongs to, from the metadata it was stored with."""
    return (metadata.get("label"), metadata.get("session_index"), metadata.get("date"))


def _line(text: str, metadata: dict, turn_chars: int) -> str:
    speaker = str(metadata.get("speaker") or metadata.get("role") or "").strip()
    text = " ".join(text.split())
    if turn_chars > 0 and len(text) > turn_chars:
        text = text[:turn_chars].rstrip() + " ..."
    if speaker and not text.lower().startswith(speaker.lower() + ":"):
        text = f"{speaker}: {text}"
    return text


def window_text(turns: list[tuple[str, dict]], turn_chars: int) -> str:
    """The text embedded for one window: the session date, then one line per turn with its speaker.

    Each turn is cut to `turn_chars` characters so that every turn of the window
    fits in the model's input, however long one of them is.
    """
    date = next((str(m.get("date")) for _, m in turns if m.get("date")), "")
    lines = [_line(text, metadata, turn_chars) for text, metadata in turns]
    return (f"[{date}]\n" if date else "") + "\n".join(lines)


def check_window(size: int, overlap: int) -> None:
    """Refuse window settings no window can have; size 0 means no windows (any overlap then)."""
    if size < 0 or (size and not 0 <= overlap < size):
        raise ValueError(f"window size {size} with overlap {overlap}: need size >= 0 and 0 <= overlap < size")


def spans(count: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """`[start, end)` positions of the windows over `count` consecutive turns; the last one ends at `count`."""
    if size < 1:
        raise ValueError(f"window size must be at least 1, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"window overlap must be in [0, size), got {overlap} for size {size}")
    stride, out, start = size - overlap, [], 0
    while start < count:
        end = min(start + size, count)
        out.append((start, end))
        if end == count:
            break
        start += stride
    return out


def build_windows(rows: list[tuple[int, str, dict]], size: int, overlap: int, turn_chars: int) -> list[dict]:
    """Windows over `rows` (id, text, metadata), in id order: `[{"turns": [ids], "text": str}, ...]`.

    A window never crosses from one session into another.
    """
    runs: list[list[tuple[int, str, dict]]] = []
    for row in sorted(rows, key=lambda r: r[0]):
        if runs and session_key(runs[-1][-1][2]) == session_key(row[2]):
            runs[-1].append(row)
        else:
            runs.append([row])
    windows = []
    for run in runs:
        for start, end in spans(len(run), size, overlap):
            part = run[start:end]
            windows.append({"turns": [r[0] for r in part],
                            "text": window_text([(r[1], r[2]) for r in part], turn_chars)})
    return windows


def credit_turns(window_hits: list[tuple[int, float]], window_turns: list[list[int]]) -> list[tuple[int, float]]:
    """Window hits (window position, score) as turn hits: each turn keeps its best window's score.

    Best first, equal scores ordered by turn id.
    """
    best: dict[int, float] = {}
    for window, score in window_hits:
        for turn in window_turns[window]:
            if turn not in best or score > best[turn]:
                best[turn] = score
    return best_first(best.items())
