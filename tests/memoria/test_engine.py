import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from memoria import BatchLoader, MemoryInterface
from memoria.bm25 import STEMMER, BM25Index, stem, tokenize
from memoria.errors import (
    SnapshotError,
    EmptyTextError,
    InvalidMetadataError,
    InvalidTextError,
    LengthMismatchError,
    UnknownModeError,
)

pytestmark = pytest.mark.slow

CORPUS = [
    "The quarterly budget meeting moved to Thursday afternoon.",
    "I adopted a small puppy from the animal shelter last weekend.",
    "My car needs new tyres before the winter trip.",
    "The error code XQ-7731 appears whenever the printer jams.",
    "We planted tomatoes and basil in the garden this spring.",
    "She is learning to play the violin with a private teacher.",
    "The flight to Lisbon was delayed by three hours.",
    "Remember to renew the passport before it expires in May.",
    "Invoice 7f3b9d2e was refunded to the customer.",
    "Invoice 8f3a9c2f was cancelled by accounting.",
    "Invoice 7e3a9c2e is still waiting for approval.",
    "The parcel with tracking code 7f3a9c2e arrived damaged.",
]
PUPPY = 1
RARE_CODE = 11  # the only memory holding the token 7f3a9c2e; its neighbours look alike
RARE_QUERY = "invoice 7f3a9c2e"


@pytest.fixture()
def memory(embedder):
    memory = MemoryInterface(embedder=embedder)
    BatchLoader(memory).insert_batch(CORPUS, [{"n": i} for i in range(len(CORPUS))])
    return memory


def ids(response):
    return [c["id"] for c in response["results"]]


def test_dense_finds_a_paraphrase_that_bm25_misses(memory):
    query = "recently got a new dog"  # shares no word with the puppy sentence
    assert ids(memory.recall(query, mode="dense", limit=3))[0] == PUPPY
    assert PUPPY not in ids(memory.recall(query, mode="bm25", limit=3))
    assert PUPPY in ids(memory.recall(query, mode="fusion", limit=3))


def test_bm25_finds_a_rare_token_that_dense_ranks_low(memory):
    assert ids(memory.recall(RARE_QUERY, mode="bm25", limit=3))[0] == RARE_CODE
    dense = ids(memory.recall(RARE_QUERY, mode="dense", limit=len(CORPUS)))
    assert dense.index(RARE_CODE) >= 2
    assert RARE_CODE in ids(memory.recall(RARE_QUERY, mode="fusion", limit=3))


def test_raw_merges_both_sources_without_fusion(memory):
    response = memory.recall(RARE_QUERY, mode="raw", limit=4)
    assert response["diagnostics"]["sources_submitted"] == ["faiss", "bm25"]
    placed = {c["diagnostics"]["merge"]["placed_by"] for c in response["results"]}
    assert placed == {"faiss", "bm25"}
    assert len(set(ids(response))) == len(ids(response))


def test_candidates_carry_their_diagnostics(memory):
    response = memory.recall("new dog", mode="fusion", limit=5)
    top = response["results"][0]
    assert set(top) >= {"rank", "id", "text", "metadata", "score", "final_score", "diagnostics"}
    assert top["rank"] == 1 and top["metadata"] == {"n": top["id"]}
    assert set(top["diagnostics"]["sources"]) <= {"faiss", "bm25"}
    contributions = top["diagnostics"]["fusion"]["contributions"]
    assert top["score"] == pytest.approx(sum(contributions.values()))
    diag = response["diagnostics"]
    assert diag["sources_completed"] == ["fusion"] and diag["finish_reason"] == "all_completed"
    assert "fusion" in diag["source_ms"]


def test_fusion_ranking_is_stable_across_runs(memory):
    first = memory.recall("garden trip", mode="fusion", limit=8)
    second = memory.recall("garden trip", mode="fusion", limit=8)
    assert [(c["id"], c["score"]) for c in first["results"]] == [(c["id"], c["score"]) for c in second["results"]]


def test_snapshot_restore_gives_identical_rankings(memory, embedder, tmp_path):
    memory.snapshot(tmp_path / "snap")
    restored = MemoryInterface(embedder=embedder)
    restored.restore(tmp_path / "snap")
    for mode in ("dense", "bm25", "raw", "fusion"):
        for query in ("new dog", RARE_QUERY, "passport renewal"):
            before = memory.recall(query, mode=mode, limit=8)["results"]
            after = restored.recall(query, mode=mode, limit=8)["results"]
            assert [(c["id"], c["score"], c["text"]) for c in before] == [(c["id"], c["score"], c["text"]) for c in after]


def test_bm25_state_round_trips_as_json_without_pickle(tmp_path):
    index = BM25Index()
    index.add([0, 1, 2], CORPUS[:3])
    index.save(tmp_path / "bm25.json")
    raw = (tmp_path / "bm25.json").read_bytes()
    state = json.loads(raw)
    assert state["ids"] == [0, 1, 2] and "idf" in state and state["avgdl"] > 0
    assert not raw.startswith(b"\x80")  # a pickle stream starts with the PROTO opcode
    loaded = BM25Index.load(tmp_path / "bm25.json")
    assert loaded.search("budget meeting thursday", 3) == index.search("budget meeting thursday", 3)


def test_bm25_matches_a_word_in_another_form_and_a_saved_state_names_its_stemmer(tmp_path):
    index = BM25Index()
    index.add([0, 1, 2, 3], ["We went camping in the mountains with the kids.", "I got a new pet, a turtle.",
                             "The budget meeting moved to Thursday.", "Talk soon!"])
    assert [i for i, _ in index.search("Where has Melanie camped?", 4)] == [0]  # camped / camping: "camp"
    assert [i for i, _ in index.search("Which pets does Nate have?", 4)] == [1]  # pets / pet
    assert tokenize("Paintings, painted, PAINTING") == ["paint", "paint", "paint"]
    # a stem is not always its own stem ("sunrise" -> "sunris" -> "sunri"): stemmed terms are searched as they are
    index.add([4], ["Melanie: I painted that lake sunrise last year!"])
    assert stem(stem("sunrise")) != stem("sunrise")
    assert [i for i, _ in index.search_terms(tokenize("sunrise"), 5)] == [4]
    assert index.search(" ".join(tokenize("sunrise")), 5) == []  # the stems' text, stemmed again, finds nothing
    index.save(tmp_path / "bm25.json")
    state = json.loads((tmp_path / "bm25.json").read_text())
    assert state["stemmer"] == STEMMER and state["format"] == BM25Index.FORMAT
    for change in ({"stemmer": None}, {"stemmer": "porter"}, {"format": "memoria-bm25/1"}):
        (tmp_path / "old.json").write_text(json.dumps({**state, **change}))
        with pytest.raises(SnapshotError, match="stemmed by|not a memoria-bm25/2"):
            BM25Index.load(tmp_path / "old.json")


def test_stemming_from_many_threads_gives_what_one_thread_gives():
    # the scheduler runs sources in threads; a Snowball stemmer keeps state while it works
    words = [f"{w}{suffix}" for w in ("camp", "paint", "hike", "adopt", "rescue", "nation") for suffix in
             ("ed", "ing", "s", "ions", "ers", "ful", "ness")]
    expected = [tokenize(w) for w in words]
    stem.cache_clear()
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: [tokenize(w) for w in words], range(64)))
    assert all(result == expected for result in results)


@pytest.mark.parametrize(
    "texts, metadatas, error, position",
    [
        (["a", "b"], [{}], LengthMismatchError, None),
        (["fine", 42], [{}, {}], InvalidTextError, 1),
        (["fine", "also fine"], [{}, "meta"], InvalidMetadataError, 1),
        (["fine", "   "], [{}, {}], EmptyTextError, 1),
        (["fine"], [{"when": object()}], InvalidMetadataError, 0),
    ],
)
def test_bad_batches_are_rejected_whole(memory, texts, metadatas, error, position):
    before = len(memory)
    with pytest.raises(error) as caught:
        BatchLoader(memory).insert_batch(texts, metadatas)
    assert caught.value.position == position
    if position is not None:
        assert f"position {position}" in str(caught.value)
    assert len(memory) == before
    assert len(memory.vectors) == before and len(memory.bm25) == before


def test_a_query_on_an_empty_store_returns_nothing(embedder):
    response = MemoryInterface(embedder=embedder).recall("anything at all", mode="fusion")
    assert response["results"] == [] and response["diagnostics"]["finish_reason"] == "empty_store"


def test_unknown_mode_is_a_clear_error(memory):
    with pytest.raises(UnknownModeError, match="fusion"):
        memory.recall("x", mode="hybrid")


def test_reset_forgets_everything(memory):
    memory.reset()
    assert len(memory) == 0 and len(memory.vectors) == 0 and len(memory.bm25) == 0
    assert memory.recall("dog")["results"] == []


def test_embedder_signature_and_unit_vectors(embedder):
    sig = embedder.signature
    assert sig["model_id"].endswith("all-MiniLM-L6-v2") and sig["dimension"] == 384 and sig["max_seq_length"] == 256
    vectors = embedder.encode(["one sentence", "another one"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_deferred_index_build_gives_the_same_rankings(memory, embedder, tmp_path):
    deferred = MemoryInterface(embedder=embedder)
    loader = BatchLoader(deferred)
    loader.insert_batch(CORPUS[:6], [{"n": i} for i in range(6)], skip_embedding_build=True)
    loader.insert_batch(CORPUS[6:], [{"n": i} for i in range(6, len(CORPUS))], skip_embedding_build=True)
    assert len(deferred.vectors) == 0  # nothing indexed yet
    for query in ("new dog", RARE_QUERY):
        expected = memory.recall(query, mode="dense", limit=5)["results"]
        got = deferred.recall(query, mode="dense", limit=5)["results"]
        assert [c["id"] for c in got] == [c["id"] for c in expected]
        assert [c["score"] for c in got] == pytest.approx([c["score"] for c in expected], abs=1e-5)
    assert len(deferred.vectors) == len(CORPUS)


def test_skip_embedding_stores_text_for_lexical_search_only(embedder):
    memory = MemoryInterface(embedder=embedder)
    BatchLoader(memory).insert_batch(CORPUS, [{}] * len(CORPUS), skip_embedding=True)
    assert len(memory.vectors) == 0
    assert memory.recall(RARE_QUERY, mode="bm25", limit=1)["results"][0]["id"] == RARE_CODE
    assert memory.recall(RARE_QUERY, mode="dense", limit=3)["results"] == []


def test_a_question_is_encoded_once_until_a_reset_or_a_restore_and_its_kept_vector_cannot_be_written(tmp_path):
    from tests.helpers import WordEmbedder

    memory = MemoryInterface(embedder=WordEmbedder())
    BatchLoader(memory).insert_batch(CORPUS, [{"n": i} for i in range(len(CORPUS))])
    memory.snapshot(tmp_path / "snap")

    def asked(*queries):
        before = memory.encoded["questions"]
        for query in queries:
            memory.recall(query, mode="dense", limit=5)
        return memory.encoded["questions"] - before

    assert asked("new dog", "new dog", "passport renewal") == 2, "a question text asked again is served"
    kept = next(iter(memory.questions.held.values()))
    with pytest.raises(ValueError):
        kept[0] = 1.0
    memory.restore(tmp_path / "snap")  # a worker restores item after item into one memory
    assert asked("new dog") == 1, "a restored state keeps no vector of the state before"
    memory.reset()
    BatchLoader(memory).insert_batch(CORPUS[:3], [{"n": i} for i in range(3)])
    assert asked("new dog") == 1
