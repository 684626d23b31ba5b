"""An embedder through ONNX Runtime: the same vectors as the torch path, computed faster on a CPU.

The ONNX model is exported once, offline, from the model's checked files
(torch's exporter; no download) into a folder, with `export.json` naming the
hash of the model files it came from and of each ONNX file it wrote. A folder
whose hashes do not match, or that an older recipe made, is exported again.
The model is traced with plain ("eager") attention, so that ONNX Runtime's
transformer optimizer can fuse each layer's attention, its GELU and its layer
norms into single kernels (`Attention`, `BiasGelu`, `SkipLayerNormalization`);
traced with torch's fused attention instead, the graph keeps dozens of small
ops per layer that no optimizer folds, and runs no faster than torch.
`onnx` runs that fused fp32 graph; its vectors agree with torch's to a cosine of
0.9999 and more. `onnx-int8` runs a dynamically quantised copy of it: faster,
at a small quality cost, and opt-in.
The backend is part of the embedding signature, so vectors of two backends are
never mixed in a cache, a store or a farm run.
Families: BERT (MiniLM) is fused as above. MPNet's attention adds a relative
position bias that the optimizer's BERT fusion does not match, so its graph is
kept unfused and its signature's backend says `unfused`. Any other family is
refused (`ModelFilesError`): the torch backend runs it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

import numpy as np

from memoria import defaults
from memoria.canonical_batches import batch_rows, canonical_batches, full_rows
from memoria.checksums import file_sha256
from memoria.model_files import (BACKENDS, ONNX_FAMILIES, ModelFilesError, backend_label,  # noqa: F401
                                  check_unchanged, embedder_key, model_files_sha256, offline_environment,
                                  packaged_signature, resolve, signature)

logger = logging.getLogger(__name__)

OPSET = 17
#: How the files are made; a folder made by another recipe is exported again.
RECIPE = "eager-attention/bert-fusion/v3-int8-7bit-per-channel"
#: The least mean cosine between a backend's vectors and torch's on `AGREEMENT_TEXTS`, checked at export per model
#: (int8: MiniLM's fused graph gives about 0.95 there, mpnet's unfused one about 0.98).
AGREEMENT_FLOOR = {"onnx": 0.9999, "onnx-int8": 0.9}
AGREEMENT_TEXTS = ("We adopted a puppy last May.", "Caroline went to the LGBTQ support group on 7 May 2023.",
                   "user: I have been thinking about changing jobs; the commute takes two hours and " * 6, "ok")
_FILES = {"onnx": "model.onnx", "onnx-int8": "model.int8.onnx"}
_LOCK = threading.Lock()
_SHARED: dict[tuple, "OnnxEmbedder"] = {}


def _valid(folder: Path, backend: str, embedder: str | None = None) -> bool:
    try:
        record = json.loads((folder / "export.json").read_text())
    except (OSError, ValueError):
        return False
    name = _FILES[backend]
    return (record.get("model_files") == model_files_sha256(embedder) and record.get("recipe") == RECIPE
            and (folder / name).is_file()
            and record.get("files", {}).get(name) == file_sha256(folder / name))


def check_family(embedder: str | None = None) -> bool:
    """Whether the ONNX graph of `embedder` is fused; ModelFilesError for a family the backends cannot export."""
    model = resolve(embedder)
    if model.family not in ONNX_FAMILIES:
        raise ModelFilesError(f"embedder {model.name}: the ONNX backends export {' and '.join(ONNX_FAMILIES)} "
                              f"models, not {model.family or 'an unnamed family'}; use --embedder-backend torch")
    return ONNX_FAMILIES[model.family]


def export(folder: str | Path, backend: str = "onnx", embedder: str | None = None) -> Path:
    """The ONNX file of `backend` in `folder`, exported (and quantised) here unless a valid one is there."""
    folder = Path(folder)
    fusable = check_family(embedder)
    with _LOCK:
        if _valid(folder, backend, embedder):
            return folder / _FILES[backend]
        folder.mkdir(parents=True, exist_ok=True)
        offline_environment()
        import torch
        from transformers import AutoModel

        fp32 = folder / _FILES["onnx"]
        if not _valid(folder, "onnx", embedder):
            model = resolve(embedder)
            logger.info("exporting %s to ONNX in %s (once per model and folder)", model.model_id, folder)
            bert = AutoModel.from_pretrained(str(model.root), local_files_only=True, attn_implementation="eager").eval()
            check_unchanged(embedder)  # the export is filed under the files' hash taken at the check
            traced = fp32.with_suffix(".traced.tmp")
            _trace(bert, traced, with_types=model.family == "bert")
            staging = fp32.with_suffix(".tmp")
            if fusable:
                logger.info("fused: %s", _fuse(traced, staging, bert.config))
                traced.unlink()
            else:
                logger.info("%s: %s graphs are not fused (labelled unfused)", model.model_id, model.family)
                os.replace(traced, staging)
            agreement = {"onnx": _checked_agreement(staging, "onnx", embedder)}
            os.replace(staging, fp32)
            (folder / _FILES["onnx-int8"]).unlink(missing_ok=True)  # quantised from the old graph: made again
        else:
            agreement = json.loads((folder / "export.json").read_text()).get("agreement", {})
        files = {_FILES["onnx"]: file_sha256(fp32)}
        if backend == "onnx-int8":
            import onnx
            from onnxruntime.quantization import QuantType, quantize_dynamic

            int8 = folder / _FILES["onnx-int8"]
            staging = int8.with_suffix(".tmp")
            # the fused ops live in ONNX Runtime's own domain, where shape inference cannot type their
            # outputs: every tensor of this model is float32 unless it says otherwise
            # unfused (mpnet), quantising every MatMul loses the model (cosine 0.3 to 0.75 with torch): the two
            # MatMuls of activations in each attention, and each layer's feed-forward output (fed by GELU's
            # outliers), stay float32, and the rest are quantised per channel (cosine 0.97 and more)
            # per channel, every channel spans the whole int8 range, and the u8*s8 kernels of a CPU without VNNI
            # (VPMADDUBSW) saturate their int16 pair sums on such weights: ONNX Runtime's remedy is 7-bit weights
            # (reduce_range), kept whatever machine exports them (an 8-bit export gave cosine 0.07 with torch
            # on a CI machine and 0.98 here)
            kept = [] if fusable else _kept_float(fp32)
            quantize_dynamic(str(fp32), str(staging), weight_type=QuantType.QInt8, nodes_to_exclude=kept,
                             per_channel=not fusable, reduce_range=not fusable,
                             op_types_to_quantize=None if fusable else ["MatMul"],
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            agreement["onnx-int8"] = _checked_agreement(staging, "onnx-int8", embedder)
            os.replace(staging, int8)
            files[_FILES["onnx-int8"]] = file_sha256(int8)
        elif (folder / _FILES["onnx-int8"]).is_file():
            files[_FILES["onnx-int8"]] = file_sha256(folder / _FILES["onnx-int8"])
        record = {"model_files": model_files_sha256(embedder), "recipe": RECIPE, "fused": fusable, "opset": OPSET,
                  "torch": torch.__version__, "files": files,
                  "agreement": {name: value for name, value in agreement.items() if _FILES[name] in files}}
        (folder / "export.json").write_text(json.dumps(record, indent=1))
        if not _valid(folder, backend, embedder):
            raise RuntimeError(f"ONNX export in {folder} did not validate")
        return folder / _FILES[backend]


def _kept_float(path: Path) -> list[str]:
    """The MatMul nodes an unfused graph keeps in float32: those of two activations (no weight among their
    inputs) and those by a feed-forward output weight (more rows than columns: intermediate -> hidden)."""
    import onnx

    graph = onnx.load(str(path)).graph
    shapes = {init.name: tuple(init.dims) for init in graph.initializer}
    kept = []
    for node in graph.node:
        if node.op_type != "MatMul":
            continue
        weights = [shapes[name] for name in node.input if name in shapes]
        if not weights or (len(weights[0]) == 2 and weights[0][0] > weights[0][1]):
            kept.append(node.name)
    return kept


def _checked_agreement(path: Path, backend: str, embedder: str | None) -> float:
    """`_agreement`, the file at `path` removed when it is refused."""
    try:
        return _agreement(path, backend, embedder)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _agreement(path: Path, backend: str, embedder: str | None) -> float:
    """The mean cosine between this ONNX file's vectors and torch's (sentence-transformers) on a few texts;
    RuntimeError, naming the model and backend, below `AGREEMENT_FLOOR`."""
    from sentence_transformers import SentenceTransformer

    model = resolve(embedder)
    reference = SentenceTransformer(str(model.root), device="cpu", local_files_only=True).encode(
        list(AGREEMENT_TEXTS), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    probe = OnnxEmbedder.__new__(OnnxEmbedder)
    probe._open(path, backend, None, 1, embedder)
    cosine = float((probe.encode(list(AGREEMENT_TEXTS)) * reference).sum(axis=1).mean())
    logger.info("%s %s: mean cosine with torch %.5f", model.model_id, backend, cosine)
    if cosine < AGREEMENT_FLOOR[backend]:
        raise RuntimeError(f"ONNX export of {model.model_id} ({backend}): cosine with torch {cosine:.4f}, below "
                           f"{AGREEMENT_FLOOR[backend]}; use --embedder-backend torch")
    return round(cosine, 6)


def _trace(bert, out: Path, with_types: bool = True) -> None:
    """Trace a transformers encoder into an ONNX graph with dynamic batch and token axes (MPNet has no token types)."""
    import torch

    class Encoder(torch.nn.Module):  # keyword arguments: the model's positional order changes by version
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            types = {"token_type_ids": token_type_ids} if with_types else {}
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, **types).last_hidden_state

    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if with_types else [])
    dummy = tuple(torch.ones(2, 8, dtype=torch.long) if n != "token_type_ids"
                  else torch.zeros(2, 8, dtype=torch.long) for n in names)
    torch.onnx.export(Encoder().eval(), dummy, str(out), input_names=names, output_names=["last_hidden_state"],
                      opset_version=OPSET, dynamo=False,
                      dynamic_axes={n: {0: "batch", 1: "tokens"} for n in names + ["last_hidden_state"]})


def _fuse(traced: Path, out: Path, config) -> dict[str, int]:
    """Fuse a traced BERT graph with ONNX Runtime's transformer optimizer; refuse a graph it could not fuse
    (a new exporter that traces attention differently would otherwise give a slow model without a word)."""
    from onnxruntime.transformers.optimizer import optimize_model

    model = optimize_model(str(traced), model_type="bert", num_heads=config.num_attention_heads,
                           hidden_size=config.hidden_size)
    fused = {op: n for op, n in model.get_fused_operator_statistics().items() if n}
    if fused.get("Attention", 0) != config.num_hidden_layers:
        raise RuntimeError(f"ONNX export: {fused.get('Attention', 0)} of {config.num_hidden_layers} attention "
                           f"layers fused ({fused}); the traced graph is not the one this recipe expects")
    model.save_model_to_file(str(out))
    return fused


class OnnxEmbedder:
    """Unit-length float32 vectors from ONNX Runtime: mean pooling over the attention mask, then L2."""

    def __init__(self, folder: str | Path, backend: str = "onnx", max_seq_length: int | None = None,
                 threads: int | None = None, embedder: str | None = None):
        if backend not in _FILES:
            raise ValueError(f"unknown ONNX backend {backend!r}; choose from {sorted(_FILES)}")
        self._open(export(folder, backend, embedder), backend, max_seq_length, threads, embedder)

    def _open(self, path: Path, backend: str, max_seq_length: int | None, threads: int | None,
              embedder: str | None) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.embedder = embedder_key(embedder)
        packaged = packaged_signature(max_seq_length, self.embedder)
        self.max_seq_length, self.dimension = packaged["max_seq_length"], packaged["dimension"]
        self.backend = backend
        self.tokenizer = Tokenizer.from_file(str(resolve(self.embedder).root / "tokenizer.json"))
        check_unchanged(self.embedder)  # a local folder may have changed since its check, before this load
        self.tokenizer.enable_truncation(self.max_seq_length)
        self.tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or 1
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}

    @classmethod
    def shared(cls, folder: str | Path, backend: str, max_seq_length: int | None = None,
               threads: int | None = None, embedder: str | None = None) -> "OnnxEmbedder":
        key = (str(folder), backend, max_seq_length, threads, embedder_key(embedder))
        with _LOCK:
            instance = _SHARED.get(key)
        if instance is None:
            instance = cls(folder, backend, max_seq_length, threads, embedder)
            with _LOCK:
                instance = _SHARED.setdefault(key, instance)
        return instance

    @property
    def signature(self) -> dict:
        return signature(self.dimension, self.max_seq_length, backend_label(self.backend, self.embedder), self.embedder)

    def encode(self, texts: list[str], batch_size: int = defaults.DEFAULT_BATCH_SIZE) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(texts)
        lengths = [len(e.ids) for e in encodings]
        for width, indices in canonical_batches(lengths, self.max_seq_length):
            # every run of the graph has one shape per width
            batch = [encodings[i] for i in full_rows(indices, batch_rows(width))]
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for row, e in enumerate(batch):
                n = len(e.ids)
                ids[row, :n], mask[row, :n], types[row, :n] = e.ids, e.attention_mask, e.type_ids
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            hidden = self.session.run(None, {name: feed[name] for name in self.inputs})[0]
            pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[indices] = pooled[:len(indices)]
        return out
