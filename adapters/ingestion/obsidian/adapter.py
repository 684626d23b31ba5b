"""ObsidianAdapter: a vault as normalised Memoria records, one per note.

The vault is read as untrusted content: nothing outside it is opened and each note that is
passed over (or ingested without its frontmatter) is listed with its reason in `stats()["skipped"]`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from adapters.ingestion.obsidian.models import Note
from adapters.ingestion.obsidian.parser import MAX_NOTE_BYTES, ObsidianParser
from adapters.ingestion.records import SourceAdapter, existing_folder, validate_record


class ObsidianAdapter(SourceAdapter):
    source_name = "obsidian"

    def __init__(self, vault: str | Path, max_note_bytes: int = MAX_NOTE_BYTES):
        self.vault = vault = existing_folder(vault, "Obsidian vault")
        self.parser = ObsidianParser(vault, max_note_bytes=max_note_bytes)

    def iter_notes(self) -> Iterator[dict]:
        """Normalised records, one per readable note, in path order."""
        for note in self.parser.parse():
            yield validate_record(self._normalise(note))

    iter_records = iter_notes

    def stats(self) -> dict:
        records = self.records()
        meta = [r["metadata"] for r in records]
        return {
            "source": self.source_name,
            "vault": str(self.vault),
            "notes": len(records),
            "templates": sum(m["is_template"] for m in meta),
            "links": sum(len(m["links"]) for m in meta),
            "tasks": sum(len(m["tasks"]) for m in meta),
            "open_tasks": sum(1 for m in meta for t in m["tasks"] if not t["done"]),
            "tags": len({t for m in meta for t in m["tags"]}),
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.parser.skipped],
        }

    def _normalise(self, note: Note) -> dict:
        text = note.title if not note.body else f"{note.title}\n\n{note.body}"
        return {
            "text": text,
            "metadata": {
                "source": self.source_name,
                "record_type": "note",
                "path": note.path,
                "filename": note.filename,
                "folder": note.folder,
                "title": note.title,
                "frontmatter": note.frontmatter,
                "headings": note.headings,
                "links": [asdict(link) for link in note.links],
                "tags": note.tags,
                "tasks": [asdict(task) for task in note.tasks],
                "is_template": note.is_template,
            },
        }
