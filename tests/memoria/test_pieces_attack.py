"""Sentence vectors under attack: damaged snapshots, builds after reset, restore and insert, the exact `sentence`
signal, the exact cut of a long turn, a cache entry with files its manifest does not list, and the stemmer shared
by threads.

The embedder gives each word its own dimension (a unit bag of words), so every cosine here is known exactly."""

import json
import re
import shutil
import sys
import threading

import faiss
import numpy as np
import pytest

from adapters.systems.memoria_system import MemoriaSystem
from memoria import BatchLoader, MemoryInterface, bm25
from memoria.errors import SnapshotError
from memoria.pieces import MIN_PIECE_WORDS, split_pieces
from memoria.ranking import SIGNALS
from workers.item.cache import ItemCache, expected_entry

_VOCABULARY: dict[str, int] = {}


class VocabularyEmbedder:
    """Unit bag-of-words vectors, one dimension per word (no two words share one); records what it encodes."""

    dimension = 512
    signature = {"model_id": "tests/vocabulary", "dimension": 512}

    def __init__(self):
        self.texts = []

    def encode(self, texts, batch_size=32):
        self.texts += list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[row, _VOCABULARY.setdefault(word, len(_VOCABULARY))] += 1.0
            norm = np.linalg.norm(out[row])
            out[row] /= norm if norm else 1.0
        return out


#: (text, speaker): turns of one, two and three sentences, the best sentence for QUESTION in varied places.
TURNS = [("Ann: alpha beta gamma. delta epsilon zeta.", "Ann"),
         ("Bob: kappa lambda mu. nu xi omicron.", "Bob"),
         ("Ann: alpha delta one two three four five six", "Ann"),
         ("Bob: rho sigma tau. alpha delta upsilon phi. chi psi omega.", "Bob"),
         ("Ann: alpha pi rho sigma. theta iota kappa.", "Ann")]
QUESTION = "alpha delta"
MORE = [("Bob: delta alpha again here. quiet words only.", "Bob"), ("Ann: one sentence only here", "Ann")]


def _memory(turns=TURNS, embedder=None, **settings):
    memory = MemoryInterface(embedder=embedder or VocabularyEmbedder(),
                             **{"window_size": 0, "weights": {"sentence": 1.0}, **settings})
    _insert(memory, turns)
    return memory


def _insert(memory, turns):
    BatchLoader(memory).insert_batch([t for t, _ in turns], [{"speaker": s, "session_index": 1} for _, s in turns],
                                     parallel_extract=False)


def _cosine(a: str, b: str) -> float:
    vectors = VocabularyEmbedder().encode([a, b])
    return float(vectors[0] @ vectors[1])


def _best_by_hand(memory) -> dict[int, float]:
    """Each stored turn of two pieces or more: its best piece's cosine with QUESTION, from split_pieces alone."""
    best = {}
    for memory_id, text, metadata in memory.store.all_rows():
        pieces = split_pieces(text, metadata["speaker"], memory.max_pieces)
        if pieces:
            best[memory_id] = max(_cosine(p, QUESTION) for p in pieces)
    return best


def _rank(memory):
    """Rank QUESTION in `full`: the head of its first ranking has its pieces built."""
    return memory.rank(memory.ranking_context(QUESTION), 10)


def _assert_best_pieces(memory):
    got = memory.pieces.best(memory.embedder.encode([QUESTION])[0])
    expected = _best_by_hand(memory)
    assert got.keys() == expected.keys()
    for memory_id, value in expected.items():
        assert got[memory_id] == pytest.approx(value, abs=1e-6), f"turn {memory_id}"


# -- split_pieces -------------------------------------------------------------

def test_a_piece_of_exactly_min_piece_words_words_is_kept_and_one_fewer_is_not():
    assert MIN_PIECE_WORDS == 3
    assert split_pieces("We went hiking. Then it rained.") == ["We went hiking.", "Then it rained."]
    assert split_pieces("We went hiking. Then rain. It was cold.") == ["We went hiking.", "It was cold."]


@pytest.mark.parametrize("count, max_pieces, sizes", [(8, 4, [2, 2, 2, 2]), (9, 8, [2, 2, 2, 2, 1]),
                                                      (12, 5, [3, 3, 3, 3]), (5, 5, [1] * 5), (6, 2, [3, 3]),
                                                      (3, 2, [2, 1])])
def test_a_long_turn_is_cut_into_runs_of_the_ceiling_size_in_order(count, max_pieces, sizes):
    sentences = [f"Sentence number {n} here." for n in range(count)]
    pieces = split_pieces(" ".join(sentences), "", max_pieces)
    assert [len(re.findall(r"\.", p)) for p in pieces] == sizes
    assert " ".join(pieces) == " ".join(sentences) and len(pieces) <= max_pieces


# -- the signal -------------------------------------------------------------

def test_best_pieces_is_each_turn_s_own_best_sentence_wherever_it_stands_in_the_turn():
    memory = _memory()
    memory.build_pieces()
    assert len(set(memory.pieces.owners)) == 4 and memory.pieces.owners == sorted(memory.pieces.owners)
    _assert_best_pieces(memory)


def test_the_sentence_signal_is_the_better_of_a_turn_s_whole_cosine_and_its_best_sentence():
    turns = [TURNS[0], TURNS[1], TURNS[2]]  # two sentences each; none relevant; one sentence, relevant
    memory = _memory(turns)
    context = memory.ranking_context(QUESTION, limit=3)
    first, irrelevant, single = memory.view().ids
    context.best_pieces = context.pieces_for([first, irrelevant, single])  # as `rank` reads its head
    assert set(context.best_pieces) == {first, irrelevant}
    raw = {first: max(_cosine(TURNS[0][0], QUESTION), _cosine("alpha beta gamma.", QUESTION)),
           irrelevant: 0.0, single: _cosine(TURNS[2][0], QUESTION)}
    # the whole of the first turn (both words) beats each of its sentences (one word each)
    assert _cosine(TURNS[0][0], QUESTION) > _cosine("alpha beta gamma.", QUESTION)
    # and the single sentence turn, with no pieces, keeps its whole cosine
    assert raw[single] > 0
    signal = SIGNALS["sentence"](context, [first, irrelevant, single])
    assert signal == pytest.approx({first: 1.0, irrelevant: 0.0, single: raw[single] / raw[first]}, abs=1e-6)


def test_with_no_turn_of_two_sentences_the_sentence_signal_is_the_whole_turn_s_cosine():
    turns = [("Ann: alpha one two three four", "Ann"), ("Bob: alpha delta one two three", "Bob"),
             ("Ann: kappa lambda mu nu", "Ann")]
    memory = _memory(turns)
    context = memory.ranking_context(QUESTION, limit=3)
    ids = memory.view().ids
    context.best_pieces = context.pieces_for(ids)
    assert context.best_pieces == {}
    assert SIGNALS["sentence"](context, ids) == pytest.approx(SIGNALS["semantic"](context, ids))
    assert SIGNALS["sentence"](context, ids)[ids[1]] == 1.0


# -- builds after insert, reset and restore -----------------------------------

def test_after_a_restore_an_insert_encodes_only_the_new_sentences_and_matches_a_fresh_build(tmp_path):
    memory = _memory()
    memory.build_pieces()
    memory.snapshot(tmp_path / "state")
    restored = MemoryInterface(embedder=VocabularyEmbedder(), window_size=0, weights={"sentence": 1.0})
    restored.restore(tmp_path / "state")
    assert restored.pieces.owners == memory.pieces.owners and restored.pieces.texts == memory.pieces.texts
    _insert(restored, MORE)
    restored.embedder.texts.clear()
    assert restored.build_pieces() == 2
    assert restored.embedder.texts == ["delta alpha again here.", "quiet words only."]
    fresh = _memory(TURNS + MORE)
    fresh.build_pieces()
    assert restored.pieces.owners == fresh.pieces.owners and restored.pieces.texts == fresh.pieces.texts
    _assert_best_pieces(restored)


def test_after_a_reset_the_pieces_are_those_of_the_new_rows_only():
    memory = _memory()
    memory.build_pieces()
    memory.reset()
    assert memory.pieces.owners == [] and memory.pieces.max_pieces is None
    other = [(text.replace("alpha", "omega"), speaker) for text, speaker in TURNS]  # as many rows, other texts
    _insert(memory, other)
    memory.build_pieces()
    fresh = _memory(other)
    fresh.build_pieces()
    assert memory.pieces.owners == fresh.pieces.owners and memory.pieces.texts == fresh.pieces.texts
    _assert_best_pieces(memory)


def test_restoring_a_snapshot_without_pieces_drops_the_pieces_of_rows_that_are_gone(tmp_path):
    other = [(text.replace("alpha", "omega"), speaker) for text, speaker in TURNS]  # as many rows, other texts
    plain = _memory(other, weights={"semantic": 1.0})
    plain.snapshot(tmp_path / "plain")
    memory = _memory()
    memory.build_pieces()
    memory.restore(tmp_path / "plain")
    assert memory.pieces.owners == [] and memory.pieces.max_pieces is None
    _rank(memory)  # builds them for the restored rows
    assert memory.pieces.texts == [p for t, s in other for p in split_pieces(t, s)]
    _assert_best_pieces(memory)


def test_pieces_held_before_an_insert_stay_valid_travel_in_a_snapshot_and_the_new_turns_get_theirs(tmp_path):
    memory = _memory()
    memory.build_pieces()
    held = list(memory.pieces.owners)
    _insert(memory, MORE)
    files = memory.snapshot(tmp_path / "state")
    assert json.loads(files["pieces"].read_text())["owners"] == held  # the turns split before the insert only
    restored = MemoryInterface(embedder=VocabularyEmbedder(), window_size=0, weights={"sentence": 1.0})
    restored.restore(tmp_path / "state")
    assert restored.pieces.owners == held
    restored.embedder.texts.clear()
    _rank(restored)  # every turn is a candidate: only the inserted turn's pieces are encoded
    assert restored.embedder.texts == [QUESTION, "delta alpha again here.", "quiet words only."]
    _assert_best_pieces(restored)


def test_a_snapshot_over_an_earlier_one_leaves_none_of_its_stale_pieces_or_windows(tmp_path):
    memory = _memory(window_size=3, weights={"sentence": 1.0, "window": 1.0})
    memory.build_pieces()
    memory.build_windows()
    assert {"pieces", "windows"} <= set(memory.snapshot(tmp_path / "state"))
    _insert(memory, MORE)  # windows now stale: the next snapshot into the same folder leaves them out
    files = memory.snapshot(tmp_path / "state")
    assert not {"windows", "window_vectors"} & set(files) and {"pieces", "piece_vectors"} <= set(files)
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == sorted(p.name for p in files.values())
    memory.max_pieces = 2  # pieces split under another setting are stale too: none is written
    files = memory.snapshot(tmp_path / "state")
    assert not {"pieces", "piece_vectors"} & set(files)
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == sorted(p.name for p in files.values())
    restored = MemoryInterface(embedder=VocabularyEmbedder(), window_size=3, weights={"sentence": 1.0})
    restored.restore(tmp_path / "state")
    assert len(restored) == len(TURNS) + len(MORE) and restored.pieces.owners == []
    _rank(restored)
    _assert_best_pieces(restored)


def test_pieces_snapshotted_under_another_max_pieces_are_built_again(tmp_path):
    two = _memory(max_pieces=2)
    two.build_pieces()
    assert "rho sigma tau. alpha delta upsilon phi." in two.pieces.texts  # three sentences in two runs
    two.snapshot(tmp_path / "state")
    eight = MemoryInterface(embedder=VocabularyEmbedder(), window_size=0, weights={"sentence": 1.0})
    eight.restore(tmp_path / "state")
    assert eight.pieces.max_pieces == 2
    _rank(eight)
    assert "alpha delta upsilon phi." in eight.pieces.texts and eight.pieces.max_pieces == 8
    _assert_best_pieces(eight)


# -- damaged snapshots ----------------------------------------------------------

def _vectors(path):
    index = faiss.read_index(str(path))
    return index.reconstruct_n(0, index.ntotal)


def _rewrite(path, vectors, ids=None, kind=faiss.IndexIDMap2):
    index = kind(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32),
                       np.arange(len(vectors)) if ids is None else np.asarray(ids))
    faiss.write_index(index, str(path))


def _json_damage(change):
    def damage(folder):
        path = folder / "pieces.json"
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    return damage


def _owner_moved(saved):
    """The last piece credited to the turn before its own: every owner still a stored row, still in order."""
    owners = list(saved["owners"])
    owners[-1] = owners[-1] - 1
    return {**saved, "owners": owners}


def _nan(folder):
    vectors = _vectors(folder / "pieces.faiss")
    vectors[1, :] = np.nan
    _rewrite(folder / "pieces.faiss", vectors)


DAMAGES = {
    "built as a list": _json_damage(lambda s: {**s, "built": [s["built"]["rows"]]}),
    "built as null": _json_damage(lambda s: {**s, "built": None}),
    "rows as text": _json_damage(lambda s: {**s, "built": {**s["built"], "rows": str(s["built"]["rows"])}}),
    "max_pieces as true": _json_damage(lambda s: {**s, "built": {**s["built"], "max_pieces": True}}),
    "owners as a string": _json_damage(lambda s: {**s, "owners": "".join(map(str, s["owners"]))}),
    "owners as floats": _json_damage(lambda s: {**s, "owners": [float(o) for o in s["owners"]]}),
    "a negative owner": _json_damage(lambda s: {**s, "owners": [-1] + s["owners"][1:]}),
    "a piece moved to another turn": _json_damage(_owner_moved),
    "texts swapped": _json_damage(lambda s: {**s, "texts": [s["texts"][1], s["texts"][0]] + s["texts"][2:]}),
    "a text as a number": _json_damage(lambda s: {**s, "texts": [7] + s["texts"][1:]}),
    "the top as a list": _json_damage(lambda s: [s]),
    "vectors of another dimension": lambda f: _rewrite(f / "pieces.faiss", _vectors(f / "pieces.faiss")[:, :8]),
    "vector ids shifted": lambda f: _rewrite(f / "pieces.faiss", _vectors(f / "pieces.faiss"),
                                             ids=np.arange(len(_vectors(f / "pieces.faiss"))) + 1),
    "ids that cannot be read back": lambda f: _rewrite(f / "pieces.faiss", _vectors(f / "pieces.faiss"),
                                                       kind=faiss.IndexIDMap),
    "a vector of NaN": _nan,
    "one vector fewer": lambda f: _rewrite(f / "pieces.faiss", _vectors(f / "pieces.faiss")[:-1]),
}


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pieces") / "state"
    memory = _memory()
    memory.build_pieces()
    memory.snapshot(folder)
    return folder


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_pieces_are_refused_with_a_snapshot_error_naming_the_file(snapshot_dir, tmp_path, damage):
    folder = tmp_path / "state"
    shutil.copytree(snapshot_dir, folder)
    DAMAGES[damage](folder)
    memory = MemoryInterface(embedder=VocabularyEmbedder(), window_size=0, weights={"sentence": 1.0})
    with pytest.raises(SnapshotError, match=r"pieces\.(json|faiss)|pieces disagree"):
        memory.restore(folder)


def test_the_undamaged_snapshot_restores_and_ranks_as_it_was(snapshot_dir):
    memory = MemoryInterface(embedder=VocabularyEmbedder(), window_size=0, weights={"sentence": 1.0})
    memory.restore(snapshot_dir)
    assert memory.build_pieces() == 0 and memory.pieces.unsaved == 0
    _assert_best_pieces(memory)


def _windows_json_damage(built):
    def damage(folder):
        path = folder / "windows.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "built": built}))
    return damage


WINDOW_DAMAGES = {
    "built as null": _windows_json_damage(None),
    "built as a list": _windows_json_damage([5]),
    "built as text": _windows_json_damage("built"),
    "vector ids shifted": lambda f: _rewrite(f / "windows.faiss", _vectors(f / "windows.faiss"),
                                             ids=np.arange(len(_vectors(f / "windows.faiss"))) + 1),
    "a vector of NaN": lambda f: _rewrite(f / "windows.faiss", _vectors(f / "windows.faiss") * np.nan),
}


@pytest.mark.parametrize("damage", sorted(WINDOW_DAMAGES))
def test_a_damaged_windows_file_is_a_snapshot_error_naming_it(tmp_path, damage):
    """Before, a shifted id restored and then failed the window source of every recall (IndexError)."""
    memory = _memory(window_size=3, weights={"window": 1.0})
    memory.build_windows()
    memory.snapshot(tmp_path / "state")
    WINDOW_DAMAGES[damage](tmp_path / "state")
    with pytest.raises(SnapshotError, match=r"windows\.(json|faiss)"):
        MemoryInterface(embedder=VocabularyEmbedder(), window_size=3).restore(tmp_path / "state")


# -- the item cache -------------------------------------------------------------

def test_a_cache_entry_holding_files_its_manifest_does_not_list_is_a_miss(tmp_path):
    """An entry stored without sentence vectors, given pieces files by someone without the key: restoring it
    would load them unhashed (a restore reads the optional parts wherever their files are)."""
    docs = [{"external_id": f"x-{i}", "label": "x", "text": t, "props": {"speaker": s}} for i, (t, s) in
            enumerate(TURNS)]
    cache = ItemCache(tmp_path / "cache", key_file=tmp_path / "key" / "cache.key")
    expected = expected_entry("item-hash", VocabularyEmbedder.signature, {"engine_code": "x"})
    plain = MemoriaSystem(mode="full", embedder=VocabularyEmbedder(), parallel_extract=False, without=("sentence",))
    plain.ingest(docs)
    assert cache.store("item", plain, expected, None) is None
    assert cache.restore("item", MemoriaSystem(mode="full", embedder=VocabularyEmbedder(), parallel_extract=False),
                         expected) is None
    forged = MemoriaSystem(mode="full", embedder=VocabularyEmbedder(), parallel_extract=False)
    forged.ingest(docs)
    forged.retrieve("x", QUESTION, 5)  # its candidates get sentence vectors
    forged.snapshot(tmp_path / "forged")
    for name in ("pieces.json", "pieces.faiss"):
        shutil.copy(tmp_path / "forged" / name, cache.folder("item", "memoria") / name)
    reader = MemoriaSystem(mode="full", embedder=VocabularyEmbedder(), parallel_extract=False)
    reason = cache.restore("item", reader, expected)
    assert reason == "entry holds pieces.faiss, pieces.json, not listed in its manifest"
    assert reader.memory.pieces.owners == [] and len(reader.memory) == 0


# -- the stemmer ----------------------------------------------------------------

def test_threads_stemming_at_once_each_get_the_stems_one_thread_gets():
    """A Snowball stemmer keeps its word in itself while it works: one shared by threads mixes their words."""
    words = sorted({w for text, _ in TURNS for w in re.findall(r"[a-z]+", text.lower())}
                   | {"camping", "camped", "adoptions", "generously", "relational", "happiness", "running",
                      "abilities", "conditional", "hopeful", "agreed", "feed", "national", "skies"})
    expected = {w: bm25.stem.__wrapped__(w) for w in words}
    assert expected["camping"] == expected["camped"] == "camp"
    found, errors = [], []

    def work(k):
        try:
            for _ in range(30):
                for word in (words if k % 2 else words[::-1]):
                    found.append((word, bm25.stem.__wrapped__(word)))  # past the cache: the stemmer itself
        except Exception as exc:  # noqa: BLE001 - a thread's error is the finding
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns inside stemWord, where a shared stemmer goes wrong
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    wrong = [(w, s) for w, s in found if s != expected[w]]
    assert wrong == [] and len(found) == 4 * 30 * len(words)



# -- the run's settings ---------------------------------------------------------

def test_max_pieces_that_no_sentence_weight_reads_is_named_in_a_warning(tmp_path):
    from coordinator.running.spec import RunSpec

    weights = tmp_path / "w.json"
    weights.write_text(json.dumps({"semantic": 1.0}))
    unused = ("--max-pieces is not used: sentence vectors weigh 0 (--weights gives `sentence` none, or --without "
              "sentence), and sentence vectors weighing nothing are not built")
    for settings in ({"weights_file": str(weights)}, {"without": ("sentence",)}):
        spec = RunSpec("locomo", dataset="d.json", retrieval_mode="full", memoria_settings={"max_pieces": 4},
                       **settings)
        assert spec.check(farm=False) == [unused]
    used = RunSpec("locomo", dataset="d.json", retrieval_mode="full", memoria_settings={"max_pieces": 4})
    assert used.check(farm=False) == []
    assert used.system_settings()["max_pieces"] == 4


def test_a_full_item_s_cache_entry_is_stored_again_with_its_candidates_pieces_and_a_warm_run_encodes_none(
        tmp_path, monkeypatch):
    """Cold: the state is cached after ingest (no pieces yet), the questions encode their candidates' pieces, and
    the entry is stored again holding them. Warm: restored, the same rankings, no piece encoded, nothing stored."""
    from adapters.benchmarks.longmemeval.reader import LongMemEval
    from tests.helpers import write_dataset
    from workers.item.cache_key import CACHE_KEY_ENV
    from workers.item.evaluate import evaluate_item

    monkeypatch.setenv(CACHE_KEY_ENV, str(tmp_path / "config" / "cache.key"))
    item = next(LongMemEval(write_dataset(tmp_path / "d.json", questions=1, seed=5, scale=0.1)).iter_items())
    cache = ItemCache(tmp_path / "cache")

    def system():
        return MemoriaSystem(mode="full", embedder=VocabularyEmbedder(), parallel_extract=False)

    cold = evaluate_item(item, system(), cache=cache)
    assert cold["cache"] == {"hit": False, "reason": "no cache entry", "consulted": True,
                             "stored_after_questions": True}
    assert cold["stats"]["texts_encoded_by_kind"]["pieces"] > 0
    entry = json.loads((cache.folder(item["item_id"], "memoria") / "pieces.json").read_text())
    assert len(set(entry["texts"])) == cold["stats"]["texts_encoded_by_kind"]["pieces"]  # a repeated piece once
    warm = evaluate_item(item, system(), cache=cache)
    assert warm["cache"] == {"hit": True, "reason": None, "consulted": True}  # nothing new: not stored again
    assert warm["stats"]["texts_encoded_by_kind"] == {"turns": 0, "windows": 0, "pieces": 0, "questions": 1}
    assert [[c["id"] for c in r["candidates"]] for r in warm["records"]] == \
        [[c["id"] for c in r["candidates"]] for r in cold["records"]]
