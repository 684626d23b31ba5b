"""mnem and MemPalace through the contract: one real LoCoMo conversation here and on a farm of real workers,
their modes, their isolation, a vendor that raises, hits the runner must drop."""

import json
import os

import pytest
from click.testing import CliRunner

from adapters.errors import MemfarmError, SystemUnavailable
from coordinator.cli import main
from tests.adapters.systems.one_conversation import need, one_conversation, rankings, run_locomo
from tests.helpers import skip_outside_ci, write_dataset




@pytest.mark.slow
@pytest.mark.server
def test_mnem_and_mempalace_on_one_locomo_conversation_here_and_on_a_farm(locomo_path, tmp_path, redis_server,
                                                                         workers, monkeypatch):
    need("pymnem", "mnem")
    need("mempalace", "mempalace")
    monkeypatch.delenv("MNEM_BENCH", raising=False)
    data = one_conversation(locomo_path, tmp_path)
    hybrid, manifest = run_locomo(tmp_path, "mnem_hybrid", data, "--system", "mnem")
    dense, _ = run_locomo(tmp_path, "mnem_dense", data, "--system", "mnem", "--retrieval-mode", "dense")
    palace, palace_manifest = run_locomo(tmp_path, "mempalace", data, "--system", "mempalace")
    assert "MNEM_BENCH" not in os.environ
    for results in (hybrid, dense, palace):
        ok = [r for r in results["records"] if r["status"] == "ok"]
        assert len(ok) == len(json.loads(data.read_text())[0]["qa"]) > 20
        assert all(r["candidates"] for r in ok if not r.get("abstention") and not r.get("excluded"))
        assert all(r["diagnostics"]["rejected_hits"] == [] for r in ok)
        turns = sum(len(v) for k, v in json.loads(data.read_text())[0]["conversation"].items()
                    if k.startswith("session_") and isinstance(v, list))
        # far above chance: ten turns drawn at random from the kept sessions' turns
        assert results["metrics"]["all"]["turn"]["recall_any@10"] > 3 * 10 / turns
    assert hybrid["settings_system"]["retrieval_mode"] == "mnem:hybrid" and hybrid["settings_system"]["version"] == "0.1.0"
    assert manifest["system"]["query"] == "text + vector" and dense["settings_system"]["query"] == "vector"
    assert manifest["system"]["embedding_signature"]["model_id"].endswith("all-MiniLM-L6-v2")
    assert palace_manifest["system"]["version"] == "3.11.0"
    # mnem 0.1.0's text lane ranks nothing: its fused retrieve orders exactly as the vector alone
    assert rankings(hybrid) == rankings(dense)
    # MemPalace's BM25 re-rank moves something: its order is not the vector order
    assert rankings(palace) != rankings(dense)
    # the same rankings from real workers that run the built-in systems
    workers(redis_server.url, "w1").wait_ready()
    for name, options, local in (("mnem", ["--retrieval-mode", "dense"], dense), ("mempalace", [], palace)):
        farm, farm_manifest = run_locomo(tmp_path, f"farm_{name}", data, "--system", name, *options,
                                   env={"MEMFARM_BROKER": redis_server.url})
        assert rankings(farm) == rankings(local)
        assert farm_manifest["system"]["name"] == name and farm_manifest["farm"]["workers"]


def test_modes_are_the_systems_own(tmp_path):
    data = write_dataset(tmp_path / "lme.json", questions=2, seed=2, scale=0.02)

    def refused(*options):
        result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), *options])
        assert result.exit_code != 0
        return result.output

    assert "not a mode of mnem; its modes: hybrid, dense" in refused("--system", "mnem", "--retrieval-mode", "fusion")
    assert "not a mode of memoria" in refused("--system", "memoria", "--retrieval-mode", "hybrid")
    assert "means nothing to mempalace" in refused("--system", "mempalace", "--retrieval-mode", "dense")
    assert "not a setting of mem0" in refused("--system", "mem0", "--embedder", "minilm")
    from coordinator.running.spec import RunSpec

    assert RunSpec("locomo", dataset="x", system="mnem").retrieval_mode == "hybrid"
    assert RunSpec("locomo", dataset="x", system="memoria").retrieval_mode == "fusion"
    from workers.farm.config import WorkerConfig
    from workers.farm.run_settings import checked_settings

    taken = checked_settings({"system": "mnem", "system_settings": {"mode": "dense"}}, WorkerConfig())
    assert taken == {"mode": "dense"}
    with pytest.raises(MemfarmError, match="choose from dense, hybrid"):
        checked_settings({"system": "mnem", "system_settings": {"mode": "fusion"}}, WorkerConfig())
    with pytest.raises(MemfarmError, match="choose from"):
        checked_settings({"system": "memoria", "system_settings": {"mode": "hybrid"}}, WorkerConfig())


def test_a_missing_vendor_package_makes_the_system_unavailable(monkeypatch):
    from adapters.systems import make_system

    for name, module in (("mnem", "pymnem"), ("mempalace", "mempalace")):
        monkeypatch.setitem(__import__("sys").modules, module, None)  # `import module` now raises ImportError
        with pytest.raises(SystemUnavailable, match=f"pip install -e '\\.\\[{name}\\]'"):
            make_system(name)


@pytest.mark.slow
def test_mnem_labels_keep_items_apart_and_its_switch_is_put_back(embedder, monkeypatch):
    need("pymnem", "mnem")
    from adapters.systems.mnem_system import MnemSystem

    monkeypatch.setenv("MNEM_BENCH", "0")  # a user's own setting, off: it must be the same afterwards
    system = MnemSystem(mode="dense", embedder=embedder)
    system.reset()
    docs = [{"external_id": f"{label}-{i}", "label": label, "text": f"{who} talks about {topic}", "props": {}}
            for label, who in (("a", "Ann"), ("b", "Bo")) for i, topic in enumerate(("hiking", "cats", "boots"))]
    system.ingest(docs)
    hits = system.retrieve("a", "Who talks about cats?", 10)
    assert sorted(h["external_id"] for h in hits) == ["a-0", "a-1", "a-2"]
    assert os.environ["MNEM_BENCH"] == "0"


@pytest.mark.slow
def test_a_vendor_error_fails_its_item_and_unknown_or_repeated_hits_are_dropped(embedder, tmp_path):
    need("pymnem", "mnem")
    from adapters.defaults import DEFAULT_SCORING_PROFILE, K_VALUES
    from adapters.benchmarks.longmemeval.reader import LongMemEval
    from adapters.systems.mnem_system import MnemSystem
    from coordinator.running.local_executor import run_items
    from tests.factories import run_context
    from workers.item.evaluate import evaluate_item

    data = write_dataset(tmp_path / "lme.json", questions=3, seed=4, scale=0.02)
    items = list(LongMemEval(data).iter_items())

    class Faulty(MnemSystem):
        """mnem, with the second item's repository failing as a vendor would."""

        items_seen = 0

        def reset(self):
            self.items_seen += 1
            super().reset()

        def retrieve(self, label, query, top_k):
            if self.items_seen == 2:
                raise RuntimeError("mnem: repository poisoned")
            return super().retrieve(label, query, top_k)

    context = run_context(top_k=5, k_values=K_VALUES, scoring_profile=DEFAULT_SCORING_PROFILE, dataset_sha256=None)
    outcomes = run_items(items, Faulty(mode="dense", embedder=embedder), context, cache=None)
    states = [o["records"][0]["status"] for o in outcomes]
    assert states.count("failed") == 1 and states.count("ok") == 2
    failed = next(o for o in outcomes if o["records"][0]["status"] == "failed")
    assert "mnem: repository poisoned" in failed["records"][0]["error"]

    class Sloppy(MnemSystem):
        """mnem whose answer repeats its best hit that the runner knows."""

        def retrieve(self, label, query, top_k):
            hits = super().retrieve(label, query, top_k)
            return [next(h for h in hits if not h["external_id"].startswith("mnem:"))] + hits

    system = Sloppy(mode="dense", embedder=embedder)
    outcome = evaluate_item(items[0], _Forgetful(system), top_k=5)
    record = next(r for r in outcome["records"] if r["status"] == "ok")
    rejected = record["diagnostics"]["rejected_hits"]
    assert any("duplicate id" in p for p in rejected) and any("unknown id 'mnem:" in p for p in rejected)
    assert len({c["id"] for c in record["candidates"]}) == len(record["candidates"])


class _Forgetful:
    """Wraps a mnem system: after ingesting, its node map forgets every other node (mnem then names nodes the
    runner never minted)."""

    def __init__(self, system):
        self._system = system
        self.name = system.name

    def reset(self):
        self._system.reset()

    def ingest(self, docs):
        self._system.ingest(docs)
        for node_id in list(self._system._ids)[::2]:
            del self._system._ids[node_id]

    def retrieve(self, label, query, top_k):
        return self._system.retrieve(label, query, top_k)
