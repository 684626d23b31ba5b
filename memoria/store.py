"""SQLite: the canonical store of raw text and JSON metadata.

Every derived index (vectors, BM25) can be rebuilt from these rows; the rows
cannot be rebuilt from the indexes.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from memoria.errors import SnapshotError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entities (memory_id INTEGER NOT NULL, entity TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS entities_by_name ON entities (entity);
CREATE TABLE IF NOT EXISTS relationships (
    memory_id INTEGER NOT NULL, source TEXT NOT NULL, relation TEXT NOT NULL, target TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS attributes (memory_id INTEGER NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS importance (memory_id INTEGER PRIMARY KEY, score REAL NOT NULL);
"""
_DERIVED_TABLES = ("entities", "relationships", "attributes", "importance")


class MemoryStore:
    """Raw memories in an in-process SQLite database."""

    def __init__(self):
        self.conn = sqlite3.connect(":memory:", check_same_thread=False)
        self.conn.executescript(_SCHEMA)

    def __len__(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]

    def next_id(self) -> int:
        return self.conn.execute("SELECT COALESCE(MAX(id), -1) + 1 FROM memories").fetchone()[0]

    def insert(self, ids: list[int], texts: list[str], metadatas: list[str], derived: list[dict] | None = None) -> None:
        """Insert rows and their derived rows in one transaction; metadatas are already JSON text."""
        with self.conn:
            self.conn.executemany(
                "INSERT INTO memories (id, text, metadata) VALUES (?, ?, ?)", zip(ids, texts, metadatas)
            )
            for memory_id, facts in zip(ids, derived or []):
                self.conn.executemany("INSERT INTO entities VALUES (?, ?)", ((memory_id, e) for e in facts["entities"]))
                self.conn.executemany("INSERT INTO relationships VALUES (?, ?, ?, ?)",
                                      ((memory_id, *triple) for triple in facts["relationships"]))
                self.conn.executemany("INSERT INTO attributes VALUES (?, ?, ?)",
                                      ((memory_id, k, v) for k, v in facts["attributes"]))
                self.conn.execute("INSERT INTO importance VALUES (?, ?)", (memory_id, facts["importance"]))

    def delete(self, ids: list[int]) -> None:
        with self.conn:
            for table in ("memories",) + _DERIVED_TABLES:
                column = "id" if table == "memories" else "memory_id"
                self.conn.executemany(f"DELETE FROM {table} WHERE {column} = ?", ((i,) for i in ids))

    def rows(self, table: str) -> list[tuple]:
        if table not in _DERIVED_TABLES:
            raise ValueError(f"no derived table {table!r}")
        return self.conn.execute(f"SELECT * FROM {table}").fetchall()

    def get(self, ids: list[int]) -> dict[int, tuple[str, dict]]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(f"SELECT id, text, metadata FROM memories WHERE id IN ({marks})", list(ids))
        return {row[0]: (row[1], json.loads(row[2])) for row in rows}

    def all_rows(self) -> list[tuple[int, str, dict]]:
        rows = self.conn.execute("SELECT id, text, metadata FROM memories ORDER BY id")
        return [(row[0], row[1], json.loads(row[2])) for row in rows]

    def clear(self) -> None:
        with self.conn:
            for table in ("memories",) + _DERIVED_TABLES:
                self.conn.execute(f"DELETE FROM {table}")

    def save(self, path: Path) -> None:
        path = Path(path)
        if path.exists():
            path.unlink()
        target = sqlite3.connect(str(path))
        try:
            self.conn.backup(target)
        finally:
            target.close()

    @classmethod
    def load(cls, path: Path) -> "MemoryStore":
        store = cls()
        try:
            source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                source.backup(store.conn)
            finally:
                source.close()
            for table in ("memories",) + _DERIVED_TABLES:
                store.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
        except sqlite3.Error as exc:
            raise SnapshotError(f"{path}: unreadable SQLite store ({exc})") from exc
        return store
