import json

import pytest

from adapters.benchmarks.longmemeval.reader import LongMemEval, abstention_reason, extract_questions, load_companion, scan
from adapters.generators.longmemeval_s import TYPE_COUNTS, generate
from adapters.errors import DatasetError
from tests.helpers import write_dataset


def _raw(**over):
    raw = {
        "question_id": "aa11bb22", "question": "What is my dog called?", "answer": "Rex",
        "haystack_session_ids": ["filler_1", "answer_x1"],
        "haystack_dates": ["2023/01/01 (Sun) 10:00", "2023/02/01 (Wed) 10:00"],
        "haystack_sessions": [
            [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
            [{"role": "user", "content": "We adopted a puppy."},
             {"role": "assistant", "content": "Nice!"},
             {"role": "user", "content": "We named him Rex, after the puppy.", "has_answer": True}],
        ],
        "answer_session_ids": ["answer_x1"],
    }
    raw.update(over)
    return raw


@pytest.mark.parametrize("raw, qid, expected, reason", [
    (_raw(_abs=True), "aa11bb22", "x", "_abs field"),
    (_raw(), "aa11bb22_abs", "x", "question_id ends with _abs"),
    (_raw(), "aa11bb22", "I Don't Know that", "expected says don't know"),
    (_raw(answer_session_ids=["answer_x1_abs"]), "aa11bb22", "x", "answer session id contains _abs"),
    (_raw(), "aa11bb22", "x", None),
])
def test_each_abstention_trigger_alone(raw, qid, expected, reason):
    assert abstention_reason(raw, qid, expected) == reason


def _item(tmp_path, raw, profile="expected-text", companion=True):
    data = tmp_path / "d.json"
    data.write_text(json.dumps([raw]))
    questions = None
    if companion:
        questions = tmp_path / "q.json"
        extract_questions(data, questions)
    return next(LongMemEval(data, questions, profile).iter_items())


def test_gold_turns_under_the_memoria_profile(tmp_path):
    item = _item(tmp_path, _raw())
    # expected = first turn of the first answer session; gold = answer-session turns containing it
    assert item["questions"][0]["expected"] == "We adopted a puppy."
    assert item["questions"][0]["gold_turns"] == ["answer_x1#0"]


def test_memoria_profile_gold_is_answer_session_turns_holding_the_expected_text(tmp_path):
    """The expected text sits in a later turn of the answer session and in a filler session too: only the
    answer-session turns that contain it are gold, not the first turn and not the filler."""
    raw = _raw(haystack_session_ids=["filler_1", "answer_x1"], haystack_sessions=[
        [{"role": "user", "content": "My friend named his cat Rex."}, {"role": "assistant", "content": "Cute."}],
        [{"role": "user", "content": "We adopted a puppy."}, {"role": "assistant", "content": "Nice!"},
         {"role": "user", "content": "We named him Rex."}, {"role": "assistant", "content": "Rex is a fine name."}],
    ])
    data = tmp_path / "d.json"
    data.write_text(json.dumps([raw]))
    companion = tmp_path / "q.json"
    companion.write_text(json.dumps([{"question_id": "aa11bb22", "query": "?", "expected": "Rex",
                                      "expected_ids": ["answer_x1"]}]))
    question = next(LongMemEval(data, companion, "expected-text").iter_items())["questions"][0]
    assert question["gold_turns"] == ["answer_x1#2", "answer_x1#3"]
    assert question["gold_sessions"] == ["answer_x1"]


def test_gold_turns_under_the_official_profile(tmp_path):
    item = _item(tmp_path, _raw(), profile="longmemeval-official")
    assert item["questions"][0]["gold_turns"] == ["answer_x1#2"]
    assert all(t["props"]["role"] == "user" for t in item["turns"])  # user turns only are indexed
    assert [t["official_id"] for t in item["turns"]] == ["filler_1_1", "noans_x1_1", "answer_x1_3"]


def test_companion_fallback_warns_once(tmp_path):
    from click.testing import CliRunner

    from coordinator.cli import main

    data = tmp_path / "d.json"
    second = _raw(question_id="cc33dd44")
    data.write_text(json.dumps([_raw(), second]))
    items = list(LongMemEval(data, None, "expected-text").iter_items())
    assert [i["questions"][0]["gold_turns"] for i in items] == [["answer_x1#0"], ["answer_x1#0"]]
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system",
                                                       "tests.adapters.systems.spy_system:Misbehaving",
                                                       "--profile", "expected-text", "--output", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert result.output.count("first turn of each answer session") == 1


def test_empty_turns_and_repeated_sessions_are_skipped_and_counted(tmp_path):
    raw = _raw()
    raw["haystack_session_ids"].append("filler_1")
    raw["haystack_sessions"].append(raw["haystack_sessions"][0])
    raw["haystack_dates"].append("2023/03/01 (Wed) 10:00")
    raw["haystack_sessions"][1][1]["content"] = "  "
    item = _item(tmp_path, raw)
    assert item["stats"]["duplicate_sessions_skipped"] == 1 and item["stats"]["empty_turns_skipped"] == 1
    assert len(item["turns"]) == 4


def test_missing_haystack_sessions_is_an_item_failure(tmp_path):
    data = tmp_path / "d.json"
    bad = _raw(question_id="bad00001")
    del bad["haystack_sessions"]
    data.write_text(json.dumps([_raw(), bad]))
    items = list(LongMemEval(data).iter_items())
    assert "error" not in items[0]
    assert items[1]["item_id"] == "bad00001" and items[1]["field"] == "haystack_sessions"
    assert "bad00001" in items[1]["error"]


@pytest.mark.parametrize("content, message", [
    ("{not json", "expected a JSON array"),
    ('{"a": 1}', "found a JSON object"),
    ("[{\"question_id\": \"x\"}, oops]", "not valid JSON in element 1"),
    ("", "empty"),
])
def test_unusable_files_name_the_file(tmp_path, content, message):
    path = tmp_path / "broken.json"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message) as caught:
        scan(path)
    assert str(path) in str(caught.value)


def test_duplicate_question_ids_are_refused_with_both_positions(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text(json.dumps([_raw(), _raw(question_id="other"), _raw()]))
    with pytest.raises(DatasetError, match=r"'aa11bb22' at positions 0 and 2"):
        scan(path)


def test_generator_is_deterministic_and_faithful():
    first, second = generate(60, seed=5, scale=0.2), generate(60, seed=5, scale=0.2)
    assert first == second
    assert generate(60, seed=6, scale=0.2) != first
    types = {q["question_type"] for q in first}
    assert types == set(TYPE_COUNTS)
    ids = [q["question_id"] for q in first]
    assert len(set(ids)) == len(ids)
    assert any(isinstance(q["answer"], int) for q in first) and any(isinstance(q["answer"], str) for q in first)
    assert 2 <= sum(q["question_id"].endswith("_abs") for q in first) <= 6
    turns = [t for q in first for s in q["haystack_sessions"] for t in s]
    assert any(t["content"] == "" for t in turns)
    assert any(len(t["content"].encode()) > 32_743 for t in turns)
    assert any(len(q["haystack_session_ids"]) != len(set(q["haystack_session_ids"])) for q in first)
    assert any(max(q["haystack_dates"]) > q["question_date"] for q in first)
    assert any(s and s[0]["role"] != "user" for q in first for s in q["haystack_sessions"])
    for q in first:
        assert len(q["haystack_dates"]) == len(q["haystack_session_ids"]) == len(q["haystack_sessions"])
        assert q["haystack_dates"] == sorted(q["haystack_dates"])
        assert all(a in q["haystack_session_ids"] for a in q["answer_session_ids"])
    # filler sessions shared between questions carry identical content under the same id
    content = {}
    for q in first:
        for sid, session in zip(q["haystack_session_ids"], q["haystack_sessions"]):
            assert content.setdefault(sid, session) == session
    assert sum(len(q["haystack_session_ids"]) for q in first) > len(content)


def test_streaming_reader_matches_json_load(tmp_path):
    path = write_dataset(tmp_path / "d.json", questions=5)
    from adapters.jsonstream import iter_array
    import adapters.jsonstream as js

    original = js._CHUNK
    js._CHUNK = 97  # force elements to straddle many chunk boundaries
    try:
        assert list(iter_array(path)) == json.loads(path.read_text())
    finally:
        js._CHUNK = original


def test_every_field_of_a_question_under_each_rule(tmp_path):
    """Whole question dicts, written by hand: gold, expected text, abstention and exclusion reasons."""
    raws = [_raw(question_type="single-session-user", question_date="2023/05/30 (Tue) 23:40"),
            _raw(question_id="q_abs"), _raw(question_id="nolist", answer_session_ids=[]),
            _raw(question_id="away", answer_session_ids=["answer_zz"])]
    data = tmp_path / "d.json"
    data.write_text(json.dumps(raws))
    companion = tmp_path / "q.json"
    extract_questions(data, companion)

    def questions(profile, with_companion):
        items = LongMemEval(data, companion if with_companion else None, profile).iter_items()
        return {i["item_id"]: i["questions"][0] if "questions" in i else {"error": i["error"], "field": i["field"]}
                for i in items}

    common = {"question": "What is my dog called?", "question_date": "", "question_type": "", "answer": "Rex"}
    text_gold = questions("expected-text", True)
    assert {k: v for k, v in text_gold["aa11bb22"].items() if k != "gold_by_profile"} == {
        **common, "question_id": "aa11bb22", "question_date": "2023/05/30 (Tue) 23:40",
        "question_type": "single-session-user", "expected": "We adopted a puppy.", "expected_ids": ["answer_x1"],
        "gold_sessions": ["answer_x1"], "gold_turns": ["answer_x1#0"], "abstention": False}
    assert text_gold["aa11bb22"]["gold_by_profile"]["expected-text"] == {
        "sessions": ["answer_x1"], "turns": ["answer_x1#0"], "scored": True}
    assert {k: v for k, v in text_gold["q_abs"].items() if k != "gold_by_profile"} == {
        **common, "question_id": "q_abs", "expected": "We adopted a puppy.", "expected_ids": ["answer_x1"],
        "gold_sessions": ["answer_x1"], "gold_turns": ["answer_x1#0"], "abstention": True,
        "abstention_reason": "question_id ends with _abs"}
    # damaged (no answer session of the haystack named): failed with the reason, whatever the profile
    assert text_gold["nolist"] == {"error": "question nolist: answer_session_ids name no session of the haystack "
                                            "(the list is empty)", "field": "answer_session_ids"}
    assert text_gold["away"] == {"error": "question away: answer_session_ids name no session of the haystack "
                                          "(answer_zz)", "field": "answer_session_ids"}
    assert text_gold["q_abs"]["gold_by_profile"]["expected-text"]["scored"] is False
    # without the companion file, expected is the dataset's answer
    assert questions("expected-text", False)["aa11bb22"]["expected"] == "Rex"
    official = questions("longmemeval-official", False)
    assert official["nolist"] == text_gold["nolist"] and official["away"] == text_gold["away"]
    assert official["q_abs"]["abstention"] and \
        official["q_abs"]["abstention_reason"] == "question_id contains _abs (the official rule)"


def test_the_first_answer_turn_is_empty_when_there_is_none():
    from adapters.benchmarks.longmemeval.reader import first_answer_turn

    assert first_answer_turn(_raw()) == "We adopted a puppy."
    assert first_answer_turn(_raw(answer_session_ids=["nowhere"])) == ""
    no_content = _raw(haystack_sessions=[[{"role": "user", "content": "hello"}], [{"role": "user"}]])
    assert first_answer_turn(no_content) == ""


def test_the_less_common_exclusions_and_defaults(tmp_path):
    def question(raw, companion_entries=None, profile="expected-text"):
        data = tmp_path / "d.json"
        data.write_text(json.dumps([raw]))
        companion = None
        if companion_entries is not None:
            companion = tmp_path / "q.json"
            companion.write_text(json.dumps(companion_entries))
        return next(LongMemEval(data, companion, profile).iter_items())["questions"][0]

    many = _raw(answer_session_ids=["answer_x1"] + [f"gone_{n}" for n in range(6)])
    assert question(many)["excluded"] == ("gold session(s) not in the haystack: "
                                          "gone_0, gone_1, gone_2, gone_3, gone_4")
    no_answer = _raw()
    del no_answer["answer"]
    assert question(no_answer)["expected"] == ""
    # a companion entry without `expected`: no expected text, so the first answer turn is gold
    bare = question(_raw(), [{"question_id": "aa11bb22"}])
    assert bare["expected"] == "" and bare["gold_turns"] == ["answer_x1#0"]
    # the expected-text profile's abstention trigger is not the official rule: no reason is left behind under the official profile
    flagged = question(_raw(_abs=True), profile="longmemeval-official")
    assert flagged["abstention"] is False and "abstention_reason" not in flagged
    assert question(_raw(_abs=True))["abstention_reason"] == "_abs field"


@pytest.mark.parametrize("content, message", [(None, "No such file"), ("{oops", "not valid UTF-8 JSON"),
                                              ('{"question_id": "x"}', "is not a JSON array")])
def test_an_unusable_questions_file_is_named(tmp_path, content, message):
    path = tmp_path / "q.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DatasetError, match=message) as caught:
        load_companion(path)
    assert str(caught.value).startswith(f"{path}: ") and "questions file" in str(caught.value)
