"""`memfarm bench batch-rows`: what a fixed number of rows per batch costs the encoder.

Every batch the model runs at a width has the same rows (filled with copies where texts run out), so that a
threaded matrix product splits its work one way per width on any CPU (`memoria.canonical_batches`): first a
fixed 8 rows at every width, now `batch_rows(width)` (`CANONICAL_BATCH_TOKENS` over the width). Before either,
a batch had as many rows as texts of its width, up to the batch size. Side by side, round by round in one
process, on real LoCoMo turns and questions: bulk encoding (an item's turns in one call) and one question at a time, for
the rule before, fixed rows of several sizes, the fixed 8 rows at widths of 16 that came before the rows by
width, and the rows by width; medians and their ratio to the rule before.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np

from coordinator.benches.common import write_bench
from memoria import defaults


def _encode(model, texts: list[str], max_length: int, dimension: int, rows: int | str | None,
            step: int | None = None) -> np.ndarray:
    """Canonical widths, in batches of up to 32 texts of one width (`rows` None: the rule before), of exactly
    `rows` rows, or ("width") of `batch_rows(width)` rows, filled with copies of the batch's first text; widths
    are multiples of `step`."""
    import torch

    from memoria.canonical_batches import batch_rows, canonical_batches

    texts = [str(t).strip() for t in texts]
    out = np.zeros((len(texts), dimension), dtype=np.float32)
    lengths = [len(ids) for ids in model.tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
    with torch.inference_mode():
        fixed = None if rows == "width" else rows or defaults.DEFAULT_BATCH_SIZE
        for width, indices in canonical_batches(lengths, max_length, step, rows=fixed):
            size = batch_rows(width) if rows == "width" else rows or len(indices)
            batch = list(indices) + [indices[0]] * (size - len(indices))
            features = model.tokenizer([texts[i] for i in batch], padding="max_length", truncation=True,
                                       max_length=width, return_tensors="pt")
            pooled = model(dict(features))["sentence_embedding"][:len(indices)]
            out[indices] = torch.nn.functional.normalize(pooled.float(), p=2, dim=1).numpy()
    return out


def _medians(encode, rules: dict, texts: list[str], asked: list[str], rounds: int) -> dict:
    """Each rule's median seconds for the turns in one call and for the questions one at a time, the rules
    interleaved in every round, in reverse order every other round (no rule always runs first). A first round,
    not timed, runs every rule's shapes once before any clock counts."""
    seconds = {name: {"turns": [], "questions": []} for name in rules}
    for number in range(-1, rounds):
        order = list(rules.items())
        for name, rule in order if number % 2 else order[::-1]:
            started = time.perf_counter()
            encode(texts, rule)
            middle = time.perf_counter()
            for question in asked:
                encode([question], rule)
            if number >= 0:
                seconds[name]["turns"].append(middle - started)
                seconds[name]["questions"].append(time.perf_counter() - middle)
    return {name: {part: statistics.median(v) for part, v in parts.items()} for name, parts in seconds.items()}


def run_batch_rows_bench(dataset: str | Path, turns: int, questions: int, rounds: int, output,
                         threads: int | None = None) -> str:
    """Every rule on the same turns and questions, interleaved round by round; `threads`: torch's (default: as
    set)."""
    import torch

    from memoria.embedder import Embedder

    embedder = Embedder.shared()
    data = json.loads(Path(dataset).read_text(encoding="utf-8"))
    texts = [t["text"] for c in data for key, session in c["conversation"].items()
             if key.startswith("session_") and isinstance(session, list) for t in session if t.get("text")][:turns]
    asked = [q["question"] for c in data for q in c["qa"]][:questions]
    step = defaults.CANONICAL_PAD_STEP
    rules = {"before: up to 32 rows of a width": (None, step),
             **{f"fixed {rows} rows": (rows, step) for rows in (1, 8, 32)},
             "fixed 8 rows, widths of 16 (the rule before this one)": (8, 16),
             f"rows by width ({defaults.CANONICAL_BATCH_TOKENS} tokens)": ("width", step)}
    def encode(batch, rule):
        return _encode(embedder.model, batch, embedder.max_seq_length, embedder.dimension, *rule)

    previous = torch.get_num_threads()
    try:
        if threads:
            torch.set_num_threads(threads)
        used = torch.get_num_threads()
        median = _medians(encode, rules, texts, asked, rounds)
    finally:
        torch.set_num_threads(previous)  # the caller's threads, as they were
    before = median["before: up to 32 rows of a width"]
    rows_out = [{"rule": name, "rows": rules[name][0] or "up to 32", "pad_step": rules[name][1],
                 "turns_per_second": round(len(texts) / m["turns"], 1),
                 "question_ms": round(1000 * m["questions"] / len(asked), 1),
                 "turns_seconds_ratio": round(m["turns"] / before["turns"], 3),
                 "question_seconds_ratio": round(m["questions"] / before["questions"], 3),
                 "chosen": rules[name][0] == "width"} for name, m in median.items()]
    result = {"dataset": str(dataset), "turns": len(texts), "questions": len(asked), "rounds": rounds,
              "torch_threads": used, "rules": rows_out,
              "note": "medians over rounds, the rules interleaved in each round; ratios to the rule before"}
    path = write_bench("batch_rows", result, output)
    lines = [f"{len(texts)} turns and {len(asked)} questions, {rounds} rounds, "
             f"{result['torch_threads']} torch threads",
             f"{'':<56}{'turns/s':>9}{'q ms':>8}{'turns x':>9}{'q x':>7}"]
    lines += [f"{r['rule']:<56}{r['turns_per_second']:>9.1f}{r['question_ms']:>8.1f}{r['turns_seconds_ratio']:>9.2f}"
              f"{r['question_seconds_ratio']:>7.2f}" for r in rows_out]
    lines.append(f"wrote {path}")
    return "\n".join(lines)
