"""`memfarm bench beam-scale`: the 1M stand-in joined from development chats, and the bench's figures."""

import json
import os

import pytest
from click.testing import CliRunner

from adapters.benchmarks import BENCHMARKS
from adapters.errors import DatasetError
from adapters.generators.beam_joined import join_chats
from coordinator.benches.beam_scale import MIB, side_of, smallest_persona, summary, table
from coordinator.cli import main
from tests.conftest import SHARED_DATA


@pytest.fixture(scope="module")
def beam_chats():
    path = SHARED_DATA / "beam_dev" / "chats"
    if not path.is_dir():
        message = f"BEAM development chats not found at {path} (set MEMFARM_SHARED_DATA)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _item(path):
    items = list(BENCHMARKS["beam"].open(path).iter_items())
    assert len(items) == 1 and not items[0].get("error"), items[0].get("error")
    return items[0]


def test_joined_chats_read_as_one_chat_whose_gold_still_names_each_message(beam_chats, tmp_path):
    parts = [beam_chats / "100K" / "1", beam_chats / "100K" / "2"]
    folder = join_chats(parts, tmp_path, size="1M")
    assert folder == tmp_path / "chats" / "1M" / "1"
    joined, originals = _item(tmp_path), [_item(part) for part in parts]
    assert joined["item_id"] == "1M/1" and joined["stats"]["parts"] == 0  # one chat.json, BEAM's 1M layout
    ids = [turn["turn_id"] for turn in joined["turns"]]
    assert len(ids) == len(set(ids)) == sum(len(o["turns"]) for o in originals)
    assert joined["stats"]["batches"] == sum(o["stats"]["batches"] for o in originals)
    assert len({turn["session_id"] for turn in joined["turns"]}) == joined["stats"]["batches"]
    text = {turn["turn_id"]: turn["text"] for turn in joined["turns"]}
    # each ability's questions are the first chat's, then the second's; each gold id names the same message's text
    expected = {}
    for original in originals:
        own = {turn["turn_id"]: turn["text"] for turn in original["turns"]}
        for q in original["questions"]:
            expected.setdefault(q["question_type"], []).append((q, [own[g] for g in q["gold_turns"]]))
    asked = {}
    for q in joined["questions"]:
        asked.setdefault(q["question_type"], []).append(q)
    assert {k: len(v) for k, v in asked.items()} == {k: len(v) for k, v in expected.items()}
    checked = 0
    for ability, questions in asked.items():
        for q, (source, gold_texts) in zip(questions, expected[ability]):
            assert q["question"] == source["question"] and q["abstention"] == source["abstention"]
            assert bool(q.get("excluded")) == bool(source.get("excluded"))
            assert [text[g] for g in q["gold_turns"]] == gold_texts
            checked += bool(gold_texts)
    first_last = max(int(turn["turn_id"]) for turn in originals[0]["turns"])
    second_gold = [g for q in joined["questions"] for g in q["gold_turns"] if int(g) > first_last]
    assert checked > 20 and second_gold  # the second chat's gold was shifted and checked, not merely kept
    assert joined["stats"]["dropped_gold_ids"] == sum(o["stats"]["dropped_gold_ids"] for o in originals)


def test_a_joined_chat_needs_two_distinct_chats_with_their_files(beam_chats, tmp_path):
    one = beam_chats / "100K" / "1"
    with pytest.raises(DatasetError, match="needs two or more"):
        join_chats([one], tmp_path / "a")
    with pytest.raises(DatasetError, match="given twice"):
        join_chats([one, one], tmp_path / "b")
    lonely = tmp_path / "chats" / "100K" / "9"
    (lonely / "probing_questions").mkdir(parents=True)
    with pytest.raises(DatasetError, match=r"chat\.json.*missing"):
        join_chats([one, lonely], tmp_path / "c")


def _manifest(peak=3 * MIB, docs=100, total_ms=2000.0):
    stats = {"docs": docs, **({"peak_rss_bytes": peak} if peak is not None else {})}
    return {"items": [{"item_id": "1M/1", "stats": stats, "timings": {"total_ms": total_ms}}],
            "evaluation": {"question_count": 36, "failed": 0},
            "farm": {"items": [{"item_id": "1M/1", "worker": "scale0@host/12", "attempts": 1}]}}


def test_a_side_is_read_from_the_farm_manifest_and_refused_without_its_peak():
    side = side_of(_manifest(), 9.5, 200 * MIB)
    assert side["ms_per_doc"] == 20.0 and side["worker_peak_rss_mib"] == 3.0 and side["worker"] == "scale0@host/12"
    with pytest.raises(ValueError, match="peak_rss_bytes"):
        side_of(_manifest(peak=None), 1.0, 1)
    failed = _manifest()
    failed["farm"]["failures"] = [{"item_id": "1M/1", "attempts": 1, "error": "refused by scale0@host: code version"}]
    with pytest.raises(ValueError, match="1M/1 failed on the farm: refused"):
        side_of(failed, 1.0, 1)
    with pytest.raises(ValueError, match="farm block"):
        side_of({**_manifest(), "farm": None}, 1.0, 1)


def test_the_ratio_is_per_message_over_per_turn_and_the_bound_is_held_or_missed():
    sides = {"beam": side_of(_manifest(peak=900 * MIB, docs=1000, total_ms=60_000), 70, MIB),
             "realmem": side_of(_manifest(peak=700 * MIB, docs=500, total_ms=25_000), 30, MIB)}
    held = summary(sides, 1000 * MIB)
    assert held["per_message_ratio"] == 1.2 and held["within_target"] and held["within_bound"]
    assert held["worker_peak_rss_mib"] == 900.0 and held["worker_bound_mib"] == 1000.0
    assert not summary(sides, 800 * MIB)["within_bound"]
    data = {"mode": "full", "workers": 1, "threads": 2, "stand_in": {"parts": ["a/500K/2", "a/500K/5"]}, **held}
    lines = "\n".join(table(data))
    assert "1.20x" in lines and "within" in lines and "a/500K/2 + a/500K/5" in lines


def test_the_smallest_persona_of_a_folder_is_run(tmp_path):
    for name, size in (("Big_dialogues_256k.json", 30), ("Small_dialogues_256k.json", 10)):
        (tmp_path / name).write_text("x" * size)
    assert smallest_persona(tmp_path).name == "Small_dialogues_256k.json"
    (tmp_path / "none").mkdir()
    with pytest.raises(FileNotFoundError, match="no RealMem persona"):
        smallest_persona(tmp_path / "none")


@pytest.mark.slow
def test_a_small_stand_in_runs_on_a_real_worker_with_its_peak_in_the_manifest(beam_chats, realmem_dir, tmp_path):
    out = tmp_path / "scale.json"
    result = CliRunner().invoke(main, ["bench", "beam-scale", "--beam", str(beam_chats.parent), "--part", "100K/1",
                                       "--part", "100K/2", "--realmem", str(realmem_dir), "--realmem-sessions", "10",
                                       "--mode", "bm25", "--threads", "1", "--workdir", str(tmp_path / "wd"),
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    beam, persona = data["sides"]["beam"], data["sides"]["realmem"]
    assert beam["docs"] == data["stand_in"]["messages"] > 300 and beam["failed"] == 0 and persona["failed"] == 0
    assert beam["worker"].startswith("beam-0@") and persona["worker"].startswith("realmem-0@")
    assert 0 < beam["worker_peak_rss_bytes"] and data["within_bound"] == (data["worker_peak_rss_mib"]
                                                                          <= data["worker_bound_mib"])
    assert data["per_message_ratio"] == pytest.approx(beam["ms_per_doc"] / persona["ms_per_doc"], rel=1e-2)
    assert "ms per message / ms per persona turn" in result.output
