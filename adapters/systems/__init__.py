"""Systems under test: anything with `name`, `reset()`, `ingest(docs)`, `retrieve(label, query, top_k)`.

The runner owns everything else: isolation, opaque ids, tasks built from a
whitelist, the shared top_k, rejecting bad hits, scoring. Built in: `memoria`
(any mode) and `adamem` (any ablation), and the control arms `random` and `recency`; optional: the memory
systems `mem0`, `mnem` (its own modes) and `mempalace`, and the field's baselines `bm25s` (BM25 variants as modes),
`qdrant`, `lancedb`, `txtai` and `engrava` (each its own modes). A user's own system
is `path/to/file.py:ClassName` or `package.module:ClassName`, built with no
arguments, or a server in any language, `http://HOST:PORT[/PREFIX]` (`http_system`).
What a built-in system is (its settings, modes, extra, plan) is declared beside its class
(`contract.SystemInfo`); `SYSTEMS` collects them, so the command line can refuse a setting a
system would not use. What a system can do beyond the contract is asked through `contract`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from adapters.errors import MemfarmError, SystemUnavailable
from adapters.systems import (adamem, arms, bm25s_system, engrava_system, lancedb_system, mem0_system,
                              memoria_system, mempalace_system, mnem_system, qdrant_system, txtai_system)
from adapters.systems.contract import SystemInfo, check_contract, config_of

SYSTEMS: dict[str, SystemInfo] = {info.name: info for info in (
    *(module.DESCRIPTION for module in (memoria_system, adamem, mem0_system, mnem_system, mempalace_system,
                                        bm25s_system, qdrant_system, lancedb_system, txtai_system,
                                        engrava_system)),
    arms.RANDOM, arms.RECENCY)}


def modes_of(name: str) -> tuple[str, ...]:
    """The retrieval modes a built-in system takes, its natural one first (empty: it has none)."""
    return SYSTEMS[name].modes


def _user_class(spec: str):
    target, _, class_name = spec.rpartition(":")
    if not target or not class_name:
        raise MemfarmError(f"system {spec!r}: expected NAME, path/to/file.py:ClassName or package.module:ClassName")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise MemfarmError(f"system {spec!r}: no file {path}")
        module_name = f"memfarm_user_system_{abs(hash(str(path)))}"
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise MemfarmError(f"system {spec!r}: cannot import {target} ({exc})") from exc
    try:
        return getattr(module, class_name)
    except AttributeError as exc:
        raise MemfarmError(f"system {spec!r}: {target} has no {class_name}") from exc


def make_system(name: str, **settings):
    """Build a system by name (settings it does not take are dropped) or `file.py:Class` / `module:Class`."""
    info = SYSTEMS.get(name)
    if info is None:
        from adapters.systems.http_client import is_http_system
        from adapters.systems.http_system import HttpSystem

        if is_http_system(name):  # a server: nothing is asked of it until the run needs its info
            return HttpSystem(name)
        if ":" in name:
            return check_contract(_user_class(name)(), name)
        raise MemfarmError(f"unknown system {name!r}; built in: {', '.join(SYSTEMS)}, or path/to/file.py:ClassName, "
                           "or http://HOST:PORT")
    try:
        return info.factory(**{k: v for k, v in settings.items() if k in info.settings and v is not None})
    except ImportError as exc:
        if info.optional:
            raise SystemUnavailable(str(exc)) from exc
        raise
    except ValueError as exc:
        raise MemfarmError(f"system {name}: {exc}") from exc


def describe(system) -> dict:
    """What the manifest discloses about a system: its own `config`, or at least its name and class (and no
    retrieval mode: a class that declares none has none, rather than its name standing in for one)."""
    config = config_of(system)
    if isinstance(config, dict) and config:
        return {"name": system.name, **config}
    return {"name": system.name, "retrieval_mode": None,
            "class": f"{type(system).__module__}.{type(system).__qualname__}"}

