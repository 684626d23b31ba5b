"""The ONNX backends: the torch vectors again (fp32), a measured cost (int8), an export checked by hash."""

import json

import numpy as np
import pytest

from memoria.embedder import LazyEmbedder
from memoria.onnx_backend import _FILES, BACKENDS, OnnxEmbedder, _valid, export

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx")


@pytest.fixture(scope="module")
def locomo_turns(locomo_path):
    conversations = json.loads(locomo_path.read_text())
    turns = [turn["text"] for c in conversations[:2] for key, session in c["conversation"].items()
             if key.startswith("session_") and isinstance(session, list) for turn in session if turn.get("text")]
    return turns[:240] + ["x " * 400]  # and one text past the 256-token window


def test_onnx_gives_the_torch_vectors_on_real_locomo_turns(embedder, folder, locomo_turns):
    torch_vectors = embedder.encode(locomo_turns)
    onnx = OnnxEmbedder(folder, "onnx", threads=2)
    cosines = (onnx.encode(locomo_turns, batch_size=16) * torch_vectors).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines.min()
    assert onnx.signature == {**embedder.signature, "backend": BACKENDS["onnx"]}
    assert onnx.signature != embedder.signature, "the backend is part of the signature"


def test_int8_is_close_and_its_cost_is_measured(embedder, folder, locomo_turns):
    torch_vectors = embedder.encode(locomo_turns)
    int8 = OnnxEmbedder(folder, "onnx-int8", threads=2)
    cosines = (int8.encode(locomo_turns) * torch_vectors).sum(axis=1)
    assert 0.9 <= cosines.mean() < 0.99999, cosines.mean()  # close, and not the same vectors
    print(f"onnx-int8 vs torch on {len(locomo_turns)} LoCoMo turns: cosine mean {cosines.mean():.4f}, "
          f"min {cosines.min():.4f}")


def test_a_damaged_export_is_found_by_its_hash_and_made_again(folder):
    path = export(folder, "onnx")
    assert _valid(folder, "onnx")
    with open(path, "r+b") as handle:
        handle.seek(1000)
        handle.write(b"\0" * 64)
    assert not _valid(folder, "onnx")
    export(folder, "onnx")
    assert _valid(folder, "onnx")


def test_the_lazy_embedder_names_its_backend_without_loading_anything(folder):
    lazy = LazyEmbedder(backend="onnx-int8", onnx_dir=folder)
    assert lazy.signature["backend"] == "onnxruntime/int8-dynamic-fused" and lazy.dimension == 384
    with pytest.raises(ValueError, match="needs a folder"):
        LazyEmbedder(backend="onnx")
    with pytest.raises(ValueError, match="unknown embedder backend"):
        LazyEmbedder(backend="tensorrt")


def test_the_export_fuses_every_attention_layer_and_an_older_recipe_is_made_again(folder):
    import onnx

    path = export(folder, "onnx-int8")
    ops = [node.op_type for node in onnx.load(str(folder / _FILES["onnx"])).graph.node]
    assert ops.count("Attention") == 6 and "SkipLayerNormalization" in ops, sorted(set(ops))
    assert "Softmax" not in ops, "an unfused attention was left in the graph"
    record = json.loads((folder / "export.json").read_text())
    record["recipe"] = "an older one"
    (folder / "export.json").write_text(json.dumps(record))
    assert not _valid(folder, "onnx") and not _valid(folder, "onnx-int8")
    stale_int8 = path.stat().st_mtime_ns
    export(folder, "onnx")
    assert _valid(folder, "onnx") and not (folder / _FILES["onnx-int8"]).exists(), \
        "an int8 file quantised from the older graph must not be taken for the new one's"
    export(folder, "onnx-int8")
    assert _valid(folder, "onnx-int8") and path.stat().st_mtime_ns != stale_int8


def test_a_graph_whose_attention_did_not_fuse_is_refused(tmp_path):
    """Traced with torch's fused attention (what the export did before), no attention layer fuses: the
    export must say so rather than hand over a model that runs no faster than torch."""
    from transformers import AutoModel

    from memoria.model_files import model_path
    from memoria.onnx_backend import _fuse, _trace

    bert = AutoModel.from_pretrained(model_path(), local_files_only=True, attn_implementation="sdpa").eval()
    traced = tmp_path / "sdpa.onnx"
    _trace(bert, traced)
    with pytest.raises(RuntimeError, match="0 of 6 attention layers fused"):
        _fuse(traced, tmp_path / "fused.onnx", bert.config)
    assert not (tmp_path / "fused.onnx").exists()


def test_an_onnx_vector_does_not_depend_on_its_batch(folder, locomo_turns):
    onnx = OnnxEmbedder(folder, "onnx", threads=2)
    together = onnx.encode(locomo_turns, batch_size=32)
    alone = np.stack([onnx.encode([t])[0] for t in locomo_turns[:30]])
    order = np.random.default_rng(3).permutation(len(locomo_turns))
    assert np.array_equal(alone, together[:30])
    assert np.array_equal(onnx.encode([locomo_turns[i] for i in order], batch_size=5), together[order])


def test_the_graph_runs_one_shape_per_width_as_the_torch_path_does(folder, locomo_turns):
    """Each width's batches have `batch_rows(width)` rows, padded to the canonical step, whatever the batch size
    asked for: one shape per width, as the torch path runs (test_canonical_batches)."""
    from memoria import defaults
    from memoria.canonical_batches import batch_rows, padded_width

    onnx = OnnxEmbedder(folder, "onnx", threads=2)
    shapes, session = [], onnx.session

    class Watching:  # the real session, the shape of each run noted
        def run(self, names, feed):
            shapes.append(feed["input_ids"].shape)
            return session.run(names, feed)

    onnx.session = Watching()
    try:
        for batch_size, texts in ((1, locomo_turns[:1]), (32, locomo_turns), (7, locomo_turns[:13])):
            onnx.encode(texts, batch_size=batch_size)
    finally:
        onnx.session = session
    assert shapes and all(rows == batch_rows(width) for rows, width in shapes), shapes
    widths = {width for _, width in shapes}
    assert len(widths) > 1 and onnx.max_seq_length in widths, "texts of several widths, one past the window"
    assert all(width % defaults.CANONICAL_PAD_STEP == 0 or width == onnx.max_seq_length for width in widths)
    lengths = [len(e.ids) for e in onnx.tokenizer.encode_batch(locomo_turns)]
    assert {padded_width(n, onnx.max_seq_length) for n in lengths} <= widths


def test_mpnet_exports_unfused_labelled_so_and_agrees_with_torch(tmp_path):
    """MPNet's graph is not fused: both backends still agree with torch, checked at export and here, and the
    signature says `unfused`."""
    from memoria.embedder import Embedder
    from memoria.model_files import ModelFilesError, resolve
    from memoria.onnx_backend import AGREEMENT_FLOOR
    from tests.helpers import skip_outside_ci

    try:
        resolve("mpnet")
    except ModelFilesError as exc:
        skip_outside_ci(f"the mpnet extra is not installed ({exc})")
    texts = ["We adopted a puppy last May.", "When did Caroline go to the support group?", "x " * 500]
    reference = Embedder.shared(embedder="mpnet").encode(texts)
    for backend in ("onnx", "onnx-int8"):
        model = OnnxEmbedder(tmp_path, backend, threads=2, embedder="mpnet")
        cosines = (model.encode(texts) * reference).sum(axis=1)
        assert cosines.mean() >= AGREEMENT_FLOOR[backend], (backend, cosines)
        assert model.signature["backend"] == {"onnx": "onnxruntime/fp32-unfused",
                                              "onnx-int8": "onnxruntime/int8-dynamic-unfused"}[backend]
        assert model.signature["model_id"].endswith("all-mpnet-base-v2") and model.dimension == 768
        lazy = LazyEmbedder(backend=backend, onnx_dir=tmp_path, embedder="mpnet")
        assert lazy.signature == model.signature
    record = json.loads((tmp_path / "export.json").read_text())
    assert record["fused"] is False and record["agreement"]["onnx"] >= 0.9999
    assert record["agreement"]["onnx-int8"] >= AGREEMENT_FLOOR["onnx-int8"]
    # per-channel weights keep 7 bits: on a CPU without VNNI, full 8-bit ones saturate the u8*s8 kernels
    # (there the cosine with torch fell to 0.07), which the agreement check on a VNNI machine never sees
    import onnx
    from onnx import numpy_helper

    weights = [numpy_helper.to_array(init) for init in onnx.load(str(tmp_path / _FILES["onnx-int8"])).graph.initializer
               if init.data_type == onnx.TensorProto.INT8 and len(init.dims) == 2]
    assert len(weights) >= 12  # at least one quantised MatMul weight per layer
    assert max(int(np.abs(w.astype(np.int16)).max()) for w in weights) <= 64


def test_a_family_the_backends_cannot_export_is_refused_by_name(tmp_path):
    from memoria.model_files import ModelFilesError

    folder = tmp_path / "gpt"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"hidden_size": 8, "max_position_embeddings": 64,
                                                    "model_type": "gpt2"}))
    (folder / "modules.json").write_text("[]")
    with pytest.raises(ModelFilesError, match="export bert and mpnet models, not gpt2; use --embedder-backend torch"):
        export(tmp_path / "onnx", "onnx", str(folder))
    assert not (tmp_path / "onnx").exists()


def test_an_export_that_disagrees_with_torch_is_refused(folder, monkeypatch):
    import memoria.onnx_backend as backend

    export(folder, "onnx")
    monkeypatch.setitem(backend.AGREEMENT_FLOOR, "onnx-int8", 0.999999)  # int8 is close, never that close
    (folder / _FILES["onnx-int8"]).unlink(missing_ok=True)
    refused = r"all-MiniLM-L6-v2 \(onnx-int8\): cosine with torch 0\.9\d+, below 0\.999999"
    with pytest.raises(RuntimeError, match=refused):
        export(folder, "onnx-int8")
    assert not (folder / _FILES["onnx-int8"]).exists()
