"""The validated per-item cache: a system's snapshot plus a manifest of hashes.

An entry is used only if its manifest carries a valid MAC under this
machine's key (`workers.item.cache_key`, kept outside the cache: an entry edited
by anyone without the key is a miss), and the item's content hash, the
embedding signature, the code that builds the index, the model files and the
format version all match and every artifact hashes right. Anything else is a
rebuild with a stated reason, never a crash, never a failed item and never a
silent mismatch. Artifacts are SQLite, FAISS and JSON files: no pickle.

Safe under concurrency: an entry's folder is named by a hash of (system, item
id), so no two ids share one; it is written in a private temporary folder
and put in place by one rename; a restore first copies the entry's bytes into
a private folder, hashes those very bytes, and loads them. That copy follows
nothing: a link, a folder or a special file in an entry is refused unread, and
no artifact is copied past the size its authenticated manifest records.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from adapters.defaults import CACHE_FORMAT_VERSION
from adapters.errors import MemfarmError
from adapters.files import file_sha256, read_json, write_json
from workers.item.cache_key import cache_key_path, entry_mac, load_cache_key, mac_matches

logger = logging.getLogger(__name__)

MANIFEST = "entry.manifest.json"
#: The manifest's MAC (hex), beside it.
MAC = "entry.manifest.mac"
#: What must match, in the order the reasons are looked for, with how a reason names it.
#: The most bytes a manifest or its MAC may have: both are read before anything vouches for their size.
MAX_MANIFEST_BYTES = 16 << 20
#: Bytes copied at a time.
COPY_CHUNK_BYTES = 1 << 20
KEY_FIELDS = (("format_version", "cache format version"), ("item_hash", "item content"),
              ("embedding_signature", "embedding signature"), ("build", "index-building code or model files"))


def entry_name(item_id: str, system: str, variant: str | None = None) -> str:
    """A fixed-length, file-system-safe name that no other (system, item id, variant) shares. A `variant` (what a
    system's build identity names so, such as a state built without vectors) lies beside the entry without one,
    so that runs of one item in modes that build different states do not replace each other's entry."""
    key = [system, item_id] if variant is None else [system, item_id, variant]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:40]


def _variant(expected: dict) -> str | None:
    return (expected.get("build") or {}).get("variant")


class ItemCache:
    """Cache entries under one directory, one folder per (system, item), each authenticated by this machine's key."""

    def __init__(self, directory: str | Path, rebuild: bool = False, key_file: str | Path | None = None):
        self.directory = Path(directory)
        self.rebuild = rebuild
        self.directory.mkdir(parents=True, exist_ok=True)
        key_file = Path(key_file) if key_file else cache_key_path()
        if key_file.resolve().is_relative_to(self.directory.resolve()):
            raise MemfarmError(f"cache key {key_file} lies inside the cache {self.directory}: whoever can write the "
                               "cache could read it and forge entries; keep it elsewhere (MEMFARM_CACHE_KEY_FILE)")
        self._key = load_cache_key(key_file)

    def folder(self, item_id: str, system: str, variant: str | None = None) -> Path:
        return self.directory / entry_name(item_id, system, variant)

    def _check(self, folder: Path, item_id: str, system: str, expected: dict) -> str | None:
        """None if the copied entry in `folder` is valid for `expected`; else why not."""
        if not (folder / MANIFEST).exists():
            return "no cache entry"
        try:
            manifest = read_json(folder / MANIFEST, "cache manifest", top=dict)
        except MemfarmError as exc:
            return f"manifest unreadable ({exc})"
        if not (folder / MAC).is_file():
            return "entry carries no MAC (written before entries were authenticated): rebuilt"
        if not mac_matches(self._key, (folder / MANIFEST).read_bytes(), (folder / MAC).read_bytes()):
            logger.warning("cache entry of %s for %s does not carry this machine's MAC: edited without the key "
                           "(or made under another key); not used, rebuilt", system, item_id)
            return "entry's MAC does not match this machine's cache key (edited, or made under another key): rebuilt"
        if manifest.get("item_id") != item_id or manifest.get("system") != system:
            return "entry belongs to another item or system"
        for key, label in KEY_FIELDS:
            if manifest.get(key) != expected.get(key):
                return f"{label} changed"
        artifacts = manifest.get("artifacts")
        if not isinstance(artifacts, dict) or not artifacts:
            return "manifest lists no artifacts"
        for name, digest in sorted(artifacts.items()):
            path = folder / name
            if Path(name).name != name or not path.is_file():
                return f"artifact {name} missing"
            if file_sha256(path) != digest:
                return f"artifact {name} does not match its hash"
        # A restore loads the optional parts (windows, sentence vectors) when their files are there: a file the
        # manifest does not list was put there by someone else, and would be loaded unhashed.
        unlisted = sorted(set(os.listdir(folder)) - set(artifacts) - {MANIFEST, MAC})
        if unlisted:
            return f"entry holds {', '.join(unlisted)}, not listed in its manifest"
        return None

    def _copy_entry(self, source: Path, copy: Path) -> str | None:
        """Copy the entry at `source` into `copy`, or say why it is not used. Nothing is followed: a link (the entry
        itself, or a file in it), a folder or a special file is refused before a byte of it is read; the manifest
        and its MAC are read first, under a small bound, and the MAC checked; then each listed artifact is copied
        up to the size the authenticated manifest records, never more (a link to /dev/zero once copied without
        end before any check)."""
        try:
            folder = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return "no cache entry"
        except OSError as exc:  # ELOOP: a link; ENOTDIR: a file
            return f"entry is not a plain folder ({exc.strerror}): rebuilt"
        try:
            with os.scandir(folder) as entries:
                names = {entry.name: entry.is_file(follow_symlinks=False) for entry in entries}
            odd = sorted(name for name, plain in names.items() if not plain)
            if odd:
                return f"entry holds {', '.join(odd)}, not a plain file (a link, a folder or a device): rebuilt"
            if MANIFEST not in names:
                return "no cache entry"
            if MAC not in names:
                return "entry carries no MAC (written before entries were authenticated): rebuilt"
            copy.mkdir()
            for name in (MANIFEST, MAC):
                reason = _copy_bounded(folder, name, copy / name, MAX_MANIFEST_BYTES, exact=False)
                if reason:
                    return reason
            if not mac_matches(self._key, (copy / MANIFEST).read_bytes(), (copy / MAC).read_bytes()):
                return None  # `_check` says why, as for any entry whose MAC does not match
            manifest = read_json(copy / MANIFEST, "cache manifest", top=dict)
            artifacts, sizes = manifest.get("artifacts"), manifest.get("artifact_bytes")
            if not isinstance(artifacts, dict) or not isinstance(sizes, dict) or set(sizes) != set(artifacts):
                return "manifest records no size for each artifact (written before sizes were recorded): rebuilt"
            unlisted = sorted(set(names) - set(artifacts) - {MANIFEST, MAC})
            if unlisted:
                return f"entry holds {', '.join(unlisted)}, not listed in its manifest"
            for name, size in sorted(sizes.items()):
                if Path(name).name != name or name not in names:
                    return f"artifact {name} missing"
                if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                    return f"manifest records size {size!r} for artifact {name}"
                reason = _copy_bounded(folder, name, copy / name, size, exact=True)
                if reason:
                    return reason
            return None
        finally:
            os.close(folder)

    def restore(self, item_id: str, system, expected: dict) -> str | None:
        """Restore `system` from the cache; returns None on a hit, else the rebuild reason (never raises)."""
        if self.rebuild:
            return "--rebuild-cache"
        source = self.folder(item_id, system.name, _variant(expected))
        if not os.path.lexists(source):
            return "no cache entry"
        try:
            with tempfile.TemporaryDirectory(dir=self.directory, prefix=".read-") as private:
                copy = Path(private) / "entry"
                # from here on, no writer can change what is checked and loaded
                reason = self._copy_entry(source, copy) or self._check(copy, item_id, system.name, expected)
                if reason is None:
                    system.restore(copy)
        except Exception as exc:  # a cache that cannot be read or loaded is only ever a miss
            reason = f"restore failed ({type(exc).__name__}: {exc})"
        if reason is not None:
            logger.info("cache miss for %s: %s", item_id, reason)
        return reason

    def store(self, item_id: str, system, expected: dict, dataset_sha256: str | None) -> str | None:
        """Snapshot `system` into a private folder, then put it in place with one rename.

        Returns None when stored, else why not (a full disk, a race lost to an identical writer):
        a failed store is logged and the item goes on, uncached."""
        target = self.folder(item_id, system.name, _variant(expected))
        staging = None
        try:
            staging = Path(tempfile.mkdtemp(dir=self.directory, prefix=".write-"))
            files = system.snapshot(staging)
            manifest = {
                "item_id": item_id, "system": system.name, "dataset_sha256": dataset_sha256, **expected,
                "artifacts": {Path(f).name: file_sha256(f) for f in files},
                "artifact_bytes": {Path(f).name: os.path.getsize(f) for f in files},
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            write_json(staging / MANIFEST, manifest)
            (staging / MAC).write_text(entry_mac(self._key, (staging / MANIFEST).read_bytes()), encoding="ascii")
            _replace_folder(staging, target)
            staging = None
            return None
        except Exception as exc:
            logger.warning("cache store for %s failed: %s: %s", item_id, type(exc).__name__, exc)
            return f"{type(exc).__name__}: {exc}"
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)


def _copy_bounded(folder: int, name: str, dest: Path, limit: int, exact: bool) -> str | None:
    """Copy the plain file `name` of the open folder `folder` to `dest`: at most `limit` bytes, exactly that many
    when `exact`; None when copied, else why not. Opened without following a link and without blocking on a
    pipe, so what is read is the file that was checked."""
    try:
        source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError as exc:
        return f"{name} cannot be opened as a plain file ({exc.strerror}): rebuilt"
    with os.fdopen(source, "rb") as handle, open(dest, "wb") as out:
        facts = os.fstat(source)
        if not stat.S_ISREG(facts.st_mode):
            return f"{name} is not a plain file: rebuilt"
        if facts.st_size > limit or (exact and facts.st_size != limit):
            bound = f"its manifest records {limit}" if exact else f"at most {limit} allowed"
            return f"{name} holds {facts.st_size} bytes, {bound}: rebuilt"
        left = limit
        while block := handle.read(min(COPY_CHUNK_BYTES, left + 1)):
            if len(block) > left:
                return f"{name} grew past {limit} bytes while it was read: rebuilt"
            left -= len(block)
            out.write(block)
    if exact and left:
        return f"{name} shrank below {limit} bytes while it was read: rebuilt"
    return None


def _replace_folder(new: Path, target: Path) -> None:
    """Put `new` at `target` by renames only; a reader sees the old entry, no entry, or the new one."""
    try:
        os.rename(new, target)
        return
    except OSError:
        if not target.exists():
            raise
    retired = target.with_name(f".old-{target.name}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(target, retired)
    except FileNotFoundError:
        pass
    try:
        os.rename(new, target)
    except OSError:
        if not target.exists():
            raise
        shutil.rmtree(new, ignore_errors=True)  # another writer put an equal entry in place: theirs stands
    shutil.rmtree(retired, ignore_errors=True)


def expected_entry(item_hash: str, signature: dict | None, build: dict | None = None) -> dict:
    """What a valid entry must carry: item content, embedding signature, what builds it, format version."""
    return {"item_hash": item_hash, "embedding_signature": signature, "build": build,
            "format_version": CACHE_FORMAT_VERSION}
