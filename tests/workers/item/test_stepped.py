"""Memory that grows in steps (RealMem): no system ever holds a later session when it answers, a system that
adds on ingest and one that is given everything again rank alike, and Memoria's fast path equals step by step."""

import json
import re

import pytest

from adapters.benchmarks.realmem.reader import RealMem
from adapters.benchmarks import BENCHMARKS
from adapters.systems.contract import close_system
from adapters.systems.memoria_system import MemoriaSystem, _metadata
from memoria.pieces import row_pieces
from tests.helpers import WordEmbedder, realmem_persona
from workers.item.evaluate import evaluate_item, make_docs


class RecordingSystem:
    """A user's class that declares nothing optional: it records what it was given and ranks by shared words."""

    name = "recording"

    def __init__(self):
        self.events = []
        self.held = {}

    def reset(self):
        self.events.append(("reset", []))
        self.held = {}

    def ingest(self, docs):
        self.events.append(("ingest", [d["external_id"] for d in docs]))
        self.held.update({d["external_id"]: set(re.findall(r"[a-z]+", d["text"].lower())) for d in docs})

    def retrieve(self, label, query, top_k):
        self.events.append(("retrieve", sorted(self.held)))
        words = set(re.findall(r"[a-z]+", query.lower()))
        ranked = sorted(self.held, key=lambda eid: (-len(words & self.held[eid]), eid))
        return [{"external_id": eid, "score": float(len(words & self.held[eid]))} for eid in ranked[:top_k]]


class AddingRecordingSystem(RecordingSystem):
    adds_on_ingest = True


class MemoriaStepByStep(MemoriaSystem):
    """Memoria ingesting each step as it comes, nothing encoded ahead."""

    encode_ahead = None


class MemoriaGivenEverything(MemoriaSystem):
    """Memoria made to take the slow path: nothing encoded ahead, and reset and every doc so far at each step."""

    adds_on_ingest = False
    encode_ahead = None


@pytest.fixture(scope="module")
def short_persona(realmem_dir, tmp_path_factory):
    """The first 20 sessions of a development persona."""
    path = realmem_persona(realmem_dir / "Kenta_Tanaka_dialogues_256k.json", 20,
                           tmp_path_factory.mktemp("realmem") / "Kenta_Tanaka_dialogues_256k.json")
    return next(RealMem(path).iter_items())


def _steps_of(item):
    docs, _ = make_docs(item)
    return dict(zip((d["external_id"] for d in docs), (t["step"] for t in item["turns"] if t["text"])))


def _served_docs(item) -> list[dict]:
    """The docs a stepped run ingests: those of the steps before the last one with a question (a step's docs are
    added after its questions, so later ones would serve nothing)."""
    last = max(q["step"] for q in item["questions"])
    step_of = _steps_of(item)
    return [d for d in make_docs(item)[0] if step_of[d["external_id"]] < last]


def test_a_stepped_run_ingests_nothing_after_its_last_question(short_persona):
    """The persona's last sessions come after its last question: they are neither ingested nor encoded."""
    system = AddingRecordingSystem()
    outcome = evaluate_item(short_persona, system, top_k=10)
    served = [d["external_id"] for d in _served_docs(short_persona)]
    assert len(served) < len(_steps_of(short_persona)), "the persona has sessions after its last question"
    assert [eid for kind, ids in system.events if kind == "ingest" for eid in ids] == served
    assert outcome["stats"]["docs_ingested"] == len(served)


def _rankings(outcome):
    return [[(c["id"], c["score"]) for c in record["candidates"]] for record in outcome["records"]]


@pytest.mark.parametrize("system_class", [RecordingSystem, AddingRecordingSystem])
def test_no_system_ever_holds_a_later_session_when_it_answers(short_persona, system_class):
    system = system_class()
    outcome = evaluate_item(short_persona, system, top_k=10)
    step_of = _steps_of(short_persona)
    asked = [q["step"] for q in short_persona["questions"]]
    retrieves = [held for kind, held in system.events if kind == "retrieve"]
    # a question asked while memory is empty is not put to the system; every other one is, in order
    assert len(retrieves) == sum(1 for s in asked if s > 0)
    for step, held in zip((s for s in asked if s > 0), retrieves):
        assert held, "memory holds every earlier session when a question is asked"
        assert max(step_of[eid] for eid in held) == step - 1
    assert len(outcome["records"]) == len(short_persona["questions"])
    assert outcome["stats"]["added_on_ingest"] is (system_class is AddingRecordingSystem)
    ingests = [ids for kind, ids in system.events if kind == "ingest"]
    if system_class is AddingRecordingSystem:  # each step's docs once, in order, up to the last question
        assert [eid for ids in ingests for eid in ids] == [d["external_id"] for d in _served_docs(short_persona)]
    else:  # reset, then every doc so far
        assert all(ids == list(step_of)[:len(ids)] for ids in ingests)


def test_adding_each_step_and_giving_everything_again_rank_alike(short_persona):
    adding = evaluate_item(short_persona, AddingRecordingSystem(), top_k=10)
    again = evaluate_item(short_persona, RecordingSystem(), top_k=10)
    assert _rankings(adding) == _rankings(again)
    assert [r["metrics_by_profile"] for r in adding["records"]] == [r["metrics_by_profile"] for r in again["records"]]


def _pieces_of(item, max_pieces: int) -> set[str]:
    """The distinct sentence pieces of the docs a stepped run ingests, as Memoria splits a stored row."""
    return {piece for d in _served_docs(item) for piece in row_pieces(d["text"], _metadata(d), max_pieces)}


def _fast_and_slow_agree(item, mode, embedder, slow_class, weights=None):
    given = {"weights": weights} if weights else {}
    fast = MemoriaSystem(mode=mode, embedder=embedder, parallel_extract=False, **given)
    slow = slow_class(mode=mode, embedder=embedder, parallel_extract=False, **given)
    fast_outcome = evaluate_item(item, fast, top_k=20)
    slow_outcome = evaluate_item(item, slow, top_k=20)
    # encoded ahead: each turn once, in one batch, and not again at its step
    assert fast_outcome["stats"]["texts_encoded_by_kind"]["turns"] == len({d["text"] for d in _served_docs(item)})
    slow_turns = slow_outcome["stats"]["texts_encoded_by_kind"]["turns"]
    assert slow_turns >= fast_outcome["stats"]["texts_encoded_by_kind"]["turns"]
    # ... and so is each sentence piece (the ranking reads them): none is encoded again when its turn is ranked
    assert fast.memory.pieces_wanted
    assert fast_outcome["stats"]["texts_encoded_by_kind"]["pieces"] == len(_pieces_of(item, fast.memory.max_pieces))
    assert [r for r in fast_outcome["records"] if r["metrics"]], "some question is scored"
    assert _rankings(fast_outcome) == _rankings(slow_outcome)


REALMEM_WEIGHTS = json.loads(BENCHMARKS["realmem"].memoria_weights_file().read_text())["weights"]


@pytest.mark.parametrize("weights", [None, REALMEM_WEIGHTS], ids=["engine weights", "realmem weights"])
def test_memoria_adding_each_step_ranks_exactly_as_memoria_rebuilt_at_each_step(short_persona, weights):
    """RealMem's weights read whole sessions (their words, mean vector, place): views brought up to date as memory
    grows must read them as a memory built from scratch does."""
    _fast_and_slow_agree(short_persona, "full", WordEmbedder(), MemoriaGivenEverything, weights)


def test_the_same_holds_with_the_real_model(embedder, realmem_dir, tmp_path):
    """Vectors encoded ahead in one batch equal those encoded a step at a time (canonical batches)."""
    path = realmem_persona(realmem_dir / "Kim_Ji_young_dialogues_256k.json", 6, tmp_path / "Kim.json")
    _fast_and_slow_agree(next(RealMem(path).iter_items()), "full", embedder, MemoriaStepByStep, REALMEM_WEIGHTS)


@pytest.mark.parametrize("mode, given, ahead", [("bm25", {}, False), ("full", {"without": ("sentence",)}, False),
                                               ("full", {"max_pieces": 1}, False), ("full", {"max_pieces": 2}, True)],
                         ids=["bm25 mode", "full without sentence", "full without pieces", "full with two pieces"])
def test_pieces_are_encoded_ahead_only_where_a_ranking_reads_them(short_persona, mode, given, ahead):
    """A mode that does not rank, or a ranking without the sentence signal or without pieces, reads no piece: none
    is encoded, ahead or later; `bm25` reads no vector at all, so encodes no turn either."""
    system = MemoriaSystem(mode=mode, embedder=WordEmbedder(), parallel_extract=False, **given)
    encoded = evaluate_item(short_persona, system, top_k=10)["stats"]["texts_encoded_by_kind"]
    assert encoded["turns"] == (0 if mode == "bm25" else len({d["text"] for d in _served_docs(short_persona)}))
    assert encoded["pieces"] == (len(_pieces_of(short_persona, 2)) if ahead else 0)


class FailingAtStep(MemoriaSystem):
    """Memoria whose ingest fails at the third step."""

    def ingest(self, docs):
        self.steps = getattr(self, "steps", 0) + 1
        if self.steps == 3:
            raise RuntimeError("the disk is full")
        super().ingest(docs)


def test_what_was_encoded_ahead_is_forgotten_when_an_item_fails(short_persona):
    system = FailingAtStep(mode="full", embedder=WordEmbedder(), parallel_extract=False)
    with pytest.raises(RuntimeError, match="disk is full"):
        evaluate_item(short_persona, system, top_k=10)
    assert system.memory.ahead.vectors == {}


def test_a_persona_scores_under_realmem_and_the_farms_formulas(short_persona):
    outcome = evaluate_item(short_persona, AddingRecordingSystem(), top_k=10, profile="realmem")
    for record, question in zip(outcome["records"], short_persona["questions"]):
        if question.get("excluded"):
            assert record["metrics"] is None and record["excluded"] == question["excluded"]
            continue
        assert set(record["metrics_by_profile"]) == {"realmem", "expected-text"}
        assert record["metrics"] == record["metrics_by_profile"]["realmem"]
        # recall is the same under both; nDCG differs only in its discount
        for k in (1, 5, 10):
            for name in ("recall_any", "recall_all"):
                assert record["metrics"]["session"][f"{name}@{k}"] == \
                    record["metrics_by_profile"]["expected-text"]["session"][f"{name}@{k}"]


@pytest.mark.parametrize("system_name", ["mnem", "mempalace", "qdrant", "lancedb", "txtai", "engrava"])
def test_outside_systems_encode_ahead_and_rank_as_they_would_step_by_step(short_persona, system_name, tmp_path):
    """Outside systems that embed serve a stepped item's vectors made ahead; their rankings equal a run without
    that."""
    import importlib.util

    from tests.helpers import skip_outside_ci

    from adapters.systems import SYSTEMS

    info = SYSTEMS[system_name]
    if importlib.util.find_spec(info.vendor_module) is None:
        skip_outside_ci(f"{info.vendor_module} is not installed ({info.install})")
    stepwise = type("StepByStep", (info.factory,), {"encode_ahead": None})
    outcomes, calls = [], []
    for factory in (info.factory, stepwise):
        embedder = CountingWordEmbedder()
        system = factory(embedder=embedder)
        try:
            outcomes.append(evaluate_item(short_persona, system, top_k=10))
        finally:
            close_system(system)
        calls.append(embedder.calls)
    assert [r for r in outcomes[0]["records"] if r["metrics"]], "some question is scored"
    assert _rankings(outcomes[0]) == _rankings(outcomes[1])
    assert calls[0] < calls[1], "encoded ahead: one batch for the docs, not one a step"


class CountingWordEmbedder(WordEmbedder):
    def __init__(self):
        self.calls = 0

    def encode(self, texts, batch_size=32, **options):
        self.calls += 1
        return super().encode(texts, batch_size, **options)


class AheadRecordingSystem(AddingRecordingSystem):
    """A user's class that encodes ahead: it notes when it was asked to."""

    def encode_ahead(self, docs):
        self.events.append(("encode_ahead", [d["external_id"] for d in docs]))


def test_an_item_that_encodes_ahead_says_so_before_it_does_and_then_counts_its_questions(short_persona):
    system, said = AheadRecordingSystem(), []
    evaluate_item(short_persona, system, top_k=10,
                  on_question=lambda done, total: said.append((done, total, len(system.events))))
    total = len(short_persona["questions"])
    # said first (minutes on a long persona), before anything is encoded; then one call per question asked
    assert said[0] == (0, total, 1) and system.events[1][0] == "encode_ahead", system.events[:2]
    assert [done for done, _, _ in said] == list(range(total + 1))
    without, plain = [], AddingRecordingSystem()
    evaluate_item(short_persona, plain, top_k=10, on_question=lambda done, total: without.append(done))
    assert without == list(range(1, total + 1)), "a system that encodes nothing ahead has nothing to announce"


class AskedAheadRecordingSystem(AddingRecordingSystem):
    """A user's class that takes the questions of a state ahead (`contract.AsksAhead`) and records when."""

    def __init__(self):
        super().__init__()
        self.depths = []

    def questions_ahead(self, queries, top_k):
        self.events.append(("ahead", list(queries)))
        self.depths.append(top_k)

    def retrieve(self, label, query, top_k):
        self.depths.append(top_k)
        return super().retrieve(label, query, top_k)


def test_the_questions_of_each_state_reach_a_system_that_asks_ahead_together_and_never_before_their_state(
        short_persona):
    """A stepped item hands over a step's questions once its memory holds the earlier steps, never a later step's
    (that would let a system read what it will be asked before it has heard the history); a state holding
    nothing is not asked, so its questions are not handed over either."""
    system = AskedAheadRecordingSystem()
    outcome = evaluate_item(short_persona, system, top_k=10)
    by_step: dict[int, list[str]] = {}
    for question in short_persona["questions"]:
        if question["step"] > 0:
            by_step.setdefault(question["step"], []).append(question["question"])
    handed = [(n, queries) for n, (kind, queries) in enumerate(system.events) if kind == "ahead"]
    assert [queries for _, queries in handed] == list(by_step.values())
    for (n, queries), step in zip(handed, by_step):
        following = system.events[n + 1:n + 1 + len(queries)]
        assert [kind for kind, _ in following] == ["retrieve"] * len(queries), "handed over right before they are asked"
        held = following[0][1]
        assert max(_steps_of(short_persona)[eid] for eid in held) == step - 1
    assert len(outcome["records"]) == len(short_persona["questions"])


def test_a_whole_history_item_hands_over_all_its_questions_once_after_its_memory_is_built(locomo_path):
    from adapters.benchmarks.locomo.reader import LoCoMo

    locomo_item = next(LoCoMo(locomo_path).iter_items())
    system = AskedAheadRecordingSystem()
    evaluate_item(locomo_item, system, top_k=10)
    kinds = [kind for kind, _ in system.events]
    assert kinds.count("ahead") == 1 and kinds.index("ahead") > kinds.index("ingest")
    assert kinds[kinds.index("ahead") + 1:] == ["retrieve"] * len(locomo_item["questions"])
    assert system.events[kinds.index("ahead")][1] == [q["question"] for q in locomo_item["questions"]]
    assert len(set(system.depths)) == 1, "handed over for the depth each question is then asked for"
