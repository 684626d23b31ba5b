"""Sentences of a turn, each with its own vector: the `sentence` signal of the `full` mode.

A turn often answers in one clause among several ("Glad you have support! Unconditional
love is so important. Here's a pic of my family camping at the beach."), and one vector
of the whole turn dilutes that clause. Each turn of two pieces or more that reaches the
ranking stage gets a vector per piece; the signal is a candidate's best cosine over the
turn and its pieces.

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


def row_pieces(text: str, metadata: dict, max_pieces: int) -> list[str]:
    """The pieces of a stored row: its text split without the opening of the speaker its metadata names. The one
    definition that splitting at ranking, checking a snapshot and encoding ahead all read."""
    return split_pieces(text, str(metadata.get("speaker") or ""), max_pieces)


#: The files of the sentence vectors in a snapshot, present only when they were built.
FILES = {"piece_vectors": "pieces.faiss", "pieces": "pieces.json"}


def _whole(value) -> bool:
    """Whether a value read from JSON is a whole number (not a bool, not a float)."""
    return isinstance(value, int) and not isinstance(value, bool)


class SentenceVectors:
    """The pieces of the turns asked about so far, their vectors, and for a question each such turn's best piece.

    Only the turns that reach the ranking stage are ever read, so a turn is split and its pieces encoded
    when it first does (`ensure`), never a whole memory at ingest: the candidates of all of a haystack's
    questions are a fraction of its turns. (Memory that grows in steps has its pieces' vectors made ahead, by
    text, `MemoryInterface.encode_ahead`; they are served here when their turn first comes.) A turn's pieces
    are appended together, so its rows stay one run; a piece whose text is already held (another turn said the
    same) reuses that vector.
    """

    def __init__(self, dimension: int):
        self.dimension = dimension
        self.vectors = VectorIndex(dimension)
        self.owners: list[int] = []  # the memory id of each piece; a turn's pieces are one run
        self.texts: list[str] = []
        self.max_pieces: int | None = None  # the setting the pieces were split under (None: nothing split yet)
        self.checked: set[int] = set()  # the turns split under it (a turn of one piece holds no rows)
        self.matrix = None
        self._runs: dict[int, tuple[int, int]] | None = None  # each turn's [start, end) among the rows
        #: Pieces encoded since the last save or load, which a cached state made before lacks.
        self.unsaved = 0

    def ensure(self, rows: dict, embedder, max_pieces: int, batch_size: int) -> int:
        """Split and encode the pieces of the turns of `rows` ({memory id: (text, metadata)}) not split yet;
        returns how many texts were given to the embedder. Under another `max_pieces` than the pieces held,
        those are dropped first, their vectors kept for a piece whose text comes again."""
        previous, previous_texts = self.vectors, self.texts
        if max_pieces != self.max_pieces:
            self.__init__(self.dimension)
            self.max_pieces = max_pieces
        fresh = sorted(set(rows) - self.checked)
        new = [(memory_id, piece) for memory_id in fresh
               for piece in row_pieces(*rows[memory_id], max_pieces)]
        self.checked.update(fresh)
        if not new:
            return 0
        texts = [text for _, text in new]
        _, matrix, encoded = encode_reusing(texts, previous, previous_texts, embedder, self.dimension, batch_size)
        start = len(self.owners)
        self.vectors.add(list(range(start, start + len(texts))), matrix)
        self.matrix = matrix if self.matrix is None else np.vstack([self.matrix, matrix])
        self.owners += [owner for owner, _ in new]
        self.texts += texts
        self._runs = None
        self.unsaved += len(texts)
        return encoded

    def best(self, query_vector, ids=None) -> dict[int, float]:
        """Each turn of `ids` (None: every turn) with pieces held: its best piece's cosine with the question.

        Each cosine is one vector's dot product, as the turn's own cosine is (memoria.ranking): a product of
        the whole matrix rounds a row by where it stands in it, and so by which other turns are held."""
        if query_vector is None or not self.owners:
            return {}
        if self.matrix is None:
            self.matrix = self.vectors.read_back(Path("pieces"))
        if self._runs is None:
            self._runs = {}
            for position, owner in enumerate(self.owners):  # a turn's pieces are one run
                start, _ = self._runs.get(owner, (position, position))
                self._runs[owner] = (start, position + 1)
        query = np.asarray(query_vector, dtype=np.float32)
        wanted = self._runs if ids is None else [i for i in ids if i in self._runs]
        return {owner: max(float(np.dot(self.matrix[k], query)) for k in range(*self._runs[owner]))
                for owner in wanted}

    def save(self, directory: Path, rows: int) -> dict[str, Path]:
        """Write the pieces held (of a memory of `rows` rows) into `directory`."""
        paths = {name: directory / filename for name, filename in FILES.items()}
        self.vectors.save(paths["piece_vectors"])
        paths["pieces"].write_text(json.dumps({"built": {"max_pieces": self.max_pieces, "rows": rows},
                                               "owners": self.owners, "texts": self.texts}), encoding="utf-8")
        self.unsaved = 0
        return paths

    @classmethod
    def load(cls, directory: Path, rows, dimension: int) -> "SentenceVectors":
        """Snapshotted sentence vectors of `rows` ((id, text, metadata) of the restored store).

        Each saved turn's run of pieces must be what `split_pieces` makes of its row under the saved
        `max_pieces` (a snapshot holds the turns that reached ranking, or, made by earlier code, every
        turn), and the vectors rows 0..n-1 of finite numbers: a piece credited to another turn, or a text
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
        _check_runs(path, owners, texts, rows, built["max_pieces"])
        loaded = cls(dimension)
        loaded.matrix = vectors.read_back(directory / FILES["piece_vectors"])
        loaded.vectors, loaded.owners, loaded.texts = vectors, list(owners), list(texts)
        loaded.max_pieces, loaded.checked = built["max_pieces"], set(owners)
        return loaded


def _check_runs(path: Path, owners: list, texts: list, rows, max_pieces: int) -> None:
    """Refuse saved pieces unless each owner is a stored row whose pieces are exactly its one run of texts."""
    by_id = {memory_id: (text, metadata) for memory_id, text, metadata in rows}
    position = 0
    seen: set[int] = set()
    while position < len(owners):
        owner = owners[position]
        if not _whole(owner) or owner not in by_id or owner in seen:
            raise SnapshotError(f"{path}: pieces disagree with the snapshot's rows at piece {position} (owner "
                                f"{owner!r} is not a stored row, or its pieces are not one run)")
        seen.add(owner)
        text, metadata = by_id[owner]
        expected = row_pieces(text, metadata, max_pieces)
        end = position + len(expected)
        if not expected or owners[position:end] != [owner] * len(expected) or texts[position:end] != expected \
                or (end < len(owners) and owners[end] == owner):
            raise SnapshotError(f"{path}: pieces disagree with the snapshot's rows from piece {position} on (turn "
                                f"{owner} has {len(expected)} pieces under max_pieces {max_pieces})")
        position = end
