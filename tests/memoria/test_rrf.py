import pytest

from memoria.rrf import reciprocal_rank_fusion


def test_rrf_by_hand_on_three_documents():
    # faiss: a, b, c ; bm25: c, a   (ids 1=a, 2=b, 3=c)
    fused = reciprocal_rank_fusion({"faiss": [1, 2, 3], "bm25": [3, 1]}, k=60)
    scores = {e["id"]: e["score"] for e in fused}
    assert scores[1] == pytest.approx(1 / 61 + 1 / 62)
    assert scores[2] == pytest.approx(1 / 62)
    assert scores[3] == pytest.approx(1 / 63 + 1 / 61)
    assert [e["id"] for e in fused] == [1, 3, 2]
    assert fused[0]["contributions"] == {"faiss": pytest.approx(1 / 61), "bm25": pytest.approx(1 / 62)}


def test_rrf_ties_are_broken_by_id_whatever_the_input_order():
    # 7 and 4 each sit at rank 1 of one list: equal scores.
    first = reciprocal_rank_fusion({"x": [7], "y": [4]})
    second = reciprocal_rank_fusion({"y": [4], "x": [7]})
    assert [e["id"] for e in first] == [4, 7] == [e["id"] for e in second]


def test_rrf_rejects_a_non_positive_k():
    with pytest.raises(ValueError):
        reciprocal_rank_fusion({"x": [1]}, k=0)


def test_the_default_constant_is_sixty_in_the_function_and_the_engine():
    from memoria import MemoryInterface
    from memoria.defaults import DEFAULT_RRF_K

    fused = reciprocal_rank_fusion({"faiss": [1, 2], "bm25": [2]})
    scores = {e["id"]: e["score"] for e in fused}
    assert DEFAULT_RRF_K == 60
    assert scores[1] == pytest.approx(1 / 61) and scores[2] == pytest.approx(1 / 62 + 1 / 61)
    assert MemoryInterface().rrf_k == 60


def test_a_repeated_id_counts_once_per_source_and_the_rest_of_the_list_still_counts():
    fused = reciprocal_rank_fusion({"x": [1, 1, 2]}, k=10)
    scores = {e["id"]: e["score"] for e in fused}
    assert scores == {1: pytest.approx(1 / 11), 2: pytest.approx(1 / 13)}


def test_k_of_one_is_allowed_and_the_refusal_says_why():
    assert reciprocal_rank_fusion({"x": [5]}, k=1)[0]["score"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="RRF k must be positive, got -3"):
        reciprocal_rank_fusion({"x": [1]}, k=-3)
