"""Systems under test: anything with `name`, `reset()`, `ingest(docs)`, `retrieve(label, query, top_k)`.

The runner owns everything else: isolation, opaque ids, tasks built from a
whitelist, the shared top_k, rejecting bad hits, scoring. Built in: `memoria`
(any mode) and `adamem` (any ablation); optional: `mem0`, `mnem` (its own modes) and `mempalace`. A user's own system
is `path/to/file.py:ClassName` or `package.module:ClassName`, built with no
arguments, or a server in any language, `http://HOST:PORT[/PREFIX]` (`http_system`).
`SYSTEMS` says which settings each built-in system takes, so the command line
can refuse a setting a system would not use.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from adapters.errors import MemfarmError, SystemUnavailable
from adapters.systems.contract import check_contract, config_of
from memoria.settings import MemoriaSettings

@dataclass(frozen=True)
class SystemInfo:
    """A built-in system: where its class is and which run settings it takes."""

    name: str
    factory: str
    #: Settings the factory takes (anything else given on the command line is refused).
    settings: tuple[str, ...]
    #: Whether `--retrieval-mode` means anything to it.
    has_modes: bool = False
    optional: bool = False
    #: The system's own retrieval modes, its default first (empty: the engine's, `memoria.defaults.MODE_SOURCES`).
    modes: tuple[str, ...] = ()


SYSTEMS = {s.name: s for s in (
    SystemInfo("memoria", "adapters.systems.memoria_system:MemoriaSystem",
               ("mode", "batch_size", "max_workers", "without", "max_seq_length", "embedding_store",
                "embedder_backend", "embedder") + tuple(spec.name for spec in fields(MemoriaSettings)),
               has_modes=True),
    SystemInfo("adamem", "adapters.systems.adamem:AdaMemSystem", ("ablation", "max_seq_length")),
    SystemInfo("mem0", "adapters.systems.mem0_system:Mem0System", (), optional=True),
    SystemInfo("mnem", "adapters.systems.mnem_system:MnemSystem",
               ("mode", "embedder", "max_seq_length", "embedder_backend", "batch_size"),
               has_modes=True, optional=True, modes=("hybrid", "dense")),
    SystemInfo("mempalace", "adapters.systems.mempalace_system:MemPalaceSystem",
               ("embedder", "max_seq_length", "embedder_backend", "batch_size"), optional=True),
)}


def modes_of(name: str) -> tuple[str, ...]:
    """The retrieval modes a built-in system takes, its default first (memoria: the engine's)."""
    from memoria import defaults as engine

    info = SYSTEMS[name]
    if info.modes:
        return info.modes
    return (engine.DEFAULT_MODE, *sorted(m for m in engine.MODE_SOURCES if m != engine.DEFAULT_MODE))


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
        from adapters.systems.http_system import HttpSystem, is_http_system

        if is_http_system(name):  # a server: nothing is asked of it until the run needs its info
            return HttpSystem(name)
        if ":" in name:
            return check_contract(_user_class(name)(), name)
        raise MemfarmError(f"unknown system {name!r}; built in: {', '.join(SYSTEMS)}, or path/to/file.py:ClassName, "
                           "or http://HOST:PORT")
    module_name, _, class_name = info.factory.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), class_name)
        return factory(**{k: v for k, v in settings.items() if k in info.settings and v is not None})
    except ImportError as exc:
        if info.optional:
            raise SystemUnavailable(str(exc)) from exc
        raise
    except ValueError as exc:
        raise MemfarmError(f"system {name}: {exc}") from exc


def describe(system) -> dict:
    """What the manifest discloses about a system: its own `config`, or at least its name and class."""
    config = config_of(system)
    if isinstance(config, dict) and config:
        return {"name": system.name, **config}
    return {"name": system.name, "retrieval_mode": system.name,
            "class": f"{type(system).__module__}.{type(system).__qualname__}"}

