"""Control arms: systems that know nothing of the question, run like any system to show a benchmark's floor.

- `random`: every held doc in an order drawn from a seed made of the label and the question (the same ranking
  for the same docs and question on any machine, locally or on the farm);
- `recency`: the newest doc first, by the order the docs were ingested in (chronological in every benchmark
  here): the baseline a temporal benchmark, RealMem above all, must beat.

Neither embeds nor reads the question's words. Their results files and manifests say `control_arm` in the
system's configuration, so a table can mark them.
"""

from __future__ import annotations

import hashlib
import random

from adapters.systems.contract import AddsOnIngest, Describes, SystemInfo


class _Arm(AddsOnIngest, Describes):
    adds_on_ingest = True

    def __init__(self):
        self.held: dict[str, list[str]] = {}

    @property
    def config(self) -> dict:
        return {"name": self.name, "retrieval_mode": self.name, "control_arm": self.name, "rule": self.rule}

    def reset(self) -> None:
        self.held = {}

    def ingest(self, docs: list[dict]) -> None:
        for doc in docs:
            self.held.setdefault(doc["label"], []).append(doc["external_id"])


class RandomArm(_Arm):
    name = "random"
    rule = "the held docs in a random order seeded by sha256(label, question)"

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        ids = self.held.get(label, [])
        seed = int.from_bytes(hashlib.sha256(f"{label}\0{query}".encode()).digest()[:8], "big")
        order = random.Random(seed).sample(ids, min(top_k, len(ids)))
        return [{"external_id": eid, "score": float(len(order) - rank)} for rank, eid in enumerate(order)]


class RecencyArm(_Arm):
    name = "recency"
    rule = "the newest held doc first, by ingest order"

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        newest = self.held.get(label, [])[::-1][:top_k]
        return [{"external_id": eid, "score": float(len(newest) - rank)} for rank, eid in enumerate(newest)]


RANDOM = SystemInfo("random", RandomArm, "the random arm", (), arm=True)
RECENCY = SystemInfo("recency", RecencyArm, "the recency arm", (), arm=True)
