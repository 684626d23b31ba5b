"""The structured retrieval sources of the `full` mode: graph, phrase, attribute.

Each reads the derived indexes (entities, relationships, attributes) kept in
SQLite beside the raw text, through an in-memory view rebuilt after inserts.
Each returns best-first (id, score) pairs, ties ordered by id.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from types import SimpleNamespace

import numpy as np

from memoria import defaults
from memoria.boosts import date_keys, mentions_time
from memoria.bm25 import STOPWORDS, tokenize
from memoria.discourse import is_standing
from memoria.extract import query_attributes, query_entities
from memoria.ties import best_first
from memoria.windows import session_key

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

#: How much each kind of attribute match counts.
ATTRIBUTE_WEIGHTS = {"date": 1.0, "session_date": 0.6, "quantity": 1.0, "time": 1.0, "number": 0.4, "speaker": 0.3}


def _ranked(scores: dict[int, float], limit: int) -> list[tuple[int, float]]:
    return best_first((i, s) for i, s in scores.items() if s > 0)[:limit]


def _normal_text(text: str) -> str:
    return " " + " ".join(_WORD.findall(text.lower())) + " "


class DerivedView:
    """Inverted maps over the derived tables; built once per state, after the last insert.

    `earlier`: the view of an earlier state of the same memory, or what it `carried()` (memory that grows in steps
    builds one view per step).
    What is worked out from a memory's own text alone (its normal text, its date keys, whether it mentions a time,
    whether it states a standing preference) is taken from there for each memory whose text (and date) is the
    same, and worked out for the rest: the view is the one built without it, at a fraction of the cost.
    Nothing of `earlier` is held."""

    def __init__(self, store, tokens: dict[int, list[str]] | None = None, earlier=None):
        #: Each memory's BM25 tokens where the caller has them already (memoria.bm25.BM25Index); else worked out
        #: from the text on first use.
        self._tokens = tokens
        self.entity_ids: dict[str, set[int]] = defaultdict(set)
        self.entities_of: dict[int, set[str]] = defaultdict(set)
        self.related: dict[str, set[str]] = defaultdict(set)
        self.attribute_ids: dict[tuple[str, str], set[int]] = defaultdict(set)
        self.importance: dict[int, float] = {}
        for memory_id, entity in store.rows("entities"):
            self.entity_ids[entity].add(memory_id)
            self.entities_of[memory_id].add(entity)
        for _, source, _, target in store.rows("relationships"):
            self.related[source].add(target)
            self.related[target].add(source)
        for memory_id, kind, value in store.rows("attributes"):
            self.attribute_ids[(kind, value)].add(memory_id)
        self.importance = {m: s for m, s in store.rows("importance")}
        rows = store.all_rows()
        kept = earlier.raw_texts if earlier is not None else {}
        same = {memory_id for memory_id, text, _ in rows if kept.get(memory_id) == text}
        self.texts = {memory_id: earlier.texts[memory_id] if memory_id in same else _normal_text(text)
                      for memory_id, text, _ in rows}
        self.raw_texts = {memory_id: text for memory_id, text, _ in rows}
        self.speaker_of = {memory_id: str(m.get("speaker") or "").strip().lower() for memory_id, _, m in rows}
        #: Each memory's role where its doc names one (`user`, `assistant`), lower case; "" where none.
        self.role_of = {memory_id: str(m.get("role") or "").strip().lower() for memory_id, _, m in rows}
        self._standing: set[int] | None = None
        self.session_of = {memory_id: session_key(m) for memory_id, _, m in rows}
        #: Each session's place among the sessions stored, by its first memory (0: the oldest).
        self.session_order: dict = {}
        for memory_id in sorted(self.session_of):
            self.session_order.setdefault(self.session_of[memory_id], len(self.session_order))
        self.session_date = {memory_id: str(m.get("date") or "") for memory_id, _, m in rows}
        self.speakers = {s for s in self.speaker_of.values() if s}
        self.known_names = set(self.entity_ids) | self.speakers
        self.ids = sorted(self.texts)
        self.total = max(1, len(rows))
        self._date_keys: dict[int, set[str]] = {}
        self._mentions_time: dict[int, bool] = {}
        #: Whether each user message's text, read so far, states a standing preference (its role is read apart).
        self._standing_of: dict[int, bool] = {}
        if earlier is not None:
            self._date_keys = {i: keys for i, keys in earlier._date_keys.items()
                               if i in same and earlier.session_date.get(i) == self.session_date.get(i)}
            self._mentions_time = {i: said for i, said in earlier._mentions_time.items() if i in same}
            self._standing_of = {i: said for i, said in earlier._standing_of.items() if i in same}
        self._document_frequency: Counter | None = None
        self._sessions: SessionDocuments | None = None
        self._centroids: dict | None = None
        self._word_ids: dict[str, set[int]] | None = None

    def carried(self) -> SimpleNamespace:
        """What a view built after the next insert takes from this one (its `earlier`), and nothing else of it."""
        return SimpleNamespace(raw_texts=self.raw_texts, texts=self.texts, session_date=self.session_date,
                               _date_keys=self._date_keys, _mentions_time=self._mentions_time,
                               _standing_of=self._standing_of)

    @property
    def word_ids(self) -> dict[str, set[int]]:
        """Each word of the normal texts -> the memories whose text holds it (worked out once, on first use)."""
        if self._word_ids is None:  # built whole before it is shared: a source on another thread sees all or none
            word_ids: dict[str, set[int]] = defaultdict(set)
            for memory_id, text in self.texts.items():
                for word in set(text.split()):
                    word_ids[word].add(memory_id)
            self._word_ids = word_ids
        return self._word_ids

    def holding(self, words: list[str]) -> set[int]:
        """The memories whose text holds every one of `words`."""
        found = sorted((self.word_ids.get(word, set()) for word in set(words)), key=len)
        return found[0].intersection(*found[1:]) if found else set()

    def idf(self, entity: str) -> float:
        return math.log(1 + self.total / (1 + len(self.entity_ids.get(entity, ()))))

    def tokens(self, memory_id: int) -> list[str]:
        if self._tokens is None or memory_id not in self._tokens:
            return tokenize(self.raw_texts.get(memory_id, ""))
        return self._tokens[memory_id]

    @property
    def document_frequency(self) -> Counter:
        """How many memories hold each BM25 token (worked out once, on first use)."""
        if self._document_frequency is None:
            self._document_frequency = Counter()
            for memory_id in self.ids:
                self._document_frequency.update(set(self.tokens(memory_id)))
        return self._document_frequency

    @property
    def sessions(self) -> "SessionDocuments":
        """Every session as one document of its turns' tokens (worked out once, on first use)."""
        if self._sessions is None:
            self._sessions = SessionDocuments(((self.session_of[i], self.tokens(i)) for i in self.ids))
        return self._sessions

    def session_centroids(self, vectors) -> dict:
        """Each session's mean turn vector, unit length (worked out once, on first use, from `vectors`, a
        memoria.vectors.VectorIndex). A session none of whose turns has a vector has no centroid."""
        if self._centroids is None:
            stored = vectors.stored()
            sums: dict = {}
            for memory_id in self.ids:
                vector = stored.get(memory_id)
                if vector is not None:
                    key = self.session_of[memory_id]
                    sums[key] = sums[key] + vector if key in sums else np.array(vector, dtype=np.float64)
            self._centroids = {}
            for key, total in sums.items():
                norm = float(np.linalg.norm(total))
                if norm > 0:
                    self._centroids[key] = total / norm
        return self._centroids

    @property
    def standing(self) -> set[int]:
        """The user's messages that state a standing instruction or preference (memoria.discourse.is_standing),
        worked out once, on first use."""
        if self._standing is None:
            for i in self.ids:
                if self.role_of.get(i) == "user" and i not in self._standing_of:
                    self._standing_of[i] = is_standing(self.raw_texts[i])
            self._standing = {i for i in self.ids if self.role_of.get(i) == "user" and self._standing_of[i]}
        return self._standing

    def date_keys(self, memory_id: int) -> set[str]:
        """Date keys of a memory's text and of its session's date (worked out once per memory)."""
        if memory_id not in self._date_keys:
            self._date_keys[memory_id] = (date_keys(self.raw_texts.get(memory_id, ""))
                                          | date_keys(self.session_date.get(memory_id, "")))
        return self._date_keys[memory_id]

    def mentions_time(self, memory_id: int) -> bool:
        if memory_id not in self._mentions_time:
            self._mentions_time[memory_id] = mentions_time(self.raw_texts.get(memory_id, ""))
        return self._mentions_time[memory_id]


class SessionDocuments:
    """Okapi BM25 over whole sessions: a session is one document, the tokens of all its turns.

    A turn says little of what a conversation is about; the session it sits in says more. Scored with the
    parameters of the turn index (memoria.defaults) and the non-negative idf log(1 + (N - df + 0.5) / (df + 0.5)).
    """

    def __init__(self, members, k1: float = defaults.DEFAULT_BM25_K1, b: float = defaults.DEFAULT_BM25_B):
        self.k1, self.b = k1, b
        counts: dict = defaultdict(Counter)
        for key, tokens in members:
            counts[key].update(tokens)
        self.lengths = {key: sum(c.values()) for key, c in counts.items()}
        self.average = sum(self.lengths.values()) / max(1, len(self.lengths))
        #: term -> {session: term frequency}, sessions in the order they were first met: a query reads only the
        #: sessions that hold its terms.
        self.postings: dict[str, dict] = defaultdict(dict)
        for key, c in counts.items():
            for term, tf in c.items():
                self.postings[term][key] = tf

    def scores(self, terms: list[str]) -> dict:
        """Each session's BM25 score for `terms` (a repeated term counts once); sessions matching none are left out."""
        n = len(self.lengths)
        out: dict = defaultdict(float)
        for term in sorted(set(terms)):  # one order in every process: a set's follows the string hash seed
            holders = self.postings.get(term)
            if not holders:
                continue
            idf = math.log(1 + (n - len(holders) + 0.5) / (len(holders) + 0.5))
            for key, tf in holders.items():
                norm = self.k1 * (1 - self.b + self.b * self.lengths[key] / max(self.average, 1e-9))
                out[key] += idf * tf * (self.k1 + 1) / (tf + norm)
        return dict(out)


def graph_search(view: DerivedView, query: str, limit: int, seeds: int) -> list[tuple[int, float]]:
    """Seeds hold the query's entities; expand one hop through entities they share and relationships."""
    wanted = [e for e in query_entities(query) if e in view.entity_ids]
    seed_scores: dict[int, float] = defaultdict(float)
    for entity in wanted:
        for memory_id in view.entity_ids[entity]:
            seed_scores[memory_id] += view.idf(entity)
    best_seeds = _ranked(seed_scores, seeds)
    scores = dict(seed_scores)
    query_set = set(wanted)
    for seed, seed_score in best_seeds:
        bridges = (view.entities_of[seed] - query_set) | {t for e in wanted for t in view.related.get(e, ())}
        for entity in sorted(bridges):  # summed in a set's order, a score's last bit followed the hash seed
            ids = view.entity_ids.get(entity, ())
            if not ids or len(ids) > view.total / 4:  # an entity everywhere links nothing
                continue
            share = 0.5 * seed_score * view.idf(entity) / max(1.0, math.log(1 + len(ids)))
            for memory_id in ids:
                if memory_id != seed:
                    scores[memory_id] = scores.get(memory_id, 0.0) + share
    return _ranked(scores, limit)


def phrase_search(view: DerivedView, query: str, limit: int) -> list[tuple[int, float]]:
    """Exact phrase and n-gram (2 to 4 words) matches of the query; longer matches count more.

    A memory's normal text is its words between single spaces, so a phrase can be in it only where each of the
    phrase's words is: only those memories are read (`DerivedView.word_ids`), which for a paragraph-long question
    is a small part of memory."""
    words = _WORD.findall(query.lower())
    weighted = []  # (the phrase's words, what a memory holding it gains)
    for n in (4, 3, 2):
        for i in range(len(words) - n + 1):
            gram = words[i:i + n]
            if sum(w not in STOPWORDS for w in gram) >= max(1, n - 1):
                weighted.append((gram, n * n))
    if len(words) > 1:
        weighted.append((words, 2 * len(words) ** 2))  # the whole question
    totals: dict[int, int] = defaultdict(int)
    for gram, weight in weighted:
        phrase = " " + " ".join(gram) + " "
        for memory_id in view.holding(gram):
            if phrase in view.texts[memory_id]:
                totals[memory_id] += weight
    return _ranked({memory_id: float(total) for memory_id, total in totals.items() if total}, limit)


def attribute_search(view: DerivedView, query: str, limit: int) -> list[tuple[int, float]]:
    """Dates, times, quantities, numbers and speakers of the query matched against memory attributes."""
    scores: dict[int, float] = defaultdict(float)
    wanted = query_attributes(query)
    for kind, value in wanted:
        kinds = ("date", "session_date") if kind == "date" else (kind,)
        for target in kinds:
            for memory_id in view.attribute_ids.get((target, value), ()):
                scores[memory_id] += ATTRIBUTE_WEIGHTS.get(target, 0.5)
    for entity in query_entities(query):
        for memory_id in view.attribute_ids.get(("speaker", entity), ()):
            scores[memory_id] += ATTRIBUTE_WEIGHTS["speaker"]
    return _ranked(scores, limit)
