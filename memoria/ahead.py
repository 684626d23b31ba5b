"""Vectors made ahead: texts a caller knows it will store later, encoded in one batch and served from here.

Memory that grows in small steps (a session at a time) would otherwise encode a few texts at each step, and
every batch the model runs at a width has the same rows whatever it holds (`memoria.canonical_batches`),
so much of each small batch would be copies run as padding. A vector depends only on its text (never on its batch), so a
text served from here has the bits it would have had if encoded when stored: rankings are unchanged. What is
here is vectors by text only; nothing of it is stored, indexed or searchable until the text is inserted.

Questions too are handed over ahead, all those to be asked of one state (`questions_ahead`): their own vectors,
and the sentence pieces their rankings will read, each encoded once for them all, in batches sorted by width,
where each question asked alone would run its own vector and its head's pieces in small padded batches.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from memoria import defaults
from memoria.pieces import row_pieces
from memoria.ranking import sentence_head
from memoria.windows import build_windows


class VectorsAhead:
    """Text -> vector for the texts encoded ahead (one item's at a time)."""

    def __init__(self):
        self.vectors: dict[str, np.ndarray] = {}

    def add(self, texts: list[str], encode: Callable[[list[str]], np.ndarray]) -> int:
        """Encode the `texts` not held yet (each distinct one once) and hold them; returns how many were encoded."""
        distinct = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if distinct:
            self.vectors.update(zip(distinct, encode(distinct)))
        return len(distinct)

    def serve(self, texts: list[str], encode: Callable[[list[str]], np.ndarray], dimension: int) -> np.ndarray:
        """The vectors of `texts`: held ones from here, the others encoded now (through `encode`)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        fresh = dict(zip(missing, encode(missing))) if missing else {}
        out = np.zeros((len(texts), dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self.vectors[text] if text in self.vectors else fresh[text]
        return out


class AheadEmbedder:
    """An embedder that serves the texts encoded ahead from a `VectorsAhead` and encodes the rest with the one it
    wraps; everything else (its signature, its dimension) is the wrapped embedder's."""

    def __init__(self, inner):
        self.inner = inner
        self.ahead = VectorsAhead()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode(self, texts, batch_size: int = 32, **options) -> np.ndarray:
        if not self.ahead.vectors:
            return self.inner.encode(texts, batch_size=batch_size, **options)
        return self.ahead.serve(list(texts), lambda rest: self.inner.encode(rest, batch_size=batch_size, **options),
                                self.inner.dimension)

    def encode_ahead(self, texts: list[str], batch_size: int = 32) -> int:
        """Forget what was encoded ahead, then encode `texts` (each distinct one once) to be served later."""
        self.ahead = VectorsAhead()
        return self.ahead.add(list(texts), lambda rest: self.inner.encode(rest, batch_size=batch_size))


def docs_ahead(memory, texts: list[str], metadatas: list[dict], batch_size: int, ranked: bool) -> int:
    """Encode now, one batch per kind, what `texts` (to be inserted into `memory` later, in order) will need: their
    vectors, their windows' where `memory` builds windows, and, where `ranked` (the caller will recall in a ranked
    mode) and the ranking reads them, their sentence pieces'. A piece is still split into memory only when its turn
    first reaches a ranking's head; encoded here, it is served then instead of being encoded in that query's small
    batches, padded with unused rows. What was encoded ahead before is forgotten; no texts only forget. Returns the
    texts encoded."""
    memory.ahead = VectorsAhead()
    kinds = {"turns": list(texts)}
    if memory.window_size > 0 and texts:  # a session's windows depend on its own rows only
        rows = [(n, text, metadata) for n, (text, metadata) in enumerate(zip(texts, metadatas))]
        kinds["windows"] = [w["text"] for w in build_windows(rows, memory.window_size, memory.window_overlap,
                                                             memory.window_turn_chars)]
    if ranked and memory.pieces_wanted:
        kinds["pieces"] = [piece for text, metadata in zip(texts, metadatas)
                           for piece in row_pieces(text, metadata, memory.max_pieces)]
    return sum(memory.ahead.add(batch, lambda rest, kind=kind: memory.counted(kind)._encode(
        rest, batch_size=batch_size)) for kind, batch in kinds.items())


def questions_ahead(memory, queries: list[str], mode: str, limit: int, batch_size: int) -> int:
    """Encode now what `queries`, about to be asked of `memory` as it stands in `mode` (one that reads vectors) for
    `limit` candidates, will read: their vectors, together, then, in a ranked mode that reads sentences, the pieces of
    every turn that will reach one of their rankings' heads and has none yet, together. Which turns those are is
    worked out as the ranking will, from the same sources at the same depth (`memoria.ranking.sentence_head`); a turn
    that differs at recall (a source cut short by its time budget) is encoded then, as any would be.

    The heads are not worked out where that would cost more than it saves: where the docs' own pieces were encoded
    ahead (memory that grows in steps: they are served from there), and under the `deadline` policy, whose sources
    are cut by time (working them out runs every source once more, and one still running at its budget holds a
    thread of the pool the recalls share). Returns the texts encoded."""
    encoded = memory.questions.add([memory.dense_question(query, mode) for query in queries],
                                   memory.counted("questions"), batch_size)
    if not (mode in defaults.RANKED_MODES and memory.pieces_wanted) or memory.ahead.vectors \
            or memory.policy == "deadline":
        return encoded
    heads: set[int] = set()
    for query in queries:
        context = memory.ranking_context(query, mode, limit)
        if context is not None and context.query_vector is not None:
            heads.update(sentence_head(context, memory.weights, memory.sentence_head))
    missing = heads if memory.pieces.max_pieces != memory.max_pieces else heads - memory.pieces.checked
    return encoded + (memory.pieces_of(memory.store.get(sorted(missing)), batch_size) if missing else 0)
