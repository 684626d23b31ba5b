"""Every malformed LongMemEval-S input named: one item failed (item, field, problem), or one question
excluded with its reason, or the whole file refused; never scored silently."""

import json

import pytest
from click.testing import CliRunner

from adapters.defaults import MAX_SESSIONS_PER_ITEM, MAX_TEXT_CHARS, MAX_TURNS_PER_ITEM
from adapters.benchmarks.longmemeval.reader import LongMemEval
from coordinator.cli import main
from coordinator.results.score import score_rankings
from tests.helpers import write_dataset


def _items(tmp_path, mutate, questions=3):
    path = write_dataset(tmp_path / "d.json", questions=questions, seed=5, scale=0.04, mutate=mutate)
    return list(LongMemEval(path).iter_items()), path


def _first(mutation):
    def mutate(data):
        mutation(data[0])
        return data
    return mutate


@pytest.mark.parametrize("mutation, field, words", [
    (lambda q: q.update(haystack_dates=q["haystack_dates"][:-1]), "haystack_dates", "dates for"),
    (lambda q: q.update(answer_session_ids=q["answer_session_ids"][0]), "answer_session_ids", "not a list"),
    (lambda q: q.update(answer_session_ids=[5]), "answer_session_ids", "int"),
    (lambda q: q.update(question=42), "question", "int, not a string"),
    (lambda q: q.update(question="when \udc80?"), "question", "not valid Unicode"),
    (lambda q: q["haystack_sessions"][0][0].update(content="bad \udc80 text"), "haystack_sessions", "Unicode"),
    (lambda q: q.update(haystack_session_ids=q["haystack_session_ids"][:-1]), "haystack_sessions", "differ"),
    (lambda q: q.update(haystack_sessions="nope"), "haystack_sessions", "not a list"),
])
def test_a_malformed_field_fails_its_item_and_names_it(tmp_path, mutation, field, words):
    items, _ = _items(tmp_path, _first(mutation))
    bad = items[0]
    assert bad.get("error") and bad["field"] == field and words in bad["error"], bad.get("error")
    assert bad["item_id"] in bad["error"]
    assert all(not i.get("error") for i in items[1:]), "the other items are untouched"


@pytest.mark.parametrize("profile", ["longmemeval-official", "expected-text"])
@pytest.mark.parametrize("mutation, field, reason", [
    (lambda q: q.update(haystack_session_ids=[], haystack_sessions=[], haystack_dates=[]), "haystack_sessions",
     "empty haystack"),
    (lambda q: [t.update(content=" ") for s in q["haystack_sessions"] for t in s], "haystack_sessions",
     "empty haystack"),
    (lambda q: q.update(answer_session_ids=["answer_nowhere"]), "answer_session_ids",
     "answer_session_ids name no session of the haystack (answer_nowhere)"),
    (lambda q: q.update(answer_session_ids=[]), "answer_session_ids", "the list is empty"),
])
def test_a_damaged_question_fails_with_its_reason_under_every_profile(tmp_path, mutation, field, reason, profile):
    def mutate(data):
        data[0]["question_id"] = data[0]["question_id"].replace("_abs", "")
        mutation(data[0])
        return data

    path = write_dataset(tmp_path / "d.json", questions=3, seed=5, scale=0.04, mutate=mutate)
    adapter = LongMemEval(path, None, profile)
    adapter.scan()
    items = list(adapter.iter_items())
    assert reason in items[0]["error"] and items[0]["field"] == field and items[0]["item_id"] in items[0]["error"]
    assert all(not i.get("error") for i in items[1:])
    # scored as a run scores it: a failed record with the reason, no metrics, the run incomplete
    rankings = tmp_path / "r.jsonl"
    rankings.write_text("".join(json.dumps({"question_id": i["item_id"], "ranked": [t["turn_id"] for t in
                                                                                     i.get("turns", [])]}) + "\n"
                                for i in items))
    outcomes, _ = score_rankings(adapter, str(rankings), "turn", profile, (1, 5))
    record = outcomes[0]["records"][0]
    assert record["status"] == "failed" and reason in record["error"] and record["metrics"] is None


def test_a_gold_session_missing_from_the_haystack_is_excluded_under_expected_text(tmp_path):
    def mutate(data):
        data[0]["question_id"] = data[0]["question_id"].replace("_abs", "")
        data[0]["answer_session_ids"].append("answer_nowhere")
        return data

    items, _ = _items(tmp_path, mutate)
    question = items[0]["questions"][0]
    assert not question["abstention"] and "not in the haystack: answer_nowhere" in question["excluded"]


def test_the_real_files_quirks_still_pass(tmp_path):
    def mutate(data):
        q = data[0]
        q["answer"] = 42  # an int answer
        q["haystack_session_ids"].append(q["haystack_session_ids"][0])  # a session listed twice
        q["haystack_sessions"].append(q["haystack_sessions"][0])
        q["haystack_dates"].append("2099/01/01 (Thu) 00:00")  # dated after the question
        q["haystack_sessions"][1].insert(0, {"role": "assistant", "content": ""})  # empty, not alternating
        return data

    items, _ = _items(tmp_path, mutate)
    assert not items[0].get("error") and not items[0]["questions"][0].get("excluded")
    assert items[0]["stats"]["duplicate_sessions_skipped"] == 1 and items[0]["stats"]["empty_turns_skipped"] >= 1


@pytest.mark.slow  # the real model
def test_a_huge_turn_is_cut_counted_and_the_run_stays_small(tmp_path):
    def mutate(data):
        data[0]["haystack_sessions"][0][0]["content"] = "word " * (MAX_TEXT_CHARS // 2)  # 2.5x the cap
        return data

    items, path = _items(tmp_path, mutate, questions=2)
    turn = items[0]["turns"][0]
    assert len(turn["text"]) == MAX_TEXT_CHARS and items[0]["stats"]["truncated_texts"] == 1
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(path), "--retrieval-mode", "bm25",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r.manifest.json").read_text())["evaluation"]["truncated_texts"] == 1
    assert out.stat().st_size < 3 * MAX_TEXT_CHARS + 2_000_000


@pytest.mark.slow  # the real model
def test_a_run_with_damaged_items_writes_its_files_and_scores_none_of_them(tmp_path):
    def mutate(data):
        data[0]["question"] = "bad \udc80"
        data[1]["haystack_dates"] = data[1]["haystack_dates"][:2]
        return data

    _, path = _items(tmp_path, mutate, questions=4)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(path), "--retrieval-mode", "bm25",
                                       "--output", str(out)])
    assert result.exit_code == 1, result.output  # files written; failed items fail the run
    records = json.loads(out.read_text())["records"]
    assert [r["status"] for r in records] == ["failed", "failed", "ok", "ok"]
    assert [r["field"] for r in records[:2]] == ["question", "haystack_dates"]
    assert all(r["metrics"] is None for r in records[:2])


def _tiny_sessions(question, count):
    question["haystack_session_ids"] += [f"tiny_{i}" for i in range(count)]
    question["haystack_sessions"] += [[{"role": "user", "content": "a"}] for _ in range(count)]
    question["haystack_dates"] += ["2023/05/20 (Sat) 02:21"] * count


@pytest.mark.parametrize("mutation, field, words", [
    (lambda q: _tiny_sessions(q, MAX_SESSIONS_PER_ITEM + 1 - len(q["haystack_sessions"])), "haystack_sessions",
     f"holds {MAX_SESSIONS_PER_ITEM + 1} sessions, more than the {MAX_SESSIONS_PER_ITEM} an item may hold"),
    (lambda q: q["haystack_sessions"][0].extend({"role": "user", "content": "a"} for _ in range(MAX_TURNS_PER_ITEM)),
     "haystack_sessions", f"more than the {MAX_TURNS_PER_ITEM} an item may hold"),
])
def test_an_item_past_the_session_or_turn_limit_fails_alone_naming_the_count(tmp_path, mutation, field, words):
    items, _ = _items(tmp_path, _first(mutation), questions=2)
    bad = items[0]
    assert bad.get("error") and bad["field"] == field and words in bad["error"], bad.get("error")
    assert bad["error"].startswith(f"question {bad['item_id']}: ")
    assert not items[1].get("error")


def test_an_item_at_the_session_limit_still_runs(tmp_path):
    items, _ = _items(tmp_path, _first(lambda q: _tiny_sessions(q, MAX_SESSIONS_PER_ITEM - len(q["haystack_sessions"]))),
                      questions=1)
    assert not items[0].get("error") and len(items[0]["sessions"]) == MAX_SESSIONS_PER_ITEM


def _locomo_conversation(sid, sessions, turns_per_session=1):
    talk = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for number in range(1, sessions + 1):
        talk[f"session_{number}"] = [{"speaker": "Ann", "dia_id": f"D{number}:{t}", "text": "hi"}
                                     for t in range(1, turns_per_session + 1)]
        talk[f"session_{number}_date_time"] = "1:56 pm on 8 May, 2023"
    return {"sample_id": sid, "conversation": talk,
            "qa": [{"question": "Who said hi?", "answer": "Ann", "evidence": ["D1:1"], "category": 1}]}


@pytest.mark.parametrize("sessions, per_session, words", [
    (MAX_SESSIONS_PER_ITEM + 1, 1, f"holds {MAX_SESSIONS_PER_ITEM + 1} sessions, more than the {MAX_SESSIONS_PER_ITEM}"),
    (2, MAX_TURNS_PER_ITEM // 2 + 1, f"holds {MAX_TURNS_PER_ITEM + 2} turns, more than the {MAX_TURNS_PER_ITEM}"),
])
def test_locomo_a_conversation_past_the_limits_fails_alone_naming_the_count(tmp_path, sessions, per_session, words):
    from adapters.benchmarks.locomo.reader import LoCoMo

    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([_locomo_conversation("big", sessions, per_session), _locomo_conversation("ok", 2)]))
    big, ok = LoCoMo(path).iter_items()
    assert big["error"].startswith("conversation big: ") and words in big["error"], big["error"]
    assert big["field"] == "conversation"
    assert not ok.get("error") and len(ok["turns"]) == 2


def test_locomo_a_malformed_question_is_excluded_and_a_bad_turn_text_is_named(tmp_path, locomo_path):
    from adapters.benchmarks.locomo.reader import LoCoMo

    data = json.loads(locomo_path.read_text())[:2]
    data[0]["qa"][0]["question"] = 42
    data[0]["qa"][1] = "not an object"
    data[0]["qa"][2]["evidence"] = {"D1": 3}
    data[1]["conversation"]["session_1"][0]["text"] = "bad \udc80"
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data))
    first, second = LoCoMo(path).iter_items()
    reasons = [q.get("excluded") for q in first["questions"][:3]]
    assert reasons == ["field 'question' is int, not a string", "qa entry is str, not an object",
                       "field 'evidence' is dict, not a list"]
    later = first["questions"][3:]
    assert not any(q.get("excluded", "").startswith(("field", "qa entry")) for q in later)
    assert sum(1 for q in later if not q.get("excluded") and not q["abstention"]) >= 10, "the others still run"
    assert second.get("error") and second["field"] == "session_1" and "Unicode" in second["error"]


def test_adamem_episodes_a_malformed_episode_fails_alone_naming_its_field(tmp_path):
    from adapters.benchmarks.adamem.episodes import EpisodeFile, write_episodes
    from adapters.benchmarks.adamem.synthetic import synthetic_suite

    episodes = synthetic_suite()
    episodes[0]["observations"][1]["content"] = 42
    episodes[1]["queries"][0]["top_k"] = "five"
    episodes[2]["queries"][0]["expected_substrings"] = "9981"
    path = tmp_path / "e.jsonl"
    write_episodes(episodes, path)
    items = list(EpisodeFile(path).iter_items())
    assert [(i.get("field"), bool(i.get("error"))) for i in items] == [
        ("observations", True), ("top_k", True), ("expected_substrings", True), (None, False)]
    assert "episode stale-fact: observation 1" in items[0]["error"]


def test_a_rankings_line_with_ids_that_are_not_strings_is_named_and_skipped(tmp_path):
    from coordinator.results.score import read_rankings

    path = tmp_path / "r.jsonl"
    path.write_text('{"question_id": "q1", "ranked": ["s1", 2]}\n{"question_id": "q2", "ranked": ["s2"]}\n')
    rankings, problems = read_rankings(path, {"q1", "q2"})
    assert rankings == {"q2": ["s2"]} and problems == [f"{path}:1: 'ranked' must hold id strings only; line skipped"]


def test_a_rankings_line_nested_past_the_limit_is_named_and_skipped(tmp_path):
    from adapters.defaults import MAX_JSON_DEPTH
    from coordinator.results.score import read_rankings

    path = tmp_path / "r.jsonl"
    path.write_text('{"question_id": ' + "[" * 50_000 + "]" * 50_000 + ', "ranked": []}\n'
                    '{"question_id": "q2", "ranked": ["s2"]}\n')
    rankings, problems = read_rankings(path, {"q1", "q2"})
    assert rankings == {"q2": ["s2"]} and problems == [f"{path}:1: nested more than {MAX_JSON_DEPTH} levels deep"]
