"""What every outside system does alike before its own work: refuse a mode it does not have, refuse to start
without its package (with the line that installs it), and embed with the run's embedder, serving what a stepped
item's runner encoded ahead."""

from __future__ import annotations

import importlib
import re

from memoria.defaults import DEFAULT_EMBEDDER_BACKEND

#: Texts per call to the embedding model when the run names none.
DEFAULT_BATCH = 32


def check_mode(name: str, mode: str, modes: tuple[str, ...]) -> None:
    if mode not in modes:
        raise ValueError(f"retrieval mode {mode!r} is not one of {name}'s: {', '.join(modes)}")


def require(package: str, install: str, *modules: str) -> None:
    """Import `modules`; a missing one refuses the system, naming `package` and the line that installs it. The
    offline environment is set first: a vendor's libraries read their switches (hub, telemetry) as they load."""
    from memoria.model_files import offline_environment

    offline_environment()
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(f"{package} is not installed: {install} (in the checkout)") from exc


class RunEmbedder:
    """For a system that embeds: `self.embedder` is the run's embedder (a lazy one made from the run's settings
    when given a model's name or nothing), wrapped to serve the vectors a stepped item's runner had encoded ahead
    (`contract.EncodesAhead`); `None` where the system, in its mode, embeds nothing."""

    embedder = None
    batch_size = DEFAULT_BATCH

    def use_run_embedder(self, embedder=None, max_seq_length: int | None = None,
                         embedder_backend: str = DEFAULT_EMBEDDER_BACKEND, batch_size: int | None = None) -> None:
        from adapters.systems.memoria_system import onnx_folder
        from adapters.threads import model_threads
        from memoria.ahead import AheadEmbedder
        from memoria.embedder import LazyEmbedder

        self.batch_size = batch_size or DEFAULT_BATCH
        if embedder is None or isinstance(embedder, str):
            embedder = LazyEmbedder(max_seq_length, embedder_backend, onnx_dir=onnx_folder(),
                                    threads=model_threads(), embedder=embedder)
        self.embedder = AheadEmbedder(embedder)

    @property
    def embedding_signature(self) -> dict | None:
        return self.embedder.signature if self.embedder is not None else None

    def encode_ahead(self, docs: list[dict]) -> None:
        """The vectors of docs to be ingested in steps, made now in one batch (`contract.EncodesAhead`)."""
        if self.embedder is not None:
            self.embedder.encode_ahead([d["text"] for d in docs], batch_size=self.batch_size)


_OPERATOR = re.compile(r"\b(AND|OR|NOT|NEAR)\b")


def plain_words(question: str) -> str:
    """A question as plain words for a full-text engine that reads query syntax (FTS5's phrases, upper-case
    operators and column filters; LanceDB's phrases): double quotes and colons become spaces and operator words
    are lowered, so a question that quotes a title, or says AND, is matched word by word as any other. A benchmark's
    question is prose, never a query in a system's language."""
    return _OPERATOR.sub(lambda m: m.group(1).lower(), question.replace('"', " ").replace(":", " "))
