"""A system under test that records everything it is given (to a JSON-lines file named by SPY_LOG)."""

import json
import os


class SpySystem:
    name = "spy"

    def __init__(self):
        self.log = open(os.environ["SPY_LOG"], "a", encoding="utf-8")
        self.docs = {}

    def _write(self, kind, payload):
        self.log.write(json.dumps({"kind": kind, "payload": payload}) + "\n")
        self.log.flush()

    def reset(self):
        self.docs = {}
        self._write("reset", None)

    def ingest(self, docs):
        self._write("ingest", docs)
        for doc in docs:
            self.docs[doc["external_id"]] = doc

    def retrieve(self, label, query, top_k):
        self._write("retrieve", {"label": label, "query": query, "top_k": top_k})
        return [{"external_id": eid, "score": 1.0 / (n + 1)}
                for n, eid in enumerate(sorted(e for e, d in self.docs.items() if d["label"] == label))][:top_k]


class Misbehaving:
    """Returns ids it was never given, duplicates, and more than top_k hits."""

    name = "misbehaving"

    def __init__(self):
        self.ids = []

    def reset(self):
        self.ids = []

    def ingest(self, docs):
        self.ids += [d["external_id"] for d in docs]

    def retrieve(self, label, query, top_k):
        hits = [{"external_id": "answer_leak_1", "score": 9.0}, {"external_id": self.ids[0], "score": 8.0},
                {"external_id": self.ids[0], "score": 7.0}, "not a hit"]
        return hits + [{"external_id": i, "score": 1.0} for i in self.ids[1:]]


class NotASystem:
    name = "nope"
