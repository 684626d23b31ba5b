"""The vectors of the questions a memory is asked, by the text the model reads, until the memory's next reset.

A question is encoded as it is asked unless it was handed over before (`QuestionVectors.add`): the questions
about to be asked of one state, encoded together. Asked one by one, each question is a batch of its own, and
every batch the model runs at a width has the same rows (`memoria.canonical_batches`), so much of what the
model ran for a question was copies run as padding. A vector depends on its text alone, so one served from here has the bits
it would have had encoded as it was asked: no ranking changes.
"""

from __future__ import annotations

import numpy as np


class QuestionVectors:
    """Text -> vector of the questions encoded for one memory state."""

    def __init__(self):
        self.held: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.held)

    def clear(self) -> None:
        self.held = {}

    def get(self, text: str, encoder) -> np.ndarray:
        """The vector of `text`, encoded now (one text, through `encoder`) unless held."""
        if text not in self.held:
            self.add([text], encoder)
        return self.held[text]

    def add(self, texts: list[str], encoder, batch_size: int = 32) -> int:
        """Encode together, each once, those of `texts` not held; returns how many were encoded. Each kept vector is
        read-only: it is served again, and a caller that wrote into it would change later recalls."""
        fresh = [text for text in dict.fromkeys(texts) if text not in self.held]
        if fresh:
            for text, vector in zip(fresh, encoder.encode(fresh, batch_size=batch_size)):
                vector = np.array(vector, dtype=np.float32)
                vector.setflags(write=False)
                self.held[text] = vector
        return len(fresh)
