"""The ranking pipeline of the `full` mode: weighted signals, MMR, a finalizer.

Every signal maps a candidate to a value in [0, 1];
the final score is the weighted sum, and each candidate's diagnostics list
every signal's value and contribution, so the final score is their sum.
MMR then may reorder the top of the list for diversity, and says how much.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np

from memoria import boosts, defaults, discourse
from memoria.bm25 import tokenize
from memoria.ties import score_key


def _min_max(scores: dict[int, float], ids) -> dict[int, float]:
    values = [scores.get(i, 0.0) for i in ids]
    low, high = min(values, default=0.0), max(values, default=0.0)
    if high <= low:
        return {i: (1.0 if scores.get(i, 0.0) > 0 else 0.0) for i in ids}
    return {i: (scores.get(i, low) - low) / (high - low) for i in ids}


def _by_max(scores: dict[int, float], ids) -> dict[int, float]:
    top = max((scores.get(i, 0.0) for i in ids), default=0.0)
    return {i: (scores.get(i, 0.0) / top if top > 0 else 0.0) for i in ids}


class RankingContext:
    """What signals may read: the query's vector, the sources' lists, the derived view, the vectors."""

    def __init__(self, query_vector, lists: dict[str, list[tuple[int, float]]], view, vectors, total_ids: list[int],
                 query: str = "", lexical_search=None, best_pieces: dict[int, float] | None = None,
                 pieces_for=None, asked: str | None = None):
        self.query_vector = query_vector
        #: Each turn read for the sentence signal that has sentence vectors: its best sentence's cosine with the
        #: question (memoria.pieces); None where the memory keeps none (the `sentence` signal is then 0). Given, or
        #: filled by `rank` from `pieces_for` for the head of its first ranking.
        self.best_pieces = best_pieces
        #: `pieces_for(ids)` -> {id: best sentence cosine} for those of `ids` with pieces (encoding them if need
        #: be); None: the memory keeps no sentence vectors.
        self.pieces_for = pieces_for
        #: The question the sources and the lexical signals search (without its frame, memoria.discourse) ...
        self.query = query
        #: ... and as it was asked, which says whose words it asks about (`user_said`).
        self.asked = query if asked is None else asked
        #: `lexical_search(terms)` -> [(id, BM25 score)] over the whole memory for tokenized terms; None: no
        #: lexical feedback.
        self.lexical_search = lexical_search
        self.lists = {name: dict(pairs) for name, pairs in lists.items()}
        self.view = view
        self.vectors = vectors
        self.first_id = total_ids[0] if total_ids else 0
        self.last_id = total_ids[-1] if total_ids else 0
        self._vector_cache: dict[int, np.ndarray] = {}
        self._cosine_cache: dict[int, float] = {}

    def vector(self, memory_id: int):
        if memory_id not in self._vector_cache:
            try:
                self._vector_cache[memory_id] = self.vectors.index.reconstruct(int(memory_id))
            except RuntimeError:  # stored without an embedding
                self._vector_cache[memory_id] = None
        return self._vector_cache[memory_id]

    def cosine(self, memory_id: int) -> float:
        """The memory's cosine with the question (0 without a vector); worked out once per context."""
        if memory_id not in self._cosine_cache:
            vector = self.vector(memory_id)
            self._cosine_cache[memory_id] = (float(np.dot(vector, self.query_vector)) if vector is not None
                                             else 0.0)
        return self._cosine_cache[memory_id]


def _semantic(ctx: RankingContext, ids):
    if ctx.query_vector is None:
        return {i: 0.0 for i in ids}
    return _min_max({i: ctx.cosine(i) for i in ids}, ids)


def _sentence(ctx: RankingContext, ids):
    """The better of a turn's cosine and its best sentence's (memoria.pieces): the clause that answers counts
    without the rest of the turn diluting it."""
    if ctx.query_vector is None or ctx.best_pieces is None:
        return {i: 0.0 for i in ids}
    return _min_max({i: max(ctx.cosine(i), ctx.best_pieces.get(i, ctx.cosine(i))) for i in ids}, ids)


def _recency(ctx: RankingContext, ids):
    span = max(1, ctx.last_id - ctx.first_id)
    return {i: (i - ctx.first_id) / span for i in ids}


def _session_bm25(ctx: RankingContext, ids):
    """BM25 of the question against the candidate's whole session as one document, divided by the pool's best."""
    scores = ctx.view.sessions.scores(tokenize(ctx.query))
    return _by_max({i: scores.get(ctx.view.session_of.get(i), 0.0) for i in ids}, ids)


def _session_recency(ctx: RankingContext, ids):
    """exp(-n / RECENCY_SESSIONS), n the sessions stored after the candidate's: 1 for the newest session.

    Where questions come while memory grows (RealMem), they mostly continue what was said lately; where they are
    drawn evenly from a finished history (LoCoMo), this only pulls toward its end, so it weighs 0 by default."""
    order = ctx.view.session_order
    newest = len(order) - 1
    return {i: math.exp(-(newest - order.get(ctx.view.session_of.get(i), 0)) / defaults.RECENCY_SESSIONS)
            for i in ids}


def _session_centroid(ctx: RankingContext, ids):
    """The question's cosine with the mean vector of the candidate's session: what the conversation is about."""
    if ctx.query_vector is None:
        return {i: 0.0 for i in ids}
    centroids = ctx.view.session_centroids(ctx.vectors)
    cosines = {}
    for i in ids:
        centroid = centroids.get(ctx.view.session_of.get(i))
        cosines[i] = float(np.dot(centroid, ctx.query_vector)) if centroid is not None else 0.0
    return _min_max(cosines, ids)


def _names(ctx: RankingContext, ids):
    names = boosts.question_names(ctx.query, ctx.view.known_names)
    return {i: boosts.name_boost(names, ctx.view.speaker_of.get(i, ""), ctx.view.entities_of.get(i, set()),
                                 ctx.view.idf) for i in ids}


def _quoted(ctx: RankingContext, ids):
    phrases = boosts.quoted_phrases(ctx.query)
    return {i: boosts.phrase_boost(phrases, ctx.view.texts.get(i, "")) for i in ids}


def _dates(ctx: RankingContext, ids):
    wanted = boosts.date_keys(ctx.query)
    if not wanted:
        return {i: 0.0 for i in ids}
    return {i: boosts.date_boost(wanted, ctx.view.date_keys(i)) for i in ids}


def _temporal(ctx: RankingContext, ids):
    if not boosts.is_temporal_question(ctx.query):
        return {i: 0.0 for i in ids}
    return {i: 1.0 if ctx.view.mentions_time(i) else 0.0 for i in ids}


def _standing(ctx: RankingContext, ids):
    """1 for the standing instruction or preference (memoria.discourse.is_standing, a user's message) among the
    candidates closest to the question, 0 elsewhere: a rule such as "always include version numbers when I ask about
    libraries" governs a later request ("which libraries does this project use?") while sharing few of its words, so
    the one that applies is taken to be the nearest by meaning. Where no candidate is one, 0 for all."""
    candidates = [i for i in ids if i in ctx.view.standing]
    if ctx.query_vector is None or not candidates:
        return {i: 0.0 for i in ids}
    nearest = min(candidates, key=lambda i: (-score_key(ctx.cosine(i)), i))
    return {i: 1.0 if i == nearest else 0.0 for i in ids}


def _user_said(ctx: RankingContext, ids):
    """1 for the user's messages where the question asks what the user said, brought up or told (the question as
    asked: "the order in which I brought up ..."), 0 elsewhere."""
    if not discourse.asks_what_user_said(ctx.asked):
        return {i: 0.0 for i in ids}
    return {i: 1.0 if ctx.view.role_of.get(i) == "user" else 0.0 for i in ids}


SIGNALS = {
    "semantic": _semantic,
    "sentence": _sentence,
    "token": lambda ctx, ids: _min_max(ctx.lists.get("bm25", {}), ids),
    "phrase": lambda ctx, ids: _by_max(ctx.lists.get("phrase", {}), ids),
    "graph": lambda ctx, ids: _by_max(ctx.lists.get("graph", {}), ids),
    "attribute_boost": lambda ctx, ids: _by_max(ctx.lists.get("attribute", {}), ids),
    "importance": lambda ctx, ids: {i: ctx.view.importance.get(i, 0.0) for i in ids},
    "recency": _recency,
    "window": lambda ctx, ids: _min_max(ctx.lists.get("window", {}), ids),
    "session_bm25": _session_bm25,
    "session_centroid": _session_centroid,
    "session_recency": _session_recency,
    "name": _names,
    "quoted": _quoted,
    "date": _dates,
    "temporal": _temporal,
    "standing": _standing,
    "user_said": _user_said,
}
#: Read after the first stage: BM25 of words taken from its best turns (lexical pseudo-relevance feedback).
FEEDBACK_SIGNAL = "feedback"
#: The second stage: a candidate's session, scored from the first stage's scores of its turns.
SESSION_SIGNAL = "session"
KNOWN_SIGNALS = tuple(SIGNALS) + (FEEDBACK_SIGNAL, SESSION_SIGNAL)


def feedback_terms(query: str, feedback: list[tuple[str, float]], document_frequency, documents: int,
                   count: int) -> list[str]:
    """Words to search for beside the question, taken from the texts the first stage ranked best.

    In the manner of RM3 (Lavrenko and Croft, 2001; Abdul-Jaleel et al., 2004): a
    word of a feedback text weighs that text's score times the word's share of the
    text times its idf, log(1 + documents / (1 + document frequency)), summed over
    the texts; the question's own words are left out (BM25 already searches them).
    The `count` heaviest words, ties broken by the word.
    """
    asked = set(tokenize(query))
    weights: dict[str, float] = defaultdict(float)
    for text, score in feedback:
        tokens = tokenize(text)
        for term, n in Counter(tokens).items():
            if term not in asked:
                idf = math.log(1 + documents / (1 + document_frequency.get(term, 0)))
                weights[term] += score * n / len(tokens) * idf
    ranked = sorted(((t, w) for t, w in weights.items() if w > 0), key=lambda p: (-p[1], p[0]))
    return [t for t, _ in ranked[:count]]


def _feedback(ctx: RankingContext, base: dict[int, float], pool, turns: int, count: int):
    """Each candidate's BM25 score for the feedback words of the best `turns` candidates, divided by the best."""
    if ctx.lexical_search is None or not pool:
        return {i: 0.0 for i in pool}, []
    best = sorted(pool, key=lambda i: (-score_key(base[i]), i))[:turns]
    terms = feedback_terms(ctx.query, [(ctx.view.raw_texts.get(i, ""), max(base[i], 0.0)) for i in best],
                           ctx.view.document_frequency, ctx.view.total, count)
    if not terms:
        return {i: 0.0 for i in pool}, []
    return _by_max(dict(ctx.lexical_search(terms)), pool), terms


def session_aggregate(scores: dict[int, float], session_of, top_n: int) -> dict[int, float]:
    """Each candidate's session score: the mean of the `top_n` best candidate scores of its session.

    A session with fewer than `top_n` candidates counts the missing ones as 0, so
    a session holding several good turns outranks one holding a single good turn.
    `session_of(id)` names the session of a candidate.
    """
    if top_n < 1:
        raise ValueError(f"session top_n must be at least 1, got {top_n}")
    members: dict = defaultdict(list)
    for memory_id, score in scores.items():
        members[session_of(memory_id)].append(score)
    means = {key: sum(sorted(values, reverse=True)[:top_n]) / top_n for key, values in members.items()}
    return {memory_id: means[session_of(memory_id)] for memory_id in scores}


def rank(ctx: RankingContext, weights: dict[str, float], limit: int,
         mmr_lambda: float = defaults.DEFAULT_MMR_LAMBDA, mmr_window: int = defaults.DEFAULT_MMR_WINDOW,
         session_top_n: int = defaults.DEFAULT_SESSION_TOP_N,
         feedback_turns: int = defaults.DEFAULT_FEEDBACK_TURNS, feedback_count: int = defaults.DEFAULT_FEEDBACK_TERMS,
         sentence_head: int = defaults.DEFAULT_SENTENCE_HEAD):
    """Best-first `(id, final_score, diagnostics)` and the ranking's own diagnostics.

    First every signal's weighted sum, the `sentence` signal read for the best
    `sentence_head` candidates by every other signal (`_read_sentences`); with a `feedback` weight, each candidate
    then gains its BM25 score for words taken from the best `feedback_turns` of
    those sums (`feedback_terms`); then, with a `session` weight, each candidate
    gains its session's aggregate of the sums so far (normalised by the best
    session), so the final score is still the sum of the contributions.
    """
    unknown = set(weights) - set(KNOWN_SIGNALS)
    if unknown:
        raise ValueError(f"unknown ranking signals {sorted(unknown)}; known: {sorted(KNOWN_SIGNALS)}")
    pool = sorted({i for pairs in ctx.lists.values() for i in pairs})
    values = {name: SIGNALS[name](ctx, pool) for name in SIGNALS if name != "sentence"}
    head = _read_sentences(ctx, weights, values, pool, sentence_head)
    values["sentence"] = SIGNALS["sentence"](ctx, pool)
    first = {}
    for memory_id in pool:
        signal_values = {name: values[name][memory_id] for name in SIGNALS}
        contributions = {name: weights.get(name, 0.0) * signal_values[name] for name in SIGNALS}
        first[memory_id] = (signal_values, contributions)
    base = {i: sum(contributions.values()) for i, (_, contributions) in first.items()}
    feedback_weight = weights.get(FEEDBACK_SIGNAL, 0.0)
    feedback, terms = (_feedback(ctx, base, pool, feedback_turns, feedback_count) if feedback_weight
                       else ({i: 0.0 for i in pool}, []))
    for memory_id in pool:
        signal_values, contributions = first[memory_id]
        signal_values[FEEDBACK_SIGNAL] = feedback[memory_id]
        contributions[FEEDBACK_SIGNAL] = feedback_weight * feedback[memory_id]
        base[memory_id] += contributions[FEEDBACK_SIGNAL]
    session_weight = weights.get(SESSION_SIGNAL, 0.0)
    sessions = (_by_max(session_aggregate(base, lambda i: ctx.view.session_of.get(i, ("memory", i)), session_top_n),
                        pool) if session_weight else {i: 0.0 for i in pool})
    scored = []
    for memory_id in pool:
        signal_values, contributions = first[memory_id]
        signal_values[SESSION_SIGNAL] = sessions[memory_id]
        contributions[SESSION_SIGNAL] = session_weight * sessions[memory_id]
        scored.append((memory_id, sum(contributions.values()), {"signals": signal_values,
                                                                "contributions": contributions}))
    scored.sort(key=lambda e: (-score_key(e[1]), e[0]))
    reordered, mmr = _mmr(ctx, scored, mmr_lambda, mmr_window)
    final = reordered[:limit]
    diagnostics = {"pool": len(pool), "weights": dict(weights), "session_top_n": session_top_n,
                   "sentence_head": {"size": sentence_head, "read": head},
                   "feedback": {"turns": feedback_turns, "terms": terms},
                   "mmr": {**mmr, "lambda": mmr_lambda, "window": mmr_window}}
    return final, diagnostics


def _read_sentences(ctx: RankingContext, weights: dict, values: dict, pool, head_size: int) -> int | None:
    """Fill `ctx.best_pieces` from `ctx.pieces_for` for the head of a first ranking: the best `head_size`
    candidates by the weighted sum of every other first-stage signal (ties by id; 0: every candidate). The rest
    keep their whole cosine in the sentence signal. Returns how many candidates were read (None: none could be,
    or the signal weighs nothing, or the context came with its pieces)."""
    if ctx.pieces_for is None:
        return None
    if not weights.get("sentence", 0.0) or ctx.query_vector is None:
        ctx.best_pieces = None  # a context ranked before under a sentence weight keeps no stale pieces
        return None
    head = sentence_head(ctx, weights, head_size, values, pool)
    ctx.best_pieces = ctx.pieces_for(head)
    return len(head)


def sentence_head(ctx: RankingContext, weights: dict, head_size: int, values: dict | None = None,
                  pool: list[int] | None = None) -> list[int]:
    """The candidates whose sentences a ranking of `ctx` reads: the best `head_size` by the weighted sum of every
    first-stage signal but `sentence` (ties by id; 0: every candidate). `values` and `pool`: those signals' values
    and the candidates, where the caller has them."""
    if pool is None:
        pool = sorted({i for pairs in ctx.lists.values() for i in pairs})
    if values is None:
        values = {name: SIGNALS[name](ctx, pool) for name in SIGNALS if name != "sentence"}
    first = {i: sum(weights.get(name, 0.0) * signal[i] for name, signal in values.items()) for i in pool}
    head = sorted(pool, key=lambda i: (-score_key(first[i]), i))
    return head[:head_size] if head_size else head


def _mmr(ctx: RankingContext, scored, mmr_lambda: float, window: int):
    """Maximal Marginal Relevance (Carbonell and Goldstein, 1998) over the top `window` candidates."""
    head, tail = scored[:window], scored[window:]
    if mmr_lambda >= 1.0 or len(head) < 2:
        return scored, {"applied": False, "moved": 0, "max_shift": 0}
    top = head[0][1] or 1.0
    remaining, selected = list(head), []
    while remaining:
        best, best_value = None, None
        for entry in remaining:
            similarity = max((_similarity(ctx, entry[0], chosen[0]) for chosen in selected), default=0.0)
            value = mmr_lambda * (entry[1] / top) - (1 - mmr_lambda) * similarity
            if best_value is None or score_key(value) > score_key(best_value):
                best, best_value = entry, value
        best[2]["mmr_score"] = best_value
        selected.append(best)
        remaining.remove(best)
    before = {e[0]: position for position, e in enumerate(head)}
    shifts = [abs(position - before[e[0]]) for position, e in enumerate(selected)]
    return selected + tail, {"applied": True, "moved": sum(1 for s in shifts if s), "max_shift": max(shifts)}


def _similarity(ctx: RankingContext, a: int, b: int) -> float:
    va, vb = ctx.vector(a), ctx.vector(b)
    return float(np.dot(va, vb)) if va is not None and vb is not None else 0.0
