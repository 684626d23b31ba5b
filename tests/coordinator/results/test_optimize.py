import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from coordinator.results.optimize import load_weights, tuned_on, tuning_record
from adapters.errors import ResultsError
from tests.helpers import write_dataset

pytestmark = pytest.mark.slow

# Recency says nothing about where evidence sits in these haystacks; here it outweighs everything else.
WRONG = {"semantic": 0.1, "token": 0.1, "phrase": 0.0, "graph": 0.0, "attribute_boost": 0.0,
         "importance": 0.0, "recency": 0.6}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("opt")
    data = write_dataset(folder / "data.json", questions=10, seed=12, scale=0.1)
    (folder / "wrong.json").write_text(json.dumps({"weights": WRONG}))
    return folder, data


def _run(folder, data, *extra):
    return CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--retrieval-mode", "full",
                                     "--weights", str(folder / "wrong.json"), "--cache-dir", str(folder / "cache"),
                                     "--optimize", "--step-size", "0.1", *extra])


def test_optimize_moves_a_clearly_wrong_weight_the_right_way(setup):
    folder, data = setup
    out, saved = folder / "run.json", folder / "tuned.json"
    result = _run(folder, data, "--output", str(out), "--save-weights", str(saved))
    assert result.exit_code == 0, result.output
    report = json.loads(saved.read_text())
    tuned = report["weights"]
    share = lambda w: w["recency"] / sum(w.values())
    assert share(tuned) < share(WRONG), tuned
    assert report["optimisation"]["after"] > report["optimisation"]["before"]
    manifest = json.loads((folder / "run.manifest.json").read_text())
    assert manifest["system"]["ranking"]["weights"] == WRONG  # the manifest records the weights used
    assert load_weights(saved) == tuned

    rerun = folder / "rerun.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--retrieval-mode", "full",
                                       "--weights", str(saved), "--cache-dir", str(folder / "cache"),
                                       "--output", str(rerun)])
    assert result.exit_code == 0, result.output
    assert json.loads(rerun.read_text())["settings_system"]["ranking"]["weights"] == tuned


def test_a_run_with_weights_tuned_on_its_own_dataset_says_so_everywhere(setup):
    folder, data = setup
    out, saved = folder / "tuning.json", folder / "tuning.weights.json"
    assert _run(folder, data, "--output", str(out), "--save-weights", str(saved)).exit_code == 0
    origin = json.loads(saved.read_text())["tuned_on"]
    assert origin["dataset_checksum"] == json.loads(out.read_text())["dataset_checksum"]
    assert origin["benchmark"] == "longmemeval" and origin["questions"] > 0
    assert json.loads(out.read_text())["tuning"]["tuned_on_this_data"] is False, "its own weights came from elsewhere"
    tuned = folder / "tuned_run.json"
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--retrieval-mode", "full",
                                       "--weights", str(saved), "--cache-dir", str(folder / "cache"),
                                       "--output", str(tuned)])
    assert result.exit_code == 0, result.output
    assert "TUNED ON THIS DATA" in result.output
    tuning = json.loads(tuned.read_text())["tuning"]
    assert tuning["tuned_on_this_data"] is True and tuning["label"] == "tuned on this data"
    compared = CliRunner().invoke(main, ["compare", str(out), str(tuned)])
    assert compared.exit_code == 0, compared.output
    assert "tuned_run: tuned on this data" in compared.output


def test_weights_tuned_on_other_data_are_not_labelled(tmp_path):
    weights = tmp_path / "w.json"
    weights.write_text(json.dumps({"weights": {"semantic": 1.0}, "tuned_on": {"dataset_checksum": "aa" * 32}}))
    assert tuning_record(weights, "aa" * 32)["tuned_on_this_data"] is True
    record = tuning_record(weights, "bb" * 32)
    assert record["tuned_on_this_data"] is False and record["label"] is None
    weights.write_text(json.dumps({"weights": {"semantic": 1.0}}))
    assert tuning_record(weights, "aa" * 32) == {"weights_file": str(weights), "tuned_on": None,
                                                 "tuned_on_this_data": False, "label": None}


def test_dry_run_weights_writes_nothing(setup):
    folder, data = setup
    out = folder / "dry.json"
    result = _run(folder, data, "--output", str(out), "--dry-run-weights")
    assert result.exit_code == 0, result.output
    assert "dry run: weights not written" in result.output and "recency" in result.output
    assert not list(folder.glob("dry*.weights.json"))


def test_optimize_needs_the_full_mode(setup):
    folder, data = setup
    result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--optimize"])
    assert result.exit_code == 2 and "full" in result.output


def test_bad_weight_files_are_refused(tmp_path):
    (tmp_path / "w.json").write_text(json.dumps({"semantik": 1.0}))
    with pytest.raises(ResultsError, match="unknown signals"):
        load_weights(tmp_path / "w.json")


def test_weights_tuned_again_on_other_data_keep_the_data_they_started_from(tmp_path):
    """Weights tuned on A, then tuned again on B from there, were still tuned on A: a run on A is labelled."""
    report = {"questions": 10, "objective": "recall_all@5"}
    on_a = tuned_on({"dataset_checksum": "aa" * 32}, report)
    run_on_b = {"dataset_checksum": "bb" * 32, "tuning": {"tuned_on": on_a, "tuned_on_this_data": False}}
    weights = tmp_path / "again.weights.json"
    weights.write_text(json.dumps({"weights": {"semantic": 1.0}, "tuned_on": tuned_on(run_on_b, report)}))
    assert tuning_record(weights, "bb" * 32)["tuned_on_this_data"] is True
    assert tuning_record(weights, "aa" * 32)["tuned_on_this_data"] is True
    assert tuning_record(weights, "cc" * 32)["tuned_on_this_data"] is False


def test_weights_tuned_on_a_folder_know_each_of_its_files(tmp_path):
    """A run on a folder of files (RealMem's personas) records each file's checksum; weights tuned on it mark a
    later run on any one of those files as tuned on its data, and a run on another file not."""
    report = {"questions": 10, "objective": "recall_all@5"}
    on_folder = tuned_on({"dataset_checksum": "ff" * 32, "dataset_file_checksums": ["aa" * 32, "bb" * 32]}, report)
    assert on_folder["file_checksums"] == ["aa" * 32, "bb" * 32]
    weights = tmp_path / "folder.weights.json"
    weights.write_text(json.dumps({"weights": {"semantic": 1.0}, "tuned_on": on_folder}))
    assert tuning_record(weights, "bb" * 32)["tuned_on_this_data"] is True
    assert tuning_record(weights, "cc" * 32)["tuned_on_this_data"] is False
    assert "file_checksums" not in tuned_on({"dataset_checksum": "aa" * 32}, report)  # one file: its own checksum


def test_weights_know_the_items_they_were_tuned_on_in_another_file(tmp_path):
    """A conversation tuned on, inside a larger file or cut shorter, has another checksum but the same id; the ids
    are read only where no checksum decides, and only on the benchmark tuned on."""
    report = {"questions": 4, "objective": "recall_all@5"}
    scored = {"metrics": {"session": {}}, "candidates": [{"id": "d1"}]}
    results = {"dataset_checksum": "aa" * 32, "benchmark_key": "locomo",
               "records": [{"item_id": "conv-26", **scored}, {"item_id": "conv-26", **scored},
                           {"item_id": "conv-30", **scored}, {"item_id": "conv-41", "metrics": None, "candidates": []}]}
    record = tuned_on(results, report)
    assert record["items"] == ["conv-26", "conv-30"]  # a failed item was never tuned on
    weights = tmp_path / "w.json"
    weights.write_text(json.dumps({"weights": {"semantic": 1.0}, "tuned_on": record}))
    larger = tuning_record(weights, "bb" * 32, (), lambda: ["conv-26", "conv-41"], "locomo")
    assert larger["tuned_on_this_data"] and larger["items_tuned_on"] == ["conv-26"]
    assert not tuning_record(weights, "bb" * 32, (), lambda: ["conv-41"], "locomo")["tuned_on_this_data"]
    assert not tuning_record(weights, "bb" * 32, (), lambda: ["conv-26"], "realmem")["tuned_on_this_data"]

    def unread():
        raise AssertionError("the checksum decided: the dataset need not be read")

    assert tuning_record(weights, "aa" * 32, (), unread, "locomo")["tuned_on_this_data"]
    weights.write_text(json.dumps({"weights": {"semantic": 1.0}, "tuned_on": {**record, "benchmark": ["locomo"],
                                                                              "dataset_checksum": {"x": 1}}}))
    assert not tuning_record(weights, "bb" * 32, (), lambda: ["conv-26"], "locomo")["tuned_on_this_data"]  # no crash


def test_optimize_on_a_finished_run_tunes_and_checks_held_out(setup):
    """`memfarm optimize RESULTS` tunes without a model; `--held-out` tunes on some questions and scores the
    others: the clearly wrong recency weight is worth moving on questions the tuning never saw."""
    folder, data = setup
    out = folder / "finished.json"
    assert _run(folder, data, "--output", str(out), "--dry-run-weights").exit_code == 0
    tuned = CliRunner().invoke(main, ["optimize", str(out), "--step-size", "0.1", "--dry-run-weights"])
    assert tuned.exit_code == 0, tuned.output
    assert "optimise session:ndcg_any@10 over" in tuned.output and "weights not written" in tuned.output
    checked = CliRunner().invoke(main, ["optimize", str(out), "--step-size", "0.1", "--held-out", "2",
                                        "--json", str(folder / "held_out.json")])
    assert checked.exit_code == 0, checked.output
    rows = {line.split()[0]: [float(x) for x in line.split()[1:]] for line in checked.output.splitlines()
            if line.startswith(("session:", "turn:"))}
    assert list(rows)[0] == "session:recall_all@5" and len(rows) == 4
    before, after, change = rows["session:ndcg_any@10"]
    assert after > before and change == pytest.approx(after - before, abs=1e-4)
    # the check as a file a figure can be quoted from: what made it, each fold's items, tuned weights and scores
    written = json.loads((folder / "held_out.json").read_text())
    assert {"command", "commit", "load"} <= set(written) and written["objective"] == "session:ndcg_any@10"
    folds = written["per_fold"]
    assert len(folds) == 2 and sorted(i for f in folds for i in f["items"]) == sorted(
        {r["item_id"] for r in json.loads(out.read_text())["records"] if r.get("metrics")})
    assert sum(f["questions"] for f in folds) == written["questions"]
    assert any(f["tuned_weights"] != written["weights"] for f in folds)
    pooled = sum(f["metrics"]["session:ndcg_any@10"]["held_out"] * f["questions"] for f in folds) / written["questions"]
    assert pooled == pytest.approx(after, abs=1e-4)
    refused = CliRunner().invoke(main, ["optimize", str(out), "--json", str(folder / "x.json")])
    assert refused.exit_code != 0 and "give --held-out" in refused.output


def test_a_held_out_check_needs_two_items():
    from coordinator.results.optimize import held_out

    record = {"item_id": "q1", "metrics": {"x": 1}, "candidates": [{}]}
    with pytest.raises(ResultsError, match="two items at least"):
        held_out([record], {}, folds=2)


def test_optimize_on_a_run_that_ranks_by_no_weights_says_so_in_one_line(tmp_path):
    """An arm, an outside system or a Memoria mode other than full has no ranking weights: optimize (and its
    held-out check) said `KeyError: 'ranking'` before its own message."""
    data = write_dataset(tmp_path / "data.json", questions=2, seed=3, scale=0.02)
    out = tmp_path / "arm.json"
    made = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "recency",
                                     "--output", str(out)])
    assert made.exit_code == 0, made.output
    for extra in ([], ["--held-out", "2"]):
        result = CliRunner().invoke(main, ["optimize", str(out), *extra])
        assert result.exit_code == 2 and not isinstance(result.exception, KeyError), result.output
        assert f"{out}: system 'recency'" in result.output and "ranks by no weights" in result.output
        assert len(result.output.strip().splitlines()) == 1
    again = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--system", "recency",
                                      "--optimize", "--output", str(tmp_path / "again.json")])
    assert again.exit_code == 2 and "--system memoria --retrieval-mode full" in again.output
    assert not (tmp_path / "again.json").exists()  # refused before the run, not after it


def test_a_copy_of_shipped_tuned_weights_without_tuned_on_is_still_tuned_on_its_data(tmp_path):
    """`--weights` naming a copy of RealMem's weights with `tuned_on` left out made an in-sample run look held out:
    the values are the shipped file's, so its tuning is theirs."""
    from coordinator.results.optimize import SHIPPED_WEIGHTS

    shipped = json.loads((SHIPPED_WEIGHTS / "realmem.json").read_text())
    copy = tmp_path / "mine.json"
    copy.write_text(json.dumps({"weights": {n: v for n, v in shipped["weights"].items() if v}}))  # zeros left out
    record = tuning_record(copy, "cc" * 32, (), lambda: ["Kim_Ji_young"], "realmem")
    assert record["tuned_on_this_data"] and record["same_weights_as"] == "realmem.json"
    assert record["tuned_on"] == shipped["tuned_on"] and record["items_tuned_on"] == ["Kim_Ji_young"]
    moved = {**shipped["weights"], "semantic": shipped["weights"]["semantic"] + 0.05}
    copy.write_text(json.dumps({"weights": moved}))
    assert not tuning_record(copy, "cc" * 32, (), lambda: ["Kim_Ji_young"], "realmem")["tuned_on_this_data"]


@pytest.mark.parametrize("name", ["Kim\u200b_Ji_young", "\ufeffKim_Ji_young\u2060", "Ｋｉｍ_Ｊｉ_ｙｏｕｎｇ",
                                  "kim_ji_young"])
def test_a_persona_renamed_by_invisible_or_compatibility_characters_is_still_the_one_tuned_on(tmp_path, name):
    """A zero-width space in `person_name` made a tuned persona look like another one."""
    weights = tmp_path / "w.json"
    weights.write_text(json.dumps({"weights": {"semantic": 1.0},
                                   "tuned_on": {"benchmark": "realmem", "items": ["Kim_Ji_young"]}}))
    record = tuning_record(weights, "dd" * 32, (), lambda: [name, "Other"], "realmem")
    assert record["tuned_on_this_data"] and record["items_tuned_on"] == [name]


@pytest.mark.parametrize("value", ["1e308", "-1e308", "Infinity", "NaN", "1e400", "1001"])
def test_weights_that_are_not_finite_or_absurd_are_refused_naming_file_and_signal(tmp_path, value):
    """A weight of 1e308 was accepted and overflowed every score."""
    path = tmp_path / "w.json"
    path.write_text('{"weights": {"semantic": 0.3, "recency": %s}}' % value)
    with pytest.raises(ResultsError, match=r"w\.json: signal recency: weight .* not a finite number"):
        load_weights(path)
    path.write_text('{"weights": {"semantic": 0.3, "recency": 1000}}')
    assert load_weights(path)["recency"] == 1000.0
