"""The embedding store: each distinct text encoded once, damage detected, concurrent writers lose nothing."""

import multiprocessing
import sqlite3

import numpy as np
import pytest

from memoria.embedding_store import EmbeddingStore, StoredEmbedder, text_key


class Counting:
    """Wraps the real embedder and counts the texts it is asked to encode."""

    def __init__(self, embedder):
        self.embedder, self.texts = embedder, []
        self.dimension, self.signature = embedder.dimension, embedder.signature

    def encode(self, texts, batch_size=32):
        self.texts += list(texts)
        return self.embedder.encode(texts, batch_size=batch_size)


@pytest.mark.slow
def test_a_text_two_items_share_is_encoded_once_and_the_vectors_are_the_models(embedder, tmp_path):
    counting = Counting(embedder)
    stored = StoredEmbedder(counting, EmbeddingStore(tmp_path / "e.sqlite"))
    first = stored.encode(["We adopted a puppy.", "hello there", "We adopted a puppy."])
    second = stored.encode(["hello there", "a new text"])  # another item: one text seen before
    assert counting.texts == ["We adopted a puppy.", "hello there", "a new text"]
    assert stored.counts == {"encoded": 3, "served": 2, "damaged": 0, "shared": 0, "verified": 0, "forged": 0}
    direct = embedder.encode(["We adopted a puppy.", "hello there", "a new text"])
    np.testing.assert_allclose(first[[0, 1]], direct[:2], atol=1e-6)
    np.testing.assert_allclose(second, direct[1:], atol=1e-6)
    assert np.array_equal(first[0], first[2])
    # another process on the same machine (a new wrapper, the same file) encodes nothing
    again = StoredEmbedder(Counting(embedder), EmbeddingStore(tmp_path / "e.sqlite"))
    again.encode(["a new text", "hello there"])
    assert again.embedder.texts == [] and again.counts["served"] == 2


class Fake:
    """A deterministic stand-in embedder for the store's own mechanics (no model needed): a vector per text."""

    dimension = 4
    signature = {"model_id": "fake", "dimension": 4}

    def __init__(self):
        self.texts = []

    def encode(self, texts, batch_size=32):
        self.texts += list(texts)
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0, 0.5] for t in texts], dtype=np.float32)


def test_a_damaged_vector_is_detected_and_encoded_again(tmp_path):
    store = EmbeddingStore(tmp_path / "e.sqlite")
    fake = Fake()
    stored = StoredEmbedder(fake, store)
    good = stored.encode(["alpha", "beta"])
    key = text_key(stored.space, "alpha")
    with sqlite3.connect(tmp_path / "e.sqlite") as db:
        db.execute("UPDATE vectors SET vector = ? WHERE key = ?", (np.zeros(4, np.float32).tobytes(), key))
        db.execute("UPDATE vectors SET vector = ? WHERE key = ?", (b"short", text_key(stored.space, "beta")))
    fake.texts.clear()
    again = stored.encode(["alpha", "beta"])
    assert fake.texts == ["alpha", "beta"] and stored.counts["damaged"] == 2
    assert np.array_equal(again, good)
    fake.texts.clear()
    stored.encode(["alpha"])
    assert fake.texts == [], "the repaired vector is served again"


def test_another_signature_never_shares_a_vector(tmp_path):
    store = EmbeddingStore(tmp_path / "e.sqlite")
    StoredEmbedder(Fake(), store).encode(["alpha"])
    other = Fake()
    other.signature = {"model_id": "fake", "dimension": 4, "max_seq_length": 64}
    StoredEmbedder(other, store).encode(["alpha"])
    assert other.texts == ["alpha"]


def test_the_size_cap_evicts_the_least_recently_used(tmp_path):
    store = EmbeddingStore(tmp_path / "e.sqlite", max_bytes=16 * 10)  # room for 10 vectors of 4 floats
    stored = StoredEmbedder(Fake(), store)
    stored.encode([f"text {n}" for n in range(10)])
    stored.encode(["text 0"])  # used again: the most recent now
    stored.encode([f"more {n}" for n in range(5)])
    assert store.stats()["bytes"] <= 16 * 10
    held, _ = store.get([text_key(stored.space, t) for t in ("text 0", "text 1", "more 4")], 4)
    assert text_key(stored.space, "text 0") in held and text_key(stored.space, "more 4") in held
    assert text_key(stored.space, "text 1") not in held


def _write_many(path, start, count):
    store = EmbeddingStore(path)
    stored = StoredEmbedder(Fake(), store)
    for offset in range(0, count, 25):
        stored.encode([f"doc {n}" for n in range(start + offset, start + offset + 25)])


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "e.sqlite"
    EmbeddingStore(path)
    # Spawned, not forked: writers forked from this test process inherit whatever SQLite state the tests before it
    # left here (SQLite forbids carrying a connection across fork), and one run in three of tests/memoria then lost
    # rows (475 of 600) that no spawned pair lost. A farm's writers are processes of their own.
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_many, args=(path, start, 400)) for start in (0, 200)]  # 200 overlap
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
        assert writer.exitcode == 0
    store = EmbeddingStore(path)
    stored = StoredEmbedder(Fake(), store)
    keys = [text_key(stored.space, f"doc {n}") for n in range(600)]
    held, damaged = store.get(keys, 4)
    assert len(held) == 600 and damaged == 0 and store.stats()["vectors"] == 600
    assert np.array_equal(held[keys[123]], Fake().encode(["doc 123"])[0])


def _open_at_once(path, barrier, failures):
    barrier.wait(30)
    try:
        EmbeddingStore(path)
    except sqlite3.OperationalError as exc:
        failures.put(str(exc))


def test_workers_opening_a_new_store_at_once_all_open_it(tmp_path):
    """Workers sharing one cache volume open the same new store together (two containers starting at once):
    switching it to WAL can meet another's lock, which SQLite reports at once instead of waiting. None fails."""
    context = multiprocessing.get_context("fork")  # a forked opener starts in milliseconds, a spawned one in a second
    for round_ in range(20):
        path = tmp_path / f"fresh{round_}.sqlite"
        barrier, failures = context.Barrier(8), context.Queue()
        openers = [context.Process(target=_open_at_once, args=(path, barrier, failures)) for _ in range(8)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join(120)
            assert opener.exitcode == 0
        assert failures.empty(), failures.get()
