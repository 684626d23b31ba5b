"""A run's system settings as a worker takes them from Redis: checked like any other input.

Whoever holds a worker's Redis password can rewrite a run's metadata, so nothing in it is trusted
for where a worker writes: a path is the worker's own to choose (its embedding store lies in its
cache dir, `workers.farm.tasks`), and a run that names one outside that dir is refused. Every other
setting is typed and bounded by the description the command line is built from
(`adapters.systems.settings`; the engine's own settings by `memoria.settings.MemoriaSettings`), and a
setting the system does not take is refused, so a rewritten run fails with a line that names the
field instead of reaching the system's constructor.
"""

from __future__ import annotations

import numbers
from dataclasses import fields
from pathlib import Path

from adapters.errors import MemfarmError
from adapters.systems import SYSTEMS
from adapters.systems.contract import SystemInfo
from adapters.systems.settings import BY_NAME, Kind, Setting
from memoria.errors import SettingsError
from memoria.settings import MemoriaSettings
from workers.farm.config import WorkerConfig

_ENGINE_FIELDS = frozenset(spec.name for spec in fields(MemoriaSettings))


def checked_settings(meta: dict, config: WorkerConfig) -> dict:
    """The run's `system_settings`, each checked against this worker's `config`; MemfarmError names the
    field and what is wrong with it. A user's system (`file.py:Class`) is built with no arguments: none."""
    settings = meta.get("system_settings")
    if not isinstance(settings, dict):
        raise MemfarmError(f"run setting system_settings: expected an object, got {type(settings).__name__}")
    info = SYSTEMS.get(meta.get("system"))
    if info is None:
        return {}
    checked = {}
    for name, value in settings.items():
        if name not in info.settings:
            raise MemfarmError(f"run setting {name!r}: system {info.name} takes no such setting")
        if value is not None:
            checked[name] = _checked(BY_NAME[name], value, config, info) if name in BY_NAME else value
    try:
        MemoriaSettings().updated(**{k: v for k, v in checked.items() if k in _ENGINE_FIELDS})
    except SettingsError as exc:
        raise MemfarmError(f"run setting {exc.field}: {exc.problem}") from None
    return checked


def _checked(setting: Setting, value, config: WorkerConfig, system: SystemInfo):
    """`value` of a described setting, checked by its kind; the engine checks the rest (and the weights)."""
    name = setting.name
    if setting.kind is Kind.COUNT:
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < setting.minimum:
            raise MemfarmError(f"run setting {name}: expected a whole number of at least {setting.minimum}, "
                               f"got {value!r}")
        return int(value)
    if setting.kind is Kind.CHOICE:  # a system's own values sorted, fixed ones in their order
        allowed = setting.allowed(system)
        return _choice(name, value, sorted(allowed) if setting.system_choices else allowed)
    if setting.kind is Kind.MODEL:
        return _embedder(value, config.embedder)
    if setting.kind is Kind.PARTS:
        if not isinstance(value, (list, tuple)) or not all(isinstance(part, str) for part in value):
            raise MemfarmError(f"run setting {name}: expected a list of part names, got {value!r}")
        return tuple(value)
    if setting.kind is Kind.STORE:
        return str(_own_path(name, value, config.cache_dir))
    return value  # the weights: MemoriaSettings checks them


def _embedder(value, own: str | None) -> str:
    """A packaged model's name; a folder only where this worker was started with that folder (a run never picks
    what a worker loads from its disk)."""
    from memoria.model_files import PACKAGED_EMBEDDERS

    if isinstance(value, str) and value in PACKAGED_EMBEDDERS:
        return value
    if isinstance(value, str) and value and value == own:
        return value
    raise MemfarmError(f"run setting embedder: choose from {', '.join(PACKAGED_EMBEDDERS)}, or a folder this worker "
                       f"was started with (--embedder), got {value!r}")


def _choice(name: str, value, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise MemfarmError(f"run setting {name}: choose from {', '.join(choices)}, got {value!r}")
    return value


def _own_path(name: str, value, cache_dir: str | None) -> Path:
    """`value` as a path inside this worker's cache dir; refused anywhere else (links and `..` resolved)."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise MemfarmError(f"run setting {name}: expected a path, got {value!r}")
    if not cache_dir:
        raise MemfarmError(f"run setting {name}: the path {value!r} is not in this worker's directories (it has no "
                           "cache dir); a run cannot choose where a worker writes")
    own, path = Path(cache_dir).resolve(), Path(value).resolve()
    if not path.is_relative_to(own):
        raise MemfarmError(f"run setting {name}: the path {value!r} lies outside this worker's cache dir {own}; "
                           "a run cannot choose where a worker writes")
    return path
