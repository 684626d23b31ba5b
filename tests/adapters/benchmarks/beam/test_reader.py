"""BEAM's reader: the development chats as items, every gold form, the markers, both layouts, and every kind of
bad input named by file, chat, question and field while the other chats still read."""

import json
import shutil

import pytest

from adapters.benchmarks import BENCHMARKS
from adapters.benchmarks.beam.known import KNOWN_FILES
from adapters.benchmarks.beam.reader import ABILITIES, Beam, strip_marker
from adapters.benchmarks.contract import Kind, warns
from adapters.errors import DatasetError

# ---- small chats built by hand ----------------------------------------------------------------------------


def message(ident, role="user", content=None, **extra):
    return {"role": role, "id": ident, "content": f"message {ident}" if content is None else content, **extra}


def batch(number, *turns, time_anchor=None):
    return {"batch_number": number, "time_anchor": time_anchor, "turns": [list(turn) for turn in turns]}


def small_chat():
    """Two batches, six messages (ids 0-5), markers on the user messages as BEAM writes them."""
    return [
        batch(1, [message(0, content="Plan my sprint ->-> 1,1", time_anchor="March-15-2024", index="1,1"),
                  message(1, "assistant", "Here is a plan")],
              [message(2, content="Add a login page ->-> 1,2"), message(3, "assistant", "Login done")]),
        batch(2, [message(4, content="Ship it on Friday ->-> 2,1", time_anchor="April-01-2024"),
                  message(5, "assistant", "Shipping Friday")]),
    ]


def small_questions():
    return {
        "abstention": [{"question": "Who reviewed the code?", "ideal_response": "Not in the chat"}],
        "information_extraction": [{"question": "When do I ship?", "answer": "Friday", "source_chat_ids": [4]}],
        "knowledge_update": [{"question": "What did I plan?", "answer": "a sprint",
                              "source_chat_ids": {"original_info": [0], "updated_info": [2]}}],
        "event_ordering": [{"question": "In what order?", "answer": "plan, login, ship",
                            "source_chat_ids": [[0, 2], 4, [4]]}],
        "instruction_following": [{"question": "Show me code", "expected_compliance": "highlighted code",
                                   "source_chat_ids": [3]}],
    }


def write_chat(folder, chat=None, questions=None, *, raw_chat=None, raw_questions=None):
    folder.mkdir(parents=True, exist_ok=True)
    if raw_chat is not None:
        (folder / "chat.json").write_bytes(raw_chat)
    elif chat is not False:
        (folder / "chat.json").write_text(json.dumps(small_chat() if chat is None else chat))
    if raw_questions is not None or questions is not False:
        (folder / "probing_questions").mkdir(exist_ok=True)
        file = folder / "probing_questions" / "probing_questions.json"
        if raw_questions is not None:
            file.write_bytes(raw_questions)
        else:
            file.write_text(json.dumps(small_questions() if questions is None else questions))
    return folder


def read(path):
    return list(Beam(path).iter_items())


def only(path):
    items = read(path)
    assert len(items) == 1
    return items[0]


def question(item, qid):
    return next(q for q in item["questions"] if q["question_id"] == qid)


# ---- the declaration ------------------------------------------------------------------------------------------


def test_beam_is_declared_a_whole_history_benchmark_of_chat_folders():
    beam = BENCHMARKS["beam"]
    assert (beam.title, beam.item_unit, beam.kind, beam.reader) == ("BEAM", "chat", Kind.WHOLE_HISTORY, Beam)
    assert beam.reads_folders and warns(Beam)
    assert beam.group_key.split(",") == ["question_type", "category", "item_id"]  # ability, size, chat


# ---- a small chat: docs, gold forms, markers ------------------------------------------------------------------


def test_every_message_is_a_doc_with_its_batch_as_session_and_no_native_id_in_props(tmp_path):
    item = only(write_chat(tmp_path / "chats" / "100K" / "7"))
    assert item["item_id"] == "100K/7"
    assert [t["turn_id"] for t in item["turns"]] == ["0", "1", "2", "3", "4", "5"]
    assert [t["session_id"] for t in item["turns"]] == ["B1", "B1", "B1", "B1", "B2", "B2"]
    assert item["turns"][0]["text"] == "Plan my sprint"
    assert item["turns"][0]["props"] == {"role": "user", "date": "March-15-2024", "turn_index": 0, "session_index": 0}
    assert item["turns"][3]["props"] == {"role": "assistant", "date": "March-15-2024", "turn_index": 3,
                                         "session_index": 0}
    assert item["turns"][5]["props"]["date"] == "April-01-2024"
    assert all(set(t["props"]) <= {"role", "date", "turn_index", "session_index"} for t in item["turns"])
    assert item["stats"]["markers_stripped"] == 3 and item["stats"]["messages"] == 6


def test_gold_is_every_id_of_a_list_a_list_of_lists_or_a_dict_of_lists_each_once(tmp_path):
    item = only(write_chat(tmp_path / "chats" / "100K" / "7"))
    extraction = question(item, "100K/7:information_extraction:0")
    assert (extraction["gold_turns"], extraction["gold_sessions"]) == (["4"], ["B2"])
    assert (extraction["answer"], extraction["expected"], extraction["question_type"], extraction["category"]) == (
        "Friday", "Friday", "information_extraction", "100K")
    update = question(item, "100K/7:knowledge_update:0")
    assert update["gold_turns"] == ["0", "2"] and update["details"]["gold_form"] == "dict: original_info, updated_info"
    ordering = question(item, "100K/7:event_ordering:0")
    assert ordering["gold_turns"] == ["0", "2", "4"] and ordering["gold_sessions"] == ["B1", "B2"]
    assert ordering["details"]["gold_form"] == "list of lists"
    following = question(item, "100K/7:instruction_following:0")
    assert following["answer"] == "highlighted code" and following["details"]["answer_field"] == "expected_compliance"


def test_abstention_questions_are_marked_with_their_reason_and_counted(tmp_path):
    item = only(write_chat(tmp_path / "chats" / "100K" / "7"))
    abstention = question(item, "100K/7:abstention:0")
    assert abstention["abstention"] and "abstention" in abstention["abstention_reason"]
    assert abstention["gold_turns"] == [] and abstention["answer"] == "Not in the chat"
    assert item["stats"]["abstention_questions"] == 1 and item["stats"]["excluded_questions"] == 0


@pytest.mark.parametrize("content, expected", [
    ("How do I log in? ->-> 3,17", "How do I log in?"),
    ("Create Messagepack ->-> 2,N/A", "Create Messagepack"),
    ("since 1985 ->-> 1,5)", "since 1985"),
    ("my will? ->-> 2,22, 24", "my will?"),
    ("probability? ->->  3,8", "probability?"),
    ("journaling ->-> 4,(no specific bullet, but related to the context)", "journaling"),
])
def test_the_trailing_marker_is_stripped_in_every_form_beam_writes(content, expected):
    assert strip_marker(content) == (expected, True)


@pytest.mark.parametrize("content", ["no marker here", "an arrow ->-> in the middle\nof a message",
                                     "x = a ->-> 3,8\nand more lines after it", "->-> no numbers"])
def test_text_that_is_not_a_trailing_marker_is_kept(content):
    assert strip_marker(content) == (content, False)


# ---- the folders a --dataset names -----------------------------------------------------------------------------


def test_the_chats_folder_a_size_folder_a_chat_folder_and_the_folder_above_chats_are_read(tmp_path):
    for size, number in (("500K", "2"), ("100K", "10"), ("100K", "9"), ("1M", "1")):
        write_chat(tmp_path / "data" / "chats" / size / number)
    ordered = ["100K/9", "100K/10", "500K/2", "1M/1"]
    assert Beam(tmp_path / "data").scan() == ordered
    assert Beam(tmp_path / "data" / "chats").scan() == ordered
    assert Beam(tmp_path / "data" / "chats" / "100K").scan() == ["100K/9", "100K/10"]
    assert Beam(tmp_path / "data" / "chats" / "100K" / "10").scan() == ["100K/10"]


def test_a_folder_without_chats_and_a_file_are_refused_by_name(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="holds no BEAM chat"):
        Beam(tmp_path / "empty").scan()
    (tmp_path / "chat.json").write_text("[]")
    with pytest.raises(DatasetError, match="not a folder"):
        Beam(tmp_path / "chat.json").scan()


def test_a_folder_name_holding_a_colon_is_refused_since_question_ids_start_with_the_chat(tmp_path):
    write_chat(tmp_path / "chats" / "100K" / "a:b")
    with pytest.raises(DatasetError, match="may not hold ':'"):
        Beam(tmp_path / "chats" / "100K" / "a:b").scan()


# ---- bad input: each fails its chat or excludes its question, naming where; the other chats read ---------------


def bad_batch_chat(mutate):
    chat = small_chat()
    mutate(chat)
    return chat


@pytest.mark.parametrize("mutate, field, where", [
    (lambda c: c[0]["turns"][1][0].pop("content"), "content", "batch 1, turn 1, message 0"),
    (lambda c: c[0]["turns"][1][0].update(content=7), "content", "batch 1, turn 1, message 0"),
    (lambda c: c[1]["turns"][0][1].pop("id"), "id", "batch 2, turn 0, message 1"),
    (lambda c: c[1]["turns"][0][1].update(id="5"), "id", "batch 2, turn 0, message 1"),
    (lambda c: c[1]["turns"][0][1].update(id=True), "id", "batch 2, turn 0, message 1"),
    (lambda c: c[0]["turns"][0][1].pop("role"), "role", "batch 1, turn 0, message 1"),
    (lambda c: c[1].pop("batch_number"), "batch_number", "batch at position 1"),
    (lambda c: c[1].update(batch_number=1), "batch_number", "batch 1"),
    (lambda c: c[1].update(turns={"a": 1}), "turns", "batch 2"),
    (lambda c: c[1].update(turns=["not a turn"]), "turns", "batch 2"),
    (lambda c: c[1]["turns"][0].append("not a message"), "message", "batch 2, turn 0, message 2"),
    (lambda c: c[0].update(time_anchor=20240315), "time_anchor", "batch 1"),
    (lambda c: c.append("not a batch"), "batch", "batch at position 2"),
])
def test_a_missing_or_malformed_field_fails_its_chat_naming_file_chat_place_and_field(tmp_path, mutate, field, where):
    chats = tmp_path / "chats" / "100K"
    write_chat(chats / "1")
    write_chat(chats / "2", bad_batch_chat(mutate))
    write_chat(chats / "3")
    good, bad, other = read(chats)
    assert "error" not in good and "error" not in other and len(other["turns"]) == 6
    assert bad["item_id"] == "100K/2" and bad["field"] == field
    assert str(chats / "2" / "chat.json") in bad["error"] and "chat 100K/2" in bad["error"] and where in bad["error"]


def test_a_repeated_message_id_fails_its_chat_naming_both_messages(tmp_path):
    chat = small_chat()
    chat[1]["turns"][0][1]["id"] = 2
    item = only(write_chat(tmp_path / "chats" / "100K" / "1", chat))
    assert item["field"] == "id"
    assert "batch 2, turn 0, message 1: message id 2 is also the id of batch 1, turn 1, message 0" in item["error"]


def test_a_gold_id_naming_no_message_is_dropped_and_counted_and_a_question_left_without_gold_excluded(tmp_path):
    questions = {"multi_session_reasoning": [
        {"question": "Both?", "answer": "yes", "source_chat_ids": [4, 99]},
        {"question": "None?", "answer": "no", "source_chat_ids": {"first_event": [98], "second_event": ["x"]}},
        {"question": "Empty?", "answer": "no", "source_chat_ids": []},
        {"question": "Missing?", "answer": "no"},
        {"question": "Odd?", "answer": "no", "source_chat_ids": "4"},
    ]}
    item = only(write_chat(tmp_path / "chats" / "500K" / "3", questions=questions))
    kept, unresolved, empty, missing, odd = item["questions"]
    assert kept["gold_turns"] == ["4"] and kept["details"]["dropped_gold"] == [99] and not kept.get("excluded")
    assert unresolved["details"]["dropped_gold"] == [98] and unresolved["details"]["unparseable"] == ["'x'"]
    assert unresolved["excluded"] == ("chat 500K/3, probing_questions.json, question multi_session_reasoning[1]: "
                                      "field 'source_chat_ids' names no message of the chat (id 98, entry 'x')")
    assert "field 'source_chat_ids' is empty" in empty["excluded"]
    assert "question multi_session_reasoning[3]: field 'source_chat_ids' is missing" in missing["excluded"]
    assert "field 'source_chat_ids' is a str, not a list or a dict of lists" in odd["excluded"]
    assert (item["stats"]["dropped_gold_ids"], item["stats"]["unparseable_gold_entries"]) == (2, 1)
    assert item["stats"]["excluded_questions"] == 4


def test_a_gold_id_naming_a_message_without_text_is_dropped_saying_so(tmp_path):
    chat = small_chat()
    chat[1]["turns"][0][1]["content"] = "  ->-> 2,1"
    questions = {"information_extraction": [{"question": "Q?", "answer": "a", "source_chat_ids": [5]}]}
    item = only(write_chat(tmp_path / "chats" / "100K" / "1", chat, questions))
    assert [t["turn_id"] for t in item["turns"]] == ["0", "1", "2", "3", "4"]
    assert item["stats"]["empty_messages_skipped"] == 1
    assert "(id 5 (a message with no text))" in item["questions"][0]["excluded"]


@pytest.mark.parametrize("raw, field", [
    ([7], "question"), ([{"answer": "x", "source_chat_ids": [1]}], "question"),
    ([{"question": 3, "source_chat_ids": [1]}], "question"), ([{"question": "  ", "source_chat_ids": [1]}], "question"),
])
def test_a_malformed_question_is_excluded_naming_its_field_and_its_chat_s_others_still_run(tmp_path, raw, field):
    questions = {**small_questions(), "temporal_reasoning": raw}
    item = only(write_chat(tmp_path / "chats" / "100K" / "1", questions=questions))
    bad = question(item, "100K/1:temporal_reasoning:0")
    assert bad["excluded"].startswith("chat 100K/1, probing_questions.json, question temporal_reasoning[0]")
    assert raw[0] == 7 or f"field '{field}'" in bad["excluded"]
    assert question(item, "100K/1:information_extraction:0")["gold_turns"] == ["4"]


def test_an_ability_that_is_not_a_list_fails_its_chat_naming_the_ability(tmp_path):
    item = only(write_chat(tmp_path / "chats" / "100K" / "1", questions={"summarization": {"question": "x"}}))
    assert item["field"] == "summarization" and "ability 'summarization' is a dict" in item["error"]
    assert "probing_questions.json: chat 100K/1" in item["error"]


@pytest.mark.parametrize("raw, problem", [
    (json.dumps(small_chat()).encode()[:-40], "not valid JSON"),
    (b"", "expected a JSON array"),
    (b'{"batch_number": 1}', "found a JSON object"),
    (b'[{"batch_number": 1, "turns": [[{"role": "user", "id": 0, "content": "caf\xe9"}]]}]', "not UTF-8"),
])
def test_an_unreadable_or_truncated_chat_file_fails_its_chat_and_the_next_chat_reads(tmp_path, raw, problem):
    chats = tmp_path / "chats" / "100K"
    write_chat(chats / "1", raw_chat=raw)
    write_chat(chats / "2")
    bad, good = read(chats)
    assert bad["field"] == "chat" and problem in bad["error"]
    assert bad["error"].startswith(f"chat 100K/1: {chats / '1' / 'chat.json'}")
    assert len(good["turns"]) == 6 and len(good["questions"]) == 5


@pytest.mark.parametrize("raw, problem", [(b'{"abstention": [', "not valid UTF-8 JSON"),
                                          (b"[]", "is not a JSON object")])
def test_an_unreadable_probing_file_fails_its_chat_naming_it(tmp_path, raw, problem):
    item = only(write_chat(tmp_path / "chats" / "100K" / "1", raw_questions=raw))
    assert item["field"] == "probing_questions" and problem in item["error"]
    assert "probing_questions/probing_questions.json" in item["error"] and "chat 100K/1" in item["error"]


def test_a_probing_file_without_its_chat_and_a_chat_without_its_probing_file_each_fail_by_name(tmp_path):
    chats = tmp_path / "chats" / "100K"
    write_chat(chats / "1", chat=False)
    write_chat(chats / "2", questions=False)
    write_chat(chats / "3")
    orphan, silent, good = read(chats)
    assert orphan["field"] == "chat" and "the chat file is missing (the folder holds its probing questions)" in \
        orphan["error"] and str(chats / "1" / "chat.json") in orphan["error"]
    assert silent["field"] == "probing_questions" and "the probing questions file is missing" in silent["error"]
    assert str(chats / "2" / "probing_questions" / "probing_questions.json") in silent["error"]
    assert "error" not in good


def test_scan_lists_chats_without_reading_them(tmp_path):
    chats = tmp_path / "chats" / "100K"
    write_chat(chats / "1", raw_chat=b"not json at all")
    write_chat(chats / "2")
    assert Beam(chats).scan() == ["100K/1", "100K/2"]


def test_limit_stops_after_that_many_chats(tmp_path):
    for number in ("1", "2", "3"):
        write_chat(tmp_path / "chats" / "100K" / number)
    assert [item["item_id"] for item in Beam(tmp_path / "chats").iter_items(limit=2)] == ["100K/1", "100K/2"]


# ---- the 10M layout: plan-<k>/ parts read as one chat -----------------------------------------------------------


def test_plan_parts_are_read_in_plan_order_with_ids_following_on_as_beam_combines_them(tmp_path):
    folder = tmp_path / "chats" / "10M" / "1"
    for k in range(11):  # plan-10 comes after plan-9, not after plan-1
        write_chat(folder / f"plan-{k}", questions=False)
    (folder / "chat.json").write_text("[]")  # BEAM's combined copy beside the parts: not read
    questions = {"event_ordering": [{"question": "Order?", "answer": "a", "source_chat_ids": [[4], [64, 65]]}]}
    write_chat(folder, chat=False, questions=questions)
    item = only(folder)
    assert [t["turn_id"] for t in item["turns"]] == [str(i) for i in range(66)]
    assert item["turns"][6]["session_id"] == "P1B1" and item["turns"][65]["session_id"] == "P10B2"
    assert item["turns"][65]["props"]["session_index"] == 21 and item["stats"]["parts"] == 11
    assert item["questions"][0]["gold_sessions"] == ["P0B2", "P10B2"]
    assert "parts are read" in Beam(folder).warnings()[-1]


def test_a_missing_part_fails_the_chat_since_later_ids_depend_on_it(tmp_path):
    folder = tmp_path / "chats" / "10M" / "1"
    write_chat(folder / "plan-0", questions=False)
    write_chat(folder / "plan-2", questions=False)
    write_chat(folder, chat=False)
    item = only(folder)
    assert item["field"] == "plan" and "plan-1 is missing" in item["error"] and "chat 10M/1" in item["error"]


def test_a_part_missing_its_chat_file_fails_the_chat_naming_the_part(tmp_path):
    folder = tmp_path / "chats" / "10M" / "1"
    write_chat(folder / "plan-0", questions=False)
    (folder / "plan-1").mkdir()
    write_chat(folder, chat=False)
    item = only(folder)
    assert item["field"] == "chat" and str(folder / "plan-1" / "chat.json") in item["error"]


# ---- BEAM's real files -----------------------------------------------------------------------------------------


def test_the_development_chats_are_37_items_of_20_questions_each(beam_dir, beam_items):
    assert Beam(beam_dir).scan() == list(beam_items)
    assert list(beam_items) == [f"100K/{n}" for n in range(1, 21)] + [f"500K/{n}" for n in range(1, 18)]
    assert all("error" not in item for item in beam_items.values())
    assert all(len(item["questions"]) == 20 for item in beam_items.values())
    questions = [q for item in beam_items.values() for q in item["questions"]]
    assert sum(q["abstention"] for q in questions) == 74
    assert sum(1 for q in questions if q.get("excluded")) == 6  # five empty gold lists, one with none
    assert sum(1 for q in questions if not q["abstention"] and not q.get("excluded")) == 660
    assert {q["question_type"] for q in questions} == set(ABILITIES)
    assert sum(item["stats"]["dropped_gold_ids"] for item in beam_items.values()) == 0
    assert len({q["question_id"] for q in questions}) == 740
    assert sum(len(item["turns"]) for item in beam_items.values()) == 23_934


def test_every_gold_form_of_the_real_files_is_read(beam_items):
    forms = {q["details"]["gold_form"] for item in beam_items.values() for q in item["questions"]}
    assert forms == {None, "list", "list of lists", "dict: first_statement, second_statement",
                     "dict: original_info, updated_info", "dict: first_event, second_event"}
    nested = question(beam_items["100K/18"], "100K/18:event_ordering:1")
    assert nested["gold_turns"] == ["24", "26", "28", "146", "202", "204", "262"]
    contradiction = question(beam_items["100K/1"], "100K/1:contradiction_resolution:0")
    assert contradiction["details"]["gold_form"] == "dict: first_statement, second_statement"
    assert contradiction["gold_turns"] and contradiction["answer"].startswith("I notice you've mentioned")
    summary = max((q for item in beam_items.values() for q in item["questions"]), key=lambda q: len(q["gold_turns"]))
    assert summary["question_type"] == "summarization" and len(summary["gold_turns"]) == 54


def test_every_real_marker_is_stripped_and_no_text_keeps_one(beam_items):
    assert sum(item["stats"]["markers_stripped"] for item in beam_items.values()) == 9_031
    assert not any("->->" in t["text"] for item in beam_items.values() for t in item["turns"])
    first = beam_items["100K/1"]["turns"][0]
    assert first["text"].endswith("meet my deadlines by then?") and first["props"]["date"] == "March-15-2024"


def test_the_development_files_are_known_and_a_changed_file_is_warned_of(beam_dir, tmp_path):
    assert Beam(beam_dir).warnings() == []
    assert len(KNOWN_FILES) == 74
    copy = tmp_path / "chats" / "100K" / "1"
    shutil.copytree(beam_dir / "chats" / "100K" / "1", copy)
    (copy / "chat_trunecated.json").write_text("[]")
    with open(copy / "probing_questions" / "probing_questions.json", "a") as handle:
        handle.write("\n")
    first, second = Beam(copy).warnings()
    assert first.startswith(f"{copy}: probing_questions/probing_questions.json: not among BEAM's development files")
    assert "chat_trunecated.json" in second and "whole chat.json" in second
    assert "error" not in only(copy)


def test_two_development_chats_in_the_10m_layout_read_as_one_chat_with_beam_s_shifted_gold(beam_dir, beam_items,
                                                                                           tmp_path):
    first, second = beam_dir / "chats" / "100K" / "1", beam_dir / "chats" / "100K" / "2"
    folder = tmp_path / "chats" / "10M" / "1"
    for k, source in enumerate((first, second)):
        (folder / f"plan-{k}").mkdir(parents=True)
        shutil.copy(source / "chat.json", folder / f"plan-{k}" / "chat.json")
    offset = len(beam_items["100K/1"]["turns"])  # BEAM's combine: the second part's ids follow the first's last
    questions = json.loads((first / "probing_questions" / "probing_questions.json").read_text())
    later = json.loads((second / "probing_questions" / "probing_questions.json").read_text())
    for entries in later.values():
        for entry in entries:
            entry["source_chat_ids"] = _shifted(entry.get("source_chat_ids"), offset)
    combined = {ability: questions[ability] + later[ability] for ability in questions}
    (folder / "probing_questions").mkdir()
    (folder / "probing_questions" / "probing_questions.json").write_text(json.dumps(combined))
    item = only(folder)
    assert len(item["turns"]) == offset + len(beam_items["100K/2"]["turns"]) and len(item["questions"]) == 40
    text = {t["turn_id"]: t["text"] for t in item["turns"]}
    originals = {**{f"100K/1:{q['question_type']}:{q['details']['index']}": ({t["turn_id"]: t["text"] for t in
                                                                                beam_items["100K/1"]["turns"]}, q)
                    for q in beam_items["100K/1"]["questions"]},
                 **{f"100K/2:{q['question_type']}:{q['details']['index']}": ({t["turn_id"]: t["text"] for t in
                                                                                beam_items["100K/2"]["turns"]}, q)
                    for q in beam_items["100K/2"]["questions"]}}
    for q in item["questions"]:
        ability, index = q["question_type"], q["details"]["index"]
        source = "100K/1" if index < len(questions[ability]) else "100K/2"
        own = index if source == "100K/1" else index - len(questions[ability])
        texts, original = originals[f"{source}:{ability}:{own}"]
        assert [text[t] for t in q["gold_turns"]] == [texts[t] for t in original["gold_turns"]]
        assert bool(q.get("excluded")) == bool(original.get("excluded")) and q["abstention"] == original["abstention"]
    sessions = {t["session_id"] for t in item["turns"]}
    assert {"P0B1", "P1B1"} <= sessions and not any(s.startswith("B") for s in sessions)


def _shifted(value, offset):
    if isinstance(value, dict):
        return {key: _shifted(entries, offset) for key, entries in value.items()}
    if isinstance(value, list):
        return [_shifted(entry, offset) for entry in value]
    return value + offset if isinstance(value, int) else value
