"""A cache entry is copied without following anything: a link, a folder or a special file in it is refused before a
byte of it is read, and no artifact is copied past the size its authenticated manifest records. Each restore runs
in a child process under a file-size limit, so that a copy without end fails there instead of filling the disk."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each restore runs in a child process of its own

from tests.conftest import REPO
from tests.workers.item.test_cache_auth import _system, cached  # noqa: F401  (a fixture: an item and its cache entry)
from workers.item.cache import MANIFEST

#: The child's file-size limit: far above an entry of the test's item, far below what a copy without end writes.
LIMIT_BYTES = 64 << 20

CHILD = f"""
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT_BYTES}, {LIMIT_BYTES}))
from tests.workers.item.test_cache_auth import _system
from workers.item.cache import ItemCache
from workers.item.evaluate import evaluate_item
item = json.load(open(sys.argv[1]))
print(json.dumps(evaluate_item(item, _system(), cache=ItemCache(sys.argv[2]))["cache"]))
"""


def _restore_in_child(item, cache, tmp_path):
    (tmp_path / "item.json").write_text(json.dumps(item))
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "item.json"), str(cache.directory)],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _entry(cache, item):
    (entry,) = [p for p in cache.directory.iterdir() if not p.name.startswith(".")]
    return entry, json.loads((entry / MANIFEST).read_text())


def _link_to_zero(entry, manifest):
    (entry / "zz").symlink_to("/dev/zero")
    return "zz"


def _artifact_to_zero(entry, manifest):
    name = sorted(manifest["artifacts"])[0]
    (entry / name).unlink()
    (entry / name).symlink_to("/dev/zero")
    return name


def _artifact_grown(entry, manifest):
    name = sorted(manifest["artifacts"])[0]
    with open(entry / name, "r+b") as handle:  # sparse: 1 GiB on paper, nothing on disk
        handle.truncate(1 << 30)
    return name


def _link_to_a_folder(entry, manifest):
    (entry / "sub").symlink_to(entry.parent, target_is_directory=True)
    return "sub"


def _pipe(entry, manifest):
    os.mkfifo(entry / "pp")
    return "pp"


@pytest.mark.parametrize("attack, said", [
    (_link_to_zero, "not a plain file"),
    (_artifact_to_zero, "not a plain file"),
    (_artifact_grown, "holds 1073741824 bytes, its manifest records"),
    (_link_to_a_folder, "not a plain file"),
    (_pipe, "not a plain file"),
])
def test_a_link_or_an_oversized_file_in_an_entry_is_refused_before_it_is_read(cached, tmp_path, attack, said):
    item, cache, _ = cached
    entry, manifest = _entry(cache, item)
    name = attack(entry, manifest)
    state = _restore_in_child(item, cache, tmp_path)
    assert state["hit"] is False and name in state["reason"] and said in state["reason"], state
    assert "store_error" not in state, "the item was rebuilt and stored again"
    assert not [p for p in cache.directory.iterdir() if p.name.startswith(".read-")], "no private copy left behind"
    assert _restore_in_child(item, cache, tmp_path)["hit"], "the rebuilt entry is used"


def test_the_entry_folder_itself_a_link_is_refused(cached, tmp_path):
    item, cache, _ = cached
    entry, _ = _entry(cache, item)
    elsewhere = tmp_path / "elsewhere"
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere, target_is_directory=True)
    state = _restore_in_child(item, cache, tmp_path)
    assert state["hit"] is False and "not a plain folder" in state["reason"], state


def test_an_entry_without_artifact_sizes_is_rebuilt_once(cached, tmp_path):
    """Entries written before sizes were recorded carry a valid MAC but no sizes to bound a copy: rebuilt."""
    from workers.item.cache import MAC
    from workers.item.cache_key import entry_mac

    item, cache, _ = cached
    entry, manifest = _entry(cache, item)
    del manifest["artifact_bytes"]
    (entry / MANIFEST).write_text(json.dumps(manifest))
    (entry / MAC).write_text(entry_mac(cache._key, (entry / MANIFEST).read_bytes()))
    state = _restore_in_child(item, cache, tmp_path)
    assert state["hit"] is False and "no size for each artifact" in state["reason"], state
    assert _restore_in_child(item, cache, tmp_path)["hit"]
