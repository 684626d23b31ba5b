"""How an item is asked is its benchmark's declared kind, and how deep the system is asked is the profile's: the
worker asks the declarations, never the item's keys or a profile's name."""

import pytest

from adapters.errors import MemfarmError
from tests.adapters.test_profiles import TOY, toy_profile
from workers.item.evaluate import evaluate_item


class Recording:
    """A system that ranks its docs in order and remembers how many it was asked for."""

    name = "recording"

    def __init__(self):
        self.docs, self.asked = [], []

    def reset(self):
        self.docs = []

    def ingest(self, docs):
        self.docs += docs

    def retrieve(self, label, query, top_k):
        self.asked.append(top_k)
        return [{"external_id": d["external_id"], "score": 1.0} for d in self.docs[:top_k]]


def _item(benchmark="locomo", **more):
    turns = [{"session_id": f"s{n}", "turn_id": f"s{n}#0", "text": f"turn {n}", "props": {}} for n in range(3)]
    question = {"question_id": "q", "question": "which?", "gold_sessions": ["s2"], "gold_turns": [],
                "gold_by_profile": {TOY: {"sessions": ["s2"]}}}
    return {"item_id": "i", **({"benchmark": benchmark} if benchmark else {}), "turns": turns,
            "questions": [question], **more}


def test_a_profile_that_reads_the_whole_ranking_has_every_doc_ranked():
    with toy_profile():
        system = Recording()
        record = evaluate_item(_item(), system, top_k=1, profile=TOY)["records"][0]
    assert system.asked == [3] and len(record["candidates"]) == 1  # every doc ranked, the first top_k kept
    assert record["metrics"]["session"]["recall_any@1"] == 1.0
    system = Recording()
    evaluate_item(_item(), system, top_k=1)
    assert system.asked == [1]


def test_an_item_is_asked_as_its_benchmark_declares_not_as_its_keys_suggest():
    system = Recording()
    # a whole-history item that happens to carry a `steps` key is still asked of one memory
    outcome = evaluate_item(_item(steps=5), system, top_k=2)
    assert "ingest_steps" not in outcome["stats"] and outcome["cache"]["reason"] == "no cache"


def test_an_item_that_names_no_benchmark_is_refused():
    with pytest.raises(MemfarmError, match="item i: names no benchmark"):
        evaluate_item(_item(benchmark=None), Recording())


def test_an_episode_asked_of_a_system_that_cannot_observe_one_is_refused_by_name():
    item = {"item_id": "e", "benchmark": "adamem-synthetic", "episode": {"observations": [], "queries": []}}
    with pytest.raises(MemfarmError, match="item e: recording cannot observe episodes: it declares no fresh_memory"):
        evaluate_item(item, Recording())
