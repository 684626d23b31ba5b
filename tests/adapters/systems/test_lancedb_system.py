"""LanceDB through the contract: its modes rank as its own legs and its own RRF, labels and items stay apart, the
runner's ids never enter a table, the full-text index is rebuilt after each ingest, an empty store answers nothing,
its folder and files go at reset and close; and one real LoCoMo conversation here and on a farm of real workers.

The fast tests embed with a stand-in whose vectors know synonyms (so the vector leg finds what the words do not);
the slow one with the real model."""

import json
import os
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from adapters.errors import SystemUnavailable
from coordinator.cli import main
from tests.adapters.systems.one_conversation import one_conversation, rankings, run_locomo
from tests.helpers import WordEmbedder, skip_outside_ci


def _need_lancedb():
    try:
        import lancedb  # noqa: F401
    except ImportError:
        skip_outside_ci("lancedb is not installed (`make test` installs it; pip install -e '.[lancedb]')")


class SynonymEmbedder:
    """Each word to the dimension of its topic (cat, kitten and feline share one), normalised: a vector search finds
    a kitten for a cat where the full-text index finds only the word."""

    TOPICS = ({"cat", "cats", "kitten", "feline"}, {"boots", "shoes", "sneakers"}, {"cake", "pie", "baking"},
              {"hiking", "trail", "mountain"})
    signature = {"model_id": "tests/synonyms", "dimension": 16}

    def encode(self, texts, batch_size=32, **_):
        vectors = np.zeros((len(texts), 16), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(".", " ").split():
                topic = next((n for n, words in enumerate(self.TOPICS) if word in words), None)
                vectors[row, topic if topic is not None else 4 + sum(map(ord, word)) % 12] += 1.0
            vectors[row] /= np.linalg.norm(vectors[row]) or 1.0
        return vectors


TEXTS = ("Ann adopted a kitten last spring", "Ann says her cat sleeps all day", "Ann bought new hiking boots",
         "Ann baked a plum cake", "Ann walked a mountain trail in sneakers", "Ann never liked the cat next door")


def _docs(label: str, texts=TEXTS) -> list[dict]:
    return [{"external_id": f"{label}:{n}", "label": label, "text": text, "props": {}} for n, text in enumerate(texts)]


def _system(mode="hybrid", embedder=None):
    _need_lancedb()
    from adapters.systems.lancedb_system import LanceDBSystem

    return LanceDBSystem(mode=mode, embedder=embedder or SynonymEmbedder())


@pytest.fixture()
def systems():
    made = []

    def make(mode="hybrid", embedder=None):
        made.append(_system(mode, embedder))
        return made[-1]

    yield make
    for system in made:
        system.close()


def _ranked(system, label, query, top_k=6):
    return [hit["external_id"] for hit in system.retrieve(label, query, top_k)]


def test_each_mode_ranks_with_its_own_leg_and_hybrid_is_lancedbs_rrf_of_both(systems):
    ranked, scores = {}, {}
    for mode in ("vector", "fts", "hybrid"):
        system = systems(mode)
        system.reset()
        system.ingest(_docs("a"))
        hits = system.retrieve("a", "Which cat?", 4)
        ranked[mode] = [h["external_id"] for h in hits]
        scores[mode] = {h["external_id"]: h["score"] for h in hits}
    assert "a:0" in ranked["vector"], "the kitten is found by its vector"
    assert "a:0" not in ranked["fts"] and set(ranked["fts"]) == {"a:1", "a:5"}, "the words find only 'cat'"
    # RRF by hand over the two legs (each asked for top_k), K = 60, ranks from 1
    expected = {}
    for leg in ("vector", "fts"):
        for rank, doc in enumerate(ranked[leg], 1):
            expected[doc] = expected.get(doc, 0.0) + 1 / (60 + rank)
    assert set(ranked["hybrid"]) <= set(expected)
    assert scores["hybrid"] == {doc: pytest.approx(expected[doc], rel=1e-6) for doc in ranked["hybrid"]}
    assert [expected[d] for d in ranked["hybrid"]] == sorted((expected[d] for d in ranked["hybrid"]), reverse=True)
    assert sorted(expected.values(), reverse=True)[:4] == sorted((expected[d] for d in ranked["hybrid"]), reverse=True)
    assert ranked["hybrid"] != ranked["vector"] and ranked["hybrid"] != ranked["fts"]


@pytest.mark.parametrize("mode", ["hybrid", "vector", "fts"])
def test_labels_and_items_stay_apart_and_the_runners_ids_never_enter_a_table(systems, mode):
    system = systems(mode)
    system.reset()
    system.ingest(_docs("a") + _docs("b", [text.replace("Ann", "Bo") for text in TEXTS]))
    for label in ("a", "b"):
        found = _ranked(system, label, "Which cat did she adopt?")
        assert found and all(doc.startswith(f"{label}:") for doc in found)
    table = system._tables["a"].to_arrow()
    assert table.column_names == ["doc", "text", "vector"]
    assert set(table["doc"].to_pylist()) == set(range(len(TEXTS))), "rows keyed by the system's own integers"
    assert not any(":" in text for text in table["text"].to_pylist())
    system.reset()  # the next item
    assert system.retrieve("a", "Which cat?", 5) == []
    system.ingest(_docs("c"))
    assert all(doc.startswith("c:") for doc in _ranked(system, "c", "Which cat?"))
    assert system.retrieve("a", "Which cat?", 5) == []


@pytest.mark.parametrize("mode", ["fts", "hybrid"])
def test_a_question_in_quotes_is_asked_as_words_not_as_a_phrase(systems, mode):
    """The full-text index keeps no positions, so LanceDB refuses a phrase query: a question wholly in quotes
    would fail its item. The text leg is given plain words; a question with no word left asks the vectors alone."""
    system = systems(mode)
    system.ingest(_docs("a"))
    assert _ranked(system, "a", '"hiking boots"')[0] == "a:2"
    assert _ranked(system, "a", '"cake" AND "pie"')[0] == "a:3"
    if mode == "hybrid":
        assert _ranked(system, "a", '""')  # nothing of the text is left: the vector leg answers


def test_a_key_the_system_never_minted_is_shown_to_the_runner_to_drop(systems):
    system = systems("fts")
    system.reset()
    system.ingest(_docs("a"))
    del system._ids[1]
    assert "lancedb:1" in _ranked(system, "a", "cat")


def test_an_empty_store_answers_nothing_in_every_mode(systems):
    for mode in ("hybrid", "vector", "fts"):
        system = systems(mode)
        assert system.retrieve("item-000000000000", "anything at all?", 5) == []
        system.reset()
        system.ingest([])
        assert system.retrieve("item-000000000000", "anything at all?", 5) == []
        system.ingest(_docs("a"))
        assert system.retrieve("b", "Which cat?", 5) == []
    assert system.retrieve("a", "the of a", 5) == [], "stop words alone match nothing in the full-text index"


def test_ingest_in_steps_ranks_and_scores_as_one_build_because_the_index_is_rebuilt(systems):
    whole, steps = systems("fts"), systems("fts")
    whole.reset()
    whole.ingest(_docs("a"))
    steps.reset()
    for start in range(0, len(TEXTS), 2):
        steps.ingest(_docs("a")[start:start + 2])
    for query in ("cat", "Ann's boots and cake", "mountain trail"):
        assert whole.retrieve("a", query, 6) == steps.retrieve("a", query, 6)


def test_lancedb_still_scores_rows_added_after_its_index_apart_until_rebuilt(tmp_path):
    """Why the system rebuilds the index: LanceDB searches unindexed rows with statistics of their own."""
    _need_lancedb()
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS

    def rows(texts, first):
        return pa.table({"doc": pa.array(range(first, first + len(texts)), pa.int64()), "text": list(texts)})

    table = lancedb.connect(str(tmp_path / "db")).create_table("t", data=rows(TEXTS[:3], 0))
    table.create_index("text", config=FTS(), replace=True)
    table.add(rows(TEXTS[3:], 3))

    def scores():
        found = table.search("Ann cat", query_type="fts").limit(6).to_arrow()
        return dict(zip(found["doc"].to_pylist(), found["_score"].to_pylist()))

    stale = scores()
    assert 5 in stale, "unindexed rows are still searched"
    table.create_index("text", config=FTS(), replace=True)
    assert scores() != stale


def test_reset_and_close_release_the_folder_and_every_file(systems):
    system = systems("hybrid")
    system.reset()
    system.ingest(_docs("a"))
    assert _ranked(system, "a", "Which cat?")
    first = system._folder
    root = system._root
    held = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")]
    assert [path for path in held if path.startswith(root)] == [os.path.join(root, "owner.lock")]
    system.reset()
    assert not os.path.exists(first) and os.path.isdir(system._folder)
    system.close()
    assert not os.path.exists(root)


def test_config_discloses_version_mode_index_and_embedder(systems):
    import lancedb

    config = systems("fts", WordEmbedder()).config
    assert config["version"] == lancedb.__version__ == "0.40.0"
    assert config["retrieval_mode"] == "lancedb:fts" and config["query"] == "full-text"
    assert config["fts_index"]["stem"] is True and config["fts_index"]["language"] == "English"
    assert config["embedding_signature"] == WordEmbedder.signature
    assert "RRFReranker(K=60)" in systems("hybrid").config["query"]
    assert systems("vector").config["vector_search"] == "exact (no ANN index), cosine distance"


def test_modes_are_lancedbs_own_and_a_missing_package_names_its_install_line(monkeypatch, tmp_path):
    from adapters.systems import make_system, modes_of
    from tests.helpers import write_dataset

    assert modes_of("lancedb") == ("hybrid", "vector", "fts")
    data = write_dataset(tmp_path / "lme.json", questions=2, seed=2, scale=0.02)
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "lancedb",
                                       "--retrieval-mode", "dense"])
    assert result.exit_code != 0 and "not a mode of lancedb; its modes: hybrid, vector, fts" in result.output
    monkeypatch.setitem(sys.modules, "lancedb", None)  # `import lancedb` now raises ImportError
    with pytest.raises(SystemUnavailable, match=r"pip install -e '\.\[lancedb\]'"):
        make_system("lancedb")


def test_check_system_passes(systems):
    from adapters.systems.conformance import PythonDriver, report_table, run_checks

    report = run_checks(PythonDriver(systems("hybrid", WordEmbedder())))
    report["system"] = "lancedb"
    assert report["passed"], report_table(report)


@pytest.mark.slow
@pytest.mark.server
def test_lancedb_on_one_locomo_conversation_here_and_on_a_farm(locomo_path, tmp_path, redis_server, workers):
    _need_lancedb()
    data = one_conversation(locomo_path, tmp_path)
    conversation = json.loads(data.read_text())[0]
    turns = sum(len(v) for k, v in conversation["conversation"].items()
                if k.startswith("session_") and isinstance(v, list))
    runs = {mode: run_locomo(tmp_path, f"lancedb_{mode}", data, "--system", "lancedb", "--retrieval-mode", mode)
            for mode in ("hybrid", "vector", "fts")}
    for mode, (results, manifest) in runs.items():
        ok = [r for r in results["records"] if r["status"] == "ok"]
        assert len(ok) == len(conversation["qa"]) > 20
        assert all(r["diagnostics"]["rejected_hits"] == [] for r in ok)
        # far above chance: ten turns drawn at random from the kept sessions' turns
        assert results["metrics"]["all"]["turn"]["recall_any@10"] > 3 * 10 / turns
        assert results["settings_system"]["retrieval_mode"] == f"lancedb:{mode}"
        assert results["settings_system"]["version"] == "0.40.0"
        assert manifest["system"]["embedding_signature"]["model_id"].endswith("all-MiniLM-L6-v2")
    hybrid = rankings(runs["hybrid"][0])
    assert hybrid != rankings(runs["vector"][0]) and hybrid != rankings(runs["fts"][0])
    workers(redis_server.url, "w1").wait_ready()
    farm, farm_manifest = run_locomo(tmp_path, "farm_lancedb", data, "--system", "lancedb",
                               env={"MEMFARM_BROKER": redis_server.url})
    assert rankings(farm) == hybrid
    assert farm["settings_system"]["retrieval_mode"] == "lancedb:hybrid" and farm_manifest["farm"]["workers"]
