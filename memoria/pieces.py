"""Sentences of a turn, each with its own vector: the `sentence` signal of the `full` mode.

A turn often answers in one clause among several ("Glad you have support! Unconditional
love is so important. Here's a pic of my family camping at the beach."), and one vector
of the whole turn dilutes that clause. Each turn of two pieces or more keeps a vector
per piece; the signal is a candidate's best cosine over the turn and its pieces.

Pieces are the turn's sentences (split after `.`, `!` or `?`, and before a bracketed
aside such as a shared photo's caption), without the speaker's `name: ` opening; a
piece of fewer than `MIN_PIECE_WORDS` words is left out (a "Wow!" says little), and a
turn of more than `max_pieces` pieces has its sentences joined into `max_pieces`
runs of about equal length, so a long turn costs a bounded number of encodings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from memoria.errors import SnapshotError
from memoria.vectors import VectorIndex, encode_reusing

#: Split after a sentence's end, and before a bracketed aside.
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\s+(?=\[)")
#: A piece of fewer words is left out.
MIN_PIECE_WORDS = 3


def without_speaker(text: str, speaker: str) -> str:
    """`text` without its opening `speaker: ` (any case), or unchanged."""
    opening = f"{speaker}: "
    if speaker and text[:len(opening)].lower() == opening.lower():
        return text[len(opening):]
    return text


def split_pieces(text: str, speaker: str = "", max_pieces: int = 8) -> list[str]:
    """The pieces of a turn that get their own vectors; [] when the turn is one piece (its vector suffices)."""
    if max_pieces < 2:
        return []
    pieces = [p.strip() for p in _BOUNDARY.split(without_speaker(text, speaker))]
    pieces = [p for p in pieces if len(p.split()) >= MIN_PIECE_WORDS]
    if len(pieces) < 2:
        return []
    if len(pieces) > max_pieces:
        size = -(-len(pieces) // max_pieces)  # ceiling: at most max_pieces runs
        pieces = [" ".join(pieces[i:i + size]) for i in range(0, len(pieces), size)]
    return pieces


#: The files of the sentence vectors in a snapshot, present only when they were built.
FILES = {"piece_vectors": "pieces.faiss", "pieces": "pieces.json"}


def _whole(value) -> bool:
    """Whether a value read from JSON is a whole number (not a bool, not a float)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _expected(rows, max_pieces: int) -> list[tuple[int, str]]:
    """(memory id, piece) of every piece of `rows` ((id, text, metadata), in id order)."""
    return [(memory_id, piece) for memory_id, text, metadata in rows
            for piece in split_pieces(text, str(metadata.get("speaker") or ""), max_pieces)]


class SentenceVectors:
    """The pieces of every stored turn, their vectors, and for a question each turn's best piece."""

    def __init__(self, dimension: int):
        self.dimension = dimension
        self.vectors = VectorIndex(dimension)
        self.owners: list[int] = []  # the memory id of each piece, in the order of the rows
        self.texts: list[str] = []
        self.built: dict | None = None  # the setting and row count the pieces were built for
        self.matrix = None

    def current(self, max_pieces: int, rows: int) -> bool:
        return self.built == {"max_pieces": max_pieces, "rows": rows}

    def build(self, rows, embedder, max_pieces: int, batch_size: int) -> int:
        """Split and encode `rows` ((id, text, metadata)); a piece whose text is unchanged since the last build
        keeps its vector. Returns how many texts were encoded."""
        pairs = _expected(rows, max_pieces)
        owners, texts = [owner for owner, _ in pairs], [text for _, text in pairs]
        self.vectors, self.matrix, encoded = encode_reusing(texts, self.vectors, self.texts, embedder, self.dimension,
                                                            batch_size)
        self.owners, self.texts = owners, texts
        self.built = {"max_pieces": max_pieces, "rows": len(rows)}
        return encoded

    def best(self, query_vector) -> dict[int, float]:
        """Each turn with pieces: its best piece's cosine with the question ({} when no turn has two pieces)."""
        if query_vector is None or not self.owners:
            return {}
        if self.matrix is None:
            self.matrix = self.vectors.read_back(Path("pieces"))
        scores = self.matrix @ np.asarray(query_vector, dtype=np.float32)
        owners = np.asarray(self.owners)
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])  # owners run in row order
        return dict(zip(owners[starts].tolist(), np.maximum.reduceat(scores, starts).tolist()))

    def save(self, directory: Path) -> dict[str, Path]:
        paths = {name: directory / filename for name, filename in FILES.items()}
        self.vectors.save(paths["piece_vectors"])
        paths["pieces"].write_text(json.dumps({"built": self.built, "owners": self.owners, "texts": self.texts}),
                                   encoding="utf-8")
        return paths

    @classmethod
    def load(cls, directory: Path, rows, dimension: int) -> "SentenceVectors":
        """Snapshotted sentence vectors of `rows` ((id, text, metadata) of the restored store).

        The saved owners and texts must be what `split_pieces` makes of the rows under the saved
        `max_pieces`, and the vectors rows 0..n-1 of finite numbers: a piece credited to another turn, or a text
        that later builds would reuse a wrong vector for, is refused, not ranked."""
        path = directory / FILES["pieces"]
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SnapshotError(f"{path}: unreadable pieces file ({exc})") from exc
        built = saved.get("built") if isinstance(saved, dict) else None
        if not (isinstance(built, dict) and _whole(built.get("max_pieces")) and _whole(built.get("rows"))
                and isinstance(saved.get("owners"), list) and isinstance(saved.get("texts"), list)):
            raise SnapshotError(f"{path}: not a pieces file (expected an object with built {{max_pieces, rows}} "
                                "as whole numbers, and owners and texts as lists)")
        owners, texts = saved["owners"], saved["texts"]
        vectors = VectorIndex.load(directory / FILES["piece_vectors"], dimension)
        if len(vectors) != len(owners) or len(texts) != len(owners) or built["rows"] != len(rows):
            raise SnapshotError(f"{directory}: pieces disagree with the snapshot ({len(owners)} pieces, "
                                f"{len(texts)} texts, {len(vectors)} vectors, built for {built['rows']} of "
                                f"{len(rows)} rows)")
        expected = _expected(rows, built["max_pieces"])
        found = [(o, t) for o, t in zip(owners, texts) if _whole(o) and isinstance(t, str)]
        if found != expected:
            wrong = next((k for k, pair in enumerate(zip(found, expected)) if pair[0] != pair[1]),
                         min(len(found), len(expected)))
            raise SnapshotError(f"{path}: pieces disagree with the snapshot's rows from piece {wrong} on "
                                f"({len(expected)} pieces expected under max_pieces {built['max_pieces']}, "
                                f"{len(owners)} saved)")
        loaded = cls(dimension)
        loaded.matrix = vectors.read_back(directory / FILES["piece_vectors"])
        loaded.vectors, loaded.owners, loaded.texts = vectors, list(owners), list(texts)
        loaded.built = {"max_pieces": built["max_pieces"], "rows": built["rows"]}
        return loaded
