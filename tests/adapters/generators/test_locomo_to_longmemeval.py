"""LoCoMo conversations converted into LongMemEval's shape: exact output on a hand-made conversation, the
converted file read back by the LongMemEval adapter under both profiles, the real file through the CLI, and
inputs the converter must refuse with the file and the field named."""

import json
import re

import pytest
from click.testing import CliRunner

from adapters.errors import DatasetError
from adapters.benchmarks.locomo.reader import LoCoMo, normalise_evidence
from adapters.generators.locomo_to_longmemeval import convert, longmemeval_date, write
from adapters.benchmarks.longmemeval.reader import LongMemEval, extract_questions
from coordinator.cli import main

OFFICIAL = "longmemeval-official"
PROFILES = ["expected-text", OFFICIAL]
LONGMEMEVAL_DATE = re.compile(r"\d{4}/\d{2}/\d{2} \((Mon|Tue|Wed|Thu|Fri|Sat|Sun)\) \d{2}:\d{2}")


def _conversation() -> dict:
    """Two speakers, three sessions (listed out of order, beside keys that are no sessions), captions, and
    questions of every kind the converter keeps or leaves out."""
    return {
        "sample_id": "conv-t",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_3_date_time": "7:30 pm on 2 July, 2023",
            "session_3": [
                {"speaker": "Ann", "dia_id": "D3:1", "text": "Did you climb again?"},
                {"speaker": "Bo", "dia_id": "D3:2", "text": "Yes, the Matterhorn this time.",
                 "blip_caption": "a photo of a mountain hut"},
                {"speaker": "Ann", "dia_id": "D3:03", "text": "Was Mont Blanc harder?"},
            ],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo, how was the trip?"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Great, I climbed Mont Blanc."},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "Wow!", "blip_caption": "a photo of a snowy peak"},
            ],
            "session_2_date_time": "10:04 am on 19 June, 2023",
            "session_2": [
                {"speaker": "Bo", "dia_id": "D2:1", "text": "I adopted a cat."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "What is its name?"},
                {"speaker": "Bo", "dia_id": "D2:3", "text": "", "blip_caption": "a photo of a cat"},
            ],
            "session_x": "not a session",
            "session_9_date_time": "9:00 am on 1 August, 2023",
        },
        "qa": [
            {"question": "Which mountains did Bo climb?", "answer": "Mont Blanc and the Matterhorn",
             "evidence": ["D1:2; D3:2", "D:3:3"], "category": 1},
            {"question": "What did Bo name his dog?", "adversarial_answer": "a cat, not a dog",
             "evidence": ["D2:1"], "category": 5},
            {"question": "When did Ann go skiing?", "answer": "in March", "evidence": ["D9:4"], "category": 2},
            {"question": "What did Ann ask about the cat?", "answer": "its name", "evidence": ["D2:2"],
             "category": 4},
            {"question": "Who asked about the trip?", "answer": "Ann", "evidence": ["D1:2", "D1:1"], "category": 3},
            {"question": "What did Bo photograph?", "answer": "a cat", "evidence": ["D2:3"], "category": 4},
            {"question": "Where does Bo live?", "answer": "Zermatt", "evidence": [], "category": 4},
            {"question": "What does Bo drink?", "answer": "tea", "evidence": 7, "category": 4},
        ],
    }


DATES = ["2023/05/08 (Mon) 13:56", "2023/06/19 (Mon) 10:04", "2023/07/02 (Sun) 19:30"]


def _session_1(user: str) -> list[dict]:
    ann, bo = ("user", "assistant") if user == "Ann" else ("assistant", "user")
    return [{"role": ann, "content": "Hi Bo, how was the trip?"},
            {"role": bo, "content": "Great, I climbed Mont Blanc."},
            {"role": ann, "content": "Wow! [shares a photo: a photo of a snowy peak]"}]


def _session_2(user: str) -> list[dict]:
    ann, bo = ("user", "assistant") if user == "Ann" else ("assistant", "user")
    return [{"role": bo, "content": "I adopted a cat."},
            {"role": ann, "content": "What is its name?"},
            {"role": bo, "content": " [shares a photo: a photo of a cat]"}]


def _session_3(user: str) -> list[dict]:
    ann, bo = ("user", "assistant") if user == "Ann" else ("assistant", "user")
    return [{"role": ann, "content": "Did you climb again?"},
            {"role": bo, "content": "Yes, the Matterhorn this time. [shares a photo: a photo of a mountain hut]"},
            {"role": ann, "content": "Was Mont Blanc harder?"}]


def _marked(session: list[dict], *positions: int) -> list[dict]:
    return [{**turn, "has_answer": True} if i in positions else turn for i, turn in enumerate(session)]


EXPECTED = [
    {   # evidence in sessions 1 and 3, two turns of Bo's and one of Ann's: Bo is the user
        "question_id": "conv-t_q0", "question_type": "multi-hop", "question": "Which mountains did Bo climb?",
        "answer": "Mont Blanc and the Matterhorn", "question_date": DATES[2],
        "haystack_session_ids": ["answer_conv-t_D1", "conv-t_D2", "answer_conv-t_D3"],
        "haystack_dates": DATES,
        "haystack_sessions": [_marked(_session_1("Bo"), 1), _session_2("Bo"), _marked(_session_3("Bo"), 1, 2)],
        "answer_session_ids": ["answer_conv-t_D1", "answer_conv-t_D3"],
    },
    {   # Ann's own words: Ann is the user
        "question_id": "conv-t_q3", "question_type": "single-hop", "question": "What did Ann ask about the cat?",
        "answer": "its name", "question_date": DATES[2],
        "haystack_session_ids": ["conv-t_D1", "answer_conv-t_D2", "conv-t_D3"],
        "haystack_dates": DATES,
        "haystack_sessions": [_session_1("Ann"), _marked(_session_2("Ann"), 1), _session_3("Ann")],
        "answer_session_ids": ["answer_conv-t_D2"],
    },
    {   # one turn each, Bo's listed first: the tie goes to speaker_a, Ann
        "question_id": "conv-t_q4", "question_type": "open-domain", "question": "Who asked about the trip?",
        "answer": "Ann", "question_date": DATES[2],
        "haystack_session_ids": ["answer_conv-t_D1", "conv-t_D2", "conv-t_D3"],
        "haystack_dates": DATES,
        "haystack_sessions": [_marked(_session_1("Ann"), 0, 1), _session_2("Ann"), _session_3("Ann")],
        "answer_session_ids": ["answer_conv-t_D1"],
    },
]


def _write(tmp_path, data, name="locomo.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _convert_cli(source, target):
    return CliRunner().invoke(main, ["convert", "locomo-longmemeval", str(source), str(target)])


def test_hand_made_conversation_becomes_exactly_these_questions(tmp_path):
    """Left out: category 5 (q1), evidence that matches no turn (q2), evidence that is only a turn without
    text, which the LoCoMo adapter does not index (q5), no evidence (q6), evidence that is no list (q7)."""
    target = tmp_path / "out.json"
    result = _convert_cli(_write(tmp_path, [_conversation()]), target)
    assert result.exit_code == 0, result.output
    assert result.output == f"wrote 3 questions to {target}\n"
    assert json.loads(target.read_text()) == EXPECTED


def test_speaker_names_never_reach_the_output(tmp_path):
    """Renaming the speakers, one of them `answer`, changes nothing: names become roles and leave the text."""
    renamed = _conversation()
    talk = renamed["conversation"]
    talk["speaker_a"], talk["speaker_b"] = "user", "answer"
    for session in talk.values():
        if isinstance(session, list):
            for turn in session:
                turn["speaker"] = {"Ann": "user", "Bo": "answer"}[turn["speaker"]]
    assert convert(_write(tmp_path, [renamed])) == EXPECTED


def test_sessions_in_number_order_and_keys_that_are_no_sessions_ignored(tmp_path):
    talk = {"speaker_a": "Ann", "speaker_b": "Bo",
            "session_10": [{"speaker": "Bo", "dia_id": "D10:1", "text": "Later."}],
            "session_10_date_time": "8:00 am on 3 March, 2024",
            "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Earlier."}],
            "session_2_date_time": "11:15 pm on 29 February, 2024",
            "session_two": [{"speaker": "Ann", "dia_id": "D7:1", "text": "Not a session."}],
            "session_": [], "session_2_date_time_x": "junk", "session_²": [],
            "session_05": [{"speaker": "Bo", "dia_id": "D5:1", "text": "Middle."}]}
    data = [{"sample_id": "c", "conversation": talk,
             "qa": [{"question": "When?", "answer": "later", "evidence": ["D10:1"], "category": 2},
                    {"question": "Which?", "answer": "none", "evidence": ["D7:1"], "category": 4}]}]
    [question] = convert(_write(tmp_path, data))
    assert question["haystack_session_ids"] == ["c_D2", "c_D5", "answer_c_D10"]
    assert question["haystack_dates"] == ["2024/02/29 (Thu) 23:15", "", "2024/03/03 (Sun) 08:00"]
    assert question["question_date"] == "2024/03/03 (Sun) 08:00"
    assert [s[0]["content"] for s in question["haystack_sessions"]] == ["Earlier.", "Middle.", "Later."]


def test_the_answer_session_is_the_one_holding_the_evidence_turn(tmp_path):
    """A turn whose dia_id names another session than the one it sits in: the session that holds it is the
    answer session, so that its has_answer turn lies inside an `answer` session."""
    talk = {"speaker_a": "Ann", "speaker_b": "Bo",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "One."}],
            "session_2": [{"speaker": "Ann", "dia_id": "D3:1", "text": "Misnumbered."}],
            "session_3": [{"speaker": "Ann", "dia_id": "D3:2", "text": "Three."}]}
    data = [{"sample_id": "c", "conversation": talk,
             "qa": [{"question": "Which?", "answer": "x", "evidence": ["D3:1"], "category": 4}]}]
    [question] = convert(_write(tmp_path, data))
    assert question["answer_session_ids"] == ["answer_c_D2"]
    assert question["haystack_sessions"][1] == [{"role": "user", "content": "Misnumbered.", "has_answer": True}]


def test_dates_that_do_not_parse_are_kept():
    assert longmemeval_date("1:56 pm on 8 May, 2023") == "2023/05/08 (Mon) 13:56"
    assert longmemeval_date(" 12:00 am on 1 January, 2024 ") == "2024/01/01 (Mon) 00:00"
    assert longmemeval_date("sometime in May") == "sometime in May"
    assert longmemeval_date("") == ""


def _locomo_questions(path) -> dict:
    """The questions the LoCoMo adapter scores, by the id the converter gives them."""
    out = {}
    for item in LoCoMo(path).iter_items():
        assert "error" not in item, item
        for question in item["questions"]:
            if not question["abstention"] and "excluded" not in question:
                cid, index = question["question_id"].rsplit(":q", 1)
                out[f"{cid}_q{index}"] = question
    return out


def _locomo_session(session_id: str) -> str:
    """`answer_<conversation>_D<n>` -> `D<n>`."""
    return session_id.rsplit("_", 1)[1]


@pytest.mark.parametrize("profile, companion", [("expected-text", False), ("expected-text", True),
                                                (OFFICIAL, False)])
def test_converted_file_read_back_by_the_longmemeval_adapter(tmp_path, profile, companion):
    source = _write(tmp_path, [_conversation()])
    target = tmp_path / "out.json"
    assert write(source, target) == 3
    questions_file = None
    if companion:
        questions_file = tmp_path / "questions.json"
        extract_questions(target, questions_file)
    items = list(LongMemEval(target, questions_file, profile).iter_items())
    locomo = _locomo_questions(source)
    assert [item["item_id"] for item in items] == list(locomo) == ["conv-t_q0", "conv-t_q3", "conv-t_q4"]
    official_gold = {"conv-t_q0": ["answer_conv-t_D1#1", "answer_conv-t_D3#1"],
                     "conv-t_q3": ["answer_conv-t_D2#1"], "conv-t_q4": ["answer_conv-t_D1#0"]}
    for item in items:
        assert "error" not in item, item
        [question] = item["questions"]
        assert not question["abstention"] and "excluded" not in question, question
        expected = locomo[item["item_id"]]
        assert [_locomo_session(s) for s in question["gold_sessions"]] == expected["gold_sessions"]
        assert question["question_type"] == expected["question_type"]
        gold = question["gold_by_profile"]
        assert gold["expected-text"]["scored"] and gold[OFFICIAL]["scored"]
        user_answers = [t["turn_id"] for t in item["turns"] if t["props"]["role"] == "user" and t["has_answer"]]
        assert user_answers == official_gold[item["item_id"]]
        assert gold[OFFICIAL]["turn"]["gold"] == [  # the official ids count turns from 1
            f"{t.split('#')[0]}_{int(t.split('#')[1]) + 1}" for t in official_gold[item["item_id"]]]
        if profile == OFFICIAL:
            assert question["gold_turns"] == official_gold[item["item_id"]]
            assert all(t["props"]["role"] == "user" for t in item["turns"])
            assert {t["session_id"] for t in item["turns"] if "answer" in (t["official_id"] or "")} == \
                {t.split("#")[0] for t in official_gold[item["item_id"]]}


@pytest.mark.parametrize("sample_id, mark", [("conv-answer-1", "answer"), ("answers", "answer"),
                                             ("conv_abs", "_abs"), ("x_absent", "_abs")])
def test_a_conversation_id_holding_a_mark_of_longmemeval_is_refused(tmp_path, sample_id, mark):
    """`answer` in every session id would make every session gold under the official rules; `_abs` in every
    question id would make every question an abstention. The converter refuses rather than renames: the
    question ids stay the LoCoMo sample_ids."""
    data = [{**_conversation(), "sample_id": sample_id}]
    source = _write(tmp_path, data)
    target = tmp_path / "out.json"
    result = _convert_cli(source, target)
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {source}: conversation {sample_id}: field 'sample_id' contains "
                                    f"{mark!r}")
    assert not target.exists()


def test_a_conversation_id_in_capitals_is_no_mark(tmp_path):
    """The official rule looks for `answer` in lower case: `ANSWER-1` marks nothing, and only evidence
    sessions are gold when the file is read back."""
    data = [{**_conversation(), "sample_id": "ANSWER-1"}]
    target = tmp_path / "out.json"
    write(_write(tmp_path, data), target)
    item = next(LongMemEval(target, None, OFFICIAL).iter_items())
    gold = item["questions"][0]["gold_by_profile"][OFFICIAL]
    assert gold["session"]["gold"] == ["answer_ANSWER-1_D1", "answer_ANSWER-1_D3"]
    assert gold["turn"]["gold"] == ["answer_ANSWER-1_D1_2", "answer_ANSWER-1_D3_2"]


def test_two_conversations_with_one_id_are_refused(tmp_path):
    source = _write(tmp_path, [_conversation(), _conversation()])
    with pytest.raises(DatasetError) as caught:
        convert(source)
    assert str(caught.value) == (f"{source}: conversations 0 and 1 are both 'conv-t' (field 'sample_id'): "
                                 "their question ids would clash")


def _damaged(change):
    data = [_conversation()]
    change(data[0])
    return data


BAD = {
    "object at the top": ({"sample_id": "conv-t"},
                          "the LoCoMo file (an array of conversations) is not a JSON array "
                          "(its top level is a JSON object)"),
    "conversation is no object": (["conv-t"], "conversation 0 is str, not an object"),
    "no conversation": (_damaged(lambda c: c.pop("conversation")),
                        "conversation conv-t: field 'conversation' is not an object"),
    "session is no list": (_damaged(lambda c: c["conversation"].update(session_2="hello")),
                           "conversation conv-t: field 'session_2' is not a list of turns"),
    "turn is no object": (_damaged(lambda c: c["conversation"]["session_3"].append("hello")),
                          "conversation conv-t: field 'session_3' is not a list of turns"),
    "one session twice": (_damaged(lambda c: c["conversation"].update(session_02=[])),
                          "conversation conv-t: fields 'session_2' and 'session_02' are both session 2"),
    "no qa": (_damaged(lambda c: c.pop("qa")), "conversation conv-t: field 'qa' is not a list"),
    "category is a list": (_damaged(lambda c: c["qa"][3].update(category=[4])),
                           "conversation conv-t: qa 3: field 'category' is list, not a number"),
    "lone surrogate": (_damaged(lambda c: c["conversation"]["session_1"][2].update(blip_caption="a \ud800")),
                       "conversation conv-t: session_1 turn 2: field 'blip_caption' holds text that is not valid "
                       "Unicode (surrogates not allowed at position 2)"),
    "lone surrogate in a question": (_damaged(lambda c: c["qa"][0].update(question="Which \udfff?")),
                                     "conversation conv-t: qa 0: field 'question' holds text that is not valid "
                                     "Unicode (surrogates not allowed at position 6)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_naming_the_file_and_the_field(tmp_path, case):
    data, message = BAD[case]
    source = _write(tmp_path, data)
    target = tmp_path / "out.json"
    result = _convert_cli(source, target)
    assert result.exit_code == 2, result.output
    assert result.output == f"error: {source}: {message}\n"
    assert not target.exists()
    with pytest.raises(DatasetError) as caught:
        convert(source)
    assert str(caught.value) == f"{source}: {message}"


def test_a_file_that_is_not_json_and_a_target_that_cannot_be_written(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    result = _convert_cli(broken, tmp_path / "out.json")
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {broken}: cannot read the LoCoMo file (an array of conversations): "
                                    "not valid UTF-8 JSON")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = _convert_cli(_write(tmp_path, [_conversation()]), blocker / "out.json")
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {blocker / 'out.json'}: cannot write the LongMemEval file")


@pytest.fixture(scope="module")
def real_conversion(locomo_path, tmp_path_factory):
    target = tmp_path_factory.mktemp("converted") / "locomo_as_longmemeval.json"
    result = _convert_cli(locomo_path, target)
    assert result.exit_code == 0, result.output
    questions = json.loads(target.read_text())
    assert result.output == f"wrote {len(questions)} questions to {target}\n"
    return target, questions


def test_real_file_through_the_cli_keeps_every_scored_question_and_its_gold_sessions(real_conversion, locomo_path):
    _, questions = real_conversion
    locomo = _locomo_questions(locomo_path)
    assert [q["question_id"] for q in questions] == list(locomo)
    assert len(questions) == 839  # the count the LoCoMo adapter scores on this file
    conversations = {c["sample_id"]: c for c in json.loads(locomo_path.read_text())}
    for question in questions:
        expected = locomo[question["question_id"]]
        assert {_locomo_session(s) for s in question["answer_session_ids"]} == set(expected["gold_sessions"]), \
            question["question_id"]
        assert question["question"] == expected["question"]
        assert question["question_type"] == expected["question_type"]
        ids, sessions = question["haystack_session_ids"], question["haystack_sessions"]
        assert [s for s in ids if "answer" in s] == question["answer_session_ids"]
        assert all(LONGMEMEVAL_DATE.fullmatch(d) for d in question["haystack_dates"])
        assert question["question_date"] == question["haystack_dates"][-1]
        # the has_answer turns are the LoCoMo gold turns, in their words without the speaker's name
        cid = question["question_id"].rsplit("_q", 1)[0]
        talk = conversations[cid]["conversation"]
        by_id = {normalise_evidence([t["dia_id"]])[0][0]: t
                 for key, s in talk.items() if re.fullmatch(r"session_\d+", key) for t in s}
        marked = [(sid, t["content"]) for sid, s in zip(ids, sessions) for t in s if t.get("has_answer")]
        gold = [by_id[i] for i in expected["gold_turns"]]
        assert sorted(c for _, c in marked) == sorted(
            t["text"] + (f" [shares a photo: {t['blip_caption']}]" if t.get("blip_caption") else "") for t in gold)
        assert {sid for sid, _ in marked} == set(question["answer_session_ids"])
        speakers = {t["speaker"] for s in talk.values() if isinstance(s, list) for t in s}
        assert not any(t["content"].startswith(f"{name}: ") for s in sessions for t in s for name in speakers)


def test_real_file_read_back_under_the_official_profile(real_conversion, locomo_path):
    target, questions = real_conversion
    locomo = _locomo_questions(locomo_path)
    count = 0
    for item in LongMemEval(target, None, OFFICIAL).iter_items():
        assert "error" not in item, item
        [question] = item["questions"]
        assert not question["abstention"] and "excluded" not in question, question["question_id"]
        assert [_locomo_session(s) for s in question["gold_sessions"]] == sorted(
            locomo[item["item_id"]]["gold_sessions"], key=lambda s: int(s[1:]))
        assert question["gold_turns"] == [t["turn_id"] for t in item["turns"] if t["has_answer"]]
        count += 1
    assert count == len(questions)
