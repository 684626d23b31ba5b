"""Qdrant through the contract: its collections keep labels and items apart, its hybrid fusion is Qdrant's RRF over
the run's vectors and BM25 weights it weighs by IDF, its point ids never reach the runner; one real LoCoMo
conversation here and on a farm of real workers."""

import json
import math
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from adapters.errors import SystemUnavailable
from coordinator.cli import main
from tests.adapters.systems.one_conversation import one_conversation, rankings, run_locomo
from tests.helpers import WordEmbedder, skip_outside_ci, write_dataset


def _need_qdrant():
    try:
        import qdrant_client  # noqa: F401
    except ImportError:
        skip_outside_ci("qdrant-client is not installed (`make test` installs it; pip install -e '.[qdrant]')")


def _system(mode="dense", embedder=None):
    _need_qdrant()
    from adapters.systems.qdrant_system import QdrantSystem

    return QdrantSystem(mode=mode, embedder=embedder or WordEmbedder())


def _ids(hits):
    return [h["external_id"] for h in hits]


TOPICS = ("hiking in the alps", "cats and their boots", "boots for the rain", "a zebra at the zoo")


def _docs(label="a"):
    return [{"external_id": f"{label}-{i}", "label": label, "text": f"{label} speaks of {topic}",
             "props": {"session_id": "s1"}} for i, topic in enumerate(TOPICS)]


class OneHotEmbedder:
    """Each doc's vector points along its own axis; a query's is nearest the first doc's axis, whatever it says,
    so the dense ranking is fixed and only the words can move a doc."""

    dimension = 8
    signature = {"model_id": "tests/one-hot", "dimension": 8}

    def encode(self, texts, batch_size=32, **_):
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            index = next((i for i, topic in enumerate(TOPICS) if text.endswith(topic)), None)
            if index is None:  # a query: closest to doc 0, then 1, then 2, then 3
                out[row, :4] = (0.8, 0.4, 0.3, 0.2)
            else:
                out[row, index] = 1.0
        return out


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_an_empty_store_answers_nothing(mode):
    system = _system(mode)
    assert system.retrieve("a", "cats", 5) == []  # before any reset
    system.reset()
    assert system.retrieve("a", "cats", 5) == []
    system.ingest(_docs("a"))
    assert system.retrieve("b", "cats", 5) == []  # a label never ingested
    system.reset()
    assert system.retrieve("a", "cats", 5) == []  # the last item's docs went with its client
    system.ingest([])
    assert system.retrieve("a", "cats", 5) == []
    system.close()
    assert system.retrieve("a", "cats", 5) == []


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_labels_keep_apart_and_point_ids_never_reach_the_runner(mode):
    system = _system(mode)
    system.reset()
    system.ingest(_docs("a") + _docs("b"))
    hits = system.retrieve("a", "who speaks of cats?", 10)
    assert sorted(_ids(hits)) == ["a-0", "a-1", "a-2", "a-3"] and _ids(hits)[0] == "a-1"
    assert sorted(_ids(system.retrieve("b", "boots", 10))) == ["b-0", "b-1", "b-2", "b-3"]
    # Qdrant's own ids are integers the system counted; the payload holds the runner's id and nothing else
    for collection in system._collections.values():
        points, _ = system._client.scroll(collection, limit=100, with_payload=True)
        assert sorted(p.id for p in points) == [0, 1, 2, 3]
        assert all(set(p.payload) == {"external_id"} for p in points)
    system.close()


def test_modes_differ_where_the_words_disagree_with_the_vectors():
    dense, hybrid = _system("dense", OneHotEmbedder()), _system("hybrid", OneHotEmbedder())
    for system in (dense, hybrid):
        system.reset()
        system.ingest(_docs("a"))
    query = "zebra"
    assert _ids(dense.retrieve("a", query, 4)) == ["a-0", "a-1", "a-2", "a-3"]
    fused = hybrid.retrieve("a", query, 4)
    # Qdrant's RRF, 1 / (rank + k - 1) with k = 2 summed over the prefetches (ranks from 1): a-3, the only doc
    # that holds the word, is first by its words and fourth by its vector; a-0 is first by its vector only
    assert _ids(fused) == ["a-3", "a-0", "a-1", "a-2"]
    assert [h["score"] for h in fused] == pytest.approx([1 / 2 + 1 / 5, 1 / 2, 1 / 3, 1 / 4])
    assert hybrid.last_diagnostics["fused"] and not dense.last_diagnostics["fused"]
    # a query without a word cannot be asked of the sparse vectors: it is asked of the dense ones alone
    assert _ids(hybrid.retrieve("a", "?!", 4)) == _ids(dense.retrieve("a", "?!", 4))
    assert not hybrid.last_diagnostics["fused"]


def test_the_sparse_query_scores_bm25_with_qdrants_idf():
    from qdrant_client import models

    from adapters.systems import qdrant_system as q

    system = _system("hybrid")
    system.reset()
    texts = ["red red fox", "red hen", "blue whale sings to the blue sea at night"]
    system.ingest([{"external_id": f"d{i}", "label": "a", "text": t} for i, t in enumerate(texts)])
    indices, values = q.query_terms("red whale red")
    assert len(indices) == 2 and values == [1.0, 1.0]  # a repeated query word counts once
    result = system._client.query_points(system._collections["a"], using=q.SPARSE, limit=3,
                                         query=models.SparseVector(indices=indices, values=values))

    def bm25(text, words):  # by hand: k1 1.2, b 0.75, a fixed average length of 256 words
        tokens = text.split()
        score = 0.0
        for word in words:
            df = sum(word in t.split() for t in texts)
            tf = tokens.count(word)
            idf = math.log((len(texts) - df + 0.5) / (df + 0.5) + 1)
            score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(tokens) / 256)) if tf else 0.0
        return score

    expected = {f"d{i}": bm25(t, ("red", "whale")) for i, t in enumerate(texts)}
    got = {p.payload["external_id"]: p.score for p in result.points}
    assert got == pytest.approx(expected, rel=1e-5)
    assert max(got, key=got.get) == "d2"  # the rarer word outweighs the commoner one said twice
    system.close()


def test_memory_given_in_steps_ranks_as_memory_given_at_once():
    """The weights never depend on what else is stored (a fixed average length; IDF counted at query time)."""
    once, steps = _system("hybrid"), _system("hybrid")
    docs = _docs("a") + [{"external_id": "a-9", "label": "a", "text": "a zebra and a cat in the rain"}]
    once.reset()
    once.ingest(docs)
    steps.reset()
    steps.ingest(docs[:2])
    steps.ingest(docs[2:])
    for query in ("zebra in the rain", "cats", "boots"):
        assert once.retrieve("a", query, 5) == steps.retrieve("a", query, 5)


def test_config_names_the_version_and_every_ranking_setting():
    from importlib.metadata import version

    dense, hybrid = _system("dense").config, _system("hybrid").config
    for config in (dense, hybrid):
        assert config["version"] == version("qdrant-client") == "1.20.0"
        assert config["embedding_signature"] == WordEmbedder.signature
        assert config["dense"] == {"distance": "cosine", "search": "exact (local mode scans every point)"}
    assert dense["retrieval_mode"] == "qdrant:dense" and "sparse" not in dense and "fusion" not in dense
    assert hybrid["retrieval_mode"] == "qdrant:hybrid"
    assert hybrid["fusion"] == {"method": "rrf", "k": 2, "prefetch_per_hit": 2}
    assert {key: hybrid["sparse"][key] for key in ("k1", "b", "avg_len", "modifier")} == \
        {"k1": 1.2, "b": 0.75, "avg_len": 256.0, "modifier": "idf"}


def test_a_mode_it_lacks_and_a_missing_package_are_refused(tmp_path, monkeypatch):
    from adapters.systems import make_system

    _need_qdrant()
    data = write_dataset(tmp_path / "lme.json", questions=2, seed=2, scale=0.02)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "qdrant",
                                       "--retrieval-mode", "fusion"])
    assert result.exit_code != 0 and "not a mode of qdrant; its modes: dense, hybrid" in result.output
    monkeypatch.setitem(sys.modules, "qdrant_client", None)  # `import qdrant_client` now raises ImportError
    with pytest.raises(SystemUnavailable, match=r"pip install -e '\.\[qdrant\]'"):
        make_system("qdrant", mode="hybrid")


@pytest.mark.slow
def test_qdrant_on_one_locomo_conversation_here_and_on_a_farm(locomo_path, tmp_path, redis_server, workers):
    _need_qdrant()
    data = one_conversation(locomo_path, tmp_path)
    conversation = json.loads(data.read_text())[0]
    turns = sum(len(v) for k, v in conversation["conversation"].items() if k.startswith("session_") and
                isinstance(v, list))
    local = {}
    for mode in ("dense", "hybrid"):
        results, manifest = run_locomo(tmp_path, mode, data, "--system", "qdrant", "--retrieval-mode", mode)
        ok = [r for r in results["records"] if r["status"] == "ok"]
        assert len(ok) == len(conversation["qa"]) > 20
        assert all(r["candidates"] for r in ok if not r.get("abstention") and not r.get("excluded"))
        assert all(r["diagnostics"]["rejected_hits"] == [] for r in ok)
        # far above chance: ten turns drawn at random from the kept sessions' turns
        assert results["metrics"]["all"]["turn"]["recall_any@10"] > 3 * 10 / turns
        assert results["settings_system"]["retrieval_mode"] == f"qdrant:{mode}"
        assert results["settings_system"]["version"] == "1.20.0"
        assert manifest["system"]["embedding_signature"]["model_id"].endswith("all-MiniLM-L6-v2")
        local[mode] = results
    assert local["hybrid"]["settings_system"]["fusion"]["method"] == "rrf"
    # the words move something: Qdrant's fusion does not order as the vectors alone
    assert rankings(local["hybrid"]) != rankings(local["dense"])
    # the same rankings from a real worker that runs the built-in system
    workers(redis_server.url, "w1").wait_ready()
    for mode in ("dense", "hybrid"):
        farm, farm_manifest = run_locomo(tmp_path, f"farm_{mode}", data, "--system", "qdrant", "--retrieval-mode", mode,
                                   env={"MEMFARM_BROKER": redis_server.url})
        assert rankings(farm) == rankings(local[mode])
        assert farm["settings_system"]["retrieval_mode"] == f"qdrant:{mode}"
        assert farm_manifest["system"]["name"] == "qdrant" and farm_manifest["farm"]["workers"]
