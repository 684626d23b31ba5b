"""A mode run after another from the same cache restores every item and says what it still had to encode."""

import pytest
from click.testing import CliRunner

from coordinator.cli import main
from tests.helpers import write_dataset


@pytest.mark.slow
def test_full_after_fusion_restores_the_items_and_says_it_encoded_the_pieces_only_full_reads(tmp_path):
    data = write_dataset(tmp_path / "lme.json", questions=3, seed=3, scale=0.02)

    def run(mode):
        result = CliRunner().invoke(main, ["run", "longmemeval", "--dataset", str(data), "--retrieval-mode", mode,
                                           "--cache-dir", str(tmp_path / "cache"), "--output",
                                           str(tmp_path / f"{mode}.json")])
        assert result.exit_code == 0, result.output
        return result.output

    assert "still encoded" not in run("fusion"), "a cold run rebuilds its items: nothing to explain"
    first_full = run("full")
    assert "cache: 3 hits, 0 rebuilt" in first_full
    assert "the 3 items from the cache still encoded what this mode reads and no earlier run had (" in first_full
    assert " pieces)" in first_full
    assert "still encoded" not in run("full"), "its next run reads the pieces back"


def test_a_run_whose_cached_items_encoded_nothing_new_says_nothing(tmp_path):
    from coordinator.cli.run import encoded_beside_hits

    items = [{"item_id": "a", "stats": {"texts_encoded_by_kind": {"turns": 0, "pieces": 0, "questions": 4}}},
             {"item_id": "b", "stats": {"texts_encoded_by_kind": {"turns": 7, "pieces": 2}}}]
    cache = {"rebuild_reasons": {"b": "no cache entry"}, "not_cached": {}}
    assert encoded_beside_hits({"cache": cache, "items": items}) is None, "b was rebuilt; a encoded only its queries"
    said = encoded_beside_hits({"cache": {"rebuild_reasons": {}, "not_cached": {}}, "items": items})
    assert said.startswith("  the 2 items from the cache") and "(7 turns, 2 pieces)" in said
    failed = encoded_beside_hits({"cache": {"rebuild_reasons": {}, "not_cached": {}}, "items": items,
                                  "failures": [{"item_id": "a", "error": "RuntimeError"}]})
    assert failed.startswith("  the item from the cache"), "an item that failed restored nothing"
