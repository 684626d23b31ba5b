"""What Memoria gives the model for one item, mode by mode: a mode that reads no vector encodes nothing, and every
other encodes each distinct text it reads (turns, windows, sentence pieces) once per item, whatever order its
questions come in, plus one text per question. Calls and rows are counted, never timed."""

import copy
from collections import Counter

import pytest

from adapters.benchmarks.locomo.reader import LoCoMo
from adapters.systems import make_system
from adapters.systems.memoria_system import MemoriaSystem, _metadata
from memoria import defaults
from memoria.boosts import without_names
from memoria.pieces import row_pieces
from memoria.windows import build_windows
from tests.helpers import WordEmbedder
from workers.item.evaluate import evaluate_item, make_docs

SESSIONS = ("D1", "D2", "D3")
QUESTIONS = 12


class CountingEmbedder(WordEmbedder):
    """Bag-of-words vectors that record every call and every text given to the model."""

    def __init__(self):
        self.calls, self.texts = 0, []

    def encode(self, texts, batch_size=32, **options):
        self.calls += 1
        self.texts += list(texts)
        return super().encode(texts, batch_size, **options)


@pytest.fixture(scope="module")
def small_item(locomo_path):
    """A real conversation's first sessions and the questions they answer, with one turn said twice (a second doc,
    the same text), so that a text encoded per doc rather than per distinct text shows."""
    item = next(iter(LoCoMo(locomo_path).iter_items()))
    item = copy.deepcopy(item)
    item["turns"] = [t for t in item["turns"] if t["session_id"] in SESSIONS]
    again = copy.deepcopy(item["turns"][1])
    again["turn_id"], again["props"]["turn_index"] = "D1:again", len(item["turns"])
    item["turns"].insert(2, again)
    item["questions"] = [q for q in item["questions"] if set(q["gold_sessions"]) <= set(SESSIONS)][:QUESTIONS]
    assert len(item["questions"]) == QUESTIONS
    return item


def _run(item, mode, **settings):
    embedder = CountingEmbedder()
    system = MemoriaSystem(mode=mode, embedder=embedder, parallel_extract=False, **settings)
    outcome = evaluate_item(item, system, top_k=10)
    return system, embedder, outcome


def _question_texts(item, system) -> list[str]:
    """The text each question is encoded as: a ranked mode's without the speakers' names."""
    questions = [q["question"] for q in item["questions"]]
    if system.mode in defaults.RANKED_MODES and system.memory.speaker_strip:
        return [without_names(q, system.memory.view().speakers) for q in questions]
    return questions


def _rankings(outcome):
    return {r["question_id"]: [(c["id"], c["score"]) for c in r["candidates"]] for r in outcome["records"]}


def test_bm25_makes_no_model_call(small_item):
    system, embedder, outcome = _run(small_item, "bm25")
    assert embedder.calls == 0 and embedder.texts == []
    assert outcome["stats"]["texts_encoded_by_kind"] == dict.fromkeys(("turns", "windows", "pieces", "questions"), 0)
    assert len(system.memory.vectors) == 0 and len(system.memory) == len(make_docs(small_item)[0])
    assert all(r["candidates"] for r in outcome["records"]), "BM25 still ranks every question"


def test_a_source_that_reads_vectors_left_out_leaves_nothing_to_encode(small_item):
    _, embedder, _ = _run(small_item, "raw", without=("faiss",))
    assert embedder.calls == 0


@pytest.mark.parametrize("mode", ["dense", "raw", "fusion"])
def test_unranked_modes_encode_each_distinct_turn_once_and_each_question(small_item, mode):
    system, embedder, outcome = _run(small_item, mode)
    turns = [d["text"] for d in make_docs(small_item)[0]]
    assert len(set(turns)) == len(turns) - 1, "one turn is said twice"
    expected = Counter(set(turns)) + Counter(_question_texts(small_item, system))
    assert Counter(embedder.texts) == expected
    assert outcome["stats"]["texts_encoded_by_kind"] == {"turns": len(set(turns)), "windows": 0, "pieces": 0,
                                                         "questions": QUESTIONS}


@pytest.mark.parametrize("weights", [None, {**defaults.DEFAULT_WEIGHTS, "window": 0.1}],
                         ids=["engine weights", "with windows"])
def test_full_encodes_each_distinct_text_once_in_any_question_order(small_item, weights):
    """Turns at ingest, windows where they weigh something, the sentence pieces of the turns that reach a ranking's
    head as they do: each distinct text once, and the same texts and rankings with the questions reversed."""
    given = {"weights": weights} if weights else {}
    reversed_item = {**small_item, "questions": small_item["questions"][::-1]}
    runs = [_run(item, "full", **given) for item in (small_item, reversed_item)]
    docs = make_docs(small_item)[0]
    turns = {d["text"] for d in docs}
    windows = ({w["text"] for w in build_windows([(n, d["text"], _metadata(d)) for n, d in enumerate(docs)],
                                                 defaults.DEFAULT_WINDOW_SIZE, defaults.DEFAULT_WINDOW_OVERLAP,
                                                 defaults.DEFAULT_WINDOW_TURN_CHARS)} if weights else set())
    every_piece = {p for d in docs for p in row_pieces(d["text"], _metadata(d), defaults.DEFAULT_MAX_PIECES)}
    for system, embedder, outcome in runs:
        pieces = set(system.memory.pieces.texts)
        assert pieces and pieces <= every_piece
        questions = Counter(_question_texts(small_item, system))
        assert Counter(embedder.texts) == Counter(turns) + Counter(windows) + Counter(pieces) + questions
        encoded = outcome["stats"]["texts_encoded_by_kind"]
        assert encoded == {"turns": len(turns), "windows": len(windows), "pieces": len(pieces),
                           "questions": QUESTIONS}
    (_, forward, forward_outcome), (_, backward, backward_outcome) = runs
    assert Counter(forward.texts) == Counter(backward.texts)
    assert _rankings(forward_outcome) == _rankings(backward_outcome)


@pytest.mark.parametrize("name", ["random", "recency", "bm25s"])
def test_the_arms_and_bm25s_make_no_model_call(small_item, name, monkeypatch):
    from memoria.embedder import Embedder
    from memoria.onnx_backend import OnnxEmbedder

    pytest.importorskip("bm25s") if name == "bm25s" else None

    def refuse(*_, **__):
        raise AssertionError("the model was called")

    for cls in (Embedder, OnnxEmbedder):
        monkeypatch.setattr(cls, "encode", refuse)
    outcome = evaluate_item(small_item, make_system(name), top_k=10)
    assert len(outcome["records"]) == QUESTIONS and all(r["candidates"] for r in outcome["records"])


def test_memoria_bm25_never_loads_the_model(small_item, monkeypatch):
    """With the lazy embedder a run builds by default, bm25 mode neither loads the model nor calls it."""
    from memoria.embedder import Embedder, LazyEmbedder

    def refuse(*_, **__):
        raise AssertionError("the model was asked for")

    monkeypatch.setattr(LazyEmbedder, "loaded", property(refuse))
    monkeypatch.setattr(Embedder, "encode", refuse)
    outcome = evaluate_item(small_item, MemoriaSystem(mode="bm25", parallel_extract=False), top_k=10)
    assert all(r["candidates"] for r in outcome["records"])


def test_a_bm25_entry_holds_no_vectors_and_a_mode_that_reads_them_never_restores_it(small_item, tmp_path,
                                                                                    monkeypatch):
    """A bm25 run's cached state has no vectors, so it lies beside the others' entry, never in its place: a dense run
    on the same cache misses it and ranks as a run without a cache does, and each mode's entry serves it again."""
    from workers.item.cache import ItemCache
    from workers.item.cache_key import CACHE_KEY_ENV

    monkeypatch.setenv(CACHE_KEY_ENV, str(tmp_path / "config" / "cache.key"))
    cache = ItemCache(tmp_path / "cache")

    def run(mode, cached=True):
        system = MemoriaSystem(mode=mode, embedder=CountingEmbedder(), parallel_extract=False)
        return system, evaluate_item(small_item, system, top_k=10, cache=cache if cached else None)

    lexical, first = run("bm25")
    assert first["cache"]["reason"] == "no cache entry" and lexical.build_identity["variant"] == "no-vectors"
    dense, restored = run("dense")
    assert restored["cache"] == {"hit": False, "reason": "no cache entry", "consulted": True}
    assert len(dense.memory.vectors) == len(make_docs(small_item)[0])
    assert _rankings(restored) == _rankings(run("dense", cached=False)[1])
    assert run("bm25")[1]["cache"]["hit"] and run("dense")[1]["cache"]["hit"]
    assert _rankings(run("bm25")[1]) == _rankings(first)
