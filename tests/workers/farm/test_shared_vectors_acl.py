"""The shared vector tier under `cluster up`'s worker user, against a real redis-server: every key and command
it uses is allowed (its errors are swallowed, so a refusal would only show as a fleet encoding everything
twice), and a malformed budget in Redis leaves the worker encoding by itself instead of failing the item."""

import secrets

import numpy as np
import pytest

from coordinator.operations.redis_users import ACL_RULES, acl_config
from coordinator.operations.processes import free_port, start_redis
from memoria.embedding_store import EmbeddingStore, StoredEmbedder, text_key
from tests.workers.farm.test_shared_vectors import Counting
from workers.farm.connection import connect
from workers.farm.shared_vectors import BUDGET_KEY, CLAIM_PREFIX, PREFIX, RedisVectors, forget_all

pytestmark = pytest.mark.server


@pytest.fixture()
def users(tmp_path):
    passwords = {role: secrets.token_hex(12) for role in ACL_RULES}
    port = free_port()
    server = start_redis(tmp_path / "redis", port, None, tmp_path / "redis.log", acl=acl_config(passwords))
    yield {role: connect(f"redis://{role}:{passwords[role]}@127.0.0.1:{port}/0") for role in ACL_RULES}
    server.kill_group()


def test_the_worker_user_may_claim_write_and_read_shared_vectors(users, tmp_path):
    worker = users["worker"]
    first = RedisVectors(worker)
    machine = StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "a.sqlite"), shared=first)
    texts = ["one", "two", "three"]
    machine.encode(texts)
    assert first.counts["errors"] == 0 and first.counts["claimed"] == 3 and first.counts["written"] == 3
    keys = [text_key(machine.space, t) for t in texts]
    coordinator = users["coordinator"]
    assert all(coordinator.exists(PREFIX + k) for k in keys) and coordinator.exists(BUDGET_KEY)
    assert not any(coordinator.exists(CLAIM_PREFIX + k) for k in keys), "the worker removed its claims"
    second = RedisVectors(worker)
    other = StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "b.sqlite"), shared=second, verify_share=1.0)
    assert other.encode(texts).tobytes() == Counting().encode(texts).tobytes()
    assert second.counts["errors"] == 0 and second.counts["fetched"] == 3 and other.counts["verified"] == 3
    assert forget_all(coordinator) == 4 and not coordinator.exists(PREFIX + keys[0])  # forget-shared-embeddings
    second.forget(keys[:1])  # what a machine that met a forged vector does: allowed to the worker user
    assert second.counts["errors"] == 0


def test_a_budget_that_is_not_a_number_leaves_the_worker_encoding(users, tmp_path):
    users["coordinator"].set(BUDGET_KEY, b"not a number")
    tier = RedisVectors(users["worker"])
    machine = StoredEmbedder(Counting(), EmbeddingStore(tmp_path / "a.sqlite"), shared=tier)
    assert machine.encode(["one"]).tobytes() == Counting().encode(["one"]).tobytes()
    assert tier.counts["errors"] >= 1
