"""Engrava through the contract: its stores kept apart per label and per item, its modes, its own thought ids
never reaching the runner, an empty store, the install line, its configuration, and one real LoCoMo
conversation here and on a farm of real workers."""

import asyncio
import json
import re
import threading

import numpy as np
import pytest

from adapters.errors import MemfarmError, SystemUnavailable
from tests.adapters.systems.one_conversation import need, one_conversation, rankings, run_locomo
from tests.helpers import WordEmbedder


class SynonymEmbedder(WordEmbedder):
    """Bag-of-words vectors in which "kitten" and "cat" are one word: a vector finds what the words miss."""

    def encode(self, texts, batch_size=32, **options):
        return super().encode([re.sub(r"\bkittens?\b", "cat", t.lower()) for t in texts], batch_size, **options)


def _system(mode="hybrid", embedder=None):
    need("engrava", "engrava")
    from adapters.systems.engrava_system import EngravaSystem

    system = EngravaSystem(mode=mode, embedder=embedder or WordEmbedder())
    system.reset()
    return system


def _docs(label, texts, prefix=None):
    return [{"external_id": f"{prefix or label}-{i}", "label": label, "text": text, "props": {}}
            for i, text in enumerate(texts)]


TOPICS = ("Ann went hiking in the Alps", "Ann adopted two cats", "Ann bought new boots")


def test_labels_and_items_are_kept_apart():
    system = _system()
    try:
        system.ingest(_docs("a", TOPICS) + _docs("b", [t.replace("Ann", "Bo") for t in TOPICS]))
        assert {h["external_id"] for h in system.retrieve("a", "Who adopted cats?", 10)} == {"a-0", "a-1", "a-2"}
        assert system.retrieve("b", "Who adopted cats?", 1)[0]["external_id"] == "b-1"
        system.reset()  # the next item: nothing of the last one is left
        system.ingest(_docs("c", ["Cy collects stamps"]))
        assert system.retrieve("a", "Who adopted cats?", 10) == []
        assert [h["external_id"] for h in system.retrieve("c", "Who adopted cats?", 10)] == ["c-0"]
    finally:
        system.close()


def test_a_second_ingest_adds_to_the_store():
    system = _system()
    try:
        system.ingest(_docs("a", TOPICS[:2]))
        system.ingest(_docs("a", TOPICS[2:], prefix="later"))
        assert system.adds_on_ingest
        assert {h["external_id"] for h in system.retrieve("a", "boots", 10)} == {"a-0", "a-1", "later-0"}
        assert system.retrieve("a", "Who bought boots?", 1)[0]["external_id"] == "later-0"
    finally:
        system.close()


def test_an_empty_store_answers_nothing():
    system = _system()
    try:
        assert system.retrieve("a", "anything at all", 5) == []
        system.ingest([])
        assert system.retrieve("a", "anything at all", 5) == []
        system.ingest(_docs("a", TOPICS))
        assert system.retrieve("elsewhere", "hiking", 5) == []
    finally:
        system.close()


def test_each_mode_ranks_by_its_own_signals():
    texts = ("Ann adopted a kitten last spring", "Ann talks about the weather", "The cat food is in the shed")

    def ranked(mode):
        system = _system(mode, SynonymEmbedder())
        try:
            system.ingest(_docs("a", texts))
            return [h["external_id"] for h in system.retrieve("a", "Which cat did Ann adopt?", 3)]
        finally:
            system.close()

    # the words "cat" and "kitten" differ: FTS5 puts the doc that says "cat" far above those that say only "Ann"
    assert ranked("keyword") == ["a-2", "a-1", "a-0"]
    # the vectors make them one: the kitten doc shares "cat" and "Ann" with the question
    assert ranked("vector") == ["a-0", "a-1", "a-2"]
    # the fusion is neither: the min-max normalised keyword arm keeps its best on top, the vector lifts the kitten
    assert ranked("hybrid") == ["a-2", "a-0", "a-1"]


def test_recency_breaks_a_tie_only_where_the_cycle_is_given():
    # the same fact twice: a tie in every signal but recency. The runner's ids sort the other way round from the
    # ingest order, so a tie broken by them would show here.
    docs = [{"external_id": eid, "label": "a", "text": "Ann lives in Paris", "props": {}}
            for eid in ("z-older", "a-newer")]
    orders = {}
    for mode in ("hybrid", "hybrid-cycle"):
        system = _system(mode)
        try:
            system.ingest(docs)
            hits = system.retrieve("a", "Where does Ann live?", 2)
            orders[mode] = [h["external_id"] for h in hits]
            if mode == "hybrid":
                assert hits[0]["score"] == hits[1]["score"]
            assert ("recency" in system.last_diagnostics["backends_used"]) == (mode == "hybrid-cycle")
        finally:
            system.close()
    assert orders == {"hybrid": ["z-older", "a-newer"], "hybrid-cycle": ["a-newer", "z-older"]}


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_question_that_quotes_a_title_or_says_AND_is_asked_as_plain_words(mode):
    """Engrava reads balanced quotes, upper-case AND/OR/NOT and `content:` as FTS5 syntax: a question quoting a
    title would match only the exact phrase (nothing, here); the system gives it the question as plain words."""
    system = _system(mode)
    try:
        system.ingest(_docs("a", ["Mel loves The Four Seasons by Vivaldi", "Mel bought new boots"]))
        for question in ('Would Mel enjoy "Seasons Four" by Vivaldi?', "Does Mel like music AND Vivaldi?",
                         "content: Vivaldi"):
            assert system.retrieve("a", question, 2)[0]["external_id"] == "a-0", question
    finally:
        system.close()


def test_engravas_own_ids_never_reach_the_runner():
    system = _system()
    try:
        docs = _docs("a", TOPICS, prefix="opaque")
        system.ingest(docs)
        hits = system.retrieve("a", "Ann", 10)
        assert sorted(h["external_id"] for h in hits) == sorted(d["external_id"] for d in docs)
        minted = list(system._ids)
        assert all(not any(d["external_id"] in thought_id for d in docs) for thought_id in minted)
        # a thought engrava names that this system never mapped is passed on marked, for the runner to drop
        del system._ids[minted[0]]
        assert any(h["external_id"].startswith("engrava:") for h in system.retrieve("a", "Ann", 10))
    finally:
        system.close()


def test_its_scores_are_engravas_own():
    """The keyword mode returns what engrava's FTS5 search gives for the same thoughts, score for score."""
    system = _system("keyword")
    try:
        system.ingest(_docs("a", TOPICS))
        hits = system.retrieve("a", "hiking boots", 3)
        store = system._stores["a"]
        direct = system._loop.run(store.core.search_fts("hiking boots", top_k=3))
        assert [(system._ids[t], s) for t, s in direct] == [(h["external_id"], h["score"]) for h in hits]
        assert sorted(h["external_id"] for h in hits) == ["a-0", "a-2"]  # no other doc has either word
    finally:
        system.close()


def test_it_runs_beside_a_callers_event_loop_and_leaves_no_thread_behind():
    before = set(threading.enumerate())
    system = _system()

    async def asked_from_a_coroutine():
        system.ingest(_docs("a", TOPICS))
        return system.retrieve("a", "boots", 1)

    assert asyncio.run(asked_from_a_coroutine())[0]["external_id"] == "a-2"
    system.reset()
    system.ingest(_docs("a", TOPICS))
    system.close()
    system.close()  # twice is harmless
    assert set(threading.enumerate()) <= before


def test_modes_are_refused_by_name_and_the_run_knows_them():
    from adapters.systems import SYSTEMS, make_system

    need("engrava", "engrava")
    assert SYSTEMS["engrava"].modes[0] == "hybrid" and "keyword" in SYSTEMS["engrava"].modes
    with pytest.raises(MemfarmError, match="not one of engrava's: hybrid, hybrid-cycle, vector, keyword"):
        make_system("engrava", mode="dense", embedder=WordEmbedder())
    from coordinator.running.spec import RunSpec

    assert RunSpec("locomo", dataset="x", system="engrava").retrieval_mode == "hybrid"


def test_a_missing_engrava_makes_the_system_unavailable(monkeypatch):
    from adapters.systems import make_system

    monkeypatch.setitem(__import__("sys").modules, "engrava", None)
    with pytest.raises(SystemUnavailable, match=r"pip install -e '\.\[engrava\]'"):
        make_system("engrava")


def test_the_configuration_names_version_mode_weights_and_embedder():
    system = _system("hybrid-cycle")
    try:
        config = system.config
    finally:
        system.close()
    assert config["version"] == "0.7.2" and config["retrieval_mode"] == "engrava:hybrid-cycle"
    assert config["weights"] == {"fts": 0.3, "vector": 0.55, "recency": 0.1, "priority": 0.05, "graph": 0.0}
    assert config["recency"].endswith("half-life 50 cycles") and config["candidate_pools"] == {"fts": 50, "vector": 50}
    assert config["embedding_signature"] == WordEmbedder.signature
    assert config["language_model"].startswith("none") and "dreaming (consolidation)" in config["off"]
    plain = _system("hybrid")
    keyword = _system("keyword")
    try:
        assert plain.config["weights"] == config["weights"] and plain.config["recency"].startswith("skipped")
        assert keyword.config["weights"] is None and keyword.config["query"].startswith("search_fts")
    finally:
        plain.close()
        keyword.close()


def test_its_vectors_are_the_run_embedders(embedder):
    """Engrava is handed the run's model's vectors, unchanged: its cosine is the model's own."""
    system = _system("vector", embedder)
    try:
        system.ingest(_docs("a", TOPICS))
        hits = system.retrieve("a", "Which pets does Ann have?", 3)
        vectors = embedder.encode(["Which pets does Ann have?", *TOPICS])
        cosine = vectors[1:] @ vectors[0] / (np.linalg.norm(vectors[1:], axis=1) * np.linalg.norm(vectors[0]))
        assert hits[0]["external_id"] == "a-1"
        assert [h["score"] for h in hits] == pytest.approx(sorted(cosine, reverse=True), abs=1e-5)
    finally:
        system.close()


@pytest.mark.slow
@pytest.mark.server
def test_engrava_on_one_locomo_conversation_here_and_on_a_farm(locomo_path, tmp_path, redis_server, workers):
    need("engrava", "engrava")
    data = one_conversation(locomo_path, tmp_path)
    hybrid, manifest = run_locomo(tmp_path, "engrava_hybrid", data, "--system", "engrava")
    keyword, _ = run_locomo(tmp_path, "engrava_keyword", data, "--system", "engrava", "--retrieval-mode", "keyword")
    conversation = json.loads(data.read_text())[0]
    turns = sum(len(v) for k, v in conversation["conversation"].items()
                if k.startswith("session_") and isinstance(v, list))
    for results in (hybrid, keyword):
        ok = [r for r in results["records"] if r["status"] == "ok"]
        assert len(ok) == len(conversation["qa"]) > 20
        assert all(r["candidates"] for r in ok if not r.get("abstention") and not r.get("excluded"))
        assert all(r["diagnostics"]["rejected_hits"] == [] for r in ok)
        # far above chance: ten turns drawn at random from the kept sessions' turns
        assert results["metrics"]["all"]["turn"]["recall_any@10"] > 3 * 10 / turns
    assert hybrid["settings_system"]["retrieval_mode"] == "engrava:hybrid"
    assert hybrid["settings_system"]["version"] == "0.7.2"
    assert keyword["settings_system"]["retrieval_mode"] == "engrava:keyword"
    assert manifest["system"]["embedding_signature"]["model_id"].endswith("all-MiniLM-L6-v2")
    # the fusion moves something: the hybrid order is not the keyword order alone
    assert rankings(hybrid) != rankings(keyword)
    # the same rankings from a real worker that runs the built-in system
    workers(redis_server.url, "w1").wait_ready()
    farm, farm_manifest = run_locomo(tmp_path, "farm_engrava", data, "--system", "engrava",
                               env={"MEMFARM_BROKER": redis_server.url})
    assert rankings(farm) == rankings(hybrid)
    assert farm["settings_system"]["retrieval_mode"] == "engrava:hybrid"
    assert farm["settings_system"]["version"] == "0.7.2"
    assert farm_manifest["system"]["name"] == "engrava" and farm_manifest["farm"]["workers"]
