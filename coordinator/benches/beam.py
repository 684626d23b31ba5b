"""`memfarm bench beam`: the cheap systems and the control arms on BEAM chats at the message level, per chat size
and per ability, beside the issue's plain BM25 computed here over the same messages.

Each system runs as its own `memfarm run beam` child on the `--dataset` given (its wall time and peak RSS its
own); the plain BM25 is rank-bm25's Okapi over lower-cased `[a-z0-9]+` tokens, every message the reader gives a
doc and every question with gold asked as it is: the measurement the issue's figures were made with (there over
the messages with their `->->` markers kept), so a reader sees what the farm's own BM25 runs (bm25s, Memoria's
`bm25` mode, each with a tokenizer and a variant of its own) give beside it. No paired statistics: a row is a mean
over the same questions, the same gold and the same ceiling.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from adapters.benchmarks import BENCHMARKS
from adapters.benchmarks.beam.layout import ChatFolder, find_chats
from adapters.jsonstream import iter_array
from adapters.metrics import level_metrics
from coordinator.benches.common import fresh_workdir, measure_memfarm, metric, write_bench
from coordinator.results.run_files import ResultsFile

#: (label, `memfarm run` options) of the systems the bench runs by default: none needs a model of its own but
#: Memoria's `bm25` mode, which loads the embedder all the same.
SYSTEMS = (("bm25s", ["--system", "bm25s"]), ("memoria bm25", ["--retrieval-mode", "bm25"]),
           ("recency arm", ["--system", "recency"]), ("random arm", ["--system", "random"]))
PLAIN = "plain BM25"
#: The plain BM25 over the messages as the files hold them, `->->` markers and all: how the issue measured it.
KEPT = "plain BM25, markers kept"
#: The metrics of the table, as a results file spells them at the turn (message) level, and their column names.
METRICS = (("recall_any@10", "recall_any_10"), ("recall_all@10", "recall_all_10"), ("ndcg_any@10", "ndcg_10"))


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def raw_contents(chat: ChatFolder) -> dict[str, str]:
    """Each message's content as its file holds it, marker and all, by its turn id (a later part's ids follow
    the part before, as the reader shifts them)."""
    contents, offset = {}, 0
    for _, file in chat.chat_files():
        last = -1
        for batch in iter_array(file):
            for turn in batch["turns"]:
                for message in turn:
                    contents[str(message["id"] + offset)] = message["content"]
                    last = message["id"]
        offset += last + 1
    return contents


def plain_bm25(dataset: str | Path, limit: int | None = None, markers_kept: bool = False) -> list[dict]:
    """The issue's plain BM25 on every question with gold: one record each (`category`, `question_type`, message
    metrics at the table's K) from rank-bm25's Okapi over the reader's messages (`markers_kept`: over their
    contents as the files hold them)."""
    from rank_bm25 import BM25Okapi

    records = []
    chats = {chat.chat_id: chat for chat in find_chats(dataset)}
    for item in BENCHMARKS["beam"].open(dataset).iter_items(limit):
        if item.get("error"):
            continue
        ids = [turn["turn_id"] for turn in item["turns"]]
        raw = raw_contents(chats[item["item_id"]]) if markers_kept else {}
        index = BM25Okapi([_tokens(raw.get(turn["turn_id"], turn["text"])) for turn in item["turns"]])
        for question in item["questions"]:
            if question["abstention"] or question.get("excluded"):
                continue
            scores = index.get_scores(_tokens(question["question"]))
            ranking = [ids[i] for i in sorted(range(len(ids)), key=lambda i: -scores[i])[:10]]
            records.append({"category": question["category"], "question_type": question["question_type"],
                            "turn": level_metrics(ranking, question["gold_turns"], (10,))})
    return records


def _means(records: list[dict]) -> dict:
    return {name: sum(r["turn"][name] for r in records) / len(records) for name, _ in METRICS}


def run_beam_bench(dataset: str | Path, output, *, workdir: str | Path = "cache/bench_beam",
                   limit: int | None = None, only: tuple[str, ...] = ()) -> str:
    """Run the systems (all, or those labelled in `only`) on `dataset`, then the plain BM25; write one row per
    system and chat size (and over every size), and one per ability with a column per system."""
    unknown = [name for name in only if name not in dict(SYSTEMS)]
    if unknown:
        raise ValueError(f"unknown system label(s) {', '.join(unknown)}; choose from {', '.join(dict(SYSTEMS))}")
    workdir = fresh_workdir(workdir)
    groups: dict[str, dict] = {}  # label -> {"all": block, "by_category": ..., "by_question_type": ...}
    costs = {}
    for position, (label, options) in enumerate((s for s in SYSTEMS if not only or s[0] in only)):
        out = workdir / f"beam_{position}_{re.sub(r'[^A-Za-z0-9_.-]+', '-', label)}.json"
        seconds, rss = measure_memfarm(["run", "beam", "--dataset", str(dataset), *options, "--output", str(out),
                                        *(["--limit", str(limit)] if limit else [])])
        results = ResultsFile.read(out)
        groups[label] = dict(results["metrics"])
        costs[label] = {"seconds": round(seconds, 1), "peak_rss_mb": round(rss / 2**20)}
    groups[PLAIN] = _grouped(plain_bm25(dataset, limit))
    groups[KEPT] = _grouped(plain_bm25(dataset, limit, markers_kept=True))
    reference = next(iter(groups.values()))
    rows = []
    for label, metrics in groups.items():
        for size, block in [("all", metrics["all"]), *sorted((metrics.get("by_category") or {}).items())]:
            row = {"system": label, "size": size, "n": block["evaluable"]["turn"],
                   **{column: metric(block, "turn", name) for name, column in METRICS}, **costs.get(label, {})}
            if label == next(iter(groups)):
                row["ceiling_recall_all_10"] = metric(block.get("ceiling") or {}, "turn", "recall_all@10")
            rows.append(row)
    abilities = []
    for ability, block in sorted((reference.get("by_question_type") or {}).items()):
        row = {"ability": ability, "n": block["evaluable"]["turn"],
               "ceiling_recall_all_10": metric(block.get("ceiling") or {}, "turn", "recall_all@10")}
        for label, metrics in groups.items():
            row[_column(label)] = metric((metrics.get("by_question_type") or {}).get(ability) or {}, "turn",
                                         "recall_any@10")
        abilities.append(row)
    data = {"dataset": str(dataset), "limit": limit, "level": "turn (message)", "metrics": [m for m, _ in METRICS],
            "plain_bm25": "rank-bm25 BM25Okapi (k1 1.5, b 0.75, epsilon 0.25) over lower-cased [a-z0-9]+ tokens",
            "rows": rows, "abilities": abilities, "ability_columns": {label: _column(label) for label in groups}}
    path = write_bench("beam", data, output)
    return "\n".join(_table(rows, abilities, list(groups)) + [f"wrote {path}"])


def _grouped(records: list[dict]) -> dict:
    """Records' means as a results file's `metrics` holds them: over every one, by size and by ability."""
    by = defaultdict(lambda: defaultdict(list))
    for record in records:
        for key in ("category", "question_type"):
            by[f"by_{key}"][record[key]].append(record)
    return {"all": {"turn": _means(records), "evaluable": {"turn": len(records)}},
            **{key: {name: {"turn": _means(rs), "evaluable": {"turn": len(rs)}} for name, rs in found.items()}
               for key, found in by.items()}}


def _column(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def _table(rows: list[dict], abilities: list[dict], labels: list[str]) -> list[str]:
    def cell(value, width=9):
        return f"{value:>{width}.3f}" if value is not None else f"{'-':>{width}}"

    lines = [f"{'system':<26}{'size':<6}{'n':>5}{'any@10':>9}{'all@10':>9}{'nDCG@10':>9}"]
    lines += [f"{r['system']:<26}{r['size']:<6}{r['n']:>5}" + "".join(cell(r[c]) for _, c in METRICS) for r in rows]
    lines += ["", "recall_any@10 per ability", f"{'ability':<26}{'n':>5}" + "".join(f"{label[:12]:>13}"
                                                                                 for label in labels)]
    lines += [f"{a['ability'][:26]:<26}{a['n']:>5}" + "".join(cell(a[_column(label)], 13) for label in labels)
              for a in abilities]
    return lines
