"""`memfarm bench systems`: each system a `memfarm run` child, compared with Memoria full question by question."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.helpers import realmem_persona, skip_outside_ci


def _conversation(sample_id="tiny"):
    turns = [("Ann", "I hiked the Alps with Tom last week."), ("Bo", "I adopted a cat named Miso."),
             ("Ann", "My new job at the bakery starts Monday."), ("Bo", "We painted the kitchen yellow.")]
    conversation = {f"session_{i + 1}": [{"speaker": who, "dia_id": f"D{i + 1}:1", "text": text}]
                    for i, (who, text) in enumerate(turns)}
    conversation.update({f"session_{i + 1}_date_time": f"1 May 2023 {i + 1}:00" for i in range(len(turns))})
    qa = [{"question": "Where did Ann hike?", "answer": "the Alps", "evidence": ["D1:1"], "category": 4},
          {"question": "What is the cat called?", "answer": "Miso", "evidence": ["D2:1"], "category": 4},
          {"question": "Where does Ann work now?", "answer": "bakery", "evidence": ["D3:1"], "category": 4}]
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa}


@pytest.mark.slow
def test_a_system_is_set_against_memoria_full_with_its_cost(tmp_path, realmem_dir):
    try:
        import pymnem  # noqa: F401
    except ImportError:
        skip_outside_ci("mnem is not installed (`make test` installs it; pip install -e '.[mnem]')")
    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps([_conversation(), _conversation("left-out")]))
    out = tmp_path / "systems.json"
    persona = realmem_persona(realmem_dir / "Kim_Ji_young_dialogues_256k.json", 8, tmp_path / "Kim_Ji_young.json")
    result = CliRunner().invoke(main, ["bench", "systems", "--locomo", str(locomo), "--questions", "2",
                                       "--scale", "0.02", "--limit", "1", "--system", "mnem dense",
                                       "--system", "recency arm", "--realmem", str(persona),
                                       "--workdir", str(tmp_path / "wd"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    rows = {(r["dataset"], r["system"]): r for r in data["rows"]}
    assert set(rows) == {(d, s) for d in ("locomo", "longmemeval", "realmem")
                         for s in ("memoria full", "mnem dense", "recency arm")}
    # the arm is marked in the file and the table, and every dataset's table ends with the ceiling the gold allows
    assert [r["system"] for r in data["rows"] if r["arm"]] == ["recency arm"] * 3
    assert "recency arm *" in result.output and result.output.count("(ceiling)") == 3
    assert all(r["session_recall_all_5"] <= r["session_recall_all_5_ceiling"] for r in data["rows"])
    reference, mnem = rows[("locomo", "memoria full")], rows[("locomo", "mnem dense")]
    # every row has the same fields: the reference's comparison with itself is None, not left out
    assert set(reference) == set(mnem) and mnem["config"] == "mnem:dense"
    assert reference["session_recall_all_5_delta"] is None and reference["session_recall_all_5_p_holm"] is None
    # --limit keeps the LoCoMo file's first conversation and leaves the generated file its --questions
    assert mnem["n"] == 3 and rows[("longmemeval", "mnem dense")]["n"] == 2 and data["limit"] == 1
    assert mnem["session_recall_all_5_delta"] == pytest.approx(
        mnem["session_recall_all_5"] - reference["session_recall_all_5"], abs=1e-4)
    assert mnem["session_recall_all_5_ci_low"] <= mnem["session_recall_all_5_delta"] <= mnem["session_recall_all_5_ci_high"]
    assert 0 <= mnem["session_recall_all_5_p_holm"] <= 1
    assert all(r["peak_rss_mib"] > 50 and r["ingest_ms_per_turn"] > 0 for r in data["rows"] if not r["arm"])
    # like for like, as each run's files disclose it: one top_k, one embedder for those that embed, none for the arm
    assert {r["top_k"] for r in data["rows"]} == {reference["top_k"]} and reference["top_k"] > 0
    assert reference["embedder"] == mnem["embedder"] == "all-MiniLM-L6-v2"
    assert rows[("locomo", "recency arm")]["embedder"] == "none"
    assert "control_arm=recency" in rows[("locomo", "recency arm")]["configuration"]
    assert mnem["version"] == "0.1.0" and "retrieval_mode=mnem:dense" in mnem["configuration"]
    assert all(r["rejected_hits"] == 0 and r["short_rankings"] is not None for r in data["rows"])
    assert data["metrics"][0] == "session:recall_all@5"
    # Memoria full takes RealMem's own weights there, tuned on this persona (cut to 8 sessions, known by its name)
    tuned = [(r["dataset"], r["system"]) for r in data["rows"] if r["tuned_on_this_data"]]
    assert tuned == [("realmem", "memoria full")]
    assert result.output.count("memoria full †") == 1
    bad = CliRunner().invoke(main, ["bench", "systems", "--locomo", str(locomo), "--system", "mnem sparse",
                                    "--workdir", str(tmp_path / "wd2"), "--output", str(tmp_path / "x.json")])
    assert bad.exit_code == 2 and "unknown system label(s) mnem sparse" in bad.output


def test_a_row_whose_weights_were_tuned_on_its_dataset_is_marked_in_the_table():
    from coordinator.benches.systems import _table

    row = {"dataset": "realmem", "system": "memoria full", "n": 3, "session_recall_all_5": 0.5,
           "session_recall_all_5_delta": None, "session_recall_any_5": 0.7, "session_ndcg_10": 0.6,
           "turn_recall_any_10": 0.4, "ingest_ms_per_turn": 1.0, "recall_p50_ms": 2.0, "peak_rss_mib": 100.0,
           "session_recall_all_5_ceiling": 1.0}
    assert "memoria full †" in _table([{**row, "tuned_on_this_data": True}])[1]
    assert "†" not in _table([{**row, "tuned_on_this_data": False}])[1]
    assert "memoria full *" in _table([{**row, "arm": True}])[1]


def test_a_row_reads_whether_its_run_was_tuned_on_its_data_from_the_results_file(tmp_path):
    """The † comes from the run's own results file (its `tuning` block), not from the system's name."""
    from coordinator.benches.systems import _dataset_rows

    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps([_conversation()]))
    out = tmp_path / "recency.json"  # an arm: no model to load, and the row reads its files as any other's
    result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(locomo), "--system", "recency",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert not _dataset_rows("locomo", {"recency arm": (out, 1.0, 2**27)}, 100)[0]["tuned_on_this_data"]
    data = json.loads(out.read_text())
    data["tuning"] = {"weights_file": "w.json", "tuned_on": {"dataset_checksum": data["dataset_checksum"]},
                      "tuned_on_this_data": True, "label": "tuned on this data"}
    out.write_text(json.dumps(data))
    assert _dataset_rows("locomo", {"recency arm": (out, 1.0, 2**27)}, 100)[0]["tuned_on_this_data"] is True


def test_every_declared_system_and_mode_is_a_row_and_in_the_mode_help():
    """The table's rows and `--retrieval-mode`'s help come from the systems' declarations: none is left out."""
    from adapters.systems import SYSTEMS as DECLARED
    from adapters.systems.settings import BY_NAME
    from coordinator.benches.systems import SYSTEMS as ROWS

    rows = {tuple(options) for _, options in ROWS}
    help_text = " ".join(CliRunner().invoke(main, ["run", "--help"], terminal_width=10_000).output.split())
    for info in DECLARED.values():
        compared = info.compared or info.modes or info.ablations
        assert all(value in info.modes + info.ablations for value in info.compared or ()), info.name
        assert {value for options in rows if options[1] == info.name for value in options[3:]} == set(compared)
        if info.modes and info.name != BY_NAME["mode"].help_describes:
            assert f"{info.name}: {info.modes[0]}, its default, " in help_text, info.name
            assert all(mode in help_text.partition(f"{info.name}: ")[2].split(";")[0] for mode in info.modes)


def test_a_newly_declared_system_gets_its_rows_and_its_line_in_the_mode_help():
    from adapters.systems.contract import SystemInfo
    from adapters.systems.settings import BY_NAME

    new = SystemInfo("newcomer", object, "Newcomer", ("mode",), modes=("deep", "shallow", "wide"))
    assert new.variants == (("newcomer deep", "--retrieval-mode", "deep"),
                            ("newcomer shallow", "--retrieval-mode", "shallow"),
                            ("newcomer wide", "--retrieval-mode", "wide"))
    assert SystemInfo("lone", object, "Lone", ()).variants == (("lone", None, None),)
    assert SystemInfo("floor", object, "the floor", (), arm=True).variants == (("floor arm", None, None),)
    assert BY_NAME["mode"].help_for([new]).endswith("(newcomer: deep, its default, shallow or wide).")


def test_an_unreadable_persona_is_a_row_marked_incomplete_and_every_other_row_is_written(tmp_path, realmem_dir):
    """One persona that cannot be read is one failed item with no question ids in every system's run: the
    pairing refused it and the bench ended with no file. Now each row says it, and the rest are compared."""
    from coordinator.benches.systems import _dataset_rows, _incomplete_lines, _table

    folder = tmp_path / "personas"
    folder.mkdir()
    realmem_persona(realmem_dir / "Kim_Ji_young_dialogues_256k.json", 6, folder / "Kim_Ji_young_dialogues_256k.json")
    (folder / "Zed_dialogues_256k.json").write_text(json.dumps({"_metadata": {"person_name": "Zed"}}))
    files = {}
    for label, system in (("recency arm", "recency"), ("random arm", "random")):
        out = tmp_path / f"{system}.json"
        result = CliRunner().invoke(main, ["run", "realmem", "--dataset", str(folder), "--system", system,
                                           "--output", str(out)])
        assert out.is_file(), result.output
        files[label] = (out, 1.0, 2**27)
    rows = _dataset_rows("realmem", files, 100)
    assert [r["system"] for r in rows] == ["recency arm", "random arm"]
    for row in rows:
        assert not row["complete"] and row["failed_items"] == 1 and row["failed_item_ids"] == ["Zed"]
        assert row["compared_without_items"] == ["Zed"] and row["n"] > 0
    assert rows[1]["session_recall_all_5_delta"] is not None  # compared on the persona both evaluated
    assert "random arm * !" in _table(rows)[2]
    lines = _incomplete_lines(rows)
    assert len(lines) == 2 and lines[0].startswith("! realmem recency arm: incomplete, 1 failed item(s) (Zed)")
