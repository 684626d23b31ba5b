"""RealMem's adapter: the development personas as items, their gold, and every kind of bad input named."""

import json
import shutil

import pytest

from adapters.errors import DatasetError
from adapters.files import dataset_sha256
from adapters.benchmarks.realmem.reader import KNOWN_FILES, RealMem
from memoria.checksums import file_sha256


def persona(sessions, name="Tester"):
    return {"_metadata": {"person_name": name, "total_sessions": len(sessions)}, "dialogues": sessions}


def session(sid, uuid, turns, memory=()):
    return {"session_identifier": sid, "session_uuid": uuid, "current_time": "2025-01-01 (Wednesday)",
            "dialogue_turns": turns, "extracted_memory": list(memory)}


def user(text, query_id=None):
    return {"speaker": "User", "is_query": query_id is not None, "content": text, "query_id": query_id,
            **({"category_name": "Dynamic Updating"} if query_id else {})}


def assistant(text, uuids=None, used=()):
    turn = {"speaker": "Assistant", "is_query": False, "content": text, "query_id": None}
    if uuids is not None:
        turn["memory_session_uuids"] = uuids
        turn["memory_used"] = list(used)
    return turn


def point(uuid, content, snapshot):
    return {"session_uuid": uuid, "content": content, "source_content_snapshot": snapshot, "source_turn": 1}


def two_sessions(answer):
    """A persona of two sessions, the second asking a query answered by `answer` (an assistant turn or None)."""
    first = session("Topic:S1", "u1", [user("I moved to Lisbon."), assistant("Noted: you live in Lisbon now.")],
                    [point("u1", "lives in Lisbon", "Noted: you live in Lisbon now.")])
    turns = [user("Where do I live?", "Q-1")] + ([answer] if answer else [])
    return persona([first, session("Topic:S2", "u2", turns)])


def items_of(tmp_path, data, name="p.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return list(RealMem(path).iter_items())


def test_the_development_personas_are_known_by_checksum_and_read_whole(realmem_dir):
    adapter = RealMem(realmem_dir)
    assert adapter.warnings() == []
    assert {file_sha256(f) for f in realmem_dir.glob("*.json")} == set(KNOWN_FILES)
    items = list(adapter.iter_items())
    assert [i["item_id"] for i in items] == adapter.scan()
    for item in items:
        raw = json.loads((realmem_dir / f"{item['item_id']}_dialogues_256k.json").read_text())
        queries = [t for s in raw["dialogues"] for t in s["dialogue_turns"] if t["is_query"]]
        assert len(item["questions"]) == len(queries)
        assert item["steps"] == len(raw["dialogues"])
        order = {s["session_identifier"]: n for n, s in enumerate(raw["dialogues"])}
        for question in item["questions"]:
            if question.get("excluded"):
                continue
            # gold always in the past: every gold session comes before the query's own
            assert all(order[g] < question["step"] for g in question["gold_sessions"])
            assert question["gold_by_profile"]["realmem"]["sessions"] == question["gold_sessions"]
        for turn in item["turns"]:
            assert turn["step"] == order[turn["session_id"]]
            assert turn["turn_id"].startswith(turn["session_id"] + "#")


def test_a_query_whose_gold_is_its_own_session_is_named_never_scored(realmem_dir):
    kenta = next(i for i in RealMem(realmem_dir / "Kenta_Tanaka_dialogues_256k.json").iter_items())
    excluded = {q["question_id"]: q["excluded"] for q in kenta["questions"] if q.get("excluded")}
    assert excluded == {"Kenta_Tanaka:Q-0149": "gold includes its own session: memory never holds it when the query is asked"}
    assert kenta["stats"]["excluded_questions"] == 1


def test_turn_gold_is_the_turn_each_memory_point_was_taken_from(realmem_dir):
    path = realmem_dir / "Liam_O_Connor_dialogues_256k.json"
    raw = json.loads(path.read_text())
    sessions = {s["session_identifier"]: s for s in raw["dialogues"]}
    item = next(RealMem(path).iter_items())
    checked = 0
    for question in item["questions"]:
        for turn_id in question["gold_turns"]:
            sid, _, n = turn_id.rpartition("#")
            assert sid in question["gold_sessions"]
            snapshots = {m["source_content_snapshot"] for m in sessions[sid]["extracted_memory"]}
            assert sessions[sid]["dialogue_turns"][int(n)]["content"] in snapshots
            checked += 1
        if not question["gold_turns"] and not question.get("excluded"):
            assert question["details"]["turn_gold"] != "every memory point names its source turn"
    assert checked > 100


def test_a_small_persona_reads_as_steps_with_gold_and_turn_gold(tmp_path):
    [item] = items_of(tmp_path, two_sessions(assistant("In Lisbon.", ["u1"], [point("u1", "lives in Lisbon",
                                                                                    "Noted: you live in Lisbon now.")])))
    assert item["item_id"] == "Tester"
    [question] = item["questions"]
    assert question["step"] == 1 and question["gold_sessions"] == ["Topic:S1"]
    assert question["gold_turns"] == ["Topic:S1#1"]
    assert [t["step"] for t in item["turns"]] == [0, 0, 1, 1]
    assert item["turns"][0]["text"] == "User: I moved to Lisbon."


@pytest.mark.parametrize("answer, reason", [
    (None, "no assistant turn follows the query"),
    (user("another user turn"), "no assistant turn follows the query"),
    (assistant("I do not know.", []), "the answer used no memory (memory_session_uuids is empty)"),
    (assistant("Somewhere.", ["u9"]), "gold names session uuid 'u9', which is not in the file"),
    (assistant("In Lisbon.", ["u2"]), "gold includes its own session: memory never holds it when the query is asked"),
    (assistant("In Lisbon.", "u1"), "the answer's memory_session_uuids is not a list of session uuids"),
])
def test_a_query_that_cannot_be_scored_is_excluded_with_its_reason(tmp_path, answer, reason):
    [item] = items_of(tmp_path, two_sessions(answer))
    [question] = item["questions"]
    assert question["excluded"] == reason
    assert question["gold_by_profile"]["realmem"]["scored"] is False
    assert "error" not in item


def test_a_memory_point_that_names_no_turn_leaves_the_query_without_turn_gold_only(tmp_path):
    [item] = items_of(tmp_path, two_sessions(assistant("In Lisbon.", ["u1"], [point("u1", "unknown", "x")])))
    [question] = item["questions"]
    assert question["gold_sessions"] == ["Topic:S1"] and question["gold_turns"] == []
    assert question["details"]["turn_gold"] == "a memory point's source turn cannot be told from its session's turns"


@pytest.mark.parametrize("mutate, field, words", [
    (lambda d: d.pop("dialogues"), "dialogues", "field 'dialogues' is NoneType, not a list"),
    (lambda d: d["dialogues"][1].update(session_uuid="u1"), "session_uuid", "is used by sessions 0 and 1"),
    (lambda d: d["dialogues"][1].update(session_identifier="Topic:S1"), "session_identifier",
     "is used by sessions 0 and 1"),
    (lambda d: d["dialogues"][0].pop("session_uuid"), "session_uuid", "field 'session_uuid' is NoneType"),
    (lambda d: d["dialogues"][0].update(dialogue_turns="text"), "dialogue_turns", "not a list"),
    (lambda d: d["dialogues"][0]["dialogue_turns"][0].update(content=7), "content", "is int, not a string"),
    (lambda d: d["dialogues"].append("session"), "dialogues", "holds a str"),
])
def test_a_malformed_persona_fails_as_its_item_naming_file_and_field(tmp_path, mutate, field, words):
    data = two_sessions(assistant("In Lisbon.", ["u1"]))
    mutate(data)
    [item] = items_of(tmp_path, data)
    assert item["field"] == field
    assert str(tmp_path / "p.json") in item["error"] and "persona Tester" in item["error"]
    assert words in item["error"]


def test_a_folder_runs_each_persona_and_refuses_one_persona_twice(tmp_path):
    good = two_sessions(assistant("In Lisbon.", ["u1"]))
    (tmp_path / "a.json").write_text(json.dumps(good))
    (tmp_path / "b.json").write_text(json.dumps({**good, "_metadata": {"person_name": "Other"}}))
    (tmp_path / "notes.txt").write_text("not a persona")
    assert RealMem(tmp_path).scan() == ["Tester", "Other"]
    before = dataset_sha256(tmp_path)
    (tmp_path / "b.json").write_text(json.dumps(good))
    assert dataset_sha256(tmp_path) != before
    with pytest.raises(DatasetError, match="persona 'Tester' is also in"):
        RealMem(tmp_path).scan()


def test_an_unknown_file_runs_with_a_warning_naming_its_checksum(tmp_path, realmem_dir):
    copy = shutil.copy(realmem_dir / "Ethan_Hunt_dialogues_256k.json", tmp_path / "Ethan_Hunt_dialogues_256k.json")
    assert RealMem(copy).warnings() == []
    data = json.loads(copy.read_text())
    data["dialogues"] = data["dialogues"][:3]
    copy.write_text(json.dumps(data))
    [warning] = RealMem(copy).warnings()
    assert file_sha256(copy) in warning and str(copy) in warning


def test_a_folder_without_persona_files_and_a_file_that_is_not_json_are_named(tmp_path):
    with pytest.raises(Exception, match="holds no"):
        RealMem(tmp_path).scan()
    (tmp_path / "p.json").write_text("{not json")
    with pytest.raises(DatasetError, match="p.json: cannot read the RealMem persona file"):
        RealMem(tmp_path).scan()


def test_a_repeated_query_id_fails_only_its_persona_naming_the_query(tmp_path):
    repeated = two_sessions(assistant("In Lisbon.", ["u1"]))
    repeated["dialogues"][1]["dialogue_turns"] += [user("And where do I work?", "Q-1"), assistant("In Porto.", ["u1"])]
    (tmp_path / "a.json").write_text(json.dumps(repeated))
    (tmp_path / "b.json").write_text(json.dumps({**two_sessions(assistant("In Lisbon.", ["u1"])),
                                                 "_metadata": {"person_name": "Other"}}))
    failed, kept = RealMem(tmp_path).iter_items()
    assert failed["item_id"] == "Tester" and failed["field"] == "query_id"
    assert "session Topic:S2: turn 2: query_id 'Q-1' is also the query of" in failed["error"]
    assert str(tmp_path / "a.json") in failed["error"]
    assert "error" not in kept and [q["question_id"] for q in kept["questions"]] == ["Other:Q-1"]


def test_question_ids_of_two_personas_never_collide_through_a_colon(tmp_path):
    ann = two_sessions(assistant("In Lisbon.", ["u1"]))
    ann["dialogues"][1]["dialogue_turns"][0]["query_id"] = "Q:1"
    ann_q = two_sessions(assistant("In Lisbon.", ["u1"]))
    ann_q["dialogues"][1]["dialogue_turns"][0]["query_id"] = "1"
    (tmp_path / "a.json").write_text(json.dumps({**ann, "_metadata": {"person_name": "Ann"}}))
    (tmp_path / "b.json").write_text(json.dumps({**ann_q, "_metadata": {"person_name": "Ann:Q"}}))
    ids = [q["question_id"] for item in RealMem(tmp_path).iter_items() for q in item["questions"]]
    assert ids == ["Ann:Q:1", "Ann\\:Q:1"] and len(set(ids)) == 2


@pytest.mark.parametrize("used_uuid", ["u2", "u3"])
def test_turn_gold_from_the_querys_own_or_a_later_session_is_never_scored(tmp_path, used_uuid):
    """The session gold is in the past, but a memory point names the query's own session (u2) or a later one (u3):
    such turn gold is not held by memory when the query is asked, so the query has no turn gold."""
    data = two_sessions(assistant("In Lisbon.", ["u1"], [point(used_uuid, "asks", "Where do I live?")]))
    data["dialogues"][1]["extracted_memory"] = [point("u2", "asks", "Where do I live?")]
    data["dialogues"].append(session("Topic:S3", "u3", [user("Where do I live?"), assistant("Lisbon.")],
                                     [point("u3", "asks", "Where do I live?")]))
    [item] = items_of(tmp_path, data)
    [question] = item["questions"]
    assert question["gold_sessions"] == ["Topic:S1"] and question["gold_turns"] == []
    assert question["gold_by_profile"]["realmem"]["turns"] == []
    assert question["details"]["turn_gold"] == ("a memory point names a session that is not among the answer's "
                                                "memory_session_uuids")
