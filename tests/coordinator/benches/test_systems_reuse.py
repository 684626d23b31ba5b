"""`memfarm bench systems` says what it runs as it goes, can leave out the generated file, compare with another
reference, and read a run it already made instead of running it again (`--reuse`)."""

import json

from click.testing import CliRunner

from coordinator.cli import main
from tests.coordinator.benches.test_systems_bench import _conversation


def _bench(tmp_path, locomo, *extra):
    out = tmp_path / "systems.json"
    result = CliRunner().invoke(main, ["bench", "systems", "--locomo", str(locomo), "--no-longmemeval",
                                       "--reference", "recency arm", "--system", "random arm",
                                       "--workdir", str(tmp_path / "wd"), "--output", str(out), *extra])
    assert result.exit_code == 0, result.output
    return result.output, json.loads(out.read_text())


def _results_file(tmp_path, label):
    return next((tmp_path / "wd").glob(f"locomo_*_{label}.json"))


def test_each_run_is_announced_and_a_second_bench_with_reuse_reads_it_instead_of_running_it(tmp_path):
    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps([_conversation()]))
    said, first = _bench(tmp_path, locomo)
    # every run is said as it starts and as it ends, counted against the whole: nothing silent until the table
    assert "[1/2] locomo recency arm: running memfarm run locomo" in said
    assert "[2/2] locomo random arm: done in" in said
    # the generated file is left out, and the rows compare with the reference named, which comes first
    assert {r["dataset"] for r in first["rows"]} == {"locomo"} and "longmemeval" not in first["datasets"]
    assert [r["system"] for r in first["rows"]] == ["recency arm", "random arm"] and first["reference"] == "recency arm"
    assert first["rows"][1]["session_recall_all_5_delta"] is not None
    made = {label: _results_file(tmp_path, label).stat().st_mtime_ns for label in ("recency-arm", "random-arm")}

    said, again = _bench(tmp_path, locomo, "--reuse")
    assert said.count("reused") == 2 and "running memfarm" not in said
    assert {label: _results_file(tmp_path, label).stat().st_mtime_ns for label in made} == made
    assert [{k: v for k, v in r.items()} for r in again["rows"]] == first["rows"] and again["reused"] is True

    # another dataset under the same name is another run: its checksum differs, so nothing is reused
    locomo.write_text(json.dumps([_conversation(), _conversation("second")]))
    said, changed = _bench(tmp_path, locomo, "--reuse")
    assert "reused" not in said and said.count("running memfarm") == 2
    assert changed["rows"][0]["n"] == 2 * first["rows"][0]["n"]

    # without --reuse every run is cold again, and the folder is emptied first
    (tmp_path / "wd" / "leftover.txt").write_text("a bench's own leftovers go")
    said, _ = _bench(tmp_path, locomo)
    assert "reused" not in said and not (tmp_path / "wd" / "leftover.txt").exists()


def test_a_reused_entry_whose_results_file_no_longer_reads_is_run_again(tmp_path):
    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps([_conversation()]))
    _bench(tmp_path, locomo, "--reuse")
    _results_file(tmp_path, "random-arm").write_text("{ not a results file")
    said, data = _bench(tmp_path, locomo, "--reuse")
    assert "locomo recency arm: reused" in said and "locomo random arm: running" in said
    assert data["rows"][1]["n"] == data["rows"][0]["n"]


def test_a_bench_without_a_dataset_or_with_an_unknown_reference_is_refused(tmp_path):
    none = CliRunner().invoke(main, ["bench", "systems", "--workdir", str(tmp_path / "wd")])
    assert none.exit_code == 2 and "no dataset" in none.output
    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps([_conversation()]))
    bad = CliRunner().invoke(main, ["bench", "systems", "--locomo", str(locomo), "--reference", "nobody",
                                    "--workdir", str(tmp_path / "wd")])
    assert bad.exit_code == 2 and "unknown reference nobody" in bad.output and "for --reference" in bad.output
    assert not (tmp_path / "wd").exists()


def test_reuse_reads_a_run_back_only_under_the_same_environment_and_never_a_users_own_system(tmp_path, monkeypatch):
    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps([_conversation()]))
    _bench(tmp_path, locomo)
    monkeypatch.setenv("MEMFARM_THREADS", "1")  # a run reads it: another value is another run
    said, _ = _bench(tmp_path, locomo, "--reuse")
    assert "reused" not in said and said.count("running memfarm") == 2
    said, _ = _bench(tmp_path, locomo, "--reuse")
    assert said.count("reused") == 2, "the same environment again reads both back"
    # a user's class may have changed under the same name: it is run every time
    user = "tests.adapters.systems.scripted_system:Scripted"
    for _ in range(2):
        said, data = _bench(tmp_path, locomo, "--reuse", "--system", user)
        assert f"{user}: running memfarm" in said
    assert [r["system"] for r in data["rows"]] == ["recency arm", "random arm", user]


def test_a_beam_abilitys_mark_is_its_verdict():
    from coordinator.benches.systems_beam import _sign
    from coordinator.results.verdicts import AHEAD, BEHIND, NOT_TOLD_APART

    assert [_sign({"message_recall_any_10_outcome": o}) for o in (AHEAD, BEHIND, NOT_TOLD_APART)] == ["+", "-", " "]
    assert _sign({}) == " ", "the reference has no verdict of its own"
