"""`memfarm bench coldrun`: each round's ratio to the old path and their median, from known timings."""

import pytest

from adapters.errors import MemfarmError
from coordinator.benches.coldrun import round_ratios


def test_each_round_has_its_own_ratio_and_the_median_of_an_even_count_is_the_middle_two():
    assert round_ratios([10, 12, 30, 9], [5, 4, 10, 6]) == {"per_round": [2.0, 3.0, 3.0, 1.5], "median": 2.5}


def test_a_round_the_load_slowed_moves_the_whole_run_ratio_but_not_the_median():
    baseline, variant = [10.0, 10.0, 40.0], [5.0, 5.0, 5.0]  # the old path's last round ran on a busy machine
    assert round_ratios(baseline, variant) == {"per_round": [2.0, 2.0, 8.0], "median": 2.0}  # whole run: 4.0x


def test_ratios_keep_three_places():
    assert round_ratios([1, 2, 1], [3, 3, 1]) == {"per_round": [0.333, 0.667, 1.0], "median": 0.667}


@pytest.mark.parametrize("baseline, variant, words", [([1, 2], [1], "same rounds"), ([], [], "same rounds"),
                                                      ([1, 2], [1, 0], "round 1")])
def test_rounds_that_cannot_be_compared_are_refused_with_where(baseline, variant, words):
    with pytest.raises(MemfarmError, match=words):
        round_ratios(baseline, variant)
