import json
import re
from collections import Counter

import pytest
from click.testing import CliRunner

from adapters.generators.locomo_to_adamem import convert_locomo
from adapters.errors import DatasetError
from adapters.benchmarks.locomo.reader import LoCoMo, normalise_evidence
from coordinator.cli import main


def _independent_ids(evidence) -> list[str]:
    """Evidence ids parsed another way: split on separators, strip the D and the colons."""
    out = []
    for entry in evidence if isinstance(evidence, list) else [evidence]:
        for token in re.split(r"[;,\s]+", str(entry)):
            digits = [p for p in token.lstrip("D").split(":") if p]
            if token.startswith("D") and len(digits) == 2 and all(p.isdigit() for p in digits):
                ident = f"D{int(digits[0])}:{int(digits[1])}"
                if ident not in out:
                    out.append(ident)
    return out


def test_counts_on_the_real_file_match_an_independent_reading(locomo_path):
    raw = json.loads(locomo_path.read_text())
    items = {item["item_id"]: item for item in LoCoMo(locomo_path).iter_items()}
    assert list(items) == [c["sample_id"] for c in raw]
    for conv in raw:
        item = items[conv["sample_id"]]
        known = {t["dia_id"] for key, session in conv["conversation"].items()
                 if re.fullmatch(r"session_\d+", key) for t in session}
        assert {t["turn_id"] for t in item["turns"]} == known
        categories, excluded, dropped, abstentions = Counter(), 0, 0, 0
        for qa in conv["qa"]:
            categories[qa["category"]] += 1
            ids = _independent_ids(qa.get("evidence", []))
            dropped += sum(1 for i in ids if i not in known)
            if qa["category"] == 5:
                abstentions += 1
            elif not [i for i in ids if i in known]:
                excluded += 1
        questions = item["questions"]
        assert Counter(q["category"] for q in questions) == categories
        assert sum(q["abstention"] for q in questions) == abstentions
        assert sum(1 for q in questions if q.get("excluded")) == excluded
        assert item["stats"]["dropped_evidence_ids"] == dropped
    assert items["conv-42"]["stats"]["dropped_evidence_ids"] >= 1  # D10:19 matches no turn
    assert items["conv-26"]["stats"]["orphan_session_dates"] == 16


@pytest.mark.parametrize("raw, ids, bad", [
    (["D8:6; D9:17"], ["D8:6", "D9:17"], []),
    (["D:11:26"], ["D11:26"], []),
    (["D1:3 D1:5"], ["D1:3", "D1:5"], []),
    (["D30:05"], ["D30:5"], []),
    (["D"], [], ["D"]),
    ("D2:1", ["D2:1"], []),
    (["D1:3", "D1:3"], ["D1:3"], []),
])
def test_evidence_normalisation(raw, ids, bad):
    assert normalise_evidence(raw) == (ids, bad)


def _conversation(sample_id="conv-x", topic="hiking"):
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": f"I went {topic} in the Alps last week."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Wow! Who went with you?",
                 "blip_caption": "a photo of a mountain lake", "img_url": ["http://example.invalid/x.jpg"]},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "My brother Tom came along."},
            ],
            "session_2_date_time": "3:00 pm on 20 May, 2023",
            "session_2": [
                {"speaker": "Bo", "dia_id": "D2:1", "text": "I adopted a cat named Miso."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": f"So cute! I bought new {topic} boots."},
            ],
            "session_3_date_time": "an orphan date with no session",
        },
        "qa": [
            {"question": f"Where did Ann go {topic}?", "answer": "the Alps", "evidence": ["D1:1"], "category": 4},
            {"question": "Who went with Ann?", "answer": "Tom", "evidence": ["D1:1; D1:3"], "category": 1},
            {"question": "What year did Bo adopt a cat?", "answer": 2023, "evidence": ["D:2:1"], "category": 2},
            {"question": "What is Bo's cat called?", "answer": "Miso", "evidence": ["D2:01 D9:9"], "category": 4},
            {"question": "Where did Bo go hiking?", "adversarial_answer": "the Alps", "evidence": ["D1:1"], "category": 5},
            {"question": "Which boots?", "answer": "x", "adversarial_answer": "y", "evidence": ["D2:2"], "category": 5},
            {"question": "What is Ann's job?", "answer": "unknown", "evidence": ["D7:7", "D"], "category": 3},
        ],
    }


def test_hand_made_conversation_with_every_quirk(tmp_path):
    path = tmp_path / "conv.json"
    path.write_text(json.dumps([_conversation()]))
    item = next(LoCoMo(path).iter_items())
    q = {i: question for i, question in enumerate(item["questions"])}
    assert q[1]["gold_turns"] == ["D1:1", "D1:3"] and q[1]["gold_sessions"] == ["D1"]
    assert q[2]["gold_turns"] == ["D2:1"] and q[2]["expected"] == "2023"
    assert q[3]["gold_turns"] == ["D2:1"] and q[3]["details"]["dropped_evidence"] == ["D9:9"]
    # expected_ids are gold *session* ids, as for LongMemEval; a dropped id brings no session in
    assert q[1]["expected_ids"] == ["D1"] and q[3]["expected_ids"] == q[3]["gold_sessions"] == ["D2"]
    assert q[4]["abstention"] and q[4]["expected"] == "the Alps"
    assert q[5]["abstention"]
    assert q[6]["excluded"] == "no resolvable evidence" and q[6]["details"]["unparseable"] == ["D"]
    assert item["stats"]["orphan_session_dates"] == 1
    captioned = next(t for t in item["turns"] if t["turn_id"] == "D1:2")
    assert captioned["text"] == "Bo: Wow! Who went with you? [shares a photo: a photo of a mountain lake]"
    assert captioned["props"]["date"] == "1:56 pm on 8 May, 2023"


@pytest.mark.slow
def test_locomo_run_isolates_conversations_and_matches_the_longmemeval_shape(tmp_path):
    from tests.helpers import write_dataset

    path = tmp_path / "two.json"
    path.write_text(json.dumps([_conversation("conv-a", "hiking"), _conversation("conv-b", "skiing")]))
    out = tmp_path / "locomo.json"
    result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(path), "--output", str(out)])
    assert result.exit_code == 0, result.output
    locomo = json.loads(out.read_text())
    for record in locomo["records"]:
        conversation = record["item_id"]
        prefix = record["candidates"][0]["id"].rsplit("-", 1)[0] if record["candidates"] else None
        assert all(c["id"].rsplit("-", 1)[0] == prefix for c in record["candidates"])
        other = "skiing" if conversation == "conv-a" else "hiking"
        assert not any(other in c["text"] for c in record["candidates"]), conversation
    assert locomo["abstentions_excluded"] == 4 and locomo["excluded"] == 2
    assert "adversarial" not in locomo["metrics"]["by_question_type"]
    assert "single-hop" in result.output

    lme_data = write_dataset(tmp_path / "lme.json", questions=2, seed=1)
    lme_out = tmp_path / "lme_out.json"
    assert CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(lme_data), "--output", str(lme_out)]).exit_code == 0
    lme = json.loads(lme_out.read_text())
    assert set(locomo) == set(lme)
    assert set(locomo["metrics"]) == set(lme["metrics"])
    assert set(locomo["metrics"]["all"]["session"]) == set(lme["metrics"]["all"]["session"])
    scored = lambda results: next(r for r in results["records"] if r["metrics"])
    assert set(scored(locomo)["metrics"]["turn"]) == set(scored(lme)["metrics"]["turn"])
    assert set(scored(locomo)) >= set(scored(lme)) - {"question_type"}


def test_every_field_of_a_question_under_each_rule(tmp_path):
    """Whole question dicts, written by hand: category names, answers, abstention and exclusion reasons."""
    conversation = _conversation()
    conversation["qa"] += ["not a dict", {"question": "  ", "answer": "x", "evidence": ["D1:1"], "category": 4},
                           {"question": "Anything?", "answer": "x", "category": 9},
                           {"evidence": ["D1:1"], "category": 4},
                           {"question": "Trap?", "evidence": ["D1:1"], "category": 5},
                           {"question": "Gone?", "answer": "a", "evidence": ["D9:9"], "category": 4}]
    path = tmp_path / "conv.json"
    path.write_text(json.dumps([conversation]))
    q = {i: question for i, question in enumerate(next(LoCoMo(path).iter_items())["questions"])}
    details = {"raw_evidence": ["D1:1"], "dropped_evidence": [], "unparseable": []}
    assert q[0] == {"question_id": "conv-x:q0", "question": "Where did Ann go hiking?", "question_type": "single-hop",
                    "category": 4, "expected": "the Alps", "expected_ids": ["D1"], "gold_turns": ["D1:1"],
                    "gold_sessions": ["D1"], "abstention": False, "details": details}
    assert q[4] == {"question_id": "conv-x:q4", "question": "Where did Bo go hiking?", "question_type": "adversarial",
                    "category": 5, "expected": "the Alps", "expected_ids": ["D1"], "gold_turns": ["D1:1"],
                    "gold_sessions": ["D1"], "abstention": True, "abstention_reason": "category 5 (adversarial)",
                    "details": details}
    empty = {"expected_ids": [], "gold_turns": [], "gold_sessions": [], "abstention": False}
    assert q[7] == {"question_id": "conv-x:q7", "question": "", "question_type": "malformed", "category": None,
                    "expected": "", **empty, "excluded": "qa entry is str, not an object",
                    "details": {"raw_evidence": None, "dropped_evidence": [], "unparseable": []}}
    assert q[8]["excluded"] == "empty question" and q[8]["question"] == "  " and q[8]["gold_turns"] == ["D1:1"]
    assert q[9] == {"question_id": "conv-x:q9", "question": "Anything?", "question_type": "category 9", "category": 9,
                    "expected": "x", **empty, "excluded": "no evidence listed",
                    "details": {"raw_evidence": None, "dropped_evidence": [], "unparseable": []}}
    assert q[10]["question"] == "" and q[10]["excluded"] == "empty question"
    assert q[11]["expected"] == "" and q[11]["abstention"]
    assert q[12]["excluded"] == "no resolvable evidence" and q[12]["details"]["dropped_evidence"] == ["D9:9"]


def test_converting_a_file_that_is_not_an_array_of_conversations_names_it(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps({"conversation": {}}))
    with pytest.raises(DatasetError) as caught:
        convert_locomo(path)
    assert str(caught.value) == (f"{path}: the LoCoMo file (an array of conversations) is not a JSON array "
                                 "(its top level is a JSON object)")
