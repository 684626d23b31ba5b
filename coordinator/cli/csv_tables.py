"""`analyze --csv` and `compare --csv`: the tables the terminal shows, one row a line, for a spreadsheet or pandas.

Written here from what the results layer returns (analysis rows, a comparison table), so a field added there
becomes a column: a list of two numbers (an interval) becomes its `_low` and `_high` columns, a list of question
ids or a mapping with a `count` (wins, losses, ties) its count, any other mapping its JSON text."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path

from adapters.errors import MemfarmError


def _cells(row: dict) -> dict:
    cells = {}
    for key, value in row.items():
        if isinstance(value, (list, tuple)) and len(value) == 2 and all(
                isinstance(v, (int, float)) or v is None for v in value):
            cells[f"{key}_low"], cells[f"{key}_high"] = value
        elif isinstance(value, (list, tuple)):
            cells[key] = len(value)
        elif isinstance(value, dict) and "count" in value:  # wins, losses, ties: their count, not their ids
            cells[key] = value["count"]
        elif isinstance(value, dict):
            cells[key] = json.dumps(value, sort_keys=True, default=str)
        else:
            cells[key] = "" if value is None else value
    return cells


def write_rows(path: str | Path, rows: Iterable[dict]) -> Path:
    """Write dict rows as CSV with a header: the union of their columns in the order first seen."""
    flat = [_cells(row) for row in rows]
    columns: dict[str, None] = {}
    for row in flat:
        columns.update(dict.fromkeys(row))
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=list(columns), restval="")
            writer.writeheader()
            writer.writerows(flat)
    except OSError as exc:
        raise MemfarmError(f"{path}: cannot write the CSV ({exc.strerror or exc})") from None
    return path


def metric_rows(results: dict) -> list[dict]:
    """One row per metric value of a results file: the whole run (`group` all) and each group (`by_question_type`
    and the like, `group` its name), per level and depth."""
    head = {"file": results.get("_path"), "benchmark": results.get("benchmark"), "system": results.get("system"),
            "mode": results.get("retrieval_mode"), "profile": results.get("scoring_profile")}
    rows = []

    def add(grouping: str, group: str, summary: dict) -> None:
        evaluable = summary.get("evaluable") or {}
        for level in ("session", "turn"):
            for name, value in sorted((summary.get(level) or {}).items()):
                metric, _, k = name.partition("@")
                rows.append({**head, "grouping": grouping, "group": group, "level": level, "metric": metric,
                             "k": k, "value": value, "evaluable": evaluable.get(level)})

    metrics = results.get("metrics") or {}
    add("all", "all", metrics.get("all") or {})
    for key, groups in metrics.items():
        if key.startswith("by_") and isinstance(groups, dict):
            for name, summary in groups.items():
                add(key[3:], name, summary or {})
    return rows
