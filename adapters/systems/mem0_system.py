"""mem0 (PyPI `mem0ai`) as a system under test, offline, storing raw text without an LLM.

Optional: `pip install -e '.[mem0]'`. It gets the same local MiniLM the
engine uses, so a comparison measures memory design, not embedder. Texts are
added with `infer=False` (no extraction call), searched with threshold 0 (the
default 0.1 silently drops weak hits), each item under its own user id.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid

from adapters.systems.contract import AddsOnIngest, Describes, Embeds, SystemInfo

# mem0 reads this once, when it is first imported: off before anything imports it.
os.environ.setdefault("MEM0_TELEMETRY", "False")


class Mem0System(AddsOnIngest, Describes, Embeds):
    name = "mem0"
    adds_on_ingest = True  # each doc is one `Memory.add`

    def __init__(self, workdir: str | None = None):
        self._root = workdir or tempfile.mkdtemp(prefix="memfarm-mem0-")
        os.environ.setdefault("MEM0_DIR", os.path.join(self._root, "mem0home"))
        try:
            from mem0 import Memory  # noqa: F401
        except ImportError as exc:
            raise ImportError(f"mem0 is not installed: {DESCRIPTION.install} (in the checkout)") from exc
        from memoria.model_files import model_path

        self._model_path = model_path()
        self._memory = None
        self._folder = None

    @property
    def embedding_signature(self) -> dict:
        """The run's MiniLM files, encoded by mem0's own HuggingFace embedder: the model is named in the results
        file and on the board like every other system's, and the encoding path says it is mem0's, not the run's
        (its batches are mem0's, so its vectors may differ from the run's in their last bits)."""
        from memoria.model_files import packaged_signature

        return {**packaged_signature(), "backend": "mem0 huggingface embedder (sentence-transformers/torch)",
                "padding": "mem0's own (one text a call)"}

    @property
    def config(self) -> dict:
        import mem0

        return {"name": self.name, "retrieval_mode": "mem0:vector", "version": getattr(mem0, "__version__", "?"),
                "embedder": "huggingface:all-MiniLM-L6-v2 (local)", "vector_store": "qdrant (local path)",
                "infer": False, "threshold": 0.0, "embedding_signature": self.embedding_signature}

    def _config(self, folder: str) -> dict:
        return {
            "embedder": {"provider": "huggingface", "config": {"model": self._model_path, "embedding_dims": 384}},
            "vector_store": {"provider": "qdrant", "config": {"path": os.path.join(folder, "qdrant"),
                                                              "collection_name": "memfarm", "embedding_model_dims": 384,
                                                              "on_disk": False}},
            "llm": {"provider": "lmstudio", "config": {}},
            "history_db_path": os.path.join(folder, "history.db"),
        }

    def reset(self) -> None:
        from mem0 import Memory

        if self._folder:
            self._memory = None
            shutil.rmtree(self._folder, ignore_errors=True)
        self._folder = os.path.join(self._root, uuid.uuid4().hex[:8])
        self._memory = Memory.from_config(self._config(self._folder))

    def ingest(self, docs: list[dict]) -> None:
        if self._memory is None:
            self.reset()
        for doc in docs:
            self._memory.add(doc["text"], user_id=doc["label"], metadata={"external_id": doc["external_id"]}, infer=False)

    def retrieve(self, label: str, query: str, top_k: int) -> list[dict]:
        found = self._memory.search(query, top_k=top_k, filters={"user_id": label}, threshold=0.0)
        results = found.get("results", found) if isinstance(found, dict) else found
        return [{"external_id": (hit.get("metadata") or {}).get("external_id"), "score": float(hit.get("score") or 0.0)}
                for hit in results]


DESCRIPTION = SystemInfo("mem0", Mem0System, "mem0", (), extra="mem0", vendor_module="mem0")
