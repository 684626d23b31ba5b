"""Lexical feedback in `full`: words of the first stage's best turns, searched with BM25 beside the question."""

import pytest

from memoria import BatchLoader, MemoryInterface, defaults
from memoria.ranking import RankingContext, feedback_terms, rank
from tests.memoria.test_windows_boosts import WordEmbedder

ROWS = [  # (text, session)
    ("Caroline: We adopted a puppy from the shelter.", 1),
    ("Caroline: His name is Rex, a shelter puppy.", 1),
    ("Melanie: I took up running this spring.", 2),
    ("Melanie: I painted a lake at sunrise.", 3),
    ("Caroline: The museum had old maps.", 4),
    ("Melanie: Dinner was pasta again.", 4),
]


def _memory():
    memory = MemoryInterface(embedder=WordEmbedder(), window_size=0)
    BatchLoader(memory).insert_batch([t for t, _ in ROWS], [{"session_index": s, "label": "c"} for _, s in ROWS],
                                     parallel_extract=False)
    return memory


def _order(memory, query, lists, weights, search=True, **options):
    ctx = RankingContext(None, lists, memory.view(), memory.vectors, memory.view().ids, query,
                         lexical_search=(lambda terms: memory.bm25.search_terms(terms, len(memory))) if search else None)
    ranked, diagnostics = rank(ctx, weights, 10, mmr_lambda=1.0, **options)
    return [i for i, _, _ in ranked], {i: extra for i, _, extra in ranked}, diagnostics


def test_feedback_terms_by_hand():
    # Terms are stems. "caroline" and "adopt" are the question's own ("adopted" is "adopt" too); "we", "a",
    # "from", "the" are stopwords. Left: puppi 2/6, rescu 1/6, shelter 1/6 of the text; 4 documents.
    frequency = {"puppi": 1, "shelter": 1, "rescu": 1, "caroline": 3}
    text = "Caroline: We adopted a puppy, a puppy from the rescue shelter."
    # tokens: caroline adopt puppi puppi rescu shelter (6); idf = log(1 + 4/2) for each word in 1 document
    assert feedback_terms("What did Caroline adopt?", [(text, 1.0)], frequency, 4, 1) == ["puppi"]
    assert feedback_terms("What did Caroline adopt?", [(text, 1.0)], frequency, 4, 5) == \
        ["puppi", "rescu", "shelter"]  # rescu and shelter weigh the same: by the word
    # A common word loses to a rarer one of the same share: "museum" in 1 of 4 documents, "map" in 3.
    rarer = feedback_terms("", [("museum maps", 1.0)], {"museum": 1, "map": 3}, 4, 1)
    assert rarer == ["museum"]
    # Each feedback text counts by its score: a text scoring 0 adds nothing.
    assert feedback_terms("", [("museum", 0.0), ("maps", 0.5)], {}, 4, 5) == ["map"]
    assert feedback_terms("puppy shelter", [("puppy shelter", 1.0)], {}, 4, 5) == []


def test_feedback_lifts_the_turn_that_shares_words_with_the_best_turn():
    memory = _memory()
    # Turn 1 names the puppy (the answer) but shares no word with the question; turn 2 matches it a little.
    lists = {"bm25": [(0, 3.0), (2, 1.0), (1, 0.0)]}  # token signal: 1, 1/3, 0
    without, _, _ = _order(memory, "What did Caroline adopt?", lists, {"token": 1.0})
    assert without == [0, 2, 1]
    order, extra, diagnostics = _order(memory, "What did Caroline adopt?", lists, {"token": 1.0, "feedback": 3.0},
                                       feedback_turns=1)
    assert diagnostics["feedback"] == {"turns": 1, "terms": ["puppi", "shelter"]}  # "adopted" is the question's "adopt"
    assert order == [0, 1, 2]
    signals = {i: e["signals"]["feedback"] for i, e in extra.items()}
    assert signals[0] == pytest.approx(1.0) and 0 < signals[1] < 1 and signals[2] == 0.0
    assert extra[1]["contributions"]["feedback"] == pytest.approx(3.0 * signals[1])


def test_feedback_moves_nothing_when_the_best_turn_shares_no_word_with_another_candidate():
    memory = _memory()
    lists = {"bm25": [(3, 3.0), (2, 1.0), (1, 0.0)]}  # the best turn paints a lake; no other candidate says so
    without, _, _ = _order(memory, "What did Melanie do?", lists, {"token": 1.0})
    order, extra, _ = _order(memory, "What did Melanie do?", lists, {"token": 1.0, "feedback": 3.0}, feedback_turns=1)
    assert order == without == [3, 2, 1]
    assert [extra[i]["signals"]["feedback"] for i in (2, 1)] == [0.0, 0.0]
    # Without a lexical index to ask, or with no weight, the signal is 0 everywhere and nothing is searched.
    lists = {"bm25": [(0, 3.0), (2, 1.0), (1, 0.0)]}
    for weights, search in (({"token": 1.0, "feedback": 3.0}, False), ({"token": 1.0}, True)):
        order, extra, diagnostics = _order(memory, "What did Caroline adopt?", lists, weights, search=search)
        assert order == [0, 2, 1] and diagnostics["feedback"]["terms"] == []
        assert all(e["signals"]["feedback"] == 0.0 for e in extra.values())


def test_recall_in_full_searches_the_feedback_words_and_says_which():
    memory = _memory()
    memory.weights = {"token": 1.0, "feedback": 1.0}
    memory.feedback_turns = 2
    response = memory.recall("What did Caroline adopt at the shelter?", mode="full", limit=3)
    terms = response["diagnostics"]["ranking"]["feedback"]["terms"]
    assert "puppi" in terms and not {"caroline", "adopt", "shelter"} & set(terms)  # from turns 0 and 1
    assert MemoryInterface(embedder=WordEmbedder()).ranking_settings["feedback"] == \
        {"turns": defaults.DEFAULT_FEEDBACK_TURNS, "terms": defaults.DEFAULT_FEEDBACK_TERMS}
    with pytest.raises(ValueError, match="feedback"):
        MemoryInterface(embedder=WordEmbedder(), feedback_turns=0)
