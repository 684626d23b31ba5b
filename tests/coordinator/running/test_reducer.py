"""The reducer names scoring profiles as this version does, whatever name its outcomes carry."""

from pathlib import Path

from adapters.defaults import EXPECTED_TEXT_PROFILE, REALMEM_PROFILE
from adapters.profiles import profile
from coordinator.results.report import profile_lines
from coordinator.running.reducer import reduce_run
from tests.factories import run_context

OFFICIAL = "longmemeval-official"
HIT = {"session": {"recall_any@1": 1.0}, "turn": {"recall_any@1": 1.0}}
MISS = {"session": {"recall_any@1": 0.0}, "turn": {"recall_any@1": 0.0}}


def _outcome(qid, metrics_by_profile, chosen):
    record = {"question_id": qid, "item_id": qid, "status": "ok", "question_type": "t",
              "metrics": metrics_by_profile[chosen], "metrics_by_profile": metrics_by_profile}
    return {"item_id": qid, "records": [record]}


def _context(profile, benchmark="longmemeval", title="LongMemEval-S"):
    return run_context(benchmark=benchmark, benchmark_title=title, scoring_profile=profile, top_k=1, k_values=(1,))


def test_outcomes_under_the_old_name_memoria_reduce_under_expected_text():
    outcomes = [_outcome("q1", {"memoria": HIT, OFFICIAL: MISS}, "memoria"),
                _outcome("q2", {"memoria": MISS, OFFICIAL: MISS}, "memoria")]
    results, manifest = reduce_run(outcomes, _context("memoria"), elapsed_seconds=0.0,
                                   commit="c")
    assert results["scoring_profile"] == results["corpus"] == EXPECTED_TEXT_PROFILE
    assert set(results["metrics_by_profile"]) == {EXPECTED_TEXT_PROFILE, OFFICIAL}
    text_block = results["metrics_by_profile"][EXPECTED_TEXT_PROFILE]
    assert text_block["own_corpus"] and text_block["all"]["session"]["recall_any@1"] == 0.5
    assert not results["metrics_by_profile"][OFFICIAL]["own_corpus"]
    assert all(set(r["metrics_by_profile"]) == {EXPECTED_TEXT_PROFILE, OFFICIAL} for r in results["records"])
    assert manifest["evaluation"]["scoring_profile"] == EXPECTED_TEXT_PROFILE
    assert manifest["evaluation"]["profiles_computed"] == [EXPECTED_TEXT_PROFILE, OFFICIAL]
    assert outcomes[0]["records"][0]["metrics_by_profile"].keys() == {"memoria", OFFICIAL}  # its input untouched


def test_a_profile_on_another_profiles_corpus_is_starred_but_realmems_two_profiles_share_one_corpus():
    """LongMemEval's official numbers computed on the expected-text corpus are not citable as official; RealMem's
    two profiles score the one corpus a run gives its system, so both are their own and neither is starred."""
    outcomes = [_outcome("q1", {EXPECTED_TEXT_PROFILE: HIT, OFFICIAL: MISS}, EXPECTED_TEXT_PROFILE)]
    results, _ = reduce_run(outcomes, _context(EXPECTED_TEXT_PROFILE), elapsed_seconds=0.0,
                            commit="c")
    lines = profile_lines(results)
    assert any(line.startswith(f"{OFFICIAL} *") for line in lines)
    assert any(line.startswith("* on the expected-text profile's corpus") for line in lines)

    outcomes = [_outcome("q1", {REALMEM_PROFILE: HIT, EXPECTED_TEXT_PROFILE: HIT}, REALMEM_PROFILE)]
    results, _ = reduce_run(outcomes, _context(REALMEM_PROFILE, "realmem", "RealMem"),
                            elapsed_seconds=0.0, commit="c")
    assert all(block["own_corpus"] for block in results["metrics_by_profile"].values())
    lines = profile_lines(results)
    assert not any("*" in line for line in lines) and lines[-1] == f"note: {profile(REALMEM_PROFILE).notes.shared}"


#: Run in a process of its own: a test worker's allocator may keep a freed block mapped (a whole suite's
#: libraries loaded), which says nothing about the count.
_PEAK_PROBE = """
import json
import numpy as np
from workers.item.peak_memory import peak_rss_bytes, reset_peak_rss
reset_peak_rss()
before = peak_rss_bytes()
block = np.ones(256 * 2 ** 20 // 8)
with_block = peak_rss_bytes()
del block
took = reset_peak_rss()
print(json.dumps({"before": before, "with_block": with_block, "took": took, "after": peak_rss_bytes()}))
"""


def test_a_run_measures_its_own_peak_memory_not_an_earlier_runs():
    """A bench runs several systems in one process, a worker many items: after the reset, an earlier peak no
    longer counts; where the kernel refuses or ignores the reset, the reset says so and the count stays the
    lifetime peak."""
    import json
    import subprocess
    import sys

    probe = subprocess.run([sys.executable, "-c", _PEAK_PROBE], capture_output=True, text=True, timeout=120,
                           cwd=Path(__file__).resolve().parents[3], check=True)
    seen = json.loads(probe.stdout)
    assert seen["with_block"] >= seen["before"] + 200 * 2 ** 20  # the count sees the 256 MiB block
    if seen["took"]:  # the block's share is gone from the count
        assert seen["after"] < seen["with_block"] - 128 * 2 ** 20
    else:  # a sandbox that ignores clear_refs: never a peak below what the process reached
        assert seen["after"] >= seen["with_block"]
    assert seen["took"] == (Path("/proc/self/status").exists() and seen["after"] < seen["with_block"])


def test_a_question_id_two_items_hold_fails_those_items_only_and_names_item_and_question(tmp_path):
    """Two personas whose ids collide (or one persona holding a query twice) used to make the reducer refuse the
    whole run: every other item's results were lost. Only the items holding the id fail, each named with it."""
    from adapters.records import outcome
    from coordinator.results.run_files import ResultsFile
    from coordinator.running.reducer import write_results
    from tests.factories import record

    outcomes = [outcome("Ann", [record("Ann:Q:1", "Ann"), record("Ann:2", "Ann")]),
                outcome("Ann:Q", [record("Ann:Q:1", "Ann:Q")]),
                outcome("Bo", [record("Bo:1", "Bo"), record("Bo:1", "Bo")]),
                outcome("Cy", [record("Cy:1", "Cy"), record("Cy:2", "Cy", hit=False)])]
    context = run_context(benchmark="realmem", benchmark_title="RealMem", scoring_profile=REALMEM_PROFILE,
                          k_values=(5, 10))
    results, manifest = reduce_run(outcomes, context, elapsed_seconds=0.0, commit="c")
    by_id = {r["question_id"]: r for r in results["records"]}
    assert set(by_id) == {"Ann", "Ann:Q", "Bo", "Cy:1", "Cy:2"}
    assert by_id["Cy:1"]["status"] == by_id["Cy:2"]["status"] == "ok"  # the other item is kept, scored
    assert results["metrics"]["all"]["evaluable"]["session"] == 2
    assert not results["complete"] and results["failures"]["item_ids"] == ["Ann", "Ann:Q", "Bo"]
    assert by_id["Ann"]["error"].startswith("item Ann: question Ann:Q:1 is also item Ann:Q's")
    assert "item Ann:Q: question Ann:Q:1 is also item Ann's" in by_id["Ann:Q"]["error"]
    assert "item Bo: question Bo:1 is held twice by item Bo" in by_id["Bo"]["error"]
    assert by_id["Bo"]["field"] == "question_id"
    assert outcomes[0]["records"][0]["status"] == "ok"  # its input untouched
    path, _ = write_results(results, manifest, tmp_path / "run.json")
    assert ResultsFile.read(path)["failures"]["items_without_question_ids"] == ["Ann", "Ann:Q", "Bo"]
