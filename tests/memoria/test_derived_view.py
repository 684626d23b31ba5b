"""The derived view of a memory that grows: a view built from the one before it is the view built afresh, and
the phrase source reads only the memories that hold a phrase's words, with the scores of reading them all."""

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from memoria.bm25 import STOPWORDS
from memoria.retrieval_sources import _WORD, DerivedView, phrase_search
from memoria.store import MemoryStore

WORDS = ["i", "the", "coffee", "tea", "went", "to", "paris", "in", "may", "it's", "my", "sister", "loves", "jazz",
         "and", "a", "trip", "on", "monday", "2023-05-07"]


def _read_every_memory(view: DerivedView, query: str, limit: int) -> list[tuple[int, float]]:
    """The phrase source as it was before the word index: every n-gram tried on every memory."""
    words = _WORD.findall(query.lower())
    grams = []
    for n in (4, 3, 2):
        for i in range(len(words) - n + 1):
            gram = words[i:i + n]
            if sum(w not in STOPWORDS for w in gram) >= max(1, n - 1):
                grams.append((" " + " ".join(gram) + " ", n))
    whole = " " + " ".join(words) + " " if len(words) > 1 else None
    scores = {}
    for memory_id in view.ids:
        text = view.texts[memory_id]
        score = sum(n * n for gram, n in grams if gram in text)
        if whole and whole in text:
            score += 2 * len(words) ** 2
        if score:
            scores[memory_id] = float(score)
    return sorted(scores.items(), key=lambda p: (-p[1], p[0]))[:limit]


def _store(texts, metadatas=None, first=0):
    store = MemoryStore()
    _add(store, texts, metadatas, first)
    return store


def _add(store, texts, metadatas=None, first=None):
    first = store.next_id() if first is None else first
    metadatas = metadatas or [{"role": "user", "date": "2023-05-0%d" % (1 + n % 9)} for n in range(len(texts))]
    store.insert(list(range(first, first + len(texts))), texts, [json.dumps(m) for m in metadatas])


texts_strategy = st.lists(st.lists(st.sampled_from(WORDS), min_size=0, max_size=14).map(" ".join), min_size=1,
                          max_size=12)


@settings(max_examples=150, deadline=None)
@given(texts=texts_strategy, query=st.lists(st.sampled_from(WORDS), max_size=10).map(" ".join),
       punctuation=st.sampled_from(["", "?", ", really!", "  "]))
def test_the_phrase_source_scores_as_reading_every_memory_does(texts, query, punctuation):
    view = DerivedView(_store([t.capitalize() + punctuation for t in texts]))
    asked = query.upper() + punctuation
    assert phrase_search(view, asked, 100) == _read_every_memory(view, asked, 100)
    assert phrase_search(view, asked, 2) == _read_every_memory(view, asked, 2)


def test_a_repeated_phrase_counts_as_often_as_it_is_asked_and_a_word_alone_finds_nothing():
    view = DerivedView(_store(["my sister loves jazz", "jazz", "the trip to paris"]))
    assert view.holding(["sister", "jazz"]) == {0} and view.holding(["jazz", "paris"]) == set()
    twice = phrase_search(view, "sister loves jazz, sister loves jazz", 10)
    assert twice == _read_every_memory(view, "sister loves jazz, sister loves jazz", 10) and twice[0][0] == 0
    assert phrase_search(view, "jazz", 10) == []


def _fields(view: DerivedView) -> dict:
    return {"texts": view.texts, "ids": view.ids, "standing": view.standing, "sessions": view.session_of,
            "dates": {i: view.date_keys(i) for i in view.ids}, "time": {i: view.mentions_time(i) for i in view.ids},
            "words": dict(view.word_ids)}


def test_a_view_built_from_the_one_before_is_the_view_built_afresh_as_memory_grows():
    rng = random.Random(5)
    store = _store(["From now on, keep answers short.", "We went to Paris on 2023-05-07."])
    earlier = DerivedView(store)
    _fields(earlier)  # its lazy parts worked out, to be carried over
    for step in range(6):
        _add(store, [" ".join(rng.choice(WORDS) for _ in range(8)) + "." for _ in range(3)],
             [{"role": rng.choice(["user", "assistant"]), "date": f"2023-06-0{step + 1}"} for _ in range(3)])
        grown = DerivedView(store, earlier=earlier)
        assert _fields(grown) == _fields(DerivedView(store))
        earlier = grown


def test_a_memory_whose_text_role_or_date_changed_under_its_id_is_worked_out_again(monkeypatch):
    import memoria.retrieval_sources as sources

    before = DerivedView(_store(["Always answer in French.", "Coffee on Monday."],
                                [{"role": "user", "date": "2023-05-01"}, {"role": "user", "date": "2023-05-02"}]))
    _fields(before)
    store = _store(["Always answer in French.", "From now on, be brief."],
                   [{"role": "assistant", "date": "2023-06-09"}, {"role": "user", "date": "2023-05-02"}])
    normalised = []
    real = sources._normal_text
    monkeypatch.setattr(sources, "_normal_text", lambda text: normalised.append(text) or real(text))
    after = DerivedView(store, earlier=before)
    assert normalised == ["From now on, be brief."], "only the changed text is read again"
    monkeypatch.undo()
    assert _fields(after) == _fields(DerivedView(store))
    assert 0 in before.standing and 0 not in after.standing, "a user's standing preference is not an assistant's"
    assert "june" in after.date_keys(0) and "june" not in before.date_keys(0), "its session's date is read again"
    assert before.mentions_time(1) and not after.mentions_time(1) and 1 in after.standing and 1 not in before.standing


def test_the_word_index_is_shared_only_once_it_is_whole():
    """A phrase source on another thread reads the index all built or builds its own, never a part of one."""
    view = DerivedView(_store(["my sister loves jazz", "the trip to paris", "jazz in paris"]))
    seen = []

    class Watched(dict):
        def items(self):
            for pair in super().items():
                seen.append(view._word_ids)
                yield pair

    view.texts = Watched(view.texts)
    assert view.word_ids["jazz"] == {0, 2}
    assert seen == [None, None, None]


def test_a_memory_that_grows_and_recalls_in_full_builds_each_view_as_one_built_afresh():
    from memoria import BatchLoader, MemoryInterface
    from tests.helpers import WordEmbedder

    memory = MemoryInterface(embedder=WordEmbedder())
    rng = random.Random(9)
    for step in range(4):
        texts = [" ".join(rng.choice(WORDS) for _ in range(9)) for _ in range(3)]
        metadatas = [{"role": rng.choice(["user", "assistant"]), "session_index": step, "date": f"2023-06-0{step + 1}"}
                     for _ in texts]
        BatchLoader(memory).insert_batch(texts, metadatas, parallel_extract=False)
        assert memory._view is None and (step == 0 or not isinstance(memory._carried_view, DerivedView)), \
            "only what a view carries is kept past an insert"
        memory.recall("my sister loves jazz in paris on monday", mode="full", limit=5)
        fresh = DerivedView(memory.store, dict(zip(memory.bm25.ids, memory.bm25.tokens)))
        assert _fields(memory.view()) == _fields(fresh)
