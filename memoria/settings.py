"""MemoriaSettings: every setting of the engine once, with its default, one line on what it sets, and its bounds.

The engine is built from one. A harness derives the rest from these fields: the system's arguments,
what a run records, and the command-line options (the fields marked `option`), so a setting added
here reaches all of them. The defaults themselves, and why they are what they are, live in
`memoria.defaults`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field, fields
from types import MappingProxyType

from memoria import defaults
from memoria.errors import SettingsError
from memoria.scheduler import POLICIES
from memoria.windows import check_window


def setting(default, doc: str, *, minimum=None, maximum=None, choices=None, ranked: bool = False,
            option: bool = False):
    """A field of the settings: its default and `doc`, one line on what it sets, kept in the field's metadata.

    `minimum` / `maximum` bound a number, `choices` a string. `ranked`: only a ranked mode
    (`defaults.RANKED_MODES`) uses it. `option`: a harness offers it as a command-line option.
    """
    metadata = MappingProxyType({"doc": doc, "minimum": minimum, "maximum": maximum, "choices": choices,
                                 "ranked": ranked, "option": option})
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def default_of(spec: dataclasses.Field):
    """A field's default value (a fresh copy where the default is a mapping)."""
    return spec.default_factory() if spec.default is dataclasses.MISSING else spec.default


@dataclass(frozen=True)
class MemoriaSettings:
    """Everything that changes what the engine retrieves, checked when built (`SettingsError` names the field)."""

    candidate_pool: int = setting(defaults.DEFAULT_CANDIDATE_POOL,
                                  "candidates each source contributes before fusion or merging", minimum=1)
    rrf_k: int = setting(defaults.DEFAULT_RRF_K, "the constant k of Reciprocal Rank Fusion", minimum=0)
    weights: dict = setting(defaults.DEFAULT_WEIGHTS, "weight of each ranking signal (a signal left out weighs 0)",
                            ranked=True)
    mmr_lambda: float = setting(defaults.DEFAULT_MMR_LAMBDA, "MMR trade-off, 1.0 for relevance only",
                                minimum=0.0, maximum=1.0, ranked=True)
    mmr_window: int = setting(defaults.DEFAULT_MMR_WINDOW, "top candidates MMR may reorder", minimum=0, ranked=True)
    policy: str = setting(defaults.DEFAULT_SCHEDULER_POLICY, "how a recall waits for its sources", choices=POLICIES)
    budget_ms: float = setting(defaults.DEFAULT_SOURCE_BUDGET_MS, "milliseconds a recall waits for its sources",
                               minimum=0.0)
    graph_seeds: int = setting(defaults.DEFAULT_GRAPH_SEEDS, "seeds the graph source expands from", minimum=0,
                               ranked=True)
    window_size: int = setting(defaults.DEFAULT_WINDOW_SIZE, "turns per window", minimum=0, ranked=True,
                               option=True)
    window_overlap: int = setting(defaults.DEFAULT_WINDOW_OVERLAP, "turns neighbouring windows share", minimum=0,
                                  ranked=True, option=True)
    window_turn_chars: int = setting(defaults.DEFAULT_WINDOW_TURN_CHARS, "characters of each turn in a window",
                                     minimum=1, ranked=True)
    max_pieces: int = setting(defaults.DEFAULT_MAX_PIECES, "sentence vectors a turn keeps at most (0: none)",
                              minimum=0, ranked=True, option=True)
    sentence_head: int = setting(defaults.DEFAULT_SENTENCE_HEAD,
                                 "best candidates of a first ranking whose sentence pieces are read (0: every one)",
                                 minimum=0, ranked=True, option=True)
    session_top_n: int = setting(defaults.DEFAULT_SESSION_TOP_N, "a session scores the mean of its best N turns",
                                 minimum=1, ranked=True, option=True)
    feedback_turns: int = setting(defaults.DEFAULT_FEEDBACK_TURNS, "best turns that give feedback words", minimum=1,
                                  ranked=True, option=True)
    feedback_terms: int = setting(defaults.DEFAULT_FEEDBACK_TERMS, "feedback words searched", minimum=1, ranked=True,
                                  option=True)
    speaker_strip: bool = setting(defaults.DEFAULT_SPEAKER_STRIP,
                                  "encode the question without the names of the memory's speakers", ranked=True)
    frame_strip: bool = setting(defaults.DEFAULT_FRAME_STRIP,
                                "search the question without the phrases that frame it by the conversation",
                                ranked=True)

    def __post_init__(self):
        for spec in fields(self):
            _check(spec, getattr(self, spec.name))
        try:
            check_window(self.window_size, self.window_overlap)
        except ValueError as exc:
            raise SettingsError("window_overlap", str(exc)) from None
        object.__setattr__(self, "weights", dict(self.weights))  # the caller's dict stays the caller's

    def updated(self, **values) -> MemoriaSettings:
        """These settings with `values` changed by field name; a name that is no setting is refused."""
        names = [spec.name for spec in fields(self)]
        unknown = [name for name in values if name not in names]
        if unknown:
            raise SettingsError(unknown[0], f"no such setting; the settings are {', '.join(names)}")
        return dataclasses.replace(self, **values)

    def as_dict(self) -> dict:
        """{field name: value}, plain data (the weights a copy)."""
        return {spec.name: _copy(getattr(self, spec.name)) for spec in fields(self)}


def _copy(value):
    return dict(value) if isinstance(value, dict) else value


def _check(spec: dataclasses.Field, value) -> None:
    """Refuse a value of the wrong kind or out of the field's bounds, naming the field."""
    kind, meta = type(default_of(spec)), spec.metadata
    if kind is dict:
        _check_weights(spec.name, value)
        return
    if kind is bool:
        fits = isinstance(value, bool)
    elif kind is int:
        fits = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    elif kind is float:
        fits = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    else:
        fits = isinstance(value, kind)
    if not fits:
        raise SettingsError(spec.name, f"expected {'a finite number' if kind is float else kind.__name__}, "
                                       f"got {value!r}")
    if meta["minimum"] is not None and value < meta["minimum"]:
        raise SettingsError(spec.name, f"must be at least {meta['minimum']}, got {value!r}")
    if meta["maximum"] is not None and value > meta["maximum"]:
        raise SettingsError(spec.name, f"must be at most {meta['maximum']}, got {value!r}")
    if meta["choices"] is not None and value not in meta["choices"]:
        raise SettingsError(spec.name, f"choose from {', '.join(meta['choices'])}, got {value!r}")


def _check_weights(name: str, weights) -> None:
    """Weights name known signals (those `defaults.DEFAULT_WEIGHTS` lists) and give each a finite number."""
    if not isinstance(weights, dict):
        raise SettingsError(name, f"expected {{signal: number}}, got {weights!r}")
    unknown = sorted(str(signal) for signal in weights if signal not in defaults.DEFAULT_WEIGHTS)
    if unknown:
        raise SettingsError(name, f"unknown signals {unknown}; known: {sorted(defaults.DEFAULT_WEIGHTS)}")
    for signal, weight in weights.items():
        if not isinstance(weight, numbers.Real) or isinstance(weight, bool) or not math.isfinite(weight):
            raise SettingsError(name, f"signal {signal} needs a finite number, got {weight!r}")
