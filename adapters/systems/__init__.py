"""Systems under test: anything with `name`, `reset()`, `ingest(docs)`, `retrieve(label, query, top_k)`."""

from __future__ import annotations

from adapters.systems.memoria_system import MemoriaSystem


def make_system(name: str, mode: str, **options):
    """Build a built-in system by name."""
    if name == "memoria":
        return MemoriaSystem(mode=mode, **options)
    raise ValueError(f"unknown system {name!r}; built in: memoria")
