"""BM25 over the stored texts, on top of rank-bm25, with a JSON state.

The state (tokens, ids, parameters, IDF, average length) is written as JSON,
never pickled; loading it rebuilds the same scorer without re-tokenising.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import snowballstemmer
from rank_bm25 import BM25Okapi

from memoria import defaults
from memoria.errors import SnapshotError

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

#: Function words that only add noise to lexical matching of questions.
STOPWORDS = frozenset(
    """a an and are as at be been but by did do does for from had has have he her his how i if in
    into is it its me my of on or our she so than that the their them then there these they this
    to was we were what when where which who whom why will with would you your""".split()
)


#: The stemmer every token goes through, named in a saved state: "camped" and "camping" are one term.
STEMMER = "snowball-english"
_stemmers = threading.local()  # a Snowball stemmer keeps state while it works: one per thread


@lru_cache(maxsize=1 << 17)
def stem(word: str) -> str:
    """The Snowball (Porter 2) English stem of a lower-case word."""
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    return stemmer.stemWord(word)


def tokenize(text: str) -> list[str]:
    """Lower-case, stemmed word tokens without stopwords.

    Without stemming a question's "camped" never meets a turn's "camping", and "pets" never "pet";
    on LoCoMo dev5 and on a LongMemEval-format file made from it, stemming lifts both `fusion` and `full`
    (docs/full-mode.md)."""
    return [stem(t) for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


class BM25Index:
    """An Okapi BM25 index whose documents are identified by integer ids."""

    FORMAT = "memoria-bm25/2"  # /2: stemmed tokens (STEMMER)

    def __init__(
        self,
        k1: float = defaults.DEFAULT_BM25_K1,
        b: float = defaults.DEFAULT_BM25_B,
        epsilon: float = defaults.DEFAULT_BM25_EPSILON,
    ):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.ids: list[int] = []
        self.tokens: list[list[str]] = []
        self._scorer: BM25Okapi | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: list[int], texts: list[str]) -> None:
        self.ids.extend(ids)
        self.tokens.extend(tokenize(t) for t in texts)
        self._scorer = None

    def clear(self) -> None:
        self.ids, self.tokens, self._scorer = [], [], None

    def _ensure_scorer(self) -> BM25Okapi | None:
        if self._scorer is None and self.ids:
            # rank-bm25 divides by zero on an all-empty corpus; a placeholder token avoids it.
            corpus = [toks or ["\x00"] for toks in self.tokens]
            self._scorer = BM25Okapi(corpus, k1=self.k1, b=self.b, epsilon=self.epsilon)
        return self._scorer

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        """Best-first (id, score) pairs of documents sharing a term with the query."""
        return self.search_terms(tokenize(query), limit)

    def search_terms(self, terms: list[str], limit: int) -> list[tuple[int, float]]:
        """`search` for terms already tokenized (stemmed): a stem is not always its own stem."""
        scorer = self._ensure_scorer()
        if scorer is None or not terms or limit <= 0:
            return []
        scores = scorer.get_scores(terms)
        ids = np.asarray(self.ids)
        matched = np.flatnonzero(scores > 0)
        order = np.lexsort((ids[matched], -np.round(scores[matched], defaults.TIE_DECIMALS)))[:limit]
        return [(int(ids[matched[i]]), float(scores[matched[i]])) for i in order]

    # -- persistence -------------------------------------------------------
    def state(self) -> dict:
        scorer = self._ensure_scorer()
        return {
            "format": self.FORMAT,
            "stemmer": STEMMER,
            "k1": self.k1,
            "b": self.b,
            "epsilon": self.epsilon,
            "ids": self.ids,
            "tokens": self.tokens,
            "idf": scorer.idf if scorer else {},
            "avgdl": scorer.avgdl if scorer else 0.0,
        }

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.state(), separators=(",", ":")), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "BM25Index":
        try:
            state = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SnapshotError(f"{path}: unreadable BM25 state ({exc})") from exc
        if not isinstance(state, dict) or state.get("format") != cls.FORMAT:
            raise SnapshotError(f"{path}: not a {cls.FORMAT} state")
        if state.get("stemmer") != STEMMER:
            raise SnapshotError(f"{path}: BM25 tokens stemmed by {state.get('stemmer')!r}, not {STEMMER!r}")
        index = cls(state["k1"], state["b"], state["epsilon"])
        index.ids = [int(i) for i in state["ids"]]
        index.tokens = [list(t) for t in state["tokens"]]
        if index.ids:
            index._scorer = _restored_scorer(index, state)
        return index


def _restored_scorer(index: BM25Index, state: dict) -> BM25Okapi:
    """A BM25Okapi with the saved statistics, without recomputing them."""
    scorer = BM25Okapi.__new__(BM25Okapi)
    scorer.k1, scorer.b, scorer.epsilon = index.k1, index.b, index.epsilon
    scorer.tokenizer = None
    scorer.corpus_size = len(index.ids)
    scorer.doc_freqs = [Counter(toks or ["\x00"]) for toks in index.tokens]
    scorer.doc_len = [len(toks or ["\x00"]) for toks in index.tokens]
    scorer.avgdl = float(state["avgdl"])
    scorer.idf = {term: float(v) for term, v in state["idf"].items()}
    return scorer
