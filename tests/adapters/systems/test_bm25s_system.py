"""bm25s through the contract: its scores are bm25s's own on real LoCoMo questions, its labels keep items apart,
its modes are bm25s's variants, a lexical miss is no hit, and one real LoCoMo conversation ranks the same here and
on a farm of real workers."""

import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from adapters.errors import SystemUnavailable
from coordinator.cli import main
from tests.adapters.systems.one_conversation import one_conversation, rankings, run_locomo
from tests.helpers import skip_outside_ci


def _need_bm25s():
    try:
        import bm25s  # noqa: F401
        import Stemmer  # noqa: F401
    except ImportError:
        skip_outside_ci("bm25s is not installed (`make test` installs it; pip install -e '.[bm25s]')")


@pytest.fixture
def system_of():
    _need_bm25s()
    from adapters.systems.bm25s_system import Bm25sSystem

    def make(mode="lucene"):
        system = Bm25sSystem(mode=mode)
        system.reset()
        return system

    return make


def _docs(label, texts):
    return [{"external_id": f"{label}-{i:06d}", "label": label, "text": text, "props": {}}
            for i, text in enumerate(texts)]


PETS = ["Ann adopted two cats from the shelter", "Ann went hiking in the mountains with her dog",
        "the weather was grey all week", "Ann bought new hiking boots", "Bo said the cats were asleep"]


def test_scores_are_bm25s_own_on_real_locomo_questions(locomo_path, system_of):
    """The contestant's scores equal bm25s called directly on the same docs with the same settings."""
    import bm25s
    import Stemmer

    from adapters.benchmarks.locomo.reader import LoCoMo
    from workers.item.evaluate import make_docs

    item = next(iter(LoCoMo(locomo_path).iter_items()))
    docs, _ = make_docs(item)
    questions = [q["question"] for q in item["questions"][:8]]
    for mode in ("lucene", "robertson"):
        system = system_of(mode)
        system.ingest(docs)
        stemmer = Stemmer.Stemmer("english")
        direct = bm25s.BM25(method=mode, k1=1.5, b=0.75)
        direct.index(bm25s.tokenize([d["text"] for d in docs], stopwords="en", stemmer=stemmer, show_progress=False),
                     show_progress=False)
        for question in questions:
            hits = system.retrieve(docs[0]["label"], question, 10)
            tokens = bm25s.tokenize(question, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
            found = direct.retrieve(tokens, k=10, show_progress=False)
            expected = [(docs[int(i)]["external_id"], float(s)) for i, s in zip(found.documents[0], found.scores[0])
                        if s > 0]
            assert hits and [(h["external_id"], h["score"]) for h in hits] == expected, question
            scores = direct.get_scores(tokens[0])  # every doc's score: none left out beats the last hit
            held = {h["external_id"] for h in hits}
            assert all(float(s) <= hits[-1]["score"] for d, s in zip(docs, scores) if d["external_id"] not in held)
            assert len(hits) == min(10, int((scores > 0).sum()))


def test_labels_keep_items_apart_and_their_statistics_too(system_of):
    system = system_of()
    system.ingest(_docs("a", PETS))
    alone = system.retrieve("a", "Who adopted cats?", 10)
    system.ingest(_docs("b", ["cats cats cats", "the cats of Bo", "adopted"]))
    together = system.retrieve("a", "Who adopted cats?", 10)
    assert together == alone, "another label's docs change neither the hits nor the idf of this one"
    assert {h["external_id"] for h in together} == {"a-000000", "a-000004"}
    assert {h["external_id"] for h in system.retrieve("b", "Who adopted cats?", 10)} == {
        "b-000000", "b-000001", "b-000002"}
    assert system.retrieve("c", "cats", 10) == []


def test_a_second_ingest_adds_and_ranks_as_one_ingest_of_everything(system_of):
    stepped, whole = system_of(), system_of()
    docs = _docs("a", PETS)
    stepped.ingest(docs[:2])
    assert [h["external_id"] for h in stepped.retrieve("a", "hiking boots", 10)] == ["a-000001"]
    stepped.ingest(docs[2:])
    whole.ingest(docs)
    for question in ("hiking boots", "cats", "weather this week"):
        assert stepped.retrieve("a", question, 10) == whole.retrieve("a", question, 10)
    assert [h["external_id"] for h in stepped.retrieve("a", "hiking boots", 10)][0] == "a-000003"


def test_a_lexical_miss_is_no_hit_and_an_empty_store_answers_nothing(system_of):
    system = system_of()
    assert system.retrieve("a", "cats", 5) == []  # nothing ingested since the reset
    system.ingest(_docs("a", PETS) + _docs("s", ["the a", "it is", ""]))
    assert system.retrieve("a", "zebra", 5) == []
    assert system.retrieve("a", "is it the", 5) == []  # only stopwords: nothing to match
    assert system.retrieve("a", "", 5) == []
    assert system.retrieve("s", "the", 5) == []  # a label whose docs hold no indexable word
    hits = system.retrieve("a", "weather", 5)
    assert [h["external_id"] for h in hits] == ["a-000002"] and system.last_diagnostics["dropped_zero"] == 4
    assert len(system.retrieve("a", "Ann cats hiking boots weather", 3)) == 3  # top_k respected
    assert len(system.retrieve("a", "Ann cats hiking boots weather", 50)) == 5  # top_k above the docs held
    system.reset()
    assert system.retrieve("a", "weather", 5) == []


def test_native_ids_never_leak(system_of):
    system = system_of()
    docs = _docs("item-x", PETS)
    system.ingest(docs)
    given = {d["external_id"] for d in docs}
    for question in ("cats", "hiking boots dog", "Ann"):
        hits = system.retrieve("item-x", question, 10)
        assert hits and all(h["external_id"] in given and isinstance(h["score"], float) for h in hits)


def test_modes_are_bm25s_variants_and_rank_where_they_differ(system_of):
    docs = _docs("a", ["Ann hiking", "Ann cats", "Ann boots hiking", "Bo cats"])
    scores = {}
    for mode in ("lucene", "robertson", "atire"):
        system = system_of(mode)
        system.ingest(docs)
        scores[mode] = {h["external_id"]: h["score"] for h in system.retrieve("a", "Ann hiking", 10)}
        assert system.config["retrieval_mode"] == f"bm25s:{mode}" and system.config["method"] == mode
    assert len({tuple(sorted(s.items())) for s in scores.values()}) == 3, "each variant scores its own way"
    # "ann" is in 3 of 4 docs: Lucene's idf stays positive, Robertson's is floored at zero, so Robertson drops
    # the doc that matches only "ann"
    assert "a-000001" in scores["lucene"] and "a-000001" not in scores["robertson"]
    from adapters.systems import make_system
    from adapters.errors import MemfarmError

    with pytest.raises(MemfarmError, match="not one of bm25s's: lucene, robertson, atire"):
        make_system("bm25s", mode="bm25l")


def test_config_carries_version_and_every_setting_that_shapes_ranking(system_of):
    import bm25s
    import Stemmer

    from adapters.systems import SYSTEMS, describe

    config = describe(system_of("robertson"))
    assert config["version"] == bm25s.__version__ == "0.3.16"
    assert config["k1"] == 1.5 and config["b"] == 0.75 and config["method"] == "robertson"
    assert config["stopwords"] == "bm25s 'en'" and config["stemmer"] == f"PyStemmer {Stemmer.version()} english"
    assert config["backend"] == "numpy" and config["embeds"] is False and "embedding_signature" not in config
    info = SYSTEMS["bm25s"]
    assert info.modes[0] == "lucene" and info.extra == "bm25s" and info.vendor_module == "bm25s"
    assert not info.snapshots


@pytest.mark.parametrize("module", ["bm25s", "Stemmer"])
def test_a_missing_package_refuses_with_the_install_line(monkeypatch, module):
    from adapters.systems import make_system

    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    with pytest.raises(SystemUnavailable, match=r"pip install -e '\.\[bm25s\]'"):
        make_system("bm25s")


@pytest.mark.slow
@pytest.mark.server
def test_bm25s_on_one_locomo_conversation_here_and_on_a_farm(locomo_path, tmp_path, redis_server, workers):
    _need_bm25s()
    data = one_conversation(locomo_path, tmp_path)
    conversation = json.loads(data.read_text())[0]
    lucene, manifest = run_locomo(tmp_path, "bm25s_lucene", data, "--system", "bm25s")
    robertson, _ = run_locomo(tmp_path, "bm25s_robertson", data, "--system", "bm25s", "--retrieval-mode", "robertson")
    turns = sum(len(v) for k, v in conversation["conversation"].items()
                if k.startswith("session_") and isinstance(v, list))
    for results in (lucene, robertson):
        ok = [r for r in results["records"] if r["status"] == "ok"]
        assert len(ok) == len(conversation["qa"]) > 20
        assert all(r["diagnostics"]["rejected_hits"] == [] for r in ok)
        # far above chance: ten turns drawn at random from the kept sessions' turns
        assert results["metrics"]["all"]["turn"]["recall_any@10"] > 3 * 10 / turns
    settings = lucene["settings_system"]
    assert settings["retrieval_mode"] == "bm25s:lucene" and settings["version"] == "0.3.16"
    assert robertson["settings_system"]["retrieval_mode"] == "bm25s:robertson"
    assert manifest["system"]["name"] == "bm25s" and manifest["system"]["k1"] == 1.5
    assert rankings(lucene) != rankings(robertson), "the variants' idf ranks differently"
    workers(redis_server.url, "w1").wait_ready()
    for mode, local in (("lucene", lucene), ("robertson", robertson)):
        farm, farm_manifest = run_locomo(tmp_path, f"farm_{mode}", data, "--system", "bm25s", "--retrieval-mode", mode,
                                   env={"MEMFARM_BROKER": redis_server.url})
        assert rankings(farm) == rankings(local)
        assert farm["settings_system"]["retrieval_mode"] == f"bm25s:{mode}"
        assert farm_manifest["system"]["version"] == "0.3.16" and farm_manifest["farm"]["workers"]
