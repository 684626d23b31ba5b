"""A benchmark's own `full` weights (RealMem's): taken only by Memoria `full` with MiniLM and no --weights, said on
the command line, and marked tuned on the data they were tuned on."""

import json

import pytest

from adapters.benchmarks import BENCHMARKS
from coordinator.results.optimize import load_weights
from coordinator.running.spec import RunSpec
from memoria import defaults
from tests.helpers import realmem_persona

REALMEM_FILE = BENCHMARKS["realmem"].memoria_weights_file()


def test_realmems_weights_are_the_engines_with_three_session_signals_added():
    data = json.loads(REALMEM_FILE.read_text())
    weights = load_weights(REALMEM_FILE)  # every signal one the engine knows
    added = {name for name in weights if weights[name] != defaults.DEFAULT_WEIGHTS.get(name, 0.0)}
    assert added == {"session_bm25", "session_centroid", "session_recency"}
    assert all(defaults.DEFAULT_WEIGHTS[name] == 0.0 for name in added)  # the engine's own leave them out
    assert data["tuned_on"]["benchmark"] == "realmem" and len(data["tuned_on"]["file_checksums"]) == 5


def test_memoria_full_on_realmem_takes_them_and_says_so(realmem_dir):
    spec = RunSpec("realmem", dataset=str(realmem_dir), retrieval_mode="full")
    assert spec.weights_path() == str(REALMEM_FILE)
    assert spec.system_settings()["weights"] == load_weights(REALMEM_FILE)
    warnings = spec.check(farm=False)
    assert any("RealMem's own weights" in w and str(REALMEM_FILE) in w for w in warnings), warnings
    tuning = spec.context(system_config={}, embedding_signature=None).tuning
    assert tuning["tuned_on_this_data"] and tuning["label"]  # the five development personas: not held out


def test_development_personas_alone_two_in_a_folder_or_cut_are_tuned_on_and_another_is_not(realmem_dir, tmp_path):
    one = RunSpec("realmem", dataset=str(realmem_dir / "Kenta_Tanaka_dialogues_256k.json"), retrieval_mode="full")
    context = one.context(system_config={}, embedding_signature=None)
    assert context.tuning["tuned_on_this_data"] and context.dataset_file_checksums is None  # one file: none
    folder = tmp_path / "cut"
    folder.mkdir()
    realmem_persona(realmem_dir / "Kenta_Tanaka_dialogues_256k.json", 8, folder / "Kenta_Tanaka_dialogues_256k.json")
    two = tmp_path / "two"
    two.mkdir()
    for name in ("Kenta_Tanaka", "Liam_O_Connor"):  # a folder no checksum of the weights file names as a whole
        (two / f"{name}_dialogues_256k.json").write_bytes((realmem_dir / f"{name}_dialogues_256k.json").read_bytes())
    assert RunSpec("realmem", dataset=str(two), retrieval_mode="full").context(
        system_config={}, embedding_signature=None).tuning["tuned_on_this_data"]
    cut = RunSpec("realmem", dataset=str(folder), retrieval_mode="full")
    assert cut.weights_path() == str(REALMEM_FILE)
    tuning = cut.context(system_config={}, embedding_signature=None).tuning
    assert tuning["tuned_on_this_data"] and tuning["items_tuned_on"] == ["Kenta_Tanaka"]  # no checksum, its name
    other = tmp_path / "other"  # a persona the weights never saw: the same shape, another person
    other.mkdir()
    data = json.loads((folder / "Kenta_Tanaka_dialogues_256k.json").read_text())
    data["_metadata"]["person_name"] = "Someone_Else"
    (other / "Someone_Else_dialogues_256k.json").write_text(json.dumps(data))
    tuning = RunSpec("realmem", dataset=str(other), retrieval_mode="full").context(
        system_config={}, embedding_signature=None).tuning
    assert not tuning["tuned_on_this_data"] and "items_tuned_on" not in tuning
    # only the items a run takes: --limit 2 takes the folder's first two personas
    assert RunSpec("realmem", dataset=str(realmem_dir), limit=2)._item_ids() == ["Adeleke_Okonjo", "Ethan_Hunt"]


@pytest.mark.parametrize("spec", [
    RunSpec("locomo", dataset="d.json", retrieval_mode="full"),
    RunSpec("realmem", dataset="d.json", retrieval_mode="fusion"),
    RunSpec("realmem", dataset="d.json", retrieval_mode="full", embedder="mpnet"),
    RunSpec("realmem", dataset="d.json", system="mnem"),
], ids=["locomo", "fusion", "mpnet", "another system"])
def test_nothing_else_takes_them(spec):
    assert spec.weights_path() is None and spec._tuning("0" * 64, []) is None
    assert "weights" not in spec.system_settings() or spec.system_settings()["weights"] is None


def test_weights_given_are_taken_instead(tmp_path):
    given = tmp_path / "mine.json"
    given.write_text(json.dumps({"weights": {"semantic": 1.0}}))
    spec = RunSpec("realmem", dataset="d.json", retrieval_mode="full", weights_file=str(given))
    assert spec.weights_path() == str(given) and spec.system_settings()["weights"] == {"semantic": 1.0}


def test_each_session_signal_can_be_switched_off_under_them(realmem_dir):
    from adapters.systems.memoria_system import MemoriaSystem

    weights = load_weights(REALMEM_FILE)
    for part in ("session_bm25", "session_centroid", "session_recency"):
        off = MemoriaSystem(mode="full", weights=weights, without=(part,))
        assert weights[part] > 0 and off.memory.weights[part] == 0.0
        assert {k: v for k, v in off.memory.weights.items() if k != part} == \
            {k: v for k, v in {**defaults.DEFAULT_WEIGHTS, **weights}.items() if k != part}
        assert off.config["ranking"]["switched_off"] == [part]
    spec = RunSpec("realmem", dataset=str(realmem_dir), retrieval_mode="full", without=("session_recency",))
    spec.check(farm=False)  # the command line takes it too
    assert spec.system_settings()["without"] == ("session_recency",)


def test_a_folders_file_checksums_cross_the_farms_run_context_and_a_bad_one_is_refused(realmem_dir):
    from workers.item.run_context import RunContext
    from workers.ledger_values import LedgerValueError

    context = RunSpec("realmem", dataset=str(realmem_dir), retrieval_mode="full").context(
        system_config={}, embedding_signature=None)
    assert len(context.dataset_file_checksums) == 5
    limited = RunSpec("realmem", dataset=str(realmem_dir), retrieval_mode="full", limit=2).context(
        system_config={}, embedding_signature=None)
    assert limited.dataset_file_checksums == context.dataset_file_checksums[:2]  # only the files run
    assert RunContext.from_dict(context.to_dict()).to_dict()["dataset_file_checksums"] == context.dataset_file_checksums
    for bad in ("ab" * 32, ["ab" * 32, 7]):
        with pytest.raises(LedgerValueError, match="dataset_file_checksums"):
            RunContext.from_dict({**context.to_dict(), "dataset_file_checksums": bad})
