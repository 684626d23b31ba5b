"""A run's name as a person reads it, from the system and the retrieval mode its results file records."""

from __future__ import annotations


def run_label(system, mode) -> str:
    """`memoria/full`, `bm25s/lucene`, `my-memory`: the system, then its mode where it has one that adds
    something. An outside system spells its modes `SYSTEM:MODE`, so the name is said once; a user's class has no
    mode (None), and a mode equal to the name adds nothing."""
    system = str(system or "system")
    mode = "" if mode is None else str(mode).removeprefix(f"{system}:")
    return system if mode in ("", system) else f"{system}/{mode}"
