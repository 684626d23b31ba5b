"""`memfarm bench threads`: one conversation with several model thread counts, cold and alternating."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.adapters.systems.one_conversation import one_conversation


@pytest.mark.slow
def test_each_thread_count_runs_cold_in_turn_and_is_set_against_the_fastest(tmp_path, locomo_path):
    conversation = json.loads(one_conversation(locomo_path, tmp_path, sessions=2).read_text())[0]
    locomo = tmp_path / "two_conversations.json"
    locomo.write_text(json.dumps([conversation, conversation]))
    out = tmp_path / "threads.json"
    result = CliRunner().invoke(main, ["bench", "threads", "--locomo", str(locomo), "--threads", "1", "--threads", "2",
                                       "--threads", "1", "--mode", "dense", "--reps", "2",
                                       "--workdir", str(tmp_path / "wd"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert [row["threads"] for row in data["rows"]] == [1, 2]  # a count named twice runs once
    assert all(len(row["runs"]) == 2 and all(run["complete"] for run in row["runs"]) for row in data["rows"])
    assert sorted(row["times_the_fastest"] for row in data["rows"])[0] == 1.0
    for row in data["rows"]:
        assert row["times_the_fastest"] == pytest.approx(
            row["wall_s_median"] / min(r["wall_s_median"] for r in data["rows"]), abs=0.01)
    assert data["same_recall_all_5"] and data["cores"] >= 1
    assert "x fastest" in result.output and str(out) in result.output
    # only the first conversation of the file is run
    assert json.loads((tmp_path / "wd" / "conversation.json").read_text()) == [conversation]
