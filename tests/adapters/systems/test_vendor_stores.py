"""What the vendors' stores hold on to: MemPalace's handles stay flat across items and its scratch folder goes even
after os._exit; mnem and MemPalace answer a retrieve on an empty store with no hits, so check-system passes.

The embedder is a word-hashing stand-in: handles and folders do not depend on the model, and the fast tier keeps
these checks on every change (the real model runs them in test_outside_systems and by hand on 100 questions)."""

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.adapters.systems.one_conversation import need
from tests.helpers import skip_outside_ci, write_dataset

REPO = Path(__file__).resolve().parents[3]




class HashEmbedder:
    """Each word hashed into one of 64 dimensions, normalised: the same text, the same vector."""

    signature = {"model_id": "test/word-hash-64", "dimension": 64}

    def encode(self, texts, batch_size=None):
        vectors = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, hashlib.sha256(word.encode()).digest()[0] % 64] += 1.0
            vectors[row] /= max(float(np.linalg.norm(vectors[row])), 1e-9)
        return vectors


def _open_files() -> dict[str, str]:
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return found


@pytest.fixture()
def scratch(tmp_path, monkeypatch):
    """The temporary folder of this test alone, for this process and the ones it starts."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


def test_mempalace_keeps_open_files_flat_across_items_and_close_leaves_nothing(scratch, tmp_path):
    need("mempalace", "mempalace")
    from adapters.benchmarks.longmemeval.reader import LongMemEval
    from adapters.systems.mempalace_system import MemPalaceSystem
    from workers.item.evaluate import evaluate_item

    items = list(LongMemEval(write_dataset(tmp_path / "lme.json", questions=8, seed=7, scale=0.02)).iter_items())
    before = len(_open_files())
    system = MemPalaceSystem(embedder=HashEmbedder())
    counts, its_own = [], []  # per item: the handles outside the live palace; those beside it in the folder
    for item in items:
        outcome = evaluate_item(item, system, top_k=10)
        assert outcome["records"][0]["status"] == "ok", outcome["records"][0].get("error")
        files = _open_files().values()
        counts.append(sum(not t.startswith(system._palace + os.sep) for t in files))
        its_own.append(sorted(os.path.relpath(t, system._root) for t in files
                              if t.startswith(system._root + os.sep) and not t.startswith(system._palace + os.sep)))
    deleted = [target for target in _open_files().values()
               if target.startswith(str(scratch)) and target.endswith("(deleted)")]
    assert not deleted, f"handles on removed palaces: {deleted[:3]}"
    # Under its scratch folder, beside the live palace (whose SQLite connections ChromaDB pools per thread, so their
    # number varies): its lock alone, never a handle on an earlier palace.
    assert all(files == ["owner.lock"] for files in its_own), f"handles beside the live palace: {its_own}"
    # The rest of the process, sockets and pipes included: a handle kept per item grows it by one an item, five
    # from the first two items to the last three; another thread of a test process may hold a file through a look
    # or two, not through three items running.
    assert min(counts[-3:]) - min(counts[:2]) <= 2, f"open files per item, the live palace's left out: {counts}"
    root = system._root
    system.close()
    assert not os.path.exists(root)
    assert len(_open_files()) <= before + 2, "closing releases what the items opened"


_EXITS = """
import os, sys
from adapters.systems.mempalace_system import MemPalaceSystem
from tests.adapters.systems.test_vendor_stores import HashEmbedder
system = MemPalaceSystem(embedder=HashEmbedder())
system.reset()
system.ingest([{"external_id": "x-1", "label": "x", "text": "a plum cake", "props": {}}])
print(system._root, flush=True)
if sys.argv[1] == "exit":
    os._exit(0)  # as a Celery pool process ends: no atexit, no finalizer
sys.stdin.read()  # alive until the test closes its input
"""


def _start(how: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _EXITS, how], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_scratch_folder_left_by_os_exit_is_removed_and_a_living_ones_kept(scratch):
    need("mempalace", "mempalace")
    from adapters.systems.mempalace_system import MemPalaceSystem, remove_abandoned_scratch

    ended = _start("exit")
    left = Path(ended.stdout.readline().strip())
    assert ended.wait(timeout=120) == 0
    assert left.parent == scratch and (left / "home").is_dir(), "os._exit ran no clean-up"
    living = _start("wait")  # a system made later cleans up
    alive = Path(living.stdout.readline().strip())
    try:
        assert not left.exists(), "the folder of a process that ended by os._exit is removed"
        MemPalaceSystem(embedder=HashEmbedder()).close()
        assert alive.parent == scratch and alive.is_dir(), "the folder of a living process is kept"
        assert remove_abandoned_scratch(str(scratch)) == []
    finally:
        living.stdin.close()
        living.wait(timeout=120)
    assert not alive.exists(), "a process that ends normally removes its own folder"


def test_a_link_named_as_a_scratch_folder_is_never_followed(scratch, tmp_path):
    need("mempalace", "mempalace")
    from adapters.systems.mempalace_system import SCRATCH_PREFIX, remove_abandoned_scratch
    from adapters.systems.scratch import OWNER_LOCK

    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / OWNER_LOCK).write_text("")  # a free lock, as an abandoned folder has
    (scratch / f"{SCRATCH_PREFIX}link").symlink_to(precious)
    assert remove_abandoned_scratch(str(scratch)) == []
    assert (precious / OWNER_LOCK).exists()


@pytest.mark.parametrize("name, module, extra", [("mnem", "pymnem", "mnem"), ("mempalace", "mempalace", "mempalace")])
def test_check_system_passes_on_the_built_in(name, module, extra, scratch):
    need(module, extra)
    from adapters.systems import make_system
    from adapters.systems.conformance import PythonDriver, report_table, run_checks

    system = make_system(name, embedder=HashEmbedder())
    assert system.retrieve("item-000000000000", "anything at all?", 5) == [], "an empty store: no hits"
    report = run_checks(PythonDriver(system))
    report["system"] = name
    assert report["passed"], report_table(report)
