"""The `full` mode: extraction, graph / phrase / attribute sources, scheduler, ranking, MMR."""

import time

import pytest

from memoria import BatchLoader, MemoryInterface
from memoria.extract import extract, importance
from memoria.scheduler import SourceScheduler
from memoria.retrieval_sources import attribute_search, graph_search, phrase_search

pytestmark = pytest.mark.slow


@pytest.fixture()
def memory(embedder):
    texts = [
        "Tom's sister is Anna, she works as a nurse.",                 # 0: links Tom to Anna
        "Anna lives in Lisbon near the river.",                         # 1: reachable only through "anna"
        "The weather was grey all week.",                               # 2
        "We went to the farmers market on 12 March 2023.",              # 3: a date
        "I ran 10 km on Sunday and felt great!",                        # 4: a quantity
        "The quick brown fox jumps over the lazy dog in the garden.",   # 5: an exact phrase
        "Foxes are quick animals that live in gardens and woods.",      # 6: same words, no phrase
        "Remember: my passport expires in June, this is important!",   # 7: importance cues
    ]
    memory = MemoryInterface(embedder=embedder)
    BatchLoader(memory).insert_batch(texts, [{"speaker": "Sam", "date": "1 May 2023"}] * len(texts), max_workers=2)
    return memory


def test_extraction_finds_entities_relationships_attributes_and_importance():
    facts = extract("Caroline met Melanie in Boston on 7 May 2023. We bought 3 books!", {"speaker": "Caroline"})
    assert {"caroline", "melanie", "boston", "may", "2023"} <= set(facts["entities"])
    assert ("caroline", "met", "melanie") in facts["relationships"]
    assert ("quantity", "3 books") in facts["attributes"] and ("speaker", "caroline") in facts["attributes"]
    assert ("date", "may") in facts["attributes"] and ("date", "2023") in facts["attributes"]
    assert importance("Remember, this is important: I finally adopted a dog!") > importance("The sky is grey.")


def test_extraction_is_stored_and_survives_a_snapshot(memory, embedder, tmp_path):
    assert ("tom", "is", "anna") in [tuple(r[1:]) for r in memory.store.rows("relationships")]
    memory.snapshot(tmp_path / "s")
    restored = MemoryInterface(embedder=embedder)
    restored.restore(tmp_path / "s")
    for table in ("entities", "relationships", "attributes", "importance"):
        assert sorted(restored.store.rows(table)) == sorted(memory.store.rows(table))


def test_graph_reaches_a_memory_only_through_a_shared_entity(memory):
    query = "Where does Tom's sister live?"
    hits = [i for i, _ in graph_search(memory.view(), query, 10, seeds=5)]
    assert hits[0] == 0 and 1 in hits  # Anna's memory shares no word of the question but "anna" with the seed
    assert 1 not in [i for i, _ in phrase_search(memory.view(), query, 10)]


def test_attribute_source_matches_a_date_question(memory):
    hits = attribute_search(memory.view(), "What did we do in March 2023?", 5)
    assert hits[0][0] == 3
    quantity = attribute_search(memory.view(), "Who ran 10 km?", 5)
    assert quantity[0][0] == 4


def test_phrase_source_prefers_the_exact_phrase(memory):
    hits = phrase_search(memory.view(), "the quick brown fox", 5)
    assert hits[0][0] == 5 and 6 not in [i for i, _ in hits]


def test_full_mode_candidates_sum_their_signal_contributions(memory):
    response = memory.recall("Where does Tom's sister live?", mode="full", limit=8)
    assert response["diagnostics"]["sources_completed"] == ["faiss", "bm25", "graph", "phrase", "attribute", "window"]
    for candidate in response["results"]:
        ranking = candidate["diagnostics"]["ranking"]
        assert set(ranking["signals"]) == {"semantic", "sentence", "token", "phrase", "graph", "attribute_boost",
                                           "importance", "recency", "window", "name", "quoted", "date", "temporal",
                                           "session_bm25", "session_centroid", "session_recency", "standing",
                                           "user_said", "feedback", "session"}
        assert candidate["final_score"] == pytest.approx(sum(ranking["contributions"].values()), abs=1e-6)
        for name, value in ranking["signals"].items():
            assert ranking["contributions"][name] == pytest.approx(memory.weights.get(name, 0.0) * value)
    mmr = response["diagnostics"]["ranking"]["mmr"]
    assert {"applied", "moved", "max_shift", "lambda"} <= set(mmr)


def test_each_signal_moves_its_memory_up(memory):
    query = "what should I keep in mind about travel documents"
    base = [c["id"] for c in memory.recall(query, mode="full", limit=8)["results"]]
    memory.weights = {"importance": 1.0}
    assert [c["id"] for c in memory.recall(query, mode="full", limit=8)["results"]][0] == 7
    memory.weights = {"recency": 1.0}
    assert [c["id"] for c in memory.recall(query, mode="full", limit=8)["results"]][0] == max(base)


def test_mmr_with_a_low_lambda_reorders_and_says_so(memory):
    memory.mmr_lambda = 0.3
    diag = memory.recall("quick fox garden", mode="full", limit=8)["diagnostics"]["ranking"]["mmr"]
    assert diag["applied"] and diag["moved"] > 0


def test_scheduler_survives_a_raising_and_a_sleeping_source():
    scheduler = SourceScheduler()

    def boom():
        raise RuntimeError("index offline")

    def slow():
        time.sleep(2.0)
        return [(9, 1.0)]

    results, diag = scheduler.run({"fast": lambda: [(1, 1.0)], "boom": boom, "slow": slow}, policy="all", budget_ms=300)
    assert results == {"fast": [(1, 1.0)]}
    assert diag["sources_completed"] == ["fast"] and diag["sources_pending"] == ["slow"]
    assert "index offline" in diag["sources_failed"]["boom"] and diag["finish_reason"] == "budget_exhausted"
    assert diag["wait_ms"] < 1500 and "fast" in diag["source_queue_ms"]


def test_scheduler_policies():
    scheduler = SourceScheduler()
    slow = lambda: time.sleep(0.5) or [(2, 1.0)]
    _, overrun = scheduler.run({"a": lambda: [(1, 1.0)], "b": slow}, policy="all", budget_ms=100)
    assert overrun["finish_reason"] == "budget_exhausted" and overrun["sources_pending"] == ["b"]
    with pytest.raises(ValueError, match="unknown scheduler policy"):
        scheduler.run({"a": lambda: []}, policy="first_k")
    _, deadline = scheduler.run({"a": lambda: [(1, 1.0)], "b": slow}, policy="deadline", budget_ms=100)
    assert deadline["finish_reason"] == "deadline" and deadline["sources_completed"] == ["a"]
    _, everything = scheduler.run({"a": lambda: [(1, 1.0)], "b": slow}, policy="all", budget_ms=5000)
    assert everything["finish_reason"] == "all_completed" and everything["sources_completed"] == ["a", "b"]


def test_a_failing_source_in_full_mode_leaves_the_others_answering(memory):
    def broken():
        raise RuntimeError("graph store down")

    memory.custom_sources["graph"] = broken
    response = memory.recall("Where does Tom's sister live?", mode="full", limit=5)
    assert response["results"] and "graph store down" in response["diagnostics"]["sources_failed"]["graph"]
    assert response["diagnostics"]["finish_reason"] == "completed_with_failures"


def test_speaker_names_leave_the_question_vector_so_the_emptiest_turn_of_that_speaker_no_longer_wins(embedder):
    turns = [("Joanna: Later, take care!", "Joanna"), ("Joanna: Alright, see you tomorrow!", "Joanna"),
             ("Nate: Thanks, Joanna! Talk soon.", "Nate"),
             ("Joanna: Someone wrote me a letter after reading my blog post about a hard moment in my life.", "Joanna"),
             ("Nate: I took my turtles to the beach in Tampa.", "Nate")]
    question = "How many letters has Joanna received?"
    order = {}
    for strip in (True, False):
        # the question's vector alone: BM25 finds "letter" whatever the vector does
        memory = MemoryInterface(embedder=embedder, speaker_strip=strip, weights={"semantic": 1.0})
        BatchLoader(memory).insert_batch([t for t, _ in turns],
                                         [{"speaker": s, "session_index": i + 1} for i, (_, s) in enumerate(turns)],
                                         parallel_extract=False)
        response = memory.recall(question, mode="full", limit=5)
        order[strip] = [r["text"] for r in response["results"]]
        assert response["diagnostics"].get("dense_query") == ("How many letters has received?" if strip else None)
        assert memory.recall(question, mode="dense", limit=5)["diagnostics"].get("dense_query") is None
    assert order[True][0].startswith("Joanna: Someone wrote me a letter")
    # with the name in the vector, the speaker's emptiest turn comes right after the answer; without it, a turn
    # that shares no word with the question but names no one passes it
    assert order[False][1] == "Joanna: Later, take care!"
    assert order[True].index("Joanna: Later, take care!") > 1
