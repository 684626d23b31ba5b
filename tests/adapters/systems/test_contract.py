"""The declared contract: the runner asks a system's capabilities, each declared once, never its name."""

from pathlib import Path

import pytest

from adapters.systems import contract
from adapters.systems.adamem import AdaMemSystem
from adapters.systems.http_system import HttpSystem
from adapters.systems.memoria_system import MemoriaSystem
from adapters.systems.mnem_system import MnemSystem
from workers.item.evaluate import evaluate_item


class Bare:
    """A user's system that declares nothing optional."""

    name = "bare"

    def reset(self):
        self.docs = []

    def ingest(self, docs):
        self.docs = list(docs)

    def retrieve(self, label, query, top_k):
        hits = [{"external_id": d["external_id"], "score": 1.0} for d in self.docs if d["label"] == label]
        return hits[:top_k]


@pytest.mark.parametrize("helper", ["config_of", "signature_of", "build_identity_of", "model_files_of",
                                    "snapshots_of", "counters_of", "context_packer_of", "write_stats_of",
                                    "remote_of", "vector_sharing_of"])
def test_a_system_that_declares_nothing_optional_has_no_capability(helper):
    assert getattr(contract, helper)(Bare()) is None
    assert contract.diagnostics_of(Bare()) == {} and not contract.grows_while_asked(Bare())
    assert contract.version_of(Bare()) == ""


def test_a_system_that_declares_nothing_optional_still_runs():
    turn = {"session_id": "s", "turn_id": "t", "text": "hello there", "props": {}}
    item = {"item_id": "i", "benchmark": "locomo", "turns": [turn],
            "questions": [{"question_id": "q", "question": "hello?", "expected_ids": ["t"]}]}
    outcome = evaluate_item(item, Bare(), cache=object())
    assert outcome["records"][0]["status"] == "ok"
    assert outcome["cache"] == {"hit": False, "reason": "no cache", "consulted": False}


def test_a_users_class_has_a_capability_by_having_its_members():
    class Saves(Bare):
        def snapshot(self, directory: Path):
            return []

        def restore(self, directory: Path):
            pass

    assert contract.snapshots_of(Saves()) is not None
    assert contract.signature_of(type("Signed", (Bare,), {"embedding_signature": {"model_id": "m"}})()) == {
        "model_id": "m"}


def test_asking_for_a_capability_runs_none_of_its_members():
    class Costly(Bare):
        @property
        def build_identity(self):
            raise AssertionError("read only when the value is wanted")

    assert contract.declares(Costly(), contract.HasBuildIdentity)


@pytest.mark.parametrize("cls, declared", [
    (MemoriaSystem, {contract.Snapshots, contract.Embeds, contract.HasBuildIdentity, contract.CountsWork,
                     contract.GrowsWhileAsked, contract.Diagnoses, contract.SharesVectors,
                     contract.Describes, contract.AddsOnIngest, contract.EncodesAhead, contract.AsksAhead}),
    (AdaMemSystem, {contract.Embeds, contract.PacksContext, contract.CountsWrites, contract.Describes,
                    contract.AddsOnIngest, contract.FreshMemory}),
    (MnemSystem, {contract.Embeds, contract.Diagnoses, contract.Describes, contract.AddsOnIngest,
                  contract.EncodesAhead}),
    (HttpSystem, {contract.Remote, contract.Diagnoses, contract.Describes}),
])
def test_each_built_in_system_declares_its_capabilities(cls, declared):
    protocols = {base for base in cls.__mro__ if getattr(base, "_is_protocol", False)}
    assert protocols - {contract.Protocol} == declared
