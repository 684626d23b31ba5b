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


def test_hours_are_machine_hours_of_500_full_scale_questions_and_wall_hours_on_each_fleet():
    from coordinator.benches.coldrun import _hours

    hours = _hours(1.8, 0.1)  # 1.8 s a question at a tenth of the haystack: 18 s at full scale, 9000 s for 500
    assert hours == {"machine_hours": 2.5, "wall_hours": {"1": 2.5, "8": round(2.5 / 8 * 1.01, 2),
                                                          "32": round(2.5 / 32 * 1.01, 2)}}


def test_a_rate_is_full_scale_questions_per_core_hour_set_against_the_peers_published_one():
    from coordinator.benches.coldrun import PEER_RATE, _per_core_hour

    assert PEER_RATE["questions_per_core_hour"] == round(500 * 3600 / 1127 / 4)
    rate = _per_core_hour(1.8, 0.1, 2)  # 18 s a full-scale question on two cores: 100 per core-hour
    assert rate == {"questions_per_core_hour": 100, "x_peer_rate": round(100 / PEER_RATE["questions_per_core_hour"], 2)}
    assert _per_core_hour(0.0, 0.1, 2) == {"questions_per_core_hour": None, "x_peer_rate": None}


def test_each_mode_is_set_against_fusion_and_full_without_sentences_of_its_own_model_and_backend():
    from coordinator.benches.coldrun import _ratio, _variants

    variants = _variants(("fusion", "full", "full-nosentence"), ("minilm", "mpnet"), ("torch",))
    assert [v["slug"] for v in variants] == ["fusion_minilm_torch", "full_minilm_torch", "full-nosentence_minilm_torch",
                                             "fusion_mpnet_torch", "full_mpnet_torch", "full-nosentence_mpnet_torch"]
    rounds = {"fusion_minilm_torch": [10, 20], "full_minilm_torch": [15, 22], "full-nosentence_minilm_torch": [14, 20],
              "fusion_mpnet_torch": [40, 50], "full_mpnet_torch": [60, 100], "full-nosentence_mpnet_torch": [50, 80]}
    assert _ratio(rounds, variants[1], "fusion") == {"per_round": [1.5, 1.1], "median": 1.3}
    assert _ratio(rounds, variants[4], "fusion") == {"per_round": [1.5, 2.0], "median": 1.75}
    assert _ratio(rounds, variants[4], "full-nosentence") == {"per_round": [1.2, 1.25], "median": 1.225}
    assert _ratio(rounds, variants[0], "fusion") is None  # fusion against itself says nothing


def test_an_unknown_mode_is_refused_naming_it():
    from coordinator.benches.coldrun import _variants

    with pytest.raises(MemfarmError, match="hybrid"):
        _variants(("fusion", "hybrid"), ("minilm",), ("torch",))


@pytest.mark.slow
def test_the_bench_runs_tiny_and_counts_pieces_in_full_only(tmp_path):
    """Two questions of a small haystack, two rounds, fusion against full and full without sentences: every
    figure the docs' table reads is there, and only full with the sentence signal encodes pieces."""
    import json

    from coordinator.benches.coldrun import run_coldrun_bench

    table = run_coldrun_bench(2, 0.05, tmp_path / "work", tmp_path / "coldrun.json", rounds=2)
    result = json.loads((tmp_path / "coldrun.json").read_text())
    rows = {v["mode"]: v for v in result["variants"]}
    assert list(rows) == ["fusion", "full", "full-nosentence"] and result["rounds"] == 2
    assert rows["full"]["encoded_pieces"] > 0 and rows["fusion"]["encoded_pieces"] == 0
    assert rows["full-nosentence"]["encoded_pieces"] == 0
    assert all(v["encoded_turns"] > 0 and v["peak_rss_mib"] > 0 for v in rows.values())
    assert len(rows["full"]["x_fusion_per_round"]) == 2 and rows["full"]["x_full_nosentence"] > 0
    assert rows["fusion"]["x_fusion"] is None and result["command"] and "full-nosentence" in table
    assert all(v["questions_per_core_hour"] > 0 for v in rows.values()) and "per core-hour" in table
    variant_lines = table.splitlines()[2:2 + len(rows)]
    assert len({len(line) for line in variant_lines}) == 1, "a missing ratio keeps its column's width"
