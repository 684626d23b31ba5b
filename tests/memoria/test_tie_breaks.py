"""The tie rule (`memoria.ties`) where each ranked list applies it: BM25's own order, the weighted sum and MMR's
pick. Scores that differ by float noise alone are equal, and the lower store id goes first."""

import numpy as np

from memoria import defaults
from memoria.bm25 import BM25Index
from memoria.ranking import RankingContext, rank
from tests.memoria.test_feedback import _memory

NOISE = 10.0 ** -(defaults.TIE_DECIMALS + 4)


class FixedScores:
    """A BM25 scorer that answers given scores, as rank-bm25's sums would with their last bits moved."""

    def __init__(self, scores):
        self.scores = np.asarray(scores, dtype=np.float64)

    def get_scores(self, terms):
        return self.scores


def test_bm25_orders_scores_equal_up_to_noise_by_id():
    index = BM25Index()
    index.add([7, 3, 9], ["puppy", "puppy", "puppy"])
    index._ensure_scorer()
    index._scorer = FixedScores([0.5 + NOISE, 0.5, 0.25])
    assert [i for i, _ in index.search("puppy", 3)] == [3, 7, 9]


def _ranked(lists, mmr_lambda):
    memory = _memory()
    ctx = RankingContext(None, lists, memory.view(), memory.vectors, memory.view().ids, "")
    ranked, _ = rank(ctx, {"graph": 1.0}, 10, mmr_lambda=mmr_lambda)
    return [i for i, _, _ in ranked]


def test_the_weighted_sum_orders_scores_equal_up_to_noise_by_id():
    ids = _memory().view().ids
    low, high = min(ids), max(ids)
    assert _ranked({"graph": [(high, 1.0), (low, 1.0 - NOISE)]}, 1.0) == [low, high]


def test_mmr_picks_the_lower_id_of_two_equal_values():
    ids = sorted(_memory().view().ids)
    low, high = ids[0], ids[-1]
    assert _ranked({"graph": [(high, 1.0), (low, 1.0)]}, 0.5)[0] == low


def test_the_vector_index_keeps_the_lower_id_of_a_near_tie_at_the_edge_of_its_limit():
    """FAISS cuts its list at `limit` by the raw cosine; a near tie across that edge must still go to the lower
    id, or which of the two is returned at all depends on float noise."""
    from memoria.vectors import VectorIndex

    index = VectorIndex(2)
    tilt = 3e-7  # a cosine 3e-7 below the first: float noise, below the tie grid
    vectors = np.array([[1.0, 0.0], [1.0 - tilt, np.sqrt(2 * tilt)], [0.0, 1.0]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.add([5, 2, 8], vectors)
    assert [i for i, _ in index.search(np.array([1.0, 0.0], dtype=np.float32), 1)] == [2]
