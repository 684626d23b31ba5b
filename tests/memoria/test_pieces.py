"""Sentence vectors: which pieces a turn gets, the `sentence` signal, and the pieces in a snapshot."""

import json

import numpy as np
import pytest

from adapters.systems.memoria_system import MemoriaSystem
from memoria import BatchLoader, MemoryInterface
from memoria.errors import SnapshotError
from memoria.pieces import split_pieces, without_speaker
from memoria.ranking import SIGNALS

CAMPING = ("Melanie: Glad you have support, Caroline! Unconditional love is so important. "
           "Here's a pic of my family camping at the beach.")
TURNS = [(CAMPING, "Melanie"),
         ("Melanie: The beach was lovely and the kids played all day in the sand with their friends.", "Melanie"),
         ("Melanie: We went to a museum and then had dinner at a nice place downtown.", "Melanie"),
         ("Caroline: Thanks! My friends have been so supportive, their love means everything to me.", "Caroline")]


class CountingEmbedder:
    """The real model, counting the texts it encodes."""

    def __init__(self, embedder):
        self.inner, self.dimension, self.texts = embedder, embedder.dimension, []

    def encode(self, texts, batch_size=32):
        self.texts.extend(texts)
        return self.inner.encode(texts, batch_size=batch_size)


def _memory(embedder, turns=TURNS, **settings):
    memory = MemoryInterface(embedder=embedder, window_size=0, **settings)
    BatchLoader(memory).insert_batch([t for t, _ in turns],
                                     [{"speaker": s, "session_index": i + 1} for i, (_, s) in enumerate(turns)],
                                     parallel_extract=False)
    return memory


def test_a_turn_splits_into_its_sentences_without_the_speaker_and_short_ones():
    assert split_pieces(CAMPING, "Melanie") == ["Glad you have support, Caroline!", "Unconditional love is so important.",
                                               "Here's a pic of my family camping at the beach."]
    # a bracketed aside (a shared photo's caption) is a piece of its own; "Wow!" and "Thanks, Mel!" say too little
    assert split_pieces("nate: Wow! Thanks, Mel! I got a new pet today [shares a photo: a dog on a red couch]",
                        "Nate") == ["I got a new pet today", "[shares a photo: a dog on a red couch]"]
    assert split_pieces("Nate: Just one sentence here, however long it runs on.", "Nate") == []  # its own vector
    assert split_pieces("Hi there you! Bye now.", "") == []  # one piece of three words or more
    assert without_speaker("Caroline: Caroline: hi", "caroline") == "Caroline: hi"
    assert without_speaker("Caroline says hi", "Caroline") == "Caroline says hi"
    # a long turn is cut into at most max_pieces runs of neighbouring sentences, none lost
    sentences = [f"This is sentence number {n} of the turn." for n in range(10)]
    pieces = split_pieces(" ".join(sentences), "", max_pieces=4)
    assert len(pieces) == 4 and " ".join(pieces) == " ".join(sentences)
    assert split_pieces(" ".join(sentences), "", max_pieces=1) == []


def test_the_turn_that_answers_in_one_clause_wins_with_the_sentence_signal(embedder):
    question = "Where has Melanie camped?"
    whole = _memory(embedder, weights={"semantic": 1.0})
    assert whole.recall(question, mode="full", limit=4)["results"][0]["text"] != CAMPING
    assert whole.pieces.owners == []  # no sentence weight: nothing split, nothing encoded
    pieces = _memory(embedder, weights={"sentence": 1.0})
    results = pieces.recall(question, mode="full", limit=4)["results"]
    assert results[0]["text"] == CAMPING
    first = pieces.view().ids[0]
    assert pieces.pieces.owners == [first] * 3  # only the camping turn holds two sentences or more
    best = pieces.pieces.best(pieces.embedder.encode([question])[0])
    camping = embedder.encode(["Here's a pic of my family camping at the beach."])[0]
    assert best[first] == pytest.approx(float(np.dot(camping, embedder.encode([question])[0])), abs=1e-5)


def test_sentence_vectors_are_built_once_and_only_what_changed_is_encoded(embedder):
    counting = CountingEmbedder(embedder)
    memory = _memory(counting, weights={"sentence": 1.0})
    memory.recall("Where has Melanie camped?", mode="full", limit=2)
    assert len(memory.pieces.owners) == 3
    counting.texts.clear()
    memory.recall("What did the kids do?", mode="full", limit=2)
    assert counting.texts == ["What did the kids do?"]  # the question only
    BatchLoader(memory).insert_batch(["Nate: I adopted a turtle. His name is Tilly and he loves the tank."],
                                     [{"speaker": "Nate", "session_index": 5}], parallel_extract=False)
    counting.texts.clear()
    memory.recall("What pet does Nate have?", mode="full", limit=2)
    # the question (without the speaker's name), then the new turn's two sentences once it is a candidate:
    # nothing encoded twice
    assert counting.texts == ["What pet does have?", "I adopted a turtle.", "His name is Tilly and he loves the tank."]
    assert len(memory.pieces.owners) == 5 and memory.pieces.owners == sorted(memory.pieces.owners)
    memory.recall("What pet does Nate have?", mode="fusion", limit=2)  # the unranked modes read no pieces
    assert memory.ranking_settings["max_pieces"] == memory.max_pieces


def test_sentence_vectors_travel_in_a_snapshot_and_a_damaged_one_is_refused(embedder, tmp_path):
    memory = _memory(embedder, weights={"sentence": 1.0})
    before = memory.recall("Where has Melanie camped?", mode="full", limit=4)["results"]
    files = memory.snapshot(tmp_path / "state")
    assert {"piece_vectors", "pieces"} <= set(files)
    restored = MemoryInterface(embedder=embedder, window_size=0, weights={"sentence": 1.0})
    restored.restore(tmp_path / "state")
    assert restored.pieces.owners == memory.pieces.owners
    after = restored.recall("Where has Melanie camped?", mode="full", limit=4)["results"]
    assert [r["id"] for r in after] == [r["id"] for r in before]
    assert [r["score"] for r in after] == pytest.approx([r["score"] for r in before], abs=1e-6)
    saved = json.loads((tmp_path / "state" / "pieces.json").read_text())
    for damage in ({**saved, "owners": saved["owners"][:-1]}, {**saved, "owners": [99] * len(saved["owners"])},
                   {**saved, "built": {**saved["built"], "rows": 2}}, {"owners": []}):
        (tmp_path / "state" / "pieces.json").write_text(json.dumps(damage))
        with pytest.raises(SnapshotError, match="pieces"):
            MemoryInterface(embedder=embedder, window_size=0).restore(tmp_path / "state")
    # a snapshot without pieces (made with no sentence weight) restores, and they are built on the first recall
    plain = _memory(embedder, weights={"semantic": 1.0})
    plain.snapshot(tmp_path / "plain")
    later = MemoryInterface(embedder=embedder, window_size=0, weights={"sentence": 1.0})
    later.restore(tmp_path / "plain")
    assert later.pieces.owners == []
    assert later.recall("Where has Melanie camped?", mode="full", limit=1)["results"][0]["text"] == CAMPING


def test_a_full_system_encodes_sentence_vectors_for_its_candidates_only_and_not_when_the_part_is_off(embedder):
    docs = [{"external_id": f"x-{i:06d}", "label": "x", "text": text, "props": {"speaker": speaker}}
            for i, (text, speaker) in enumerate(TURNS)]
    on = MemoriaSystem(mode="full", embedder=embedder, parallel_extract=False)
    on.ingest(docs)
    assert on.memory.pieces.owners == [] and on.encoded_by_kind["pieces"] == 0  # nothing read yet, nothing encoded
    assert not on.unsaved_state
    on.retrieve("x", "Where has Melanie camped?", 4)
    assert len(on.memory.pieces.owners) == 3 and on.encoded_by_kind == {"turns": 4, "windows": 0, "pieces": 3,
                                                                         "questions": 1}
    assert on.unsaved_state  # the item cache stores the state again, with them
    for system in (MemoriaSystem(mode="full", embedder=embedder, parallel_extract=False, without=("sentence",)),
                   MemoriaSystem(mode="fusion", embedder=embedder, parallel_extract=False),
                   MemoriaSystem(mode="full", embedder=embedder, parallel_extract=False, max_pieces=0)):
        system.ingest(docs)
        system.retrieve("x", "Where has Melanie camped?", 4)
        assert system.memory.pieces.owners == [] and system.encoded_by_kind["pieces"] == 0
        assert not system.unsaved_state


def _locomo_turns(path, sessions: int):
    """The first `sessions` sessions of the first real LoCoMo conversation: (text, metadata) as the adapter
    renders them, and that conversation's questions."""
    from adapters.benchmarks.locomo.reader import render

    conversation = json.loads(path.read_text(encoding="utf-8"))[0]
    turns = [(render(turn), {"speaker": turn["speaker"], "session_index": number})
             for number in range(1, sessions + 1) for turn in conversation["conversation"][f"session_{number}"]]
    return turns, [qa["question"] for qa in conversation["qa"]]


@pytest.mark.slow
def test_head_only_pieces_give_the_rankings_pieces_for_every_turn_give(embedder, locomo_path):
    """Real turns, the real model: a memory that encodes the pieces of the head of each first ranking, and one
    that encodes every turn's first, read the same head and rank every question alike, to the bit, whatever else
    either holds pieces for; the first encoded fewer pieces, and none outside the heads it read."""
    turns, questions = _locomo_turns(locomo_path, sessions=4)

    def memory():  # a pool well short of the memory, a head well short of the pool
        made = MemoryInterface(embedder=embedder, window_size=0, candidate_pool=8, sentence_head=5)
        BatchLoader(made).insert_batch([t for t, _ in turns], [m for _, m in turns], parallel_extract=False)
        return made

    every, candidates = memory(), memory()
    every.build_pieces()
    assert len(set(every.pieces.owners)) > 20 and candidates.pieces.owners == []
    heads: set[int] = set()
    for question in questions[:12]:
        full, lazy = every.ranking_context(question, limit=10), candidates.ranking_context(question, limit=10)
        pool = sorted({i for pairs in full.lists.values() for i in pairs})
        assert pool == sorted({i for pairs in lazy.lists.values() for i in pairs}) and len(pool) < len(turns)
        read = lazy.pieces_for
        lazy.pieces_for = lambda ids: (heads.update(ids), read(ids))[1]
        ranked, diagnostics = every.rank(full, 10)
        assert candidates.rank(lazy, 10)[0] == ranked  # ids, scores and every signal's value
        assert diagnostics["sentence_head"] == {"size": 5, "read": 5} and set(full.best_pieces) <= set(pool)
        assert lazy.best_pieces == full.best_pieces and len(lazy.best_pieces) <= 5
        assert SIGNALS["sentence"](lazy, pool) == SIGNALS["sentence"](full, pool)
        ranked = [(r["id"], r["score"]) for r in every.recall(question, mode="full", limit=10)["results"]]
        assert [(r["id"], r["score"]) for r in candidates.recall(question, mode="full", limit=10)["results"]] == ranked
    assert set(candidates.pieces.owners) <= heads and set(candidates.pieces.owners) < set(every.pieces.owners)
    assert len(candidates.pieces.texts) < len(every.pieces.texts)
    assert every.encoded["pieces"] == len(set(every.pieces.texts))  # a piece said twice is encoded once
    assert 0 < candidates.encoded["pieces"] <= every.encoded["pieces"]


def test_the_sentence_signal_is_read_for_the_head_of_the_first_ranking_only(embedder):
    """With a head of one, the one candidate every other signal ranks first is split and read; the others keep
    their whole cosine. A head of 0 reads every candidate."""
    question = "Where has Melanie camped?"
    weights = {"semantic": 1.0, "sentence": 1.0}
    one = _memory(embedder, weights=weights, sentence_head=1)
    context = one.ranking_context(question, limit=4)
    pool = sorted({i for pairs in context.lists.values() for i in pairs})
    first_stage = SIGNALS["semantic"](context, pool)
    top = min(pool, key=lambda i: (-first_stage[i], i))
    ranked, diagnostics = one.rank(context, 4)
    assert diagnostics["sentence_head"] == {"size": 1, "read": 1}
    assert set(one.pieces.checked) == {top} and set(context.best_pieces) <= {top}
    every = _memory(embedder, weights=weights, sentence_head=0)
    every_context = every.ranking_context(question, limit=4)
    assert every.rank(every_context, 4)[1]["sentence_head"] == {"size": 0, "read": len(pool)}
    assert set(every.pieces.checked) == set(pool) and len(every_context.best_pieces) > len(context.best_pieces or {})
    # no sentence weight: nothing read, and the diagnostics say so
    assert _memory(embedder, weights={"semantic": 1.0}).recall(question, mode="full", limit=4)["diagnostics"][
        "ranking"]["sentence_head"]["read"] is None


def test_a_head_reads_only_its_own_pieces_whatever_the_memory_already_encoded(embedder):
    """A memory that encoded every candidate's pieces for one question (head 0) and then ranks with a head of
    one reads that one turn's pieces only, and ranks as a fresh memory with a head of one does."""
    question = "Where has Melanie camped?"
    weights = {"semantic": 1.0, "sentence": 1.0}
    warm = _memory(embedder, weights=weights, sentence_head=0)
    warm.rank(warm.ranking_context(question, limit=4), 4)
    assert len(warm.pieces.checked) == len(TURNS)  # every turn's pieces are held
    warm.sentence_head = 1
    context = warm.ranking_context(question, limit=4)
    warm_ranked, _ = warm.rank(context, 4)
    fresh = _memory(embedder, weights=weights, sentence_head=1)
    fresh_context = fresh.ranking_context(question, limit=4)
    fresh_ranked, _ = fresh.rank(fresh_context, 4)
    assert set(context.best_pieces) == set(fresh_context.best_pieces) and len(fresh.pieces.checked) == 1
    assert [(i, s) for i, s, _ in warm_ranked] == [(i, s) for i, s, _ in fresh_ranked]


def test_a_context_ranked_again_without_the_sentence_weight_keeps_no_pieces(embedder):
    """The sentence signal of a context ranked first with a sentence weight and then without is 0 everywhere,
    as on a fresh context: diagnostics never depend on an earlier ranking of the same context."""
    question = "Where has Melanie camped?"
    memory = _memory(embedder, weights={"semantic": 1.0, "sentence": 1.0}, sentence_head=0)
    reused = memory.ranking_context(question, limit=4)
    memory.rank(reused, 4)
    assert reused.best_pieces
    again, _ = memory.rank(reused, 4, weights={"semantic": 1.0})
    fresh, _ = memory.rank(memory.ranking_context(question, limit=4), 4, weights={"semantic": 1.0})
    assert [d["signals"]["sentence"] for _, _, d in again] == [d["signals"]["sentence"] for _, _, d in fresh]
    assert reused.best_pieces is None


def test_equal_candidates_at_the_head_boundary_go_to_the_lowest_id(embedder):
    """Turns every first-stage signal scores alike: a head of one reads the lowest id among them."""
    same = [("Melanie: We camped at the beach with the kids last summer.", "Melanie")] * 3
    memory = _memory(embedder, turns=same, weights={"semantic": 1.0, "sentence": 1.0}, sentence_head=1)
    context = memory.ranking_context("Where did Melanie camp?", limit=3)
    memory.rank(context, 3)
    pool = sorted({i for pairs in context.lists.values() for i in pairs})
    assert set(memory.pieces.checked) == {min(pool)}


def test_the_default_head_is_the_one_the_published_comparisons_measured():
    """docs/cost.md compares a head of 30 with every candidate: the default is that head."""
    from memoria.defaults import DEFAULT_SENTENCE_HEAD

    assert DEFAULT_SENTENCE_HEAD == 30 and MemoryInterface().sentence_head == DEFAULT_SENTENCE_HEAD
