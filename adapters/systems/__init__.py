"""Systems under test: anything with `name`, `reset()`, `ingest(docs)`, `retrieve(label, query, top_k)`.

The runner owns everything else: isolation, opaque ids, tasks built from a
whitelist, the shared top_k, rejecting bad hits, scoring. Built in: `memoria`
(any mode) and `adamem` (any ablation); optional: `mem0`. A user's own system
is `path/to/file.py:ClassName` or `package.module:ClassName`, built with no
arguments.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from memoria.errors import MemfarmError

CONTRACT = ("reset", "ingest", "retrieve")
BUILT_IN = ("memoria", "adamem", "mem0")


class SystemUnavailable(MemfarmError):
    """An optional system whose package is not installed."""


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


def check_contract(system, spec: str):
    missing = [m for m in CONTRACT if not callable(getattr(system, m, None))]
    if missing or not isinstance(getattr(system, "name", None), str):
        raise MemfarmError(f"system {spec!r} does not implement the contract: needs a str `name` and "
                           f"{', '.join(CONTRACT)} (missing {', '.join(missing) or 'name'})")
    return system


def make_system(name: str, mode: str = "fusion", **options):
    """Build a system by name or `file.py:Class` / `module:Class`; options a system does not take are ignored."""
    if name == "memoria":
        from adapters.systems.memoria_system import MemoriaSystem

        keep = {k: v for k, v in options.items() if k in ("batch_size", "max_workers", "weights", "without", "mmr_lambda")}
        return MemoriaSystem(mode=mode, **keep)
    if name == "adamem":
        from adapters.systems.adamem import ABLATIONS, AdaMemSystem

        ablation = options.get("ablation") or "full"
        if ablation not in ABLATIONS:
            raise ValueError(f"unknown AdaMem ablation {ablation!r}; choose from {', '.join(ABLATIONS)}")
        return AdaMemSystem(ablation=ablation)
    if name == "mem0":
        try:
            from adapters.systems.mem0_system import Mem0System

            return Mem0System()
        except ImportError as exc:
            raise SystemUnavailable(str(exc)) from exc
    if ":" in name:
        return check_contract(_user_class(name)(), name)
    raise ValueError(f"unknown system {name!r}; built in: {', '.join(BUILT_IN)}, or path/to/file.py:ClassName")


def describe(system) -> dict:
    """What the manifest discloses about a system: its own `config`, or at least its name and class."""
    config = getattr(system, "config", None)
    if isinstance(config, dict) and config:
        return {"name": system.name, **config}
    return {"name": system.name, "retrieval_mode": system.name,
            "class": f"{type(system).__module__}.{type(system).__qualname__}"}
