"""BatchLoader: validated, batched insertion into a MemoryInterface."""

from __future__ import annotations

import json
import logging
import time

from memoria import defaults
from memoria.extract import extract_many
from memoria.errors import (
    EmptyTextError,
    InvalidMetadataError,
    InvalidTextError,
    LengthMismatchError,
)

logger = logging.getLogger(__name__)


class BatchLoader:
    """Inserts texts with their metadata; nothing is stored unless the whole batch is valid."""

    def __init__(self, memory):
        self.memory = memory
        self.timings: dict[str, float] = {}

    def insert_batch(
        self,
        texts: list[str],
        metadatas: list[dict],
        batch_size: int = defaults.DEFAULT_BATCH_SIZE,
        skip_embedding: bool = False,
        parallel_extract: bool = True,
        max_workers: int = defaults.DEFAULT_MAX_WORKERS,
        skip_embedding_build: bool = False,
    ) -> int:
        """Validate, embed and store; returns the number of memories stored.

        `metadatas[i]` belongs to `texts[i]`. `skip_embedding` stores text
        without vectors (lexical sources only). `skip_embedding_build` embeds
        now but builds the FAISS index once, on the next recall or snapshot.
        Entities, relationships, attributes and importance are extracted for
        every memory, across `max_workers` threads when `parallel_extract` is on.
        """
        texts, metadatas = list(texts), list(metadatas)
        validate_batch(texts, metadatas)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        vectors = None
        started = time.perf_counter()
        if not skip_embedding and texts:  # a text said twice is encoded once: its vector depends on it alone
            distinct = list(dict.fromkeys(texts))
            vectors = self.memory.counted("turns").encode(distinct, batch_size=batch_size)
            if len(distinct) < len(texts):
                row = {text: n for n, text in enumerate(distinct)}
                vectors = vectors[[row[text] for text in texts]]
        encoded = time.perf_counter()
        derived = extract_many(texts, metadatas, parallel=parallel_extract, max_workers=max_workers)
        extracted = time.perf_counter()
        self.memory.insert(texts, metadatas, vectors, derived, defer_vectors=skip_embedding_build)
        self.timings = {"encode_ms": (encoded - started) * 1000, "extract_ms": (extracted - encoded) * 1000,
                        "index_ms": (time.perf_counter() - extracted) * 1000}  # where this insert's time went
        logger.debug("stored %d memories", len(texts))
        return len(texts)


def validate_batch(texts: list, metadatas: list) -> None:
    """Raise a specific error naming the first bad position; change nothing."""
    if len(texts) != len(metadatas):
        raise LengthMismatchError(f"{len(texts)} texts but {len(metadatas)} metadatas")
    for position, (text, metadata) in enumerate(zip(texts, metadatas)):
        if not isinstance(text, str):
            raise InvalidTextError(f"text at position {position} is {type(text).__name__}, not str", position)
        if not text.strip():
            raise EmptyTextError(f"text at position {position} is empty", position)
        if not isinstance(metadata, dict):
            raise InvalidMetadataError(
                f"metadata at position {position} is {type(metadata).__name__}, not dict", position
            )
        try:
            json.dumps(metadata, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidMetadataError(f"metadata at position {position} is not JSON-able: {exc}", position) from exc
