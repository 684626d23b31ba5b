import json

import pytest
from click.testing import CliRunner

from adapters.ingestion.obsidian import ObsidianAdapter
from adapters.ingestion.records import validate_record
from coordinator.cli import main


@pytest.fixture()
def vault(tmp_path):
    root = tmp_path / "vault"
    (root / "Projects" / "Garden").mkdir(parents=True)
    (root / "Daily").mkdir()
    (root / "Templates").mkdir()
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "workspace.md").write_text("internal, never a note")
    (root / "Projects" / "Garden" / "Tomatoes.md").write_text(
        "---\n"
        "title: Tomato plan\n"
        "tags: [garden, vegetables]\n"
        "aliases:\n  - tomato notes\n"
        "created: 2024-03-05\n"
        "---\n"
        "# Tomato plan\n"
        "Sow the San Marzano seeds indoors in early March, then harden them off in May. #seeds\n"
        "See [[Compost#Mixing ratio|the compost ratio]] and ![[greenhouse.png]] and [[Daily/2024-03-05]].\n"
        "## Tasks\n"
        "- [ ] buy a soil thermometer\n"
        "- [x] order seed trays\n"
        "```python\n# not a heading, [[not a link]] #notatag\n```\n"
    )
    (root / "Projects" / "Compost.md").write_text("# Compost\n## Mixing ratio\nThree parts brown to one part green.\n")
    (root / "Daily" / "2024-03-05.md").write_text("Met Dana about the allotment. #meeting\n* [ ] send Dana the map\n")
    (root / "Templates" / "Daily template.md").write_text("# {{date}}\n- [ ] review inbox\n")
    (root / "Empty.md").write_text("")
    (root / "Broken.md").write_bytes(b"caf\xe9 au lait \xff\xfe")
    (root / "image.png").write_bytes(b"\x89PNG\r\n")
    return root


def _by_path(records):
    return {r["metadata"]["path"]: r for r in records}


def test_discovery_skips_system_folders_and_unreadable_files(vault):
    adapter = ObsidianAdapter(vault)
    paths = sorted(_by_path(adapter.records()))
    assert paths == ["Daily/2024-03-05.md", "Empty.md", "Projects/Compost.md", "Projects/Garden/Tomatoes.md",
                     "Templates/Daily template.md"]
    assert adapter.stats()["skipped"] == [{"path": "Broken.md", "reason": "not valid UTF-8 at byte 3"}]


def test_parsing_keeps_frontmatter_headings_links_tags_and_tasks(vault):
    note = _by_path(ObsidianAdapter(vault).records())["Projects/Garden/Tomatoes.md"]
    meta = note["metadata"]
    assert meta["title"] == "Tomato plan" and meta["filename"] == "Tomatoes.md" and meta["folder"] == "Projects/Garden"
    assert meta["frontmatter"]["aliases"] == ["tomato notes"] and meta["frontmatter"]["created"] == "2024-03-05"
    assert meta["headings"] == [{"level": 1, "text": "Tomato plan"}, {"level": 2, "text": "Tasks"}]
    assert meta["links"] == [
        {"target": "Compost", "heading": "Mixing ratio", "alias": "the compost ratio", "embed": False},
        {"target": "greenhouse.png", "heading": None, "alias": None, "embed": True},
        {"target": "Daily/2024-03-05", "heading": None, "alias": None, "embed": False},
    ]
    assert meta["tags"] == ["garden", "vegetables", "seeds"]
    assert [(t["text"], t["done"]) for t in meta["tasks"]] == [("buy a soil thermometer", False), ("order seed trays", True)]
    assert "San Marzano" in note["text"] and note["text"].startswith("Tomato plan")
    json.dumps(meta)  # JSON-compatible all the way down


def test_templates_and_empty_notes(vault):
    records = _by_path(ObsidianAdapter(vault).records())
    assert records["Templates/Daily template.md"]["metadata"]["is_template"] is True
    assert records["Projects/Compost.md"]["metadata"]["is_template"] is False
    assert records["Empty.md"]["text"] == "Empty"  # the title stands in for an empty body


def test_records_satisfy_the_contract(vault):
    for record in ObsidianAdapter(vault).iter_notes():
        assert validate_record(record) is record
        assert record["metadata"]["source"] == "obsidian"


@pytest.mark.parametrize("bad, error", [(["not", "a dict"], TypeError), ({"metadata": {}}, ValueError),
                                        ({"text": 1, "metadata": {}}, TypeError), ({"text": "x", "metadata": []}, TypeError),
                                        ({"text": "x", "metadata": {"a": object()}}, TypeError)])
def test_invalid_records_are_rejected(bad, error):
    with pytest.raises(error):
        validate_record(bad)


def test_load_with_a_collector_and_a_non_callable(vault):
    adapter = ObsidianAdapter(vault)
    inserted = []
    count = adapter.load(lambda text, metadata: inserted.append((text, metadata)))
    assert count == len(inserted) == 5
    with pytest.raises(TypeError):
        adapter.load("not callable")


def test_stats(vault):
    stats = ObsidianAdapter(vault).stats()
    assert stats["notes"] == 5 and stats["templates"] == 1 and stats["links"] == 3
    assert stats["tasks"] == 4 and stats["open_tasks"] == 3 and stats["tags"] == 4


def test_empty_and_invalid_vaults(tmp_path):
    (tmp_path / "empty").mkdir()
    assert ObsidianAdapter(tmp_path / "empty").records() == []
    assert ObsidianAdapter(tmp_path / "empty").stats()["notes"] == 0
    with pytest.raises(FileNotFoundError):
        ObsidianAdapter(tmp_path / "missing")
    (tmp_path / "file.md").write_text("x")
    with pytest.raises(NotADirectoryError):
        ObsidianAdapter(tmp_path / "file.md")


@pytest.mark.slow
def test_ingest_then_recall_finds_the_note(vault, tmp_path):
    store = tmp_path / "store"
    result = CliRunner().invoke(main, ["ingest", "obsidian", str(vault), "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert "stored 5 records" in result.output
    result = CliRunner().invoke(main, ["recall", "--store", str(store), "when should I start the tomato seedlings?"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].split()[2] == "Projects/Garden/Tomatoes.md"
    missing = CliRunner().invoke(main, ["ingest", "obsidian", str(tmp_path / "nope"), "--store", str(store)])
    assert missing.exit_code == 2 and "not found" in missing.output
