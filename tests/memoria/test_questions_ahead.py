"""Questions handed over ahead (`MemoryInterface.encode_questions`): their vectors, and the sentences their rankings
read, encoded together before the first is asked, with every ranking as it is asked one by one."""

import pytest

from memoria import BatchLoader, MemoryInterface

TURNS = [
    ("Caroline: I went to the pottery class on Sunday. The teacher showed us how to centre the clay.", "Caroline"),
    ("Melanie: That sounds fun! Did you make a bowl? I always wanted to try the wheel.", "Melanie"),
    ("Caroline: I made a small bowl. It cracked in the kiln, sadly.", "Caroline"),
    ("Melanie: My kids started swimming lessons last week. They love the water already.", "Melanie"),
    ("Caroline: Swimming is great exercise. Which pool do they go to?", "Caroline"),
    ("Melanie: The one near the library. We go every Tuesday after school.", "Melanie"),
]
QUESTIONS = ["What did Caroline make in pottery class?", "When do Melanie's kids go swimming?",
             "Where is the pool?", "What did Melanie make in pottery class?", "   "]


class Calls:
    """The real model, keeping the texts of each call."""

    def __init__(self, embedder):
        self.inner, self.dimension, self.calls = embedder, embedder.dimension, []

    def encode(self, texts, batch_size=32):
        self.calls.append(list(texts))
        return self.inner.encode(texts, batch_size=batch_size)


def _memory(embedder, **settings):
    memory = MemoryInterface(embedder=Calls(embedder), window_size=0, **settings)
    BatchLoader(memory).insert_batch([t for t, _ in TURNS],
                                     [{"speaker": s, "session_index": 1 + n // 3} for n, (_, s) in enumerate(TURNS)],
                                     parallel_extract=False)
    memory.embedder.calls.clear()
    return memory


def _asked(memory, mode):
    return [[(c["id"], c["final_score"]) for c in memory.recall(q, mode=mode, limit=6)["results"]] for q in QUESTIONS]


@pytest.mark.parametrize("mode", ["dense", "fusion", "full"])
def test_questions_handed_over_ahead_are_encoded_in_one_call_and_rank_as_if_asked_alone(embedder, mode):
    # a head of one turn: each question's ranking reads the sentences of another turn
    alone, ahead = _memory(embedder, sentence_head=1), _memory(embedder, sentence_head=1)
    expected = _asked(alone, mode)
    encoded = ahead.encode_questions(QUESTIONS, mode)
    calls = ahead.embedder.calls
    questions = {ahead.dense_question(q, mode) for q in QUESTIONS if q.strip()}
    assert set(calls[0]) == questions, "the questions first, together, each text once"
    if mode == "full":
        assert len(calls) == 2, "then the sentences of every head, together"
        assert len(alone.embedder.calls) > 1 + len(questions), "asked alone, each question's head took a call"
    else:
        assert len(calls) == 1
    assert encoded == sum(len(call) for call in calls)
    assert _asked(ahead, mode) == expected
    assert len(calls) == (2 if mode == "full" else 1), "nothing encoded once the questions are asked"
    assert ahead.encode_questions(QUESTIONS, mode) == 0, "what is held is not encoded again"


def test_a_mode_that_reads_no_vector_encodes_no_question_and_an_empty_memory_none(embedder):
    memory = _memory(embedder)
    assert memory.encode_questions(QUESTIONS, "bm25") == 0 and memory.embedder.calls == []
    memory.reset()
    assert memory.encode_questions(QUESTIONS, "full") == 0 and memory.embedder.calls == []


@pytest.mark.parametrize("docs_ahead", [False, True])
def test_the_heads_are_worked_out_ahead_only_where_the_docs_pieces_were_not_encoded_ahead(embedder, docs_ahead):
    """Memory that grows in steps has its docs' pieces encoded ahead already (`encode_ahead`): working out the heads
    would only run every source once more. There only the questions' vectors are encoded ahead."""
    memory = MemoryInterface(embedder=Calls(embedder), window_size=0)
    texts, metadatas = [t for t, _ in TURNS], [{"speaker": s} for _, s in TURNS]
    if docs_ahead:
        memory.encode_ahead(texts, metadatas)
    BatchLoader(memory).insert_batch(texts, metadatas, parallel_extract=False)
    asked = []
    memory.custom_sources["graph"] = lambda: asked.append(1) or []
    memory.encode_questions(QUESTIONS, "full")
    assert len(asked) == (0 if docs_ahead else len([q for q in QUESTIONS if q.strip()]))
