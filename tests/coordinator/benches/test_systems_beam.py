"""`memfarm bench systems --beam`: BEAM's rows scored message by message, each system against the reference on
the whole set and on each ability's questions alone."""

import json

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from coordinator.results.run_files import ResultsFile
from tests.helpers import skip_outside_ci


@pytest.fixture(scope="module")
def chats(beam_dir):
    return beam_dir / "chats" / "100K"


def test_beam_rows_are_scored_by_message_and_compared_per_ability(tmp_path, chats):
    try:
        import bm25s  # noqa: F401
    except ImportError:
        skip_outside_ci("bm25s is not installed (`make test` installs it; pip install -e '.[bm25s]')")
    out = tmp_path / "systems.json"
    result = CliRunner().invoke(main, ["bench", "systems", "--beam", str(chats), "--beam-limit", "2",
                                       "--no-longmemeval", "--reference", "recency arm", "--system", "random arm",
                                       "--system", "bm25s lucene", "--workdir", str(tmp_path / "wd"),
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["datasets"] == {"beam": str(chats)} and data["beam_metrics"][0] == "turn:recall_any@10"
    rows = {r["system"]: r for r in data["rows"]}
    assert list(rows) == ["recency arm", "bm25s lucene", "random arm"], "the reference first, then in the table's order"
    bm25s = rows["bm25s lucene"]
    # each row's abilities are the run's own question types with gold, each cell the mean over its questions
    results = ResultsFile.read(next((tmp_path / "wd").glob("beam_*_bm25s-lucene.json")))
    scored = [r for r in results["records"] if r.get("metrics")]
    abilities = {r["question_type"] for r in scored}
    assert set(bm25s["abilities"]) == abilities and "abstention" not in abilities
    assert sum(cell["n"] for cell in bm25s["abilities"].values()) == bm25s["n"] == len(scored)
    for ability, cell in bm25s["abilities"].items():
        mine = [r["metrics"]["turn"]["recall_any@10"] for r in scored if r["question_type"] == ability]
        assert cell["message_recall_any_10"] == pytest.approx(sum(mine) / len(mine), abs=1e-4)
        # Holm over the ability's comparisons: the two other systems against the reference on that metric
        assert cell["message_recall_any_10_holm_family"] == 2 and 0 <= cell["message_recall_any_10_p_holm"] <= 1
        assert cell["message_recall_any_10_verdict"].startswith("bm25s lucene ")
    assert "message_recall_any_10_delta" not in rows["recency arm"]["abilities"][next(iter(abilities))]
    assert bm25s["message_recall_any_10_delta"] == pytest.approx(
        bm25s["message_recall_any_10"] - rows["recency arm"]["message_recall_any_10"], abs=1e-3)
    assert 0 < bm25s["message_recall_all_10_ceiling"] <= 1
    # the table: BEAM's own block, its ceiling, an ability per line, and a verdict line per system
    assert "message recall_any@10 by ability" in result.output and "(ceiling of mAll@10" in result.output
    assert all(ability[:27] in result.output for ability in abilities)
    assert result.output.count("  beam: ") == 2 and "verdicts on turn:recall_any@10 on BEAM" in result.output
