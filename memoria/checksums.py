"""Checksums every layer shares: a file's SHA-256, read in chunks, and the checksum of a stored vector.

They live in the engine's package, the bottom layer, so that the engine (model files, ONNX exports,
the embedding store) and the harness above it (datasets, caches, the farm's shared vectors) use the
same function and never disagree on what a hash of the same bytes is.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

#: Bytes read at a time: memory stays flat however large the file.
CHUNK_BYTES = 1 << 20
#: Bytes of a vector's checksum (the first bytes of a SHA-256): enough to catch damage, short beside the vector.
VECTOR_CHECKSUM_BYTES = 16


def update_from_file(digest, path: str | Path, chunk: int = CHUNK_BYTES):
    """Feed the bytes of the file at `path` into `digest` (a hashlib object), a chunk at a time; returns it.

    For a hash over several files in one digest (the packaged model's), as well as over one."""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest


def file_sha256(path: str | Path, chunk: int = CHUNK_BYTES) -> str:
    """SHA-256 of a file's bytes, as 64 hex digits."""
    return update_from_file(hashlib.sha256(), path, chunk).hexdigest()


def files_sha256(root: str | Path, paths) -> str:
    """One SHA-256 over several files under `root`: each file's path relative to `root`, then its bytes,
    in sorted path order. What a set of files is (model weights, a package's sources) as one value."""
    root = Path(root)
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        digest.update(str(path.relative_to(root)).encode())
        update_from_file(digest, path)
    return digest.hexdigest()


def vector_checksum(key: str, blob: bytes) -> bytes:
    """The checksum of a stored vector: the first 16 bytes of SHA-256 over its key, a NUL byte and its bytes.

    Binding the key catches a vector stored under another text's key, not only flipped bytes. The
    embedding store keeps it as 32 hex digits, the farm's Redis as 16 raw bytes before the vector: one
    value, two spellings, so rows and entries written before keep validating."""
    return hashlib.sha256(key.encode() + b"\0" + blob).digest()[:VECTOR_CHECKSUM_BYTES]
