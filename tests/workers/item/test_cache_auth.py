"""Cache entries are authenticated by this machine's key: one edited by anyone without the key, its manifest's
hashes updated to match, is a miss with its reason and is rebuilt, never used."""

import json
import os
import stat

import faiss
import pytest

from adapters.errors import MemfarmError
from adapters.files import file_sha256
from adapters.benchmarks.longmemeval.reader import LongMemEval
from adapters.systems.memoria_system import MemoriaSystem
from tests.helpers import WordEmbedder, write_dataset
from workers.item.cache import MAC, MANIFEST, ItemCache
from workers.item.cache_key import CACHE_KEY_ENV, cache_key_path, load_cache_key
from workers.item.evaluate import evaluate_item


def _system():
    return MemoriaSystem(mode="fusion", embedder=WordEmbedder(), parallel_extract=False)


def _ranked(outcome):
    return [[c["id"] for c in record["candidates"]] for record in outcome["records"]]


@pytest.fixture()
def cached(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_KEY_ENV, str(tmp_path / "config" / "cache.key"))
    item = next(LongMemEval(write_dataset(tmp_path / "d.json", questions=2, seed=5, scale=0.05)).iter_items())
    cache = ItemCache(tmp_path / "cache")
    first = evaluate_item(item, _system(), cache=cache)
    assert first["cache"] == {"hit": False, "reason": "no cache entry", "consulted": True}
    assert evaluate_item(item, _system(), cache=cache)["cache"]["hit"], "an entry this machine wrote is used"
    return item, cache, first


def _forge(folder, name, change):
    """Edit artifact `name` of an entry and put its new hash into the manifest, as someone without the key would."""
    change(folder / name)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["artifacts"][name] = file_sha256(folder / name)
    (folder / MANIFEST).write_text(json.dumps(manifest))


def _reverse_vectors(path):
    """A well-formed index whose vectors belong to other docs: recall goes wrong, nothing crashes."""
    index = faiss.read_index(str(path))
    vectors = index.reconstruct_n(0, index.ntotal)[::-1].copy()
    forged = faiss.IndexFlatIP(index.d)
    forged.add(vectors)
    faiss.write_index(forged, str(path))


def test_an_entry_edited_with_its_hash_updated_is_rebuilt_not_used(cached, caplog):
    item, cache, first = cached
    folder = cache.folder(item["item_id"], "memoria")
    _forge(folder, "vectors.faiss", _reverse_vectors)
    outcome = evaluate_item(item, _system(), cache=cache)
    assert outcome["cache"]["hit"] is False
    assert outcome["cache"]["reason"].startswith("entry's MAC does not match this machine's cache key")
    assert _ranked(outcome) == _ranked(first), "the rebuilt state ranks as the first build did"
    assert any("does not carry this machine's MAC" in r.getMessage() for r in caplog.records)
    assert evaluate_item(item, _system(), cache=cache)["cache"]["hit"], "the rebuilt entry is used again"


def test_an_edited_manifest_field_is_rebuilt(cached):
    item, cache, _ = cached
    path = cache.folder(item["item_id"], "memoria") / MANIFEST
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "dataset_sha256": "0" * 64}))
    assert "MAC does not match" in evaluate_item(item, _system(), cache=cache)["cache"]["reason"]


def test_an_entry_without_a_mac_is_rebuilt_once(cached):
    item, cache, first = cached
    (cache.folder(item["item_id"], "memoria") / MAC).unlink()
    outcome = evaluate_item(item, _system(), cache=cache)
    assert outcome["cache"] == {"hit": False, "reason": "entry carries no MAC (written before entries were "
                                                        "authenticated): rebuilt", "consulted": True}
    assert _ranked(outcome) == _ranked(first)
    assert evaluate_item(item, _system(), cache=cache)["cache"]["hit"]


def test_another_machine_s_key_does_not_open_this_cache(cached, tmp_path):
    item, cache, _ = cached
    elsewhere = ItemCache(cache.directory, key_file=tmp_path / "other" / "cache.key")
    assert "MAC does not match" in evaluate_item(item, _system(), cache=elsewhere)["cache"]["reason"]


def test_the_key_is_made_once_readable_by_its_owner_alone(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_KEY_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    path = cache_key_path()
    assert path == tmp_path / "xdg" / "memfarm" / "cache.key" and not path.exists()
    key = load_cache_key()
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_cache_key() == key
    assert os.listdir(path.parent) == ["cache.key"], "no draft is left beside it"


@pytest.mark.parametrize("problem, words", [("mode", "chmod 600"), ("content", "64 hex digits"),
                                            ("inside", "lies inside the cache")])
def test_a_key_others_can_read_or_a_broken_key_is_refused_by_name(tmp_path, problem, words):
    key_file = tmp_path / "config" / "cache.key"
    load_cache_key(key_file)
    if problem == "mode":
        key_file.chmod(0o644)
    elif problem == "content":
        key_file.write_text("not a key")
    else:
        key_file = tmp_path / "cache" / "cache.key"
    with pytest.raises(MemfarmError) as caught:
        ItemCache(tmp_path / "cache", key_file=key_file)
    assert str(key_file) in str(caught.value) and words in str(caught.value)


@pytest.mark.parametrize("mac", [b"", b"\xff\xfe not hex", b"0" * 64])
def test_a_mac_file_of_any_bytes_is_a_miss_with_its_reason(cached, mac):
    item, cache, _ = cached
    (cache.folder(item["item_id"], "memoria") / MAC).write_bytes(mac)
    assert "MAC does not match" in evaluate_item(item, _system(), cache=cache)["cache"]["reason"]
