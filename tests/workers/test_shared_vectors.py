"""The farm's shared vector tier against a real redis-server: exact, checked, bounded, never fatal."""

import numpy as np
import pytest
import redis

from coordinator.cluster import free_port
from memoria.embedding_store import EmbeddingStore, StoredEmbedder
from tests.farm_support import RedisServer
from workers.ledger import connect
from workers.shared_vectors import BUDGET_KEY, PREFIX, RedisVectors

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("vectors"))
    yield server
    server.stop()


@pytest.fixture()
def client(server):
    client = connect(server.url)
    client.flushdb()
    return client


class Counting:
    """A stand-in embedder (the store's logic does not depend on the model): a vector from the text's bytes,
    and a count of the texts it was asked to encode."""

    dimension = 8
    signature = {"model": "counting", "dimension": 8}

    def __init__(self):
        self.asked = []

    def encode(self, texts, batch_size=None):
        self.asked += list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            raw = text.encode()[: self.dimension]
            out[row, : len(raw)] = np.frombuffer(raw, dtype=np.uint8) / 255.0
        return out


def test_a_vector_comes_back_bit_for_bit(client):
    tier = RedisVectors(client)
    vector = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    tier.put({"k1": vector})
    got = tier.get(["k1", "absent"], 384)
    assert list(got) == ["k1"] and got["k1"].tobytes() == vector.tobytes()
    assert client.ttl(PREFIX + "k1") > 0, "every vector expires"


def test_a_damaged_vector_is_not_served(client):
    tier = RedisVectors(client)
    tier.put({"k1": np.ones(4, dtype=np.float32)})
    raw = bytearray(client.get(PREFIX + "k1"))
    raw[-1] ^= 0xFF
    client.set(PREFIX + "k1", bytes(raw))
    assert tier.get(["k1"], 4) == {} and tier.counts["damaged"] == 1
    client.set(PREFIX + "k1", b"short")
    assert tier.get(["k1"], 4) == {}


def test_writes_stop_at_the_budget(client):
    tier = RedisVectors(client, max_bytes=3 * (16 + 16))  # three vectors of 4 floats, with their checksums
    for n in range(5):
        tier.put({f"k{n}": np.full(4, n, dtype=np.float32)})
    assert tier.counts["written"] == 3 and tier.counts["skipped_full"] == 2
    assert sorted(tier.get([f"k{n}" for n in range(5)], 4)) == ["k0", "k1", "k2"]
    assert 0 < client.ttl(BUDGET_KEY) <= tier.ttl_seconds, "the budget's window ends"


def test_a_redis_that_is_gone_leaves_the_worker_encoding(tmp_path):
    tier = RedisVectors(redis.Redis(port=free_port(), socket_connect_timeout=1))  # nothing listens there
    embedder = StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "s.sqlite"), shared=tier)
    vectors = embedder.encode(["one", "two"])
    assert vectors.shape == (2, 8) and embedder.counts["encoded"] == 2 and tier.counts["errors"] >= 1


def test_a_second_machine_fetches_what_the_first_encoded(client, tmp_path):
    texts = ["alpha", "beta", "gamma", "beta"]
    first = StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "a.sqlite"), shared=RedisVectors(client))
    made = first.encode(texts)
    second_model = Counting()
    second = StoredEmbedder(second_model, EmbeddingStore(tmp_path / "b.sqlite"), shared=RedisVectors(client))
    fetched = second.encode(texts + ["delta"])
    assert second_model.asked == ["delta"], "only the text no machine had is encoded"
    assert second.counts["shared"] == 3 and second.counts["encoded"] == 1
    assert fetched[:4].tobytes() == made.tobytes()
    again = second.encode(["alpha"])  # now in the second machine's own store: Redis is not asked again
    assert second.counts["shared"] == 3 and again.tobytes() == made[:1].tobytes()
