"""A memory's snapshot: its whole state as files (SQLite, FAISS, JSON; no pickle), and back.

The item cache stores and hashes these files, so what a snapshot holds, and what a restore checks before it
replaces a state, is the engine's file format; `MemoryInterface.snapshot` and `restore` call here.
"""

from __future__ import annotations

import json
from pathlib import Path

from memoria.bm25 import BM25Index
from memoria.errors import SnapshotError
from memoria.pieces import FILES as PIECE_FILES, SentenceVectors
from memoria.store import MemoryStore
from memoria.vectors import VectorIndex

#: File names of a snapshot; the item cache hashes each of them.
SNAPSHOT_FILES = {"store": "memory.sqlite", "vectors": "vectors.faiss", "bm25": "bm25.json"}
#: Files of the turn windows, in a snapshot only when windows were built; without them they are built again.
WINDOW_FILES = {"window_vectors": "windows.faiss", "windows": "windows.json"}


def write_snapshot(memory, directory: str | Path) -> dict[str, Path]:
    """Write `memory`'s whole state into `directory`; returns the files written."""
    memory.build_indexes()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {name: directory / filename for name, filename in SNAPSHOT_FILES.items()}
    memory.store.save(paths["store"])
    memory.vectors.save(paths["vectors"])
    memory.bm25.save(paths["bm25"])
    if memory._windows_built is not None and memory._windows_current():
        paths["window_vectors"] = directory / WINDOW_FILES["window_vectors"]
        paths["windows"] = directory / WINDOW_FILES["windows"]
        memory.window_vectors.save(paths["window_vectors"])
        paths["windows"].write_text(json.dumps({"built": memory._windows_built, "turns": memory.window_turns,
                                                "texts": memory._window_texts}), encoding="utf-8")
    if memory.pieces.owners and memory.pieces.max_pieces == memory.max_pieces:
        paths.update(memory.pieces.save(directory, len(memory.store)))
    for name, filename in {**WINDOW_FILES, **PIECE_FILES}.items():  # an earlier snapshot's, now stale
        if name not in paths:
            (directory / filename).unlink(missing_ok=True)
    return paths


def read_snapshot(memory, directory: str | Path) -> None:
    """Replace `memory`'s state with the one snapshotted in `directory`."""
    directory = Path(directory)
    missing = [f for f in SNAPSHOT_FILES.values() if not (directory / f).is_file()]
    if missing:
        raise SnapshotError(f"{directory}: snapshot is missing {', '.join(missing)}")
    store = MemoryStore.load(directory / SNAPSHOT_FILES["store"])
    vectors = VectorIndex.load(directory / SNAPSHOT_FILES["vectors"], memory.dimension)
    bm25 = BM25Index.load(directory / SNAPSHOT_FILES["bm25"])
    if len(bm25) != len(store) or len(vectors) not in (0, len(store)):
        raise SnapshotError(f"{directory}: snapshot parts disagree ({len(store)} rows, {len(vectors)} "
                            f"vectors, {len(bm25)} BM25 docs)")
    memory.store, memory.vectors, memory.bm25 = store, vectors, bm25
    memory._pending_vectors = []
    memory._view = memory._carried_view = None
    memory._clear_windows()
    memory._clear_pieces()
    if all((directory / f).is_file() for f in WINDOW_FILES.values()):
        _read_windows(memory, directory)
    if all((directory / f).is_file() for f in PIECE_FILES.values()):
        memory.pieces = SentenceVectors.load(directory, memory.store.all_rows(), memory.dimension)


def _read_windows(memory, directory: Path) -> None:
    """Load snapshotted windows; ones built under other settings are left to be built again."""
    try:
        saved = json.loads((directory / WINDOW_FILES["windows"]).read_text(encoding="utf-8"))
        built, turns, texts = saved["built"], saved["turns"], saved["texts"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SnapshotError(f"{directory}: unreadable windows file ({exc})") from exc
    if not isinstance(built, dict) or not isinstance(turns, list) or not isinstance(texts, list):
        raise SnapshotError(f"{directory / WINDOW_FILES['windows']}: not a windows file (expected built as "
                            "an object, turns and texts as lists)")
    vectors = VectorIndex.load(directory / WINDOW_FILES["window_vectors"], memory.dimension)
    rows = len(memory.store)
    if len(vectors) != len(turns) or len(texts) != len(turns) or built.get("rows") != rows:
        raise SnapshotError(f"{directory}: windows disagree with the snapshot ({len(turns)} windows, "
                            f"{len(vectors)} vectors, built for {built.get('rows')} of {rows} rows)")
    vectors.read_back(directory / WINDOW_FILES["window_vectors"])
    memory.window_vectors, memory.window_turns, memory._window_texts = vectors, turns, texts
    memory._windows_built = built
