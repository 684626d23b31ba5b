"""`memfarm bench realmem-cost`: a persona cut to a LoCoMo conversation's turns, both run cold side by side."""

import json

import pytest
from click.testing import CliRunner

from coordinator.benches.realmem_cost import _persona_cut_to
from coordinator.cli import main
from tests.adapters.systems.one_conversation import one_conversation


def test_a_persona_is_cut_to_the_fewest_sessions_that_hold_as_many_turns():
    persona = {"_metadata": {}, "dialogues": [{"dialogue_turns": [{}] * n} for n in (4, 6, 8, 10)]}
    cut, turns = _persona_cut_to(persona, 12)
    assert len(cut["dialogues"]) == 3 and turns == 18 and cut["_metadata"] == {}
    assert _persona_cut_to(persona, 100)[1] == 28  # a persona shorter than the conversation is kept whole


@pytest.mark.slow
def test_both_sides_run_cold_and_the_ratio_is_per_turn(tmp_path, realmem_dir, locomo_path):
    locomo = one_conversation(locomo_path, tmp_path, sessions=2)
    out = tmp_path / "cost.json"
    result = CliRunner().invoke(main, ["bench", "realmem-cost", "--locomo", str(locomo), "--realmem",
                                       str(realmem_dir / "Kim_Ji_young_dialogues_256k.json"), "--mode", "dense",
                                       "--reps", "1", "--workdir", str(tmp_path / "wd"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    locomo_side, persona_side = data["sides"]["locomo"], data["sides"]["realmem"]
    assert persona_side["turns"] >= locomo_side["turns"] > 0 and data["sessions_kept"] >= 1
    assert all(run["complete"] for side in data["sides"].values() for run in side["runs"])
    expected = (persona_side["wall_s_median"] / persona_side["turns"]) / (locomo_side["wall_s_median"] / locomo_side["turns"])
    assert data["ratio_per_turn"] == pytest.approx(expected, abs=1e-3)
    assert data["within_target"] == (data["ratio_per_turn"] <= data["target_ratio"])
    assert "persona / conversation, per turn" in result.output
