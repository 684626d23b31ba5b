"""Vectors from the shared tier are checked before they are used or kept, and a machine's store can forget what it
took from elsewhere; against a real redis-server. Anyone with a worker credential can write any vector under any
text's key with a valid checksum; the stand-in embedder here shows the store's logic, the farm run below the real
model, workers and run."""

import json
import sqlite3

import numpy as np
import pytest
from click.testing import CliRunner

from coordinator.cli import main
from memoria.embedding_store import ORIGIN_LOCAL, ORIGIN_SHARED, EmbeddingStore, StoredEmbedder, text_key
from tests.workers.farm.test_shared_vectors import Counting
from workers.farm.connection import connect
from workers.farm.shared_vectors import PREFIX, RedisVectors

pytestmark = pytest.mark.server


@pytest.fixture()
def client(redis_server):
    return connect(redis_server.url)


def _forge(client, space, texts, dimension, seed=7):
    """What an attacker with a worker credential writes: a random unit vector, checksummed, for every text."""
    rng = np.random.default_rng(seed)
    forged = {}
    for text in texts:
        vector = rng.standard_normal(dimension).astype(np.float32)
        forged[text_key(space, text)] = vector / np.linalg.norm(vector)
    RedisVectors(client, claims=False).put(forged)
    return forged


def _rows(path):
    with sqlite3.connect(path) as db:
        return {key: (bytes(blob), origin) for key, blob, origin in db.execute("SELECT key, vector, origin FROM vectors")}


def test_a_tier_of_forged_vectors_is_caught_at_the_first_fetch_and_nothing_forged_is_kept(client, tmp_path):
    texts = [f"turn {n} of a haystack" for n in range(200)]
    machine = StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "a.sqlite"), shared=RedisVectors(client))
    forged = _forge(client, machine.space, texts, Counting.dimension)
    vectors = machine.encode(texts)
    assert vectors.tobytes() == Counting().encode(texts).tobytes(), "every vector is this machine's own"
    assert machine.counts["forged"] >= 1 and machine.shared_refused and machine.counts["shared"] == 0
    assert not any(blob == forged[key].tobytes() for key, (blob, _) in _rows(tmp_path / "a.sqlite").items())
    genuine = {text_key(machine.space, t): v for t, v in zip(texts, Counting().encode(texts))}
    for key in forged:  # the fetch's keys were removed and this machine wrote its own in their place
        assert RedisVectors(client).get([key], Counting.dimension)[key].tobytes() == genuine[key].tobytes()
    later = machine.encode(["one more text"])
    assert later.tobytes() == Counting().encode(["one more text"]).tobytes()


def test_one_forged_vector_among_genuine_ones_is_caught_when_checked_and_refuses_the_whole_fetch(client, tmp_path):
    texts = [f"filler session turn {n}" for n in range(40)]
    honest = StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "honest.sqlite"), shared=RedisVectors(client))
    honest.encode(texts)
    client.delete(PREFIX + text_key(honest.space, texts[3]))
    forged = _forge(client, honest.space, texts[3:4], Counting.dimension)
    machine = StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "b.sqlite"), shared=RedisVectors(client),
                             verify_share=1.0)  # every vector checked: the forged one cannot hide
    assert machine.encode(texts).tobytes() == Counting().encode(texts).tobytes()
    assert machine.counts["forged"] == 1 and machine.counts["shared"] == 0
    assert all(origin == ORIGIN_LOCAL for _, origin in _rows(tmp_path / "b.sqlite").values())
    assert not any(blob == forged[k].tobytes() for k, (blob, _) in _rows(tmp_path / "b.sqlite").items()
                   if k in forged)


def test_genuine_shared_vectors_are_sampled_then_kept_marked_as_taken_from_elsewhere(client, tmp_path):
    texts = [f"shared text {n}" for n in range(300)]
    StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "a.sqlite"), shared=RedisVectors(client)).encode(texts)
    model = Counting()
    machine = StoredEmbedder(model, EmbeddingStore(tmp_path / "b.sqlite"), shared=RedisVectors(client))
    machine.encode(texts + ["only here"])
    checked = machine.counts["verified"]
    assert 1 <= checked < 60, "about one in twenty encoded again, never none"
    assert len(model.asked) == checked + 1 and machine.counts["encoded"] == checked + 1
    assert machine.counts["shared"] == 300 - checked and machine.counts["forged"] == 0
    origins = [origin for _, origin in _rows(tmp_path / "b.sqlite").values()]
    assert origins.count(ORIGIN_SHARED) == 300 - checked and origins.count(ORIGIN_LOCAL) == checked + 1


def test_the_command_forgets_what_a_store_took_from_elsewhere_and_keeps_its_own(client, tmp_path):
    texts = [f"shared text {n}" for n in range(30)]
    StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "a.sqlite"), shared=RedisVectors(client)).encode(texts)
    cache = tmp_path / "cache"
    cache.mkdir()
    store_path = cache / "embeddings.sqlite"
    with sqlite3.connect(store_path) as db:  # a store made before origins were kept, with one row
        db.executescript("CREATE TABLE vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL, checksum TEXT NOT NULL,"
                         " used REAL NOT NULL); INSERT INTO vectors VALUES ('old', x'00', 'c', 0);")
    machine = StoredEmbedder(Counting(), EmbeddingStore(store_path), shared=RedisVectors(client), verify_share=0.0)
    machine.encode(texts + ["mine"])
    assert EmbeddingStore(store_path).stats()["by_origin"] == {"local": 1, "shared": 30, "unknown": 1}

    result = CliRunner().invoke(main, ["forget-stored-embeddings", "--cache-dir", str(cache)])
    assert result.exit_code == 0 and "forgot 31 vectors (shared, unknown); 1 left" in result.output, result.output
    assert list(_rows(store_path)) == [text_key(machine.space, "mine")]
    result = CliRunner().invoke(main, ["forget-stored-embeddings", "--cache-dir", str(cache), "--all"])
    assert result.exit_code == 0 and "forgot 1 vectors" in result.output and _rows(store_path) == {}
    result = CliRunner().invoke(main, ["forget-stored-embeddings", "--cache-dir", str(tmp_path / "none")])
    assert result.exit_code != 0 and "no embedding store there" in result.output


@pytest.mark.slow
def test_a_farm_run_over_a_forged_tier_scores_as_a_clean_run_and_keeps_nothing_forged(redis_server, client, workers,
                                                                                     tmp_path, monkeypatch):
    """Every text of the run forged in Redis beforehand, as the attack did: the run with --shared-embeddings on a
    real worker gives the records of a run with no Redis at all, and the worker's store holds no forged vector."""
    from adapters.benchmarks.longmemeval.reader import LongMemEval
    from adapters.systems.memoria_system import MemoriaSystem
    from tests.helpers import write_dataset
    from workers.item.evaluate import make_docs

    monkeypatch.setenv("MEMFARM_TASK_TIME_LIMIT", "120")
    monkeypatch.setenv("MEMFARM_VISIBILITY_TIMEOUT", "125")
    dataset = write_dataset(tmp_path / "d.json", questions=3, seed=6, scale=0.03)
    run = ["run", "longmemeval", "--dataset", str(dataset)]
    clean = CliRunner().invoke(main, [*run, "--output", str(tmp_path / "clean.json"), "--cache-dir",
                                      str(tmp_path / "local")])
    assert clean.exit_code == 0, clean.output

    items = list(LongMemEval(dataset).iter_items())
    texts = {d["text"] for item in items for d in make_docs(item)[0]}
    texts |= {q["question"] for item in items for q in item["questions"]}
    space = MemoriaSystem(embedding_store=str(tmp_path / "probe.sqlite")).memory.embedder.space
    forged = _forge(client, space, sorted(texts), 384)

    worker = workers(redis_server.url, "w1").wait_ready()
    farm = CliRunner().invoke(main, [*run, "--output", str(tmp_path / "farm.json"), "--shared-embeddings"],
                              env={"MEMFARM_BROKER": redis_server.url})
    assert farm.exit_code == 0, farm.output + worker.log.read_text()[-3000:]

    def comparable(path):
        return [(r["question_id"], r["status"], r["metrics"], [c["id"] for c in r.get("candidates", [])])
                for r in json.loads(path.read_text())["records"]]

    assert comparable(tmp_path / "farm.json") == comparable(tmp_path / "clean.json")
    assert "not this machine's" in worker.log.read_text(), "the worker said it refused forged vectors"
    rows = _rows(tmp_path / "cache_w1" / "embeddings.sqlite")
    assert rows and not any(blob == forged[key].tobytes() for key, (blob, _) in rows.items() if key in forged)
