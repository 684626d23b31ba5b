"""What a stepped item (RealMem) keeps of an answer is what memory held at the question's step: a hit naming a doc
not yet ingested (the query's own session, a later one, the query turn itself) is dropped and said, and the
ranking's depth counts the docs memory held then, not the whole persona."""

import pytest

from adapters.benchmarks.realmem.reader import RealMem
from coordinator.running.reducer import _short
from tests.helpers import realmem_persona
from workers.item.evaluate import evaluate_item, make_docs


class Clairvoyant:
    """Holds what it is given, but answers with docs of the persona it was never given: their ids are
    predictable (`<label>-<position>`), so it names the latest first."""

    name = "clairvoyant"
    adds_on_ingest = True

    def __init__(self, every_id):
        self.every_id, self.held = every_id, []

    def reset(self):
        self.held = []

    def ingest(self, docs):
        self.held += [d["external_id"] for d in docs]

    def retrieve(self, label, query, top_k):
        ranked = list(reversed(self.every_id))[:top_k // 2] + self.held[:top_k - top_k // 2]
        return [{"external_id": eid, "score": 1.0} for eid in ranked]


class Honest(Clairvoyant):
    """Returns everything it holds, up to top_k."""

    def retrieve(self, label, query, top_k):
        return [{"external_id": eid, "score": 1.0} for eid in self.held[:top_k]]


@pytest.fixture(scope="module")
def persona(realmem_dir, tmp_path_factory):
    path = realmem_persona(realmem_dir / "Kenta_Tanaka_dialogues_256k.json", 12,
                           tmp_path_factory.mktemp("realmem") / "Kenta_Tanaka_dialogues_256k.json")
    return next(RealMem(path).iter_items())


def _held_at(item) -> dict[int, set[str]]:
    """The ids memory holds when a question of each step is asked: the docs of every earlier step."""
    docs, _ = make_docs(item)
    steps = [t["step"] for t in item["turns"] if t["text"]]
    return {q["step"]: {d["external_id"] for d, s in zip(docs, steps) if s < q["step"]} for q in item["questions"]}


def test_hits_naming_docs_not_yet_ingested_are_dropped_and_said(persona):
    every_id = [d["external_id"] for d in make_docs(persona)[0]]
    outcome = evaluate_item(persona, Clairvoyant(every_id), top_k=10)
    held = _held_at(persona)
    asked = [(q, r) for q, r in zip(persona["questions"], outcome["records"]) if held[q["step"]]]
    assert asked, "the persona has questions asked with something in memory"
    for question, record in asked:
        assert {c["id"] for c in record["candidates"]} <= held[question["step"]], question["question_id"]
        rejected = record["diagnostics"]["rejected_hits"]
        assert len(rejected) == 5 and all("unknown id" in line for line in rejected), rejected


def test_the_ranking_depth_counts_what_memory_held_and_a_small_memory_is_no_short_ranking(persona):
    top_k = len(make_docs(persona)[0])  # the whole persona: asked for more than memory holds at every step
    outcome = evaluate_item(persona, Honest([]), top_k=top_k)
    held = _held_at(persona)
    for question, record in zip(persona["questions"], outcome["records"]):
        depth = record["diagnostics"]["ranking_depth"]
        assert depth["docs"] == len(held[question["step"]]), question["question_id"]
        assert depth["returned"] == depth["docs"] < top_k and not _short(record)
    assert any(held.values()), "some question is asked with something in memory"
