"""This machine's key for cache entries: HMAC-SHA256 over each entry's manifest, kept outside every cache.

Hashes in a manifest only catch damage: whoever can write the cache can rewrite a hash too. A MAC
under a key that lives elsewhere (`$XDG_CONFIG_HOME/memfarm/cache.key`, else
`~/.config/memfarm/cache.key`; `MEMFARM_CACHE_KEY_FILE` names another file) makes an entry edited
by anyone without the key a miss. The key is 32 random bytes, written hex into a file made 0600
from its first byte on first use; a key file that others may read or write is refused, since it
would let them forge entries.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from adapters.errors import MemfarmError

CACHE_KEY_ENV = "MEMFARM_CACHE_KEY_FILE"
_KEY_BYTES = 32


def cache_key_path() -> Path:
    """Where this machine's cache key lives."""
    named = os.environ.get(CACHE_KEY_ENV)
    if named:
        return Path(named).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / "memfarm" / "cache.key"


def load_cache_key(path: str | Path | None = None) -> bytes:
    """The key in `path` (default `cache_key_path()`), created on first use; MemfarmError names a bad key file."""
    path = Path(path) if path else cache_key_path()
    if not path.exists():
        _create(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise MemfarmError(f"cache key {path}: cannot read it ({exc.strerror})") from None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise MemfarmError(f"cache key {path}: not a regular file")
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise MemfarmError(f"cache key {path}: mode {stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}: "
                               "it must be this user's and readable by it alone (chmod 600), or anyone who can "
                               "read it can forge cache entries")
        text = handle.read(4 * _KEY_BYTES).decode("ascii", "replace").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != _KEY_BYTES:
        raise MemfarmError(f"cache key {path}: expected {2 * _KEY_BYTES} hex digits; delete it to make a new key "
                           "(every cache entry is then rebuilt once)")
    return key


def entry_mac(key: bytes, manifest: bytes) -> str:
    """The MAC of an entry: HMAC-SHA256 of its manifest file's bytes (which hash every artifact)."""
    return hmac.new(key, manifest, hashlib.sha256).hexdigest()


def mac_matches(key: bytes, manifest: bytes, mac: bytes) -> bool:
    """Whether `mac` (the bytes of an entry's MAC file) is the MAC of `manifest`, compared in constant time."""
    return hmac.compare_digest(entry_mac(key, manifest).encode("ascii"), mac.strip())


def _create(path: Path) -> None:
    """Write a new key beside `path` and link it into place: of two processes creating it, one key wins whole."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(secrets.token_hex(_KEY_BYTES) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another process made the key first: its key stands
    finally:
        draft.unlink(missing_ok=True)
