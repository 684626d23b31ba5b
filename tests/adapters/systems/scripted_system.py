"""A system under test with a fixed preference: it ranks docs by a script of texts (then by ingestion order).

Used by the hand-worked official-profile tests, where the ranking must be known in advance.
"""

SCRIPT = ("alpha", "hello there", "I bought a red bike", "it cost 300")


class Scripted:
    name = "scripted"

    def __init__(self):
        self.docs = []
        self.asked = []

    def reset(self):
        self.docs = []

    def ingest(self, docs):
        self.docs += docs

    def retrieve(self, label, query, top_k):
        self.asked.append(top_k)
        order = sorted((d for d in self.docs if d["label"] == label),
                       key=lambda d: (SCRIPT.index(d["text"]) if d["text"] in SCRIPT else len(SCRIPT),
                                      d["external_id"]))
        return [{"external_id": d["external_id"], "score": 1.0 / (n + 1)} for n, d in enumerate(order)][:top_k]


class Shy(Scripted):
    """Like `Scripted`, but returns at most two docs whatever it is asked for (as a keyword-only ranker would)."""

    name = "shy"

    def retrieve(self, label, query, top_k):
        return super().retrieve(label, query, top_k)[:2]


class Disguised(Scripted):
    """A name that would retitle the terminal and reverse the line after it, were it printed raw."""

    name = "scripted\x1b]0;owned\x07\u202e"
