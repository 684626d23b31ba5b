"""The six measures the AdaMem design asks of every ablation, per query and per run.

- answer support: no LLM is available here, so no answer is generated; the gold answer is set against
  the packed `context()` block instead: `answer_exact` / `answer_f1` (SQuAD-style normalisation, the
  best-matching span of the block) and `answer_in_context` (the answer string occurs in the block,
  ignoring case and runs of white space);
- `recall`: the shared metric block (`adapters.metrics`), at turn level for AdaMem episodes
  (an entry is gold when it holds an expected substring) and at session and turn level elsewhere;
- `stale_fact_rate`: of the queries that name stale facts (`forbidden_substrings`), the share whose
  top_k or context block holds one; a query counts once however many stale entries it shows. Where
  no query names one (LoCoMo, LongMemEval-S) it is not measured: null, never zero;
- `latency_ms`: p50 / p95 of `retrieve` and p95 of `context()`, nearest rank;
- `prompt_tokens`: MiniLM's WordPiece tokens of the context block, without [CLS] / [SEP];
- `write_amplification`: stored entries and bytes per observed event.
"""

from __future__ import annotations

import json
import re
import string
import time
from collections import Counter

from adapters.metrics import average, level_metrics
from adapters.percentile import percentile

#: What `prompt_tokens` counts with (the embedder's own tokenizer; no LLM tokenizer is available).
TOKENIZER = "all-MiniLM-L6-v2 WordPiece (bert-base-uncased vocabulary), no special tokens"
#: Said beside every answer measure: nothing here generates an answer.
ANSWER_NOTE = ("no LLM is available: the gold answer is matched against the packed context() block "
               "(answer support), not against a generated answer")
STALE_NOT_MEASURED = "not measured: no query of this dataset names a stale fact"
#: Bytes of one stored edge (two entry ids) in `write_amplification`.
EDGE_BYTES = 8

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_TOKENIZER = None


def normalise(text: str) -> list[str]:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, split on white space."""
    return _ARTICLES.sub(" ", str(text).lower().translate(_PUNCTUATION)).split()


def best_span(answer: str, block: str) -> tuple[float, float]:
    """(exact, F1) of the block's contiguous token span that best matches `answer`.

    The best span starts and ends on answer tokens (trimming any other end
    token only raises precision), and a span of L tokens scores at most
    2g / (L + g) against a g-token answer, so longer spans are tried only
    while they could still beat the best.
    """
    gold_tokens, tokens = normalise(answer), normalise(block)
    if not gold_tokens or not tokens:
        return 0.0, 0.0
    gold, g = Counter(gold_tokens), len(gold_tokens)
    if any(tokens[i:i + g] == gold_tokens for i in range(len(tokens) - g + 1)):
        return 1.0, 1.0
    best = 0.0
    for start in (i for i, t in enumerate(tokens) if t in gold):
        seen, overlap = Counter(), 0
        for end in range(start, len(tokens)):
            length = end - start + 1
            if 2 * g / (length + g) <= best:
                break
            token = tokens[end]
            if token in gold:
                if seen[token] < gold[token]:
                    overlap += 1
                seen[token] += 1
                precision, recall = overlap / length, overlap / g
                best = max(best, 2 * precision * recall / (precision + recall))
    return 0.0, best


def answer_support(answers: list[str], block: str) -> dict:
    """`answer_exact`, `answer_f1`, `answer_in_context` of the gold answer(s) against a context block.

    With several gold strings (an episode's expected substrings) each must be
    there: exact and in-context are the minimum, F1 the mean. No gold: None each.
    """
    answers = [str(a) for a in answers if str(a).strip()]
    if not answers:
        return {"answer_exact": None, "answer_f1": None, "answer_in_context": None}
    spans = [best_span(a, block) for a in answers]
    folded = " ".join(block.split()).casefold()
    return {"answer_exact": min(s[0] for s in spans),
            "answer_f1": sum(s[1] for s in spans) / len(spans),
            "answer_in_context": all(" ".join(a.split()).casefold() in folded for a in answers)}


def prompt_tokens(text: str) -> int:
    """MiniLM's WordPiece tokens of `text` (no [CLS] / [SEP], no truncation), from the packaged files."""
    global _TOKENIZER
    if _TOKENIZER is None:
        from transformers import AutoTokenizer

        from memoria.model_files import model_path, offline_environment

        offline_environment()
        _TOKENIZER = AutoTokenizer.from_pretrained(model_path(), local_files_only=True)
    return len(_TOKENIZER(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"])


def stale_fact(forbidden: list[str], texts: list[str], block: str) -> bool | None:
    """Does the top_k (`texts`) or the context block hold a stale fact? None where the query names none."""
    forbidden = [s for s in forbidden or [] if s]
    if not forbidden:
        return None
    return any(s in text for s in forbidden for text in [*texts, block])


def timed_context(system_or_memory, *args, **kwargs) -> tuple[str, float]:
    """The context block and the milliseconds `context()` took."""
    started = time.perf_counter()
    block = system_or_memory.context(*args, **kwargs)
    return block, (time.perf_counter() - started) * 1000


def query_measures(*, answers: list[str], block: str, context_ms: float, retrieve_ms: float,
                   forbidden: list[str], texts: list[str], recall: dict | None = None) -> dict:
    """One query's measures (its recall is the record's `metrics` where the record has them)."""
    measures = {**answer_support(answers, block),
                "stale_fact": stale_fact(forbidden, texts, block),
                "latency_ms": {"retrieve": round(retrieve_ms, 3), "context": round(context_ms, 3)},
                "prompt_tokens": prompt_tokens(block)}
    if recall is not None:
        measures["recall"] = recall
    return measures


def entry_recall(ranked_ids: list, gold_ids, k_values) -> dict:
    """An episode query's recall from the shared metric code: entries are the turns, no sessions."""
    gold = {str(i) for i in gold_ids}
    return {"session": None, "turn": level_metrics([str(i) for i in ranked_ids], gold, k_values) if gold else None}


def write_amplification(memory) -> dict:
    """What an AdaMem memory stored for what it observed.

    Entries and folded duplicates come from `observe()`'s counts; bytes are
    every entry's UTF-8 content, vector and JSON metadata, plus `EDGE_BYTES`
    per supersession edge, cause link and similarity link.
    """
    entries = memory.entries
    supersession = sum(len(e.updates) for e in entries)
    links = sum(len(e.causes) + len(e.related) for e in entries)
    stored = sum(len(e.content.encode("utf-8")) + int(e.vector.nbytes)
                 + len(json.dumps(e.metadata, sort_keys=True, separators=(",", ":")).encode("utf-8")) for e in entries)
    return {"events": memory.events, "entries": len(entries), "folded": memory.folded,
            "supersession_edges": supersession, "links": links,
            "bytes": stored + EDGE_BYTES * (supersession + links)}


def _mean(values: list) -> float | None:
    values = [float(v) for v in values if v is not None]
    return sum(values) / len(values) if values else None


def run_measures(records: list[dict], outcomes: list[dict], metrics_all: dict) -> dict | None:
    """A run's six measures from its records and item outcomes; None when no record carries measures."""
    measured = [r for r in records if r.get("status") == "ok" and r.get("measures")]
    if not measured:
        return None
    answered = [r["measures"] for r in measured
                if r["measures"].get("answer_exact") is not None and not r.get("abstention") and not r.get("excluded")]
    stale = [r["measures"]["stale_fact"] for r in measured if r["measures"].get("stale_fact") is not None]
    if any("recall" in r["measures"] for r in measured):
        recall = average([{"metrics": r["measures"]["recall"]} for r in measured if r["measures"].get("recall")])
    else:
        recall = {k: v for k, v in metrics_all.items() if k in ("session", "turn", "evaluable")}
    retrieve = [r["measures"]["latency_ms"]["retrieve"] for r in measured]
    context = [r["measures"]["latency_ms"]["context"] for r in measured]
    write = {k: sum((o.get("stats") or {}).get("write", {}).get(k, 0) for o in outcomes)
             for k in ("events", "entries", "folded", "supersession_edges", "links", "bytes")}
    events = write["events"]
    return {
        "queries": len(measured),
        "answer_exact": _mean([m["answer_exact"] for m in answered]),
        "answer_f1": _mean([m["answer_f1"] for m in answered]),
        "answer_in_context": _mean([m["answer_in_context"] for m in answered]),
        "answered": len(answered),
        "answer_note": ANSWER_NOTE,
        "recall": recall,
        "stale_fact_rate": (sum(stale) / len(stale)) if stale else None,
        "stale_fact_queries": len(stale),
        **({} if stale else {"stale_fact_note": STALE_NOT_MEASURED}),
        "latency_ms": {"p50": percentile(retrieve, 0.5), "p95": percentile(retrieve, 0.95),
                       "context_p95": percentile(context, 0.95)},
        "prompt_tokens": _mean([r["measures"]["prompt_tokens"] for r in measured]),
        "prompt_tokens_p95": percentile([r["measures"]["prompt_tokens"] for r in measured], 0.95),
        "tokenizer": TOKENIZER,
        "write_amplification": {"entries_per_event": (write["entries"] / events) if events else None,
                                "bytes_per_event": (write["bytes"] / events) if events else None, **write},
    }
