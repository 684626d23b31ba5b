"""What the benches share: the bench file's writer, and how much a LongMemEval-S file repeats itself."""

import json

import pytest

from coordinator.benches.common import sharing_statistics, start_workers, stop_workers, write_bench


def test_a_bench_file_says_what_made_it_and_holds_no_password(tmp_path):
    out = tmp_path / "deep" / "farm.json"
    path = write_bench("farm", {"broker": "redis://:s3cret-pass@127.0.0.1:6390/0", "speedup": 1.5}, out)
    assert path == out
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["benchmark"] == "farm" and data["speedup"] == 1.5
    assert data["broker"] == "redis://:***@127.0.0.1:6390/0"
    assert "s3cret-pass" not in out.read_text(encoding="utf-8")
    assert {"commit", "machine", "created", "command", "cores", "load"} <= set(data)
    assert data["cores"] >= 1 and len(data["load"]) == 3
    assert sorted(p.name for p in out.parent.iterdir()) == ["farm.json"]  # no temporary file left beside it


def test_sharing_counts_sessions_and_texts_by_hand(tmp_path):
    def question(n, sessions):
        return {"question_id": f"q{n}", "question": f"Question {n}?",
                "haystack_session_ids": [sid for sid, _ in sessions],
                "haystack_sessions": [[{"role": "user", "content": text} for text in texts] for _, texts in sessions]}

    path = tmp_path / "data.json"
    path.write_text(json.dumps([question(0, [("s1", ["a", "b"]), ("s2", ["c"])]),
                                question(1, [("s1", ["a", "b"]), ("s3", ["  ", "d"])])]))
    stats = sharing_statistics(path)
    # s1 twice, s2, s3: four occurrences of three sessions; turns a b c a b d (the blank one is not a text) and
    # the two questions: eight texts, six of them distinct
    assert {k: stats[k] for k in ("session_occurrences", "distinct_sessions", "texts_given_to_the_model",
                                  "distinct_texts")} == {"session_occurrences": 4, "distinct_sessions": 3,
                                                         "texts_given_to_the_model": 8, "distinct_texts": 6}


def test_sharing_counts_a_session_repeated_in_one_history_twice(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([{"question_id": "q0", "question": "Q?", "haystack_session_ids": ["s1", "s2", "s1"],
                                 "haystack_sessions": [[{"role": "user", "content": "a"}],
                                                       [{"role": "user", "content": "b"}],
                                                       [{"role": "user", "content": "a"}]]}]))
    stats = sharing_statistics(path)
    # an M history repeats s1 on another date: the official evaluation keeps both occurrences
    assert (stats["session_occurrences"], stats["distinct_sessions"]) == (3, 2)
    assert (stats["texts_given_to_the_model"], stats["distinct_texts"]) == (4, 3)


def test_the_command_is_written_as_a_user_types_it():
    from coordinator.benches.common import invoking_command

    assert invoking_command(["/x/.venv/bin/memfarm", "bench", "systems", "--dataset", "a b.json"]) == \
        "memfarm bench systems --dataset 'a b.json'"
    assert invoking_command(["/r/coordinator/cli/__main__.py", "bench", "engine"]) == "memfarm bench engine"


def test_a_bench_empties_only_its_own_folder_and_refuses_one_holding_a_users_files(tmp_path):
    import pytest

    from adapters.errors import MemfarmError
    from coordinator.benches.common import WORKDIR_MARKER, fresh_workdir

    users = tmp_path / "results"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    with pytest.raises(MemfarmError, match="holds files no bench made"):
        fresh_workdir(users)
    assert (users / "notes.txt").read_text() == "mine"
    (tmp_path / "link").symlink_to(users)
    with pytest.raises(MemfarmError, match="symbolic link"):
        fresh_workdir(tmp_path / "link")
    own = fresh_workdir(tmp_path / "bench")  # new: made, and marked as the bench's
    (own / "left.json").write_text("{}")
    assert list(fresh_workdir(own).iterdir()) == [own / WORKDIR_MARKER]  # its own: emptied
    assert list(fresh_workdir(tmp_path / "empty-but-there").iterdir()) == [tmp_path / "empty-but-there" / WORKDIR_MARKER]


def test_bench_systems_with_a_users_folder_as_workdir_stops_in_one_line_and_deletes_nothing(tmp_path):
    from click.testing import CliRunner

    from coordinator.cli import main

    users = tmp_path / "results"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    locomo = tmp_path / "locomo.json"
    locomo.write_text("[]")
    result = CliRunner().invoke(main, ["bench", "systems", "--locomo", str(locomo), "--workdir", str(users),
                                       "--output", str(tmp_path / "out.json")])
    assert result.exit_code != 0 and "holds files no bench made" in result.output
    assert (users / "notes.txt").read_text() == "mine" and not (tmp_path / "out.json").exists()


def test_a_bench_that_names_the_commit_it_started_from_is_written_with_it(tmp_path):
    """A long bench's tree may move while it runs: the commit it started from is the one that made its figures."""
    import json

    from coordinator.benches.common import write_bench
    from coordinator.running.reducer import git_commit

    assert json.loads(write_bench("x", {"v": 1}, tmp_path / "a.json", "abc123").read_text())["commit"] == "abc123"
    assert json.loads(write_bench("x", {"v": 1}, tmp_path / "b.json").read_text())["commit"] == git_commit()


def test_workers_have_their_pool_and_answer_a_ping_when_start_workers_returns(redis_server, workers, tmp_path):
    from workers.farm.app import make_app

    running = start_workers(redis_server.url, tmp_path, "pool", 2, 1)
    try:
        assert all(child.children() for child in running), "a worker's pool processes had not started"
        answered = {name for reply in make_app(redis_server.url).control.ping(timeout=10.0, limit=2) for name in reply}
        assert {name.split("@")[0] for name in answered} == {"pool0", "pool1"}
    finally:
        stop_workers(running)
    assert running == []


def test_question_files_cut_a_file_into_consecutive_slices_with_their_companions(tmp_path):
    from coordinator.benches.common import question_files
    from tests.helpers import write_dataset

    data = write_dataset(tmp_path / "lme.json", questions=5, seed=3, scale=0.02)
    ids = [q["question_id"] for q in json.loads(data.read_text())]
    rounds = question_files(data, tmp_path, "round", 2)
    assert [path.name for path, _ in rounds] == ["round_0.json", "round_1.json", "round_2.json"]
    assert [[q["question_id"] for q in json.loads(path.read_text())] for path, _ in rounds] == \
        [ids[:2], ids[2:4], ids[4:]]
    for path, companion in rounds:
        assert companion.name == path.stem + "_q.json"
        assert [q["question_id"] for q in json.loads(companion.read_text())] == \
            [q["question_id"] for q in json.loads(path.read_text())]
    (first, _), = question_files(data, tmp_path, "first_3", 3, limit=3)
    assert [q["question_id"] for q in json.loads(first.read_text())] == ids[:3]
    assert question_files(data, tmp_path, "none", 4, limit=0) == []
    with pytest.raises(ValueError, match="size must be at least 1"):
        question_files(data, tmp_path, "empty", 0)
