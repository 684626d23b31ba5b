"""Sentence pieces through the vector stores workers share: a worker that meets turns another worker already ranked
encodes none of their pieces, on one machine (its embedding store) and across machines (the farm's Redis)."""

import hashlib
import re

import numpy as np
import pytest

from adapters.systems.memoria_system import MemoriaSystem
from workers.farm.connection import connect
from workers.farm.shared_vectors import RedisVectors

pytestmark = pytest.mark.server

TURNS = ["Ann: We camped by the lake last June. The kids loved the canoe. It rained on the last night.",
         "Bob: I started pottery classes. My first bowl cracked in the kiln. The teacher was kind about it.",
         "Ann: My sister moved to Lisbon. She teaches English there now.",
         "Bob: The garden is full of tomatoes. We gave a basket to the neighbours. They made soup."]
QUESTION = "Where did Ann go camping with the kids?"


class Model:
    """A stand-in model on every machine (what is shared does not depend on the model): hashed bag-of-words unit
    vectors, and a list of every text it was asked to encode."""

    dimension = 64
    signature = {"model_id": "tests/hashed-words", "dimension": 64}

    def __init__(self):
        self.asked = []

    def encode(self, texts, batch_size=32):
        self.asked += list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[row, int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
            out[row] /= np.linalg.norm(out[row]) or 1.0
        return out


def _worker(store, redis_client=None):
    model = Model()
    system = MemoriaSystem(mode="full", embedder=model, parallel_extract=False, embedding_store=str(store))
    if redis_client is not None:
        system.memory.embedder.shared = RedisVectors(redis_client)
    docs = [{"external_id": f"t-{n}", "label": "item", "text": text, "props": {"speaker": text.split(":")[0]}}
            for n, text in enumerate(TURNS)]
    system.ingest(docs)
    return system, model


def test_a_store_shared_by_two_workers_serves_pieces_as_it_serves_turns(redis_server, tmp_path):
    client = connect(redis_server.url)
    first, first_model = _worker(tmp_path / "machine-a.sqlite", client)
    ranked = first.retrieve("item", QUESTION, 4)
    assert first.encoded_by_kind["pieces"] == len(first.memory.pieces.texts) > 4  # the first worker encodes them
    assert set(first.memory.pieces.texts) <= set(first_model.asked)
    total = len(TURNS) + len(first.memory.pieces.texts) + 1
    for store, shared in ((tmp_path / "machine-a.sqlite", None), (tmp_path / "machine-b.sqlite", client)):
        # a second worker on the same machine (its store), then one on another machine (the farm's Redis)
        second, second_model = _worker(store, shared)
        assert second.retrieve("item", QUESTION, 4) == ranked
        assert second.memory.pieces.texts == first.memory.pieces.texts
        counts = second.embedding_counts
        if shared is None:
            assert second_model.asked == [], "turns, pieces and the question all served, none encoded"
            assert second.encoded_by_kind == {"turns": 0, "windows": 0, "pieces": 0, "questions": 0}
            assert counts["encoded"] == 0 and counts["served"] == total and counts["shared"] == 0
        else:  # another machine encodes only the sample it checks the tier's vectors with; the rest is served
            assert 0 < len(second_model.asked) == counts["verified"] == counts["encoded"]
            assert set(second_model.asked) <= set(first_model.asked)  # nothing the first worker did not encode
            assert counts["forged"] == 0 and counts["served"] == total - counts["encoded"]
            assert counts["shared"] > 0 and counts["shared"] + counts["verified"] == total
