"""The shared checksums: a file's SHA-256 over every chunk, and a vector's checksum in the format already stored."""

import hashlib
import sqlite3

import numpy as np

from memoria.checksums import CHUNK_BYTES, file_sha256, update_from_file, vector_checksum
from memoria.embedding_store import EmbeddingStore

VECTOR = np.array([1.0, -2.0, 0.5], dtype=np.float32)
#: SHA-256 over b"k1\0" + VECTOR's float32 bytes, first 16 bytes: the checksum stores already hold for this row.
K1_CHECKSUM = "d807b059c0ba0966667406cc5cd96b20"
K2_CHECKSUM = "8da1f3250b46aa9dd82f935b627ba2ca"  # the same bytes under key "k2"


def test_file_sha256_covers_every_chunk_of_a_file_larger_than_one(tmp_path):
    data = bytes(range(256)) * (CHUNK_BYTES // 256 * 2) + b"tail past the second chunk"
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    assert len(data) > 2 * CHUNK_BYTES
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()
    # a change in the last chunk only changes the hash
    path.write_bytes(data[:-1] + b"!")
    assert file_sha256(path) != hashlib.sha256(data).hexdigest()
    # a small chunk size reads the same bytes
    assert file_sha256(path, chunk=4096) == hashlib.sha256(data[:-1] + b"!").hexdigest()


def test_update_from_file_continues_a_digest_over_several_files(tmp_path):
    (tmp_path / "a").write_bytes(b"first")
    (tmp_path / "b").write_bytes(b"second")
    digest = hashlib.sha256(b"head")
    for name in ("a", "b"):
        update_from_file(digest, tmp_path / name)
    assert digest.hexdigest() == hashlib.sha256(b"headfirstsecond").hexdigest()


def test_vector_checksum_on_known_input():
    blob = VECTOR.tobytes()
    assert blob.hex() == "0000803f000000c00000003f"
    assert vector_checksum("k1", blob).hex() == K1_CHECKSUM
    assert len(vector_checksum("k1", blob)) == 16
    # the key is bound in: the same bytes under another key do not check
    assert vector_checksum("k2", blob).hex() == K2_CHECKSUM


def test_the_embedding_store_writes_the_checksum_as_hex_and_serves_rows_already_written(tmp_path):
    store = EmbeddingStore(tmp_path / "e.sqlite")
    db = sqlite3.connect(tmp_path / "e.sqlite", isolation_level=None)
    # a row as stores on disk already hold it: 32 hex digits
    db.execute("INSERT INTO vectors (key, vector, checksum, used) VALUES ('k1', ?, ?, 0)",
               (VECTOR.tobytes(), K1_CHECKSUM))
    found, damaged = store.get(["k1"], 3)
    assert damaged == 0 and list(found) == ["k1"]
    np.testing.assert_array_equal(found["k1"], VECTOR)
    store.put({"k2": VECTOR})
    assert db.execute("SELECT checksum FROM vectors WHERE key = 'k2'").fetchone()[0] == K2_CHECKSUM
    db.close()


def test_files_sha256_binds_each_file_to_its_name(tmp_path):
    """Swapping two files' contents, or renaming one, changes the hash; the order given does not."""
    import hashlib

    from memoria.checksums import files_sha256

    (tmp_path / "sub").mkdir()
    a, b = tmp_path / "a.txt", tmp_path / "sub" / "b.txt"
    a.write_bytes(b"alpha")
    b.write_bytes(b"beta")
    expected = hashlib.sha256(b"a.txt" + b"alpha" + b"sub/b.txt" + b"beta").hexdigest()
    assert files_sha256(tmp_path, [b, a]) == files_sha256(tmp_path, [a, b]) == expected
    a.write_bytes(b"beta")
    b.write_bytes(b"alpha")
    assert files_sha256(tmp_path, [a, b]) != expected
