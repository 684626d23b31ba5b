"""The validated per-item cache: a system's snapshot plus a manifest of hashes.

A cache entry is used only if the item's content hash, the embedding
signature and the format version match and every artifact hashes right.
Anything else is a rebuild with a stated reason, never a crash and never a
silent mismatch. Artifacts are SQLite, FAISS and JSON files: no pickle.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import time
from pathlib import Path

from adapters.defaults import CACHE_FORMAT_VERSION
from adapters.files import file_sha256, write_json

logger = logging.getLogger(__name__)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


class ItemCache:
    """Cache entries under one directory, keyed by item id and system."""

    def __init__(self, directory: str | Path, rebuild: bool = False):
        self.directory = Path(directory)
        self.rebuild = rebuild
        self.directory.mkdir(parents=True, exist_ok=True)

    def paths(self, item_id: str, system: str) -> tuple[Path, Path]:
        stem = f"{_safe(system)}_{_safe(item_id)}"
        return self.directory / stem, self.directory / f"{stem}.manifest.json"

    def check(self, item_id: str, system: str, expected: dict) -> str | None:
        """None if the entry is valid for `expected`; otherwise why it is not."""
        if self.rebuild:
            return "--rebuild-cache"
        folder, manifest_path = self.paths(item_id, system)
        if not manifest_path.is_file():
            return "no cache entry"
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return f"manifest unreadable ({exc})"
        if not isinstance(manifest, dict):
            return "manifest is not an object"
        for key, label in (("format_version", "index format version"), ("item_hash", "item content"),
                           ("embedding_signature", "embedding signature")):
            if manifest.get(key) != expected.get(key):
                return f"{label} changed"
        artifacts = manifest.get("artifacts")
        if not isinstance(artifacts, dict) or not artifacts:
            return "manifest lists no artifacts"
        for name, digest in sorted(artifacts.items()):
            path = folder / name
            if not path.is_file():
                return f"artifact {name} missing"
            if file_sha256(path) != digest:
                return f"artifact {name} does not match its hash"
        return None

    def restore(self, item_id: str, system, expected: dict) -> str | None:
        """Restore `system` from the cache; returns None on a hit, else the rebuild reason."""
        reason = self.check(item_id, system.name, expected)
        if reason is None:
            folder, _ = self.paths(item_id, system.name)
            try:
                system.restore(folder)
            except Exception as exc:  # a cache that validates but does not load is still only a miss
                reason = f"restore failed ({type(exc).__name__}: {exc})"
        if reason is not None:
            logger.info("cache miss for %s: %s", item_id, reason)
        return reason

    def store(self, item_id: str, system, expected: dict, dataset_sha256: str | None) -> None:
        """Snapshot `system` into a fresh folder, then write the manifest last."""
        folder, manifest_path = self.paths(item_id, system.name)
        staging = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        files = system.snapshot(staging)
        manifest = {
            "item_id": item_id,
            "system": system.name,
            "dataset_sha256": dataset_sha256,
            **expected,
            "artifacts": {Path(f).name: file_sha256(f) for f in files},
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        if manifest_path.exists():
            manifest_path.unlink()
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
        write_json(manifest_path, manifest)


def expected_entry(item_hash: str, signature: dict | None) -> dict:
    return {"item_hash": item_hash, "embedding_signature": signature, "format_version": CACHE_FORMAT_VERSION}
