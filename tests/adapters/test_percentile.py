"""The one percentile: nearest rank, checked by hand on odd, even and empty input."""

import pytest

from adapters.percentile import percentile


def test_median_of_an_even_list_is_the_lower_middle_value():
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0


def test_median_of_an_odd_list_is_the_middle_value():
    assert percentile([3, 1, 2], 0.5) == 2


@pytest.mark.parametrize("q, expected", [(0.0, 10), (0.1, 10), (0.11, 20), (0.25, 30), (0.9, 90), (0.95, 100),
                                         (1.0, 100)])
def test_ranks_of_ten_values(q, expected):
    # ceil(q * 10): 0.11 -> rank 2, 0.25 -> rank 3, 0.95 -> rank 10
    assert percentile(range(100, 0, -10), q) == expected


def test_no_values_have_no_percentile():
    assert percentile([], 0.5) is None


def test_a_single_value_is_every_percentile():
    assert {percentile([7.5], q) for q in (0.0, 0.5, 1.0)} == {7.5}


@pytest.mark.parametrize("q", [-0.01, 1.01, 95])
def test_a_quantile_outside_zero_to_one_is_refused(q):
    with pytest.raises(ValueError, match="quantile"):
        percentile([1, 2], q)
