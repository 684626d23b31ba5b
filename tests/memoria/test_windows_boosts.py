"""Turn windows, session aggregation, name / quoted-phrase / date boosts and the temporal prior of `full`.

A bag-of-words embedder stands in for MiniLM so every score here can be read
off the words; the real model runs in test_full.py.
"""

import re
import zlib

import numpy as np
import pytest

from memoria import BatchLoader, MemoryInterface, boosts
from memoria.bm25 import tokenize
from memoria.ranking import RankingContext, rank, session_aggregate
from memoria.retrieval_sources import DerivedView, SessionDocuments
from tests.conftest import REPO
from memoria.windows import build_windows, credit_turns, spans

DATE_1, DATE_2 = "1:56 pm on 8 May, 2023", "10:00 am on 20 June, 2023"


class WordEmbedder:
    """Unit bag-of-words vectors (each word hashed to one of 256 dimensions); counts what it encodes."""

    dimension = 256

    def __init__(self):
        self.encoded = 0

    def encode(self, texts, batch_size=32):
        self.encoded += len(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[row, zlib.crc32(word.encode()) % self.dimension] += 1.0
            norm = np.linalg.norm(out[row])
            out[row] /= norm if norm else 1.0
        return out


CONVERSATION = [  # (text, speaker, session_index, date)
    ("Caroline: Guess what happened this morning!", "Caroline", 1, DATE_1),
    ("Melanie: Tell me!", "Melanie", 1, DATE_1),
    ("Caroline: We adopted one from the shelter.", "Caroline", 1, DATE_1),
    ("Melanie: A puppy? What is its name?", "Melanie", 1, DATE_1),
    ("Caroline: Rex. He sleeps all day.", "Caroline", 1, DATE_1),
    ("Melanie: So cute.", "Melanie", 1, DATE_1),
    ("Caroline: I painted a lake last week.", "Caroline", 2, DATE_2),
    ("Melanie: Show me the painting.", "Melanie", 2, DATE_2),
]


def _rows():
    return [(i, text, {"speaker": s, "session_index": n, "date": d, "label": "c1"})
            for i, (text, s, n, d) in enumerate(CONVERSATION)]


def _memory(rows=None, **options):
    rows = rows or _rows()
    memory = MemoryInterface(**{"embedder": WordEmbedder(), **options})
    BatchLoader(memory).insert_batch([r[1] for r in rows], [r[2] for r in rows], parallel_extract=False)
    return memory


# -- windows ----------------------------------------------------------------
def test_spans_step_by_size_minus_overlap_and_end_at_the_last_turn():
    assert spans(6, 4, 1) == [(0, 4), (3, 6)]
    assert spans(8, 4, 1) == [(0, 4), (3, 7), (6, 8)]
    assert spans(2, 4, 1) == [(0, 2)]
    assert spans(4, 4, 0) == [(0, 4)]
    with pytest.raises(ValueError):
        spans(5, 3, 3)


def test_windows_hold_consecutive_turns_of_one_session_with_speakers_and_date():
    windows = build_windows(_rows(), size=4, overlap=1, turn_chars=200)
    assert [w["turns"] for w in windows] == [[0, 1, 2, 3], [3, 4, 5], [6, 7]]  # never across sessions 1 and 2
    first, last = windows[0]["text"].splitlines(), windows[2]["text"].splitlines()
    assert first[0] == f"[{DATE_1}]" and last[0] == f"[{DATE_2}]"
    assert first[1:] == [t for t, *_ in CONVERSATION[:4]]  # a turn already spoken as "Speaker: ..." is not doubled
    unprefixed = [(0, "hello there", {"role": "user", "date": "2023/05/20 (Sat) 02:21"}),
                  (1, "x" * 500, {"role": "assistant", "date": "2023/05/20 (Sat) 02:21"})]
    text = build_windows(unprefixed, size=6, overlap=1, turn_chars=50)[0]["text"].splitlines()
    assert text == ["[2023/05/20 (Sat) 02:21]", "user: hello there", "assistant: " + "x" * 50 + " ..."]


def test_a_window_hit_credits_every_turn_it_holds_and_each_turn_keeps_its_best_window():
    turns = [[0, 1, 2, 3], [3, 4, 5], [6, 7]]
    credited = credit_turns([(1, 0.9), (0, 0.5)], turns)
    assert credited == [(3, 0.9), (4, 0.9), (5, 0.9), (0, 0.5), (1, 0.5), (2, 0.5)]  # turn 3 keeps 0.9, not 0.5


def test_window_source_credits_a_turn_through_the_window_it_sits_in():
    memory = _memory(window_size=4, window_overlap=1)
    query = "puppy rex sleeps"  # window [3, 4, 5] holds all three words; window [0, 1, 2, 3] only "puppy"
    response = memory.recall(query, mode="full", limit=8)
    window_hits = dict(memory._source("window", query, memory.embedder.encode([query])[0], 100))
    best = max(window_hits.values())
    assert window_hits[3] == window_hits[4] == window_hits[5] == best  # turn 3 keeps its better window
    assert window_hits[0] == window_hits[1] == window_hits[2] < best
    assert window_hits.get(6, 0.0) == window_hits.get(7, 0.0) < best  # session 2: one window, one score
    assert "window" in response["diagnostics"]["sources_completed"]
    signals = {c["id"]: c["diagnostics"]["ranking"]["signals"] for c in response["results"]}
    assert signals[5]["window"] == 1.0 and signals[5]["semantic"] == 0.0  # "So cute." holds no word of the question


def test_windows_survive_a_snapshot_and_are_not_encoded_again(tmp_path):
    memory = _memory(window_size=4, window_overlap=1)
    assert memory.build_windows() == 3 and memory.build_windows() == 0
    memory.snapshot(tmp_path / "s")
    restored = MemoryInterface(embedder=WordEmbedder(), window_size=4, window_overlap=1)
    restored.restore(tmp_path / "s")
    restored.recall("puppy", mode="full")
    assert restored.embedder.encoded == 1  # the question only
    assert restored.window_turns == memory.window_turns
    other = MemoryInterface(embedder=WordEmbedder(), window_size=3, window_overlap=0)
    other.restore(tmp_path / "s")
    other.recall("puppy", mode="full")
    assert other.window_turns[0] == [0, 1, 2] and other.embedder.encoded > 1  # other settings: built again


# -- session aggregation ----------------------------------------------------
def test_session_aggregation_by_hand_on_three_sessions():
    # session A: 1.0, 0.2, 0.2   B: 0.7, 0.7, 0.6   C: 0.9 (alone)
    scores = {0: 1.0, 1: 0.2, 2: 0.2, 3: 0.7, 4: 0.7, 5: 0.6, 6: 0.9}
    session = {0: "A", 1: "A", 2: "A", 3: "B", 4: "B", 5: "B", 6: "C"}
    means = session_aggregate(scores, session.get, top_n=2)
    assert means[0] == means[1] == pytest.approx((1.0 + 0.2) / 2)    # A: 0.6
    assert means[3] == means[5] == pytest.approx((0.7 + 0.7) / 2)    # B: 0.7
    assert means[6] == pytest.approx((0.9 + 0.0) / 2)                # C: 0.45, its missing second turn counts 0
    assert session_aggregate(scores, session.get, top_n=1)[6] == pytest.approx(0.9)

    rows = [(i, f"turn {i}", {"session_index": session[i], "label": "c"}) for i in range(7)]
    memory = _memory(rows, window_size=0)
    lists = {"attribute": sorted(scores.items(), key=lambda p: -p[1])}  # attribute_boost = score / max = score
    ctx = lambda: RankingContext(None, lists, memory.view(), memory.vectors, memory.view().ids, "")
    alone, _ = rank(ctx(), {"attribute_boost": 1.0}, 7, mmr_lambda=1.0)
    assert [i for i, _, _ in alone][:4] == [0, 6, 3, 4]           # sessions A, C, B
    together, _ = rank(ctx(), {"attribute_boost": 1.0, "session": 1.0}, 7, mmr_lambda=1.0, session_top_n=2)
    assert [i for i, _, _ in together][:5] == [0, 3, 4, 5, 6]     # sessions A, B, C: B's three good turns win
    by_id = {i: (score, extra) for i, score, extra in together}
    assert by_id[6][1]["signals"]["session"] == pytest.approx(0.45 / 0.7)  # normalised by the best session
    assert by_id[6][0] == pytest.approx(0.9 + 0.45 / 0.7)
    assert by_id[6][0] == pytest.approx(sum(by_id[6][1]["contributions"].values()))


# -- whole sessions as documents ---------------------------------------------
def test_session_bm25_by_hand_on_three_sessions():
    # A: "rex" twice in 4 tokens; B: "rex" once in 2 tokens; C: no "rex", 2 tokens. N = 3, df(rex) = 2.
    docs = SessionDocuments([("A", ["rex", "sleep"]), ("A", ["rex", "bark"]), ("B", ["rex", "lake"]),
                             ("C", ["paint", "lake"])], k1=1.5, b=0.75)
    average = 8 / 3
    idf = np.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    by_hand = {key: idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * length / average))
               for key, tf, length in (("A", 2, 4), ("B", 1, 2))}
    scores = docs.scores(["rex", "rex"])  # a repeated term counts once
    assert set(scores) == {"A", "B"} and scores == pytest.approx(by_hand)
    assert docs.scores(["unheard"]) == {}


def _printed_under_six_hash_seeds(code: str) -> set[str]:
    """What `code` prints in six processes, each under another string hash seed: one output when nothing follows it."""
    import subprocess
    import sys

    return {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": str(seed), "PATH": ""}, cwd=str(REPO)).stdout for seed in range(6)}


def test_session_bm25_is_the_same_bits_whatever_the_string_hash_seed():
    """Summed in a set's order, a score's last bit followed PYTHONHASHSEED, so two processes disagreed."""
    code = ("from memoria.retrieval_sources import SessionDocuments as D; import random; r = random.Random(3); "
            "w = [f'w{n}' for n in range(40)]; "
            "d = D([(k % 7, [r.choice(w) for _ in range(30)]) for k in range(60)]); "
            "print(repr(sorted(d.scores(w[:25]).items())))")
    outputs = _printed_under_six_hash_seeds(code)
    assert len(outputs) == 1 and outputs.pop().startswith("[(0, ")


def test_graph_scores_are_the_same_bits_whatever_the_string_hash_seed():
    """A seed's bridges are a set of entity names: summed in its order, a turn's graph score changed in its last
    bit from one process to the next."""
    code = ("from memoria.retrieval_sources import DerivedView, graph_search\n"
            "import random\n"
            "r = random.Random(5)\n"
            "names = 'anna bea cleo dara eli finn gus hana ivo jade kai lena milo nora otto pia rex sol tom uma'\n"
            "held = {m: r.sample(names.split(), 4) for m in range(120)}\n"
            "class Store:\n"
            "    def rows(self, table):\n"
            "        entities = [(m, e) for m in held for e in held[m]]\n"
            "        return entities if table == 'entities' else []\n"
            "    def all_rows(self):\n"
            "        return [(m, ' '.join(held[m]), {}) for m in held]\n"
            "print(repr(graph_search(DerivedView(Store()), 'Did Rex meet Anna or Tom?', 120, 8)))")
    outputs = _printed_under_six_hash_seeds(code)
    assert len(outputs) == 1 and outputs.pop().count("(") > 100  # one answer, and it reached most turns


def test_a_turn_without_the_question_words_gains_from_its_session():
    memory = _memory(window_size=0)
    query = "the puppy from the shelter"
    lists = {"bm25": memory.bm25.search(query, 8)}  # turns 2 and 3 hold a word; 4 ("Rex. He sleeps") none
    ctx = RankingContext(memory.embedder.encode([query])[0], lists | {"extra": [(4, 0.0), (6, 0.0)]},
                         memory.view(), memory.vectors, memory.view().ids, query)
    ranked, _ = rank(ctx, {"session_bm25": 1.0, "session_centroid": 1.0}, 8, mmr_lambda=1.0)
    signals = {i: extra["signals"] for i, _, extra in ranked}
    assert signals[4]["token"] == 0.0 and signals[4]["session_bm25"] == 1.0 == signals[2]["session_bm25"]
    assert signals[6]["session_bm25"] == 0.0  # session 2 holds neither word
    assert signals[4]["session_centroid"] == 1.0 and signals[6]["session_centroid"] == 0.0
    assert [i for i, _, _ in ranked][:3] == [2, 3, 4]  # session 1's turns, ties by id


def test_session_centroids_are_the_unit_mean_of_each_sessions_vectors():
    memory = _memory(window_size=0)
    view = memory.view()
    centroids = view.session_centroids(memory.vectors)
    vectors = memory.embedder.encode([text for text, *_ in CONVERSATION])
    for session, members in ((1, range(0, 6)), (2, range(6, 8))):
        mean = vectors[list(members)].sum(axis=0)
        key = view.session_of[members[0]]
        assert np.allclose(centroids[key], mean / np.linalg.norm(mean), atol=1e-6)


def test_the_view_reads_the_bm25_tokens_it_is_given_and_the_same_ones_without():
    memory = _memory(window_size=0)
    given = DerivedView(memory.store, dict(zip(memory.bm25.ids, memory.bm25.tokens)))
    worked_out = DerivedView(memory.store)
    for i in given.ids:
        assert given.tokens(i) == worked_out.tokens(i) == tokenize(given.raw_texts[i])
    assert given.document_frequency == worked_out.document_frequency
    assert given.sessions.postings == worked_out.sessions.postings


# -- boosts -----------------------------------------------------------------
BOOST_ROWS = [
    (0, "Caroline: I went hiking and watched the sunset.", {"speaker": "Caroline", "session_index": 1, "date": DATE_1}),
    (1, "Melanie: I went hiking, the sunset was great.", {"speaker": "Melanie", "session_index": 2, "date": DATE_2}),
    (2, "Caroline: We saw Into the Wild yesterday.", {"speaker": "Caroline", "session_index": 3, "date": DATE_1}),
    (3, "Caroline: The wild trail goes into the woods.", {"speaker": "Caroline", "session_index": 3, "date": DATE_1}),
]


def _order(memory, query, weights, lists):
    ctx = RankingContext(None, lists, memory.view(), memory.vectors, memory.view().ids, query)
    ranked, _ = rank(ctx, weights, 10, mmr_lambda=1.0)
    return [i for i, _, _ in ranked], {i: extra["signals"] for i, _, extra in ranked}


@pytest.mark.parametrize("signal, query, plain, target, lists", [
    ("name", "Where did Melanie go hiking?", "Where did they go hiking?", 1, {"bm25": [(0, 2.0), (1, 1.0)]}),
    ("quoted", 'Which film is "Into the Wild"?', "Which film did they see?", 2, {"bm25": [(3, 2.0), (2, 1.0)]}),
    ("date", "Where did we go hiking in June 2023?", "Where did we go hiking?", 1, {"bm25": [(0, 2.0), (1, 1.0)]}),
    ("temporal", "When did Caroline see the film?", "What did Caroline see?", 2, {"bm25": [(3, 2.0), (2, 1.0)]}),
])
def test_each_boost_moves_its_candidate_and_none_when_the_question_names_nothing(signal, query, plain, target, lists):
    memory = _memory(BOOST_ROWS, window_size=0)
    other = next(i for i, _ in lists["bm25"] if i != target)
    without, _ = _order(memory, query, {"token": 1.0}, lists)
    assert without[0] == other
    boosted, signals = _order(memory, query, {"token": 1.0, signal: 3.0}, lists)
    assert boosted[0] == target and signals[target][signal] > signals[other][signal]
    unmoved, signals = _order(memory, plain, {"token": 1.0, signal: 3.0}, lists)
    assert unmoved == without and all(s[signal] == 0.0 for s in signals.values())


def test_what_each_boost_reads_from_a_question():
    assert boosts.question_names("Would Caroline and Melanie go?", {"caroline", "melanie"}) == ["caroline", "melanie"]
    assert boosts.question_names("What did Jon say?", {"caroline"}) == []  # a name the memory never saw
    assert boosts.quoted_phrases('Who wrote "Charlotte\'s Web" and \'Dune\'?') == [" charlotte's web ", " dune "]
    assert boosts.quoted_phrases("What's Caroline's plan?") == []  # apostrophes are no quotes
    assert boosts.date_keys("on 8 May, 2023") == {"may", "may 8", "2023"}
    assert boosts.date_keys("2023/05/20 (Sat) 02:21") == {"2023", "may", "may 20"}
    assert boosts.date_keys("You may go") == set()
    assert [boosts.is_temporal_question(q) for q in ("When did she move?", "How long ago was the trip?",
                                                     "What did she move?", "In what year did he start?")] == \
        [True, True, False, True]
    assert boosts.mentions_time("I went there last week") and not boosts.mentions_time("You may like it")


def test_which_names_leave_the_question_before_it_is_encoded():
    speakers = {"joanna", "nate", "a", "d.j. (dj)"}
    assert boosts.without_names("What did Joanna's brother give to NATE?", speakers) == "What did brother give to ?"
    assert boosts.without_names("Where did Nate\u2019s turtles go?", speakers) == "Where did turtles go?"
    assert boosts.without_names("Did Natey or Joannas call?", speakers) == "Did Natey or Joannas call?"
    assert boosts.without_names("Is a song by D.J. (DJ) here?", speakers) == "Is a song by here?"  # "a" is too short
    assert boosts.without_names("Joanna and Nate?", speakers) == "and ?"
    assert boosts.without_names("Joanna, Nate?", speakers) == "Joanna, Nate?"  # nothing left to ask: kept whole
    assert boosts.without_names("What did Joanna say?", set()) == "What did Joanna say?"
    assert boosts.without_names("What did Jo buy?", {"jo"}) == "What did buy?"  # two letters are a name
    assert boosts.without_names("What did Mary Ann buy?", {"mary", "mary ann"}) == "What did buy?"  # longest first
    assert boosts.without_names("JOANNA, WHY?", {"joanna"}) == ", WHY?"  # what is left is read in any case


class RecordingEmbedder(WordEmbedder):
    def __init__(self):
        super().__init__()
        self.texts = []

    def encode(self, texts, batch_size=32):
        self.texts += list(texts)
        return super().encode(texts, batch_size)


@pytest.mark.parametrize("strip", [True, False])
def test_full_encodes_the_question_without_the_speakers_names_unless_switched_off(strip):
    rows = [(0, "Caroline: Hi!", {"speaker": "Caroline", "session_index": 1}),
            (1, "Melanie: We adopted a puppy from the shelter.", {"speaker": "Melanie", "session_index": 1})]
    memory = _memory(rows, embedder=RecordingEmbedder(), speaker_strip=strip, window_size=0)
    memory.embedder.texts.clear()
    response = memory.recall("Where did Caroline adopt the puppy?", mode="full", limit=2)
    asked = "Where did adopt the puppy?" if strip else "Where did Caroline adopt the puppy?"
    assert memory.embedder.texts == [asked]
    assert response["diagnostics"].get("dense_query") == (asked if strip else None)
    assert memory.ranking_settings["speaker_strip"] is strip
    # only the vector loses the name: BM25, the feedback search and the boosts still read the whole question
    searched = []
    search_terms = memory.bm25.search_terms
    memory.bm25.search_terms = lambda terms, limit: searched.append(terms) or search_terms(terms, limit)
    memory.weights = {"token": 1.0, "name": 1.0, "feedback": 0.5}
    names = [c["diagnostics"]["ranking"]["signals"]["name"]
             for c in memory.recall("Where did Caroline adopt the puppy?", mode="full", limit=2)["results"]]
    assert searched[0] == tokenize("Where did Caroline adopt the puppy?") and len(searched) == 2  # the question, then feedback
    assert sorted(names) == [0.0, 1.0]  # Caroline's turn, named by the question, and Melanie's
    memory.embedder.texts.clear()
    memory.recall("Where did Caroline adopt the puppy?", mode="dense", limit=2)  # only a ranked mode strips
    # unstripped, the whole question was encoded by the first recall already, and its vector is served again
    assert memory.embedder.texts == (["Where did Caroline adopt the puppy?"] if strip else [])
