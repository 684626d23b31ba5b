"""AdaMem: a small write-manage-read memory with explicit deltas, causal links and transparent scores.

Write: `observe(event)` embeds the content, folds near-duplicates into one
entry, supersedes an active entry with the same `memory_key` (the old one
stays, inactive, with `superseded_by`), and links entries to the causes they
name (`cause_labels`). Manage: nothing is deleted. Read: `retrieve(query, now,
top_k)` adds semantic similarity, temporal validity, importance, recency,
confidence and feedback, then expands through explicit cause / update edges
(similarity links only with `use_auto_links`); each result lists its score
contributions. `context(query)` packs a prompt block with MMR.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np

from adapters.systems.contract import (AddsOnIngest, CountsWrites, Describes, Embeds, FreshMemory, PacksContext,
                                       SystemInfo)

#: The seven configurations of the design's ablation list.
ABLATIONS = {
    "full_context": {"full_context": True},
    "semantic_only": {"use_graph": False, "use_temporal": False, "use_importance": False, "use_recency": False,
                      "use_feedback": False, "use_supersession": False, "use_confidence": False},
    "semantic_importance": {"use_graph": False, "use_temporal": False, "use_recency": False, "use_feedback": False,
                            "use_supersession": False, "use_confidence": False},
    "semantic_temporal": {"use_graph": False, "use_importance": False, "use_recency": False, "use_feedback": False,
                          "use_supersession": False, "use_confidence": False},
    "semantic_graph": {"use_temporal": False, "use_importance": False, "use_recency": False, "use_feedback": False,
                       "use_supersession": False, "use_confidence": False},
    "semantic_graph_supersession": {"use_temporal": False, "use_importance": False, "use_recency": False,
                                    "use_feedback": False, "use_confidence": False},
    "full": {},
}

WEIGHTS = {"semantic": 1.0, "temporal": 0.5, "importance": 0.35, "recency": 0.1, "confidence": 0.1, "feedback": 0.2,
           "graph": 0.6}


def _time(value) -> dt.datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, dt.datetime):
        parsed = value
    else:
        try:
            parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


@dataclass
class Entry:
    id: int
    content: str
    label: str | None
    vector: np.ndarray
    importance: float
    valid_from: dt.datetime | None
    valid_to: dt.datetime | None
    memory_key: str | None
    metadata: dict
    sequence: int
    active: bool = True
    superseded_by: int | None = None
    confidence: float = 1.0
    feedback: float = 0.0
    causes: list[int] = field(default_factory=list)
    updates: list[int] = field(default_factory=list)
    related: list[int] = field(default_factory=list)


class AdaMem:
    def __init__(self, embedder=None, max_seq_length=None, use_graph=True, use_temporal=True, use_importance=True, use_recency=True,
                 use_feedback=True, use_supersession=True, use_confidence=True, use_auto_links=False,
                 full_context=False, dedup_threshold=0.97, auto_link_threshold=0.8, weights=None):
        if embedder is None:
            from memoria.embedder import LazyEmbedder

            embedder = LazyEmbedder(max_seq_length)
        self.embedder = embedder
        self.switches = {"use_graph": use_graph, "use_temporal": use_temporal, "use_importance": use_importance,
                         "use_recency": use_recency, "use_feedback": use_feedback,
                         "use_supersession": use_supersession, "use_confidence": use_confidence,
                         "use_auto_links": use_auto_links, "full_context": full_context}
        self.dedup_threshold, self.auto_link_threshold = dedup_threshold, auto_link_threshold
        self.weights = dict(WEIGHTS if weights is None else weights)
        self.entries: list[Entry] = []
        #: Events observed, and those folded into an existing entry (write amplification's denominators).
        self.events = self.folded = 0

    @classmethod
    def ablation(cls, name: str, **options) -> "AdaMem":
        if name not in ABLATIONS:
            raise ValueError(f"unknown ablation {name!r}; choose from {', '.join(ABLATIONS)}")
        return cls(**{**ABLATIONS[name], **options})

    @property
    def config(self) -> dict:
        return {**self.switches, "dedup_threshold": self.dedup_threshold, "weights": self.weights}

    # -- write ---------------------------------------------------------------
    def observe(self, event: dict, vector: np.ndarray | None = None) -> int:
        """Store one event; returns the id of the entry that now holds it."""
        content = str(event.get("content", "")).strip()
        if not content:
            raise ValueError("an observation needs non-empty content")
        metadata = dict(event.get("metadata") or {})
        vector = self.embedder.encode([self._indexed_text(content, metadata)])[0] if vector is None else vector
        key = metadata.get("memory_key") or event.get("memory_key")
        self.events += 1
        for entry in self.entries:
            if entry.active and entry.memory_key == key and float(entry.vector @ vector) >= self.dedup_threshold:
                entry.confidence = min(1.0, entry.confidence + 0.1)
                self.folded += 1
                return entry.id
        entry = Entry(id=len(self.entries), content=content, label=event.get("label"), vector=vector,
                      importance=float(event.get("importance", 0.5)), valid_from=_time(event.get("valid_from")),
                      valid_to=_time(event.get("valid_to")), memory_key=key, metadata=metadata,
                      sequence=len(self.entries), confidence=float(event.get("confidence", 1.0)))
        if key and self.switches["use_supersession"]:
            for old in self.entries:
                if old.active and old.memory_key == key:
                    old.active, old.superseded_by = False, entry.id
                    entry.updates.append(old.id)
        causes = set(event.get("cause_labels") or [])
        entry.causes = [e.id for e in self.entries if e.label in causes]
        if self.switches["use_auto_links"]:
            entry.related = [e.id for e in self.entries if float(e.vector @ vector) >= self.auto_link_threshold]
        self.entries.append(entry)
        return entry.id

    def observe_many(self, events: list[dict], batch_size: int = 64) -> list[int]:
        texts = [self._indexed_text(str(e.get("content", "")), dict(e.get("metadata") or {})) for e in events]
        vectors = self.embedder.encode(texts, batch_size=batch_size)
        return [self.observe(event, vector) for event, vector in zip(events, vectors)]

    @staticmethod
    def _indexed_text(content: str, metadata: dict) -> str:
        extra = [str(metadata[k]) for k in ("subject", "predicate", "memory_key") if metadata.get(k)]
        for k in ("tags", "keywords"):
            if isinstance(metadata.get(k), list):
                extra += [str(v) for v in metadata[k]]
        return content if not extra else f"{content} ({', '.join(extra)})"

    def feedback(self, entry_id: int, delta: float) -> None:
        entry = self.entries[entry_id]
        entry.feedback = max(-1.0, min(1.0, entry.feedback + delta))

    # -- read ----------------------------------------------------------------
    def retrieve(self, query: str, now=None, top_k: int = 5) -> list[dict]:
        """Best-first entries with their score contributions."""
        if not self.entries or top_k <= 0:
            return []
        if self.switches["full_context"]:
            recent = sorted(self.entries, key=lambda e: -e.sequence)[:top_k]
            return [self._result(e, 1.0, {"full_context": 1.0}) for e in recent]
        now = _time(now)
        q = self.embedder.encode([query])[0]
        last = max(1, len(self.entries) - 1)
        scored = {}
        for entry in self.entries:
            if not entry.active and self.switches["use_supersession"]:
                continue
            parts = {"semantic": self.weights["semantic"] * float(entry.vector @ q)}
            if self.switches["use_temporal"]:
                parts["temporal"] = self.weights["temporal"] * (self._validity(entry, now) - 1.0)
            if self.switches["use_importance"]:
                parts["importance"] = self.weights["importance"] * entry.importance
            if self.switches["use_recency"]:
                parts["recency"] = self.weights["recency"] * entry.sequence / last
            if self.switches["use_confidence"]:
                parts["confidence"] = self.weights["confidence"] * (entry.confidence - 1.0)
            if self.switches["use_feedback"]:
                parts["feedback"] = self.weights["feedback"] * entry.feedback
            scored[entry.id] = parts
        if self.switches["use_graph"]:
            self._expand(scored, top_k)
        ranked = sorted(scored.items(), key=lambda p: (-sum(p[1].values()), p[0]))[:top_k]
        return [self._result(self.entries[i], sum(parts.values()), parts) for i, parts in ranked]

    def _validity(self, entry: Entry, now) -> float:
        if now is None:
            return 1.0
        if entry.valid_from and now < entry.valid_from:
            return 0.0
        if entry.valid_to and now >= entry.valid_to:
            return 0.0
        return 1.0

    def _expand(self, scored: dict[int, dict], top_k: int) -> None:
        """Neighbours of the best seeds over explicit cause / update edges (and auto links if on)."""
        seeds = sorted(scored, key=lambda i: -sum(scored[i].values()))[:top_k]
        for seed in seeds:
            entry = self.entries[seed]
            base = sum(scored[seed].values())
            neighbours = set(entry.causes) | {e.id for e in self.entries if seed in e.causes}
            if self.switches["use_auto_links"]:
                neighbours |= set(entry.related) | {e.id for e in self.entries if seed in e.related}
            for other in neighbours:
                if other in scored and other != seed:
                    bonus = self.weights["graph"] * max(0.0, base) * 0.5
                    scored[other]["graph"] = max(scored[other].get("graph", 0.0), bonus)

    def _result(self, entry: Entry, score: float, parts: dict) -> dict:
        return {"id": entry.id, "content": entry.content, "label": entry.label, "score": score,
                "contributions": parts, "active": entry.active, "superseded_by": entry.superseded_by,
                "metadata": entry.metadata}

    def context(self, query: str, now=None, top_k: int = 5, mmr_lambda: float = 0.7, pool: int = 20) -> str:
        """A compact prompt block: the best entries, near-duplicates pushed out by MMR."""
        candidates = self.retrieve(query, now, top_k=pool)
        chosen = []
        while candidates and len(chosen) < top_k:
            def value(c):
                similarity = max((float(self.entries[c["id"]].vector @ self.entries[s["id"]].vector) for s in chosen),
                                 default=0.0)
                return mmr_lambda * c["score"] - (1 - mmr_lambda) * similarity
            best = max(candidates, key=value)
            chosen.append(best)
            candidates.remove(best)
        return "\n".join(f"- {c['content']}" for c in chosen)


class AdaMemSystem(AddsOnIngest, Describes, Embeds, FreshMemory, PacksContext, CountsWrites):
    """AdaMem behind the runner's contract: one memory per item, docs observed in order."""

    name = "adamem"
    adds_on_ingest = True  # docs are observed in order, each step's after the last

    def __init__(self, ablation: str = "full", embedder=None, max_seq_length: int | None = None):
        if ablation not in ABLATIONS:
            raise ValueError(f"unknown AdaMem ablation {ablation!r}; choose from {', '.join(ABLATIONS)}")
        self.ablation = ablation
        self.memory = AdaMem.ablation(ablation, embedder=embedder, max_seq_length=max_seq_length)
        self.embedder = self.memory.embedder

    @property
    def embedding_signature(self) -> dict:
        return self.memory.embedder.signature

    @property
    def config(self) -> dict:
        return {"name": self.name, "retrieval_mode": f"adamem:{self.ablation}", "ablation": self.ablation,
                **self.memory.config}

    def reset(self) -> None:
        self.memory = self.fresh_memory()

    def fresh_memory(self) -> AdaMem:
        """An empty AdaMem of this ablation sharing the embedder (one per item or episode)."""
        return AdaMem.ablation(self.ablation, embedder=self.embedder)

    def ingest(self, docs: list[dict]) -> None:
        from memoria.extract import importance

        events = [{"content": d["text"], "label": d["external_id"], "importance": importance(d["text"]),
                   "metadata": {"external_id": d["external_id"]}} for d in docs]
        self.memory.observe_many(events)

    def context(self, label: str, query: str, top_k: int) -> str:
        """The packed prompt block of `top_k` entries (the runner measures it; it never reaches a score)."""
        return self.memory.context(query, top_k=top_k)

    def write_stats(self) -> dict:
        """Entries, folded duplicates, edges and bytes stored for the events observed since `reset()`."""
        from adapters.benchmarks.adamem.measures import write_amplification

        return write_amplification(self.memory)

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        return [{"external_id": r["metadata"]["external_id"], "score": r["score"],
                 "diagnostics": {"contributions": r["contributions"]}}
                for r in self.memory.retrieve(query, top_k=top_k)]


DESCRIPTION = SystemInfo("adamem", AdaMemSystem, "AdaMem", ("ablation", "max_seq_length"),
                         ablations=tuple(ABLATIONS), compared=("full",))
