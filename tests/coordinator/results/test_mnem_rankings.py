"""mnem's published per-question LoCoMo lines, converted for `memfarm score` and checked line by line."""

import json

import pytest
from click.testing import CliRunner

from adapters.errors import ResultsError
from coordinator.cli import main
from coordinator.results.mnem_rankings import convert


def _conversation(sample_id):
    return {"sample_id": sample_id,
            "conversation": {"session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I hiked the Alps."},
                                           {"speaker": "Bo", "dia_id": "D1:2", "text": "   "}],
                             "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "I adopted a cat."}],
                             "session_4": [{"speaker": "Bo", "dia_id": "D4:1", "text": "never walked: no session_3"}]},
            "qa": [{"question": "Where?", "answer": "Alps", "evidence": ["D1:1"], "category": 4},
                   {"question": "Written loosely", "answer": "x", "evidence": ["D:2:1"], "category": 2},
                   {"question": "Empty turn only", "answer": "x", "evidence": ["D1:2"], "category": 1},
                   {"question": "Pet?", "adversarial_answer": "dog", "evidence": ["D2:1", "D1:1"], "category": 5},
                   {"question": "After the gap", "answer": "x", "evidence": ["D4:1"], "category": 4}]}


def _line(qid, top5, gold, hit5=1, hit10=1):
    return json.dumps({"qid": qid, "qtype": "x", "hit_at_5": hit5, "hit_at_10": hit10, "top5": top5, "gold": gold})


@pytest.fixture()
def files(tmp_path):
    dataset = tmp_path / "locomo.json"
    dataset.write_text(json.dumps([_conversation("conv-b")]))
    lines = tmp_path / "mnem.jsonl"
    # conv-a is a conversation the dataset does not hold: its two lines come first and number from 0
    lines.write_text("\n".join([_line("conv-a#0", ["session_1"], ["session_1"]),
                                _line("conv-a#1", ["session_1"], ["session_1"]),
                                _line("conv-b#3", ["session_2", "session_1"], ["session_1", "session_2"], 1, 1),
                                _line("conv-b#2", ["session_2", "session_1"], ["session_1"], 0, 1)]) + "\n")
    return dataset, lines


def test_lines_map_to_the_questions_mnem_asks_in_order(files):
    dataset, lines = files
    rankings, report = convert(lines, dataset)
    # mnem asks q0 (D1:1) and q3 (adversarial, both sessions) only: 'D:2:1' is no exact dia_id, D1:2 is empty,
    # and mnem stops walking sessions at the missing session_3
    assert rankings == [{"question_id": "conv-b:q0", "ranked": ["D2", "D1"]},
                        {"question_id": "conv-b:q3", "ranked": ["D2", "D1"]}]
    assert report["left_out_lines"] == 2
    figures = {row["questions"].split(" ")[0]: row for row in report["figures"]}
    assert figures["as"]["n"] == 2 and figures["as"]["recall_at_5_flags"] == 0.5
    assert figures["as"]["recall_at_5_from_top5"] == 1.0  # its own top 5 holds D1 for q0: the flag says 0
    assert figures["without"]["n"] == 1


def test_a_line_whose_gold_is_not_its_question_names_the_line(files, tmp_path):
    dataset, lines = files
    text = lines.read_text().replace('"gold": ["session_1"]}\n', '"gold": ["session_2"]}\n')
    lines.write_text(text)
    with pytest.raises(ResultsError, match=r"mnem.jsonl:4: gold \['session_2'\] is not the gold"):
        convert(lines, dataset)
    lines.write_text(lines.read_text() + _line("conv-b#4", [], ["session_1"]) + "\n")
    with pytest.raises(ResultsError, match="conversation conv-b has 3 lines, but mnem's rule asks 2"):
        convert(lines, dataset)


def test_the_command_writes_rankings_memfarm_score_reads(files, tmp_path):
    dataset, lines = files
    out, report = tmp_path / "rankings.jsonl", tmp_path / "report.json"
    result = CliRunner().invoke(main, ["convert", "mnem-rankings", "--input", str(lines), "--dataset", str(dataset),
                                       "--output", str(out), "--report", str(report)])
    assert result.exit_code == 0, result.output
    assert "wrote 2 rankings" in result.output and json.loads(report.read_text())["questions"][0]["mnem_qid"] == "conv-b#2"
    scored = tmp_path / "scored.json"
    result = CliRunner().invoke(main, ["score", "--benchmark", "locomo", "--dataset", str(dataset), "--rankings",
                                       str(out), "--level", "session", "--output", str(scored)])
    assert result.exit_code == 0, result.output
    records = {r["question_id"]: r for r in json.loads(scored.read_text())["records"]}
    assert records["conv-b:q0"]["metrics"]["session"]["recall_any@1"] == 0.0
    assert records["conv-b:q0"]["metrics"]["session"]["recall_any@5"] == 1.0
    assert records["conv-b:q3"]["metrics"] is None  # adversarial: mnem scores it, the farm does not


def _record(qid, hit, gold, sessions=None, scores=None):
    candidates = [{"id": f"x-{s}", "score": score, "metadata": {"session_id": s, "turn_id": f"{s}:1"}}
                  for s, score in zip(sessions or [], scores or [])]
    return {"question_id": qid, "item_id": "conv-b", "status": "ok", "expected_ids": gold, "candidates": candidates,
            "metrics": {"session": {"recall_any@5": float(hit)}}}


def test_every_difference_from_the_published_ranking_has_a_reason():
    from coordinator.results.mnem_rankings import reconcile

    report = {"figures": [], "questions": [
        {"question_id": f"conv-b:q{i}", "category": 4, "mnem_gold": ["D1"], "top5": ["D1", "D2"], "hit_at_5": 1}
        for i in range(3)] + [{"question_id": "conv-b:q3", "category": 5, "mnem_gold": ["D1"], "top5": ["D1"],
                               "hit_at_5": 1}]}
    scored = {"records": [_record(f"conv-b:q{i}", 1, ["D1"]) for i in range(3)] + [
        {"question_id": "conv-b:q3", "status": "ok", "metrics": None}]}
    six = ["D2", "D3", "D4", "D5", "D6", "D1"]
    run = {"records": [_record("conv-b:q0", 1, ["D1"], ["D1", "D2"], [0.9, 0.8]),
                       _record("conv-b:q1", 0, ["D1"], six, [0.9, 0.8, 0.7, 0.6, 0.5, 0.495]),
                       _record("conv-b:q2", 0, ["D1"], six[:5], [0.9, 0.8, 0.7, 0.6, 0.5]),
                       {"question_id": "conv-b:q3", "item_id": "conv-b", "status": "ok", "metrics": None}],
           "settings_system": {"retrieval_mode": "mnem:dense"}}
    data = reconcile(report, scored, run, [])
    sets = {row["set"]: row["n"] for row in data["question_sets"]}
    assert sets["both evaluate"] == 3 and sets["same gold, memfarm score's session hit@5 equals mnem's hit_at_5"] == 3
    reasons = {row["question_id"]: row["reason"] for row in data["differences"]}
    assert set(reasons) == {"conv-b:q1", "conv-b:q2"}
    assert reasons["conv-b:q1"].startswith("near tie") and "depth of the turn list" in reasons["conv-b:q2"]
    assert data["paired"]["run_losses"] == 2 and data["paired"]["same_top5_order"] == 1
    photo = [{"sample_id": "conv-b", "conversation": {"session_6": [{"dia_id": "D6:1", "blip_caption": "a cat"}]}}]
    again = {row["question_id"]: row["reason"] for row in reconcile(report, scored, run, photo)["differences"]}
    assert all(reason.startswith("a photo turn") for reason in again.values()) and len(again) == 2
