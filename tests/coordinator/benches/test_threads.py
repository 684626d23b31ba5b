"""`memfarm bench threads`: one conversation with several model thread counts, cold and alternating."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main


@pytest.mark.slow
def test_each_thread_count_runs_cold_in_turn_and_is_set_against_the_fastest(tmp_path, locomo_path):
    conversation = json.loads(locomo_path.read_text())[0]
    talk = conversation["conversation"]
    for key in [k for k in talk if k.startswith("session_") and k.split("_")[1] not in {"1", "2"}]:
        del talk[key]
    conversation["qa"] = [q for q in conversation["qa"] if q.get("evidence") and
                          all(str(e).split(":")[0] in {"D1", "D2"} for e in q["evidence"])]
    locomo = tmp_path / "two_sessions.json"
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
