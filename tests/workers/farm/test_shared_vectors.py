"""The farm's shared vector tier against a real redis-server: exact, checked, bounded, never fatal."""

import numpy as np
import pytest
import redis

from coordinator.operations.processes import free_port
from memoria.embedding_store import EmbeddingStore, StoredEmbedder, text_key
from workers.farm.connection import connect
from workers.farm.shared_vectors import BUDGET_KEY, PREFIX, RedisVectors

pytestmark = pytest.mark.server


@pytest.fixture()
def client(redis_server):
    return connect(redis_server.url)


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
    tier.put({"k8": np.ones(8, dtype=np.float32)})  # intact, but of another dimension
    assert tier.get(["k8"], 4) == {} and list(tier.get(["k8"], 8)) == ["k8"]
    tier.put({"nan": np.array([1.0, np.nan, 0.0, 0.0], dtype=np.float32)})  # checksummed, not finite
    assert tier.get(["nan"], 4) == {}


def test_shared_vectors_live_outside_every_run_and_can_be_forgotten(client):
    from coordinator.running.run_ledger import RunLedger
    from workers.farm.shared_vectors import forget_all

    tier = RedisVectors(client)
    tier.put({"k1": np.ones(4, dtype=np.float32)})
    ledger = RunLedger(client)
    ledger.create_run("vectors", {"created": 0.0})  # a run named like the tier removes only its own keys
    assert ledger.forget("vectors") == 1 and list(tier.get(["k1"], 4)) == ["k1"]
    assert forget_all(client) == 2 and tier.get(["k1"], 4) == {} and not client.exists(BUDGET_KEY)


def test_writes_stop_at_the_budget(client):
    tier = RedisVectors(client, max_bytes=3 * (16 + 16))  # three vectors of 4 floats, with their checksums
    for n in range(5):
        tier.put({f"k{n}": np.full(4, n, dtype=np.float32)})
    assert tier.counts["written"] == 3 and tier.counts["skipped_full"] == 2
    assert sorted(tier.get([f"k{n}" for n in range(5)], 4)) == ["k0", "k1", "k2"]
    assert 0 < client.ttl(BUDGET_KEY) <= tier.ttl_seconds, "the budget's window ends"
    client.expire(BUDGET_KEY, 50)
    tier.put({"k9": np.zeros(4, dtype=np.float32)})
    assert client.ttl(BUDGET_KEY) <= 50, "a later write does not restart the window"


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
    second = StoredEmbedder(second_model, EmbeddingStore(tmp_path / "b.sqlite"), shared=RedisVectors(client),
                            verify_share=0.0)  # fetching alone; the check of what is fetched: test_shared_forgery
    fetched = second.encode(texts + ["delta"])
    assert second_model.asked == ["delta"], "only the text no machine had is encoded"
    assert second.counts["shared"] == 3 and second.counts["encoded"] == 1
    assert fetched[:4].tobytes() == made.tobytes()
    again = second.encode(["alpha"])  # now in the second machine's own store: Redis is not asked again
    assert second.counts["shared"] == 3 and again.tobytes() == made[:1].tobytes()


def test_the_run_decides_whether_a_worker_shares(redis_server, tmp_path, monkeypatch):
    """One worker process serves runs with and without --shared-embeddings: its system follows each run."""
    from coordinator.running.spec import RunSpec
    from workers.farm import tasks

    monkeypatch.setenv("MEMFARM_BROKER", redis_server.url)
    monkeypatch.setenv("MEMFARM_CACHE_DIR", str(tmp_path / "cache"))
    for name, value in (("_LEDGER", None), ("_SHARED", None), ("_SYSTEMS", {})):
        monkeypatch.setattr(tasks, name, value)
    settings = RunSpec(benchmark="longmemeval", dataset="x.json").system_settings()
    meta = {"system": "memoria", "system_settings": settings, "embedding_store": True}
    shared = tasks._system({**meta, "shared_embeddings": True}).memory.embedder.shared
    assert isinstance(shared, RedisVectors)
    assert tasks._system({**meta, "shared_embeddings": False}).memory.embedder.shared is None
    assert tasks._system(meta).memory.embedder.shared is None


def test_the_staging_line_says_when_redis_memory_cannot_be_read():
    from coordinator.cli.run import staging_line

    stats = {"session_occurrences": 48, "sessions_stored": 40, "session_bytes": 2 * 2**20, "item_bytes": 2**19}
    line = staging_line(stats, None)
    assert "48 session occurrences as 40 distinct (2.0 MiB of sessions, 0.5 MiB of items" in line
    assert line.endswith("redis memory: not readable by this user")
    assert staging_line(stats, 3 * 2**20).endswith("redis holds 3.0 MiB")


class Slow(Counting):
    """Encodes at a fixed pace, so that two machines meet the same new texts at the same time."""

    def encode(self, texts, batch_size=None):
        import time

        time.sleep(0.004 * len(texts))
        return super().encode(texts, batch_size)


@pytest.mark.parametrize("claims", [False, True])
def test_claims_make_two_machines_encode_each_new_text_once(client, tmp_path, claims):
    import threading

    texts = [f"shared filler turn {n}" for n in range(300)]
    own = {name: [f"{name} own turn {n}" for n in range(100)] for name in ("a", "b")}
    machines = {name: StoredEmbedder(Slow(), EmbeddingStore(tmp_path / f"{name}.sqlite"),
                                     shared=RedisVectors(client, claims=claims), verify_share=0.0)
                for name in ("a", "b")}  # claims alone: no vector fetched is encoded again to check it
    results = {}
    threads = [threading.Thread(target=lambda n=name: results.__setitem__(n, machines[n].encode(own[n] + texts)))
               for name in machines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    encoded = sum(m.counts["encoded"] for m in machines.values())
    assert sum(len(m.embedder.asked) for m in machines.values()) == encoded
    if claims:
        assert encoded == len(texts) + 200  # each distinct text once in the fleet
        assert not list(client.scan_iter(match="memfarm-vector-claims:*")), "claims go once the vectors are in"
    else:
        assert encoded > len(texts) + 200 + 200  # at the same moment both encode most shared texts
    assert results["a"][100:].tobytes() == results["b"][100:].tobytes() == Counting().encode(texts).tobytes()


def test_a_claim_never_written_is_waited_for_a_bounded_time_then_encoded_here(client, tmp_path):
    import time

    tier = RedisVectors(client)
    claimed_by_a_dead_worker = StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "x.sqlite"), shared=tier)
    key_of = {t: text_key(claimed_by_a_dead_worker.space, t) for t in ("one", "two")}
    assert RedisVectors(client).claim(list(key_of.values())) == set(key_of.values())
    started = time.monotonic()
    vectors = claimed_by_a_dead_worker.encode(["one", "two"])
    assert time.monotonic() - started < 10
    assert claimed_by_a_dead_worker.counts["encoded"] == 2
    assert vectors.tobytes() == Counting().encode(["one", "two"]).tobytes()


def test_a_dead_claim_is_waited_for_less_than_its_lifetime_even_after_a_slow_first_load(client, tmp_path, monkeypatch):
    """The wait follows this process's measured rate; a first encode that included the model's load measures a
    rate so low that the wait on a dead worker's claims would outlast the claims themselves (10 minutes)."""
    from memoria import embedding_store
    from workers.farm.shared_vectors import CLAIM_TTL_SECONDS

    class Clock:  # the store's clock: sleeping moves it, nothing waits for real
        now = 0.0

        def monotonic(self):
            return self.now

        perf_counter = time = monotonic

        def sleep(self, seconds):
            self.now += seconds

    clock = Clock()
    monkeypatch.setattr(embedding_store, "time", clock)

    class LoadsSlowly(Counting):
        def encode(self, texts, batch_size=None):
            if not self.asked:
                clock.now += 100.0  # the model's load, counted in the first encode
            return super().encode(texts, batch_size)

    machine = StoredEmbedder(LoadsSlowly(), EmbeddingStore(tmp_path / "x.sqlite"), shared=RedisVectors(client))
    machine.encode(["the first text"])
    texts = [f"claimed by a worker that died {n}" for n in range(50)]
    RedisVectors(client).claim([text_key(machine.space, t) for t in texts])
    started = clock.now
    assert machine.encode(texts).tobytes() == Counting().encode(texts).tobytes()
    assert clock.now - started < CLAIM_TTL_SECONDS


def test_a_claim_whose_vector_the_full_budget_keeps_out_is_released(client):
    """The budget fills between a claim and its vector: the vector is not shared, and its claim goes at once, so
    the workers that saw the claim stop waiting for a vector that will not come."""
    from workers.farm.shared_vectors import CLAIM_PREFIX

    tier = RedisVectors(client, max_bytes=16 + 16)  # one vector of 4 floats, with its checksum
    assert tier.claim(["first", "second"]) == {"first", "second"}
    tier.put({"first": np.ones(4, dtype=np.float32)})
    tier.put({"second": np.ones(4, dtype=np.float32)})
    assert tier.counts["skipped_full"] == 1 and not client.exists(PREFIX + "second")
    assert not client.exists(CLAIM_PREFIX + "first") and not client.exists(CLAIM_PREFIX + "second")


def test_a_damaged_vector_is_replaced_by_the_next_worker_that_encodes_its_text(client):
    """Vectors are written only where none is (SET NX): a damaged one left in place would make every worker
    encode that text again, and wait out its whole bound for it behind each claim, for the vector's 7 days."""
    tier = RedisVectors(client)
    client.set(PREFIX + "k1", b"damaged")
    assert tier.get(["k1"], 4) == {} and tier.counts["damaged"] == 1
    tier.put({"k1": np.ones(4, dtype=np.float32)})
    assert list(RedisVectors(client).get(["k1"], 4)) == ["k1"]
