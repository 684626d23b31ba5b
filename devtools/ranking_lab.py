"""A ranking lab: ask the `full` mode's sources once per question, then rank again under many settings.

What a run does, minus what does not depend on the ranking: the items come from
the same adapters, the docs from the same `make_docs`, the memory from the same
system, and a question's ranking is scored by the same `profile_metrics` under the
run's profile; but the sources are asked once (`MemoryInterface.ranking_context`)
and the ranking (`MemoryInterface.rank`) can then be redone under other weights in
a fraction of a run. Questions whose items hold the same docs share one memory (a
LongMemEval-format file made from LoCoMo repeats each conversation). Memories are
snapshotted under `cache_dir`, so a second session starts at the questions.

`rank(ranking_context(q), limit)` is the order `recall` gives, so the lab's
metrics at the default settings equal a run's (`tests/devtools/test_ranking_lab.py`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from adapters.defaults import DEFAULT_TOP_K, K_VALUES
from adapters.files import content_hash
from adapters.metrics import average, profile_metrics
from adapters.benchmarks import benchmark, default_profile
from adapters.profiles import profile as scoring_profile
from adapters.systems.memoria_system import MemoriaSystem
from workers.item.evaluate import make_docs

#: The metrics a lab table shows, the strict one first.
TABLE = (("session", "recall_all@5"), ("session", "recall_any@5"), ("session", "ndcg_any@10"),
         ("turn", "recall_any@10"), ("turn", "ndcg_any@10"))


@dataclass
class Asked:
    """One question with what its ranking reads, and how to score a ranking of it."""

    question: dict
    item_id: str
    memory: object  # the MemoryInterface the context was asked of
    context: object  # its RankingContext
    native: dict  # memory id -> native ids (session_id, turn_id, official_id)
    depth: int  # how many docs the run asks for
    top_k: int
    profile: str
    fusion: list = field(default_factory=list)  # the `fusion` mode's ranking, as memory ids

    def metrics(self, ranking_ids) -> dict | None:
        ranked = [self.native[i] for i in ranking_ids if i in self.native]
        return profile_metrics(self.question, ranked, level="turn", k_values=K_VALUES,
                               depth=self.top_k).get(self.profile)


def _memory_for(docs: list[dict], embedder: str, cache_dir: Path | None, settings: dict):
    if cache_dir:
        cache_dir.mkdir(parents=True, exist_ok=True)
    store = str(cache_dir / "embeddings.sqlite") if cache_dir else None  # a text met twice is encoded once
    system = MemoriaSystem(mode="full", embedder=embedder, parallel_extract=False, embedding_store=store, **settings)
    key = hashlib.sha256(json.dumps([content_hash(docs), system.embedding_signature, system.build_identity,
                                     settings], sort_keys=True, default=str).encode()).hexdigest()[:20]
    folder = cache_dir / embedder / key if cache_dir else None
    if folder and (folder / "memory.sqlite").is_file():
        system.restore(folder)
    else:
        system.ingest(docs)
        if folder:
            system.snapshot(folder)
    return system


def ask(kind: str, path: str | Path, *, profile: str, embedder: str = "minilm", cache_dir: str | Path | None = None,
        top_k: int = DEFAULT_TOP_K, settings: dict | None = None, items: int | None = None,
        with_fusion: bool = True, progress=None) -> list[Asked]:
    """Every scored question of the file at `path`, asked once of the `full` mode's sources."""
    cache = Path(cache_dir) if cache_dir else None
    systems: dict[str, MemoriaSystem] = {}
    asked = []
    for item in benchmark(kind).open(path, profile=profile).iter_items(limit=items):
        if item.get("error"):
            raise ValueError(f"{path}: item {item['item_id']}: {item['error']}")
        docs, native_by_external = make_docs(item)
        if not docs:
            continue
        key = content_hash([{k: d[k] for k in ("text", "props")} for d in docs])
        if key not in systems:
            systems[key] = _memory_for(docs, embedder, cache, settings or {})
        memory = systems[key].memory
        # the memory may have been built from another item with the same docs: doc positions line up
        position_of = {mid: int(meta["external_id"].rsplit("-", 1)[1])
                       for mid, _, meta in memory.store.all_rows()}
        natives = list(native_by_external.values())
        native = {mid: natives[pos] for mid, pos in position_of.items()}
        depth = scoring_profile(profile).depth(top_k, len(docs))
        for question in item["questions"]:
            gold = (question.get("gold_by_profile") or {}).get(profile)
            scored = (gold or {}).get("scored", not question.get("abstention") and not question.get("excluded"))
            if not scored:
                continue
            context = memory.ranking_context(question["question"], limit=depth)
            fusion = ([r["id"] for r in memory.recall(question["question"], mode="fusion", limit=depth)["results"]]
                      if with_fusion else [])
            asked.append(Asked(question, item["item_id"], memory, context, native, depth, top_k, profile, fusion))
        if progress:
            progress(item["item_id"], len(asked))
    return asked


def ranked_ids(entry: Asked, weights: dict | None = None) -> list[int]:
    ranked, _ = entry.memory.rank(entry.context, entry.depth, weights)
    return [memory_id for memory_id, _, _ in ranked]


def summary(per_question: list[dict | None]) -> dict:
    """The table's metrics averaged over the questions that have them (`adapters.metrics.average`), and the count."""
    means = average({"metrics": m} for m in per_question)
    out = {f"{level}:{name}": means[level].get(name, float("nan")) for level, name in TABLE}
    out["questions"] = means["evaluable"]["session"]
    return out


def evaluate(asked: list[Asked], weights: dict | None = None, by_type: bool = False) -> dict:
    """The table metrics of `full` under `weights` (None: each memory's own), overall and by question type."""
    return summaries(asked, [entry.metrics(ranked_ids(entry, weights)) for entry in asked], by_type)


def summaries(asked: list[Asked], per_question: list[dict | None], by_type: bool) -> dict:
    """The table metrics of the questions `asked`, each ranked once already (`per_question`, in the same order),
    overall and by question type."""
    out = {"all": summary(per_question)}
    if by_type:
        types = sorted({entry.question.get("question_type", "") for entry in asked})
        for kind in types:
            out[kind] = summary([m for entry, m in zip(asked, per_question)
                                 if entry.question.get("question_type", "") == kind])
    return out


def evaluate_fusion(asked: list[Asked]) -> dict:
    return {"all": summary([entry.metrics(entry.fusion) for entry in asked])}


def table(rows: dict[str, dict]) -> str:
    """One line per (label -> summary)."""
    header = f"{'':<34}" + "".join(f"{f'{lv[0]}:{n}':>16}" for lv, n in TABLE) + f"{'n':>6}"
    lines = [header]
    for label, values in rows.items():
        lines.append(f"{label:<34}" + "".join(f"{values[f'{lv}:{n}']:>16.3f}" for lv, n in TABLE)
                     + f"{values['questions']:>6}")
    return "\n".join(lines)


def evaluate_heads(asked: list[Asked], heads) -> dict[str, dict]:
    """`full` with the sentence signal read for each head size in `heads` (memoria's `sentence_head`; 0: every
    candidate): its table row, and how many distinct turns had their pieces read, summed over the memories."""
    rows = {}
    before = {id(entry.memory): (entry.memory, entry.memory.sentence_head) for entry in asked}
    for head in heads:
        read: dict[int, set] = {}
        for entry in asked:
            entry.memory.sentence_head = head
        try:
            per_question = []
            for entry in asked:
                per_question.append(entry.metrics(ranked_ids(entry)))
                read.setdefault(id(entry.memory), set()).update(entry.context.best_pieces or {})
        finally:  # each memory gets back the head it had
            for memory, head_before in before.values():
                memory.sentence_head = head_before
        rows[f"full, sentence head {head}"] = {**summary(per_question),
                                               "turns_with_pieces_read": sum(len(ids) for ids in read.values())}
    return rows


def lab_report(datasets: list[tuple[str, str, str]], embedder: str, weights: dict | None, cache_dir, by_type: bool,
               progress=None, sentence_heads=(), tuned_items: dict[str, set[str]] | None = None) -> dict:
    """fusion, `full` at the embedder's default weights and, given `weights`, `full` under them (and under each
    of `sentence_heads`), per dataset (label, kind, path): the table a change of the ranking is judged by, on
    every format at once."""
    from memoria.defaults import weights_for

    report = {"embedder": embedder, "default_weights": weights_for(embedder), "weights": weights, "datasets": {},
              "heads": [], "by_part": []}
    for label, kind, path in datasets:
        profile = default_profile(kind)  # a run's: LongMemEval's official profile, LoCoMo's expected text
        asked = ask(kind, path, profile=profile, embedder=embedder, cache_dir=cache_dir, progress=progress)
        rows = {"fusion": evaluate_fusion(asked)["all"]}
        rankings = [("full", None)] + ([("full, given weights", weights)] if weights is not None else [])
        tuned = (tuned_items or {}).get(kind, set())
        parts = [("", asked)]
        if tuned:  # the questions of items the weights were tuned on, and the others: held out
            parts += [(" (items tuned on)", [e for e in asked if e.item_id in tuned]),
                      (" (held-out items)", [e for e in asked if e.item_id not in tuned])]
        for name, chosen in rankings:
            ranked = {id(e): e.metrics(ranked_ids(e, chosen)) for e in asked}  # each question ranked once
            for part, questions in parts:
                if not questions:
                    continue
                result = summaries(questions, [ranked[id(e)] for e in questions], by_type)
                rows[name + part] = result["all"]
                rows.update({f"{name}{part}: {kind_}": values for kind_, values in result.items() if kind_ != "all"})
        report["by_part"].extend(_by_part(label, rows, [name for name, _ in rankings], parts))
        by_head = evaluate_heads(asked, sentence_heads)
        rows.update(by_head)
        # one flat row per dataset and head size, for a table of them all
        report["heads"] += [{"dataset": label, "head": head, **by_head[f"full, sentence head {head}"]}
                            for head in sentence_heads]
        report["datasets"][label] = {"kind": kind, "path": str(path), "profile": profile, "rows": rows}
    return report


def _by_part(label: str, rows: dict, rankings: list[str], parts) -> list[dict]:
    """One flat row per part of the questions (all; the items tuned on; the held-out items) and question type, with
    each ranking's metrics side by side under its name: what the manual's tables are rendered from."""
    flat = []
    for part, questions in parts:
        if not questions:
            continue
        types = ["all"] + sorted({k.split(": ", 1)[1] for k in rows if k.startswith(f"full{part}: ")})
        for kind in types:
            suffix = "" if kind == "all" else f": {kind}"
            flat.append({"dataset": label, "part": part.strip(" ()") or "all items", "type": kind,
                         **{name: rows[f"{name}{part}{suffix}"] for name in rankings}})
    return flat


def render(report: dict) -> str:
    lines = [f"embedder {report['embedder']}"]
    for label, entry in report["datasets"].items():
        lines += ["", f"{label} ({entry['kind']}, {entry['profile']})", table(entry["rows"])]
    return "\n".join(lines)
