"""txtai through the contract: its own index per item and its own hybrid fusion, offline with the run's embedder,
its row ids mapped back, its modes; and one real LoCoMo conversation here and on a farm of real workers.

The fast tests embed with the word-hashing stand-in (the index, BM25 and fusion are txtai's own; the model is not
needed to check them); the slow one runs the real MiniLM."""

import json
import socket
import sys

import pytest

from adapters.errors import SystemUnavailable
from tests.adapters.systems.one_conversation import one_conversation, rankings, run_locomo
from tests.helpers import WordEmbedder, skip_outside_ci


@pytest.fixture(autouse=True)
def offline(monkeypatch, request):
    """The hub is off (for the workers a test starts too), and in a test that starts no redis-server no socket may
    connect anywhere but a local one: txtai must need neither."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    if request.node.get_closest_marker("server"):
        return

    def refused(self, address, *args):
        if self.family == socket.AF_UNIX:
            return original(self, address, *args)
        raise OSError(f"txtai tried to reach {address!r}")

    original = socket.socket.connect
    monkeypatch.setattr(socket.socket, "connect", refused)


def _need_txtai():
    try:
        import txtai  # noqa: F401
    except ImportError:
        skip_outside_ci("txtai is not installed (`make test` installs it; pip install -e '.[txtai]')")


class CountingEmbedder(WordEmbedder):
    def __init__(self):
        self.texts = 0

    def encode(self, texts, batch_size=32, **options):
        self.texts += len(texts)
        return super().encode(texts, batch_size, **options)


def _system(mode="hybrid", embedder=None):
    _need_txtai()
    from adapters.systems.txtai_system import TxtaiSystem

    system = TxtaiSystem(mode=mode, embedder=embedder or WordEmbedder())
    system.reset()
    return system


TOPICS = ("Ann went hiking in the hills with her dog", "Bo adopted two cats from the shelter",
          "Ann bought new hiking boots for the trip", "the weather was rainy all week long",
          "Bo says cats sleep most of the day", "a dog and two cats share the garden",
          "Ann cooked pasta for her friends", "Bo fixed the old bicycle in the shed")


def _docs(label="a", topics=TOPICS):
    return [{"external_id": f"opaque-{label}-{n:03d}", "label": label, "text": text, "props": {}}
            for n, text in enumerate(topics)]


def _ids(hits):
    return [h["external_id"] for h in hits]


def test_each_label_is_its_own_index_and_an_unknown_one_has_nothing():
    system = _system()
    system.ingest(_docs("a") + _docs("b", ("Cy collects stamps", "Cy has cats too")))
    assert set(_ids(system.retrieve("a", "who has cats", 10))) <= {d["external_id"] for d in _docs("a")}
    assert _ids(system.retrieve("b", "who has cats", 10))[0] == "opaque-b-001"
    assert system.retrieve("c", "who has cats", 10) == []
    system.reset()
    assert system.retrieve("a", "who has cats", 10) == []


def test_a_retrieve_on_an_empty_store_returns_nothing_in_every_mode():
    _need_txtai()
    from adapters.systems.txtai_system import MODES, TxtaiSystem

    for mode in MODES:
        fresh = TxtaiSystem(mode=mode, embedder=WordEmbedder())
        assert fresh.retrieve("a", "anything", 5) == []  # never reset nor given a doc
        fresh.reset()
        fresh.ingest([])
        assert fresh.retrieve("a", "anything", 5) == []


def test_txtais_row_ids_are_mapped_back_and_never_given_out(monkeypatch):
    system = _system()
    seen = []
    from txtai import Embeddings

    original = Embeddings.index

    def index(self, documents, *args, **kwargs):
        documents = list(documents)
        seen.extend(documents)
        return original(self, documents, *args, **kwargs)

    monkeypatch.setattr(Embeddings, "index", index)
    system.ingest(_docs("a"))
    # txtai is given the system's own row ids and the text, never the runner's ids
    assert [row[0] for row in seen] == list(range(len(TOPICS))) and not any("opaque" in str(row) for row in seen)
    hits = system.retrieve("a", "Ann hiking boots", 5)
    assert hits and all(h["external_id"].startswith("opaque-a-") for h in hits)
    assert _ids(hits)[0] == "opaque-a-002"
    # a row id the system never minted reaches the runner as such (it is dropped and counted there)
    system._ids["a"] = system._ids["a"][:1]
    assert any(eid.startswith("txtai:") for eid in _ids(system.retrieve("a", "Ann hiking boots", 5)))


def test_the_modes_rank_by_their_own_lanes_and_hybrid_fuses_them_as_txtai_says():
    from adapters.systems.txtai_system import CANDIDATES_PER_LANE, WEIGHTS

    query, top_k = "Ann and her dog in the hills", 4
    lanes = {}
    for mode in ("dense", "sparse", "hybrid"):
        system = _system(mode)
        system.ingest(_docs("a"))
        lanes[mode] = system.retrieve("a", query, top_k * (CANDIDATES_PER_LANE if mode != "hybrid" else 1))
    dense = {h["external_id"]: h["score"] for h in lanes["dense"]}
    sparse = {h["external_id"]: h["score"] for h in lanes["sparse"]}
    assert _ids(lanes["dense"]) != _ids(lanes["sparse"]), "the fixture tells the two lanes apart"
    # convex fusion, by hand: a doc missing from a lane gets nothing from it
    fused = {eid: WEIGHTS[0] * dense.get(eid, 0.0) + WEIGHTS[1] * sparse.get(eid, 0.0) for eid in {*dense, *sparse}}
    expected = sorted(fused.items(), key=lambda pair: -pair[1])[:top_k]
    assert [h["external_id"] for h in lanes["hybrid"]] == [eid for eid, _ in expected]
    assert [h["score"] for h in lanes["hybrid"]] == pytest.approx([score for _, score in expected])
    assert _ids(lanes["hybrid"]) != _ids(lanes["dense"])[:top_k]
    # BM25 answers only docs that share a word with the question (txtai keeps scores above 0)
    assert all(set(d["text"].lower().split()) & set(query.lower().split())
               for d in _docs("a") if d["external_id"] in sparse)


def test_the_index_is_what_the_configuration_says():
    import faiss
    from txtai.embeddings.search.hybrid import Hybrid

    from adapters.systems.txtai_system import BM25, FAISS_COMPONENTS, FUSION, HYBRID_SCORING, WEIGHTS

    system = _system()
    system.ingest(_docs("a"))
    index = system._indexes["a"]
    assert index.config["scoring"] == HYBRID_SCORING and index.config["content"] is False
    assert {"k1": index.scoring.k1, "b": index.scoring.b} == BM25
    assert Hybrid(index.scoring).method.__name__ == FUSION
    assert index.ann.config["faiss"]["components"] == FAISS_COMPONENTS
    assert isinstance(index.ann.backend, faiss.IndexIDMap)
    inner = faiss.downcast_index(index.ann.backend.index)
    assert type(inner) is faiss.IndexFlat and inner.metric_type == faiss.METRIC_INNER_PRODUCT, "exact, no IVF"
    assert type(index.model).__name__ == "External" and "path" not in index.config, "no model named: none fetched"
    # txtai's default weights are the ones recorded
    for query in ("Ann hiking", "cats in the garden", "rainy week"):
        assert index.search(query, 5) == index.search(query, 5, weights=list(WEIGHTS))
    config = system.config
    assert config["version"] == "9.14.0" and config["retrieval_mode"] == "txtai:hybrid"
    assert config["sparse_scoring"]["k1"] == BM25["k1"] and "0.5/0.5" in config["fusion"]
    assert config["embedding_signature"] == WordEmbedder.signature


def test_sparse_embeds_nothing_and_says_so():
    embedder = CountingEmbedder()
    system = _system("sparse", embedder)
    system.encode_ahead(_docs("a"))
    system.ingest(_docs("a"))
    assert _ids(system.retrieve("a", "Bo cats", 3))[0] in {"opaque-a-001", "opaque-a-004"}
    assert embedder.texts == 0 and system.embedding_signature is None
    assert system.config["vectors"] == "none" and system.config["embedding_signature"] is None
    assert system.config["fusion"] == "none" and system.config["dense_backend"] == "none"
    dense = _system("dense", CountingEmbedder())
    assert dense.config["sparse_scoring"] == "none" and dense.config["fusion"] == "none"


def test_a_second_ingest_adds_and_ranks_as_one_ingest_of_everything():
    docs = _docs("a")
    for mode in ("hybrid", "sparse"):
        once, steps = _system(mode), _system(mode)
        once.ingest(docs)
        steps.ingest(docs[:3])
        steps.ingest(docs[3:5])
        steps.ingest(docs[5:])
        for query in ("Bo cats", "Ann hiking dog", "bicycle shed", "pasta"):
            assert steps.retrieve("a", query, 5) == once.retrieve("a", query, 5)


def test_reset_and_close_close_txtais_indexes():
    system = _system()
    system.ingest(_docs("a") + _docs("b"))
    indexes = list(system._indexes.values())
    system.reset()
    assert all(index.config is None and index.scoring is None and index.ann is None for index in indexes)
    system.ingest(_docs("a"))
    last = system._indexes["a"]
    system.close()
    assert last.config is None and system.retrieve("a", "Ann", 3) == []


def test_a_missing_txtai_makes_the_system_unavailable_with_its_install_line(monkeypatch):
    from adapters.systems import make_system

    monkeypatch.setitem(sys.modules, "txtai", None)  # `import txtai` now raises ImportError
    with pytest.raises(SystemUnavailable, match=r"pip install -e '\.\[txtai\]'"):
        make_system("txtai")


def test_its_modes_are_its_own():
    from adapters.errors import MemfarmError
    from adapters.systems import SYSTEMS, make_system

    assert SYSTEMS["txtai"].modes == ("hybrid", "dense", "sparse") and SYSTEMS["txtai"].extra == "txtai"
    with pytest.raises(MemfarmError, match="not one of txtai's: hybrid, dense, sparse"):
        make_system("txtai", mode="fusion")


@pytest.mark.slow
@pytest.mark.server
def test_txtai_on_one_locomo_conversation_here_and_on_a_farm(locomo_path, tmp_path, redis_server, workers):
    _need_txtai()
    data = one_conversation(locomo_path, tmp_path)
    conversation = json.loads(data.read_text())[0]
    turns = sum(len(v) for k, v in conversation["conversation"].items() if k.startswith("session_") and isinstance(v, list))
    runs = {mode: run_locomo(tmp_path, f"txtai_{mode}", data, "--system", "txtai", "--retrieval-mode", mode)
            for mode in ("hybrid", "dense", "sparse")}
    for mode, (results, manifest) in runs.items():
        ok = [r for r in results["records"] if r["status"] == "ok"]
        assert len(ok) == len(conversation["qa"]) > 20
        assert all(r["diagnostics"]["rejected_hits"] == [] for r in ok)
        # far above chance: ten turns drawn at random from the kept sessions' turns
        assert results["metrics"]["all"]["turn"]["recall_any@10"] > 3 * 10 / turns
        assert results["settings_system"]["retrieval_mode"] == f"txtai:{mode}"
        assert results["settings_system"]["version"] == manifest["system"]["version"] == "9.14.0"
    assert runs["hybrid"][1]["system"]["embedding_signature"]["model_id"].endswith("all-MiniLM-L6-v2")
    assert runs["sparse"][1]["system"]["embedding_signature"] is None
    hybrid, dense, sparse = (rankings(runs[mode][0]) for mode in ("hybrid", "dense", "sparse"))
    assert hybrid != dense and hybrid != sparse and dense != sparse
    # the same rankings from real workers that run the built-in system
    workers(redis_server.url, "w1").wait_ready()
    for mode in ("hybrid", "sparse"):
        farm, farm_manifest = run_locomo(tmp_path, f"farm_txtai_{mode}", data, "--system", "txtai",
                                   "--retrieval-mode", mode, env={"MEMFARM_BROKER": redis_server.url})
        assert rankings(farm) == rankings(runs[mode][0])
        assert farm["settings_system"]["retrieval_mode"] == f"txtai:{mode}"
        assert farm_manifest["system"]["name"] == "txtai" and farm_manifest["farm"]["workers"]
