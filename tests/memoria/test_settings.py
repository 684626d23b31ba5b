"""MemoriaSettings: each setting once, checked where it is built, and the engine built from it."""

import re
from dataclasses import fields
from types import SimpleNamespace

import pytest

from memoria import MemoryInterface, defaults
from memoria.errors import MemoriaError, SettingsError
from memoria.settings import MemoriaSettings, default_of

EMBEDDER = SimpleNamespace(dimension=4)  # the constructor reads only the dimension


def _other_value(spec):
    """A valid value that differs from the field's default, whatever its kind."""
    default = default_of(spec)
    if isinstance(default, bool):
        return not default
    if isinstance(default, dict):
        return {name: weight + 0.5 for name, weight in default.items()}
    if isinstance(default, str):
        return next(choice for choice in spec.metadata["choices"] if choice != default)
    if isinstance(default, float):
        return default / 2
    return default + 1


def test_every_setting_has_one_line_of_doc_and_holds_its_own_default_weights():
    for spec in fields(MemoriaSettings):
        doc = spec.metadata["doc"]
        assert doc and "\n" not in doc, spec.name
    assert MemoriaSettings().weights == defaults.DEFAULT_WEIGHTS
    assert MemoriaSettings().weights is not defaults.DEFAULT_WEIGHTS  # each holds its own


def test_the_engine_takes_every_setting_as_an_attribute_of_its_name():
    chosen = {spec.name: _other_value(spec) for spec in fields(MemoriaSettings)}
    memory = MemoryInterface(embedder=EMBEDDER, settings=MemoriaSettings(**chosen))
    assert {name: getattr(memory, name) for name in chosen} == chosen
    assert all(chosen[spec.name] != default_of(spec) for spec in fields(MemoriaSettings))
    by_name = MemoryInterface(embedder=EMBEDDER, feedback_terms=7, window_size=0)
    assert (by_name.feedback_terms, by_name.window_size, by_name.session_top_n) == (
        7, 0, defaults.DEFAULT_SESSION_TOP_N)


def test_the_engine_and_the_settings_keep_their_own_weights():
    given = {"semantic": 1.0}
    settings = MemoriaSettings(weights=given)
    memory = MemoryInterface(embedder=EMBEDDER, settings=settings)
    given["semantic"] = 9.0
    memory.weights["token"] = 2.0  # tuned in place, as the tests and benches do
    assert settings.weights == {"semantic": 1.0} and MemoriaSettings().weights == defaults.DEFAULT_WEIGHTS


@pytest.mark.parametrize("name, value, message", [
    ("feedback_turns", 0, "must be at least 1, got 0"),
    ("feedback_terms", 2.5, "expected int"),
    ("window_size", -1, "must be at least 0"),
    ("window_overlap", 6, "window size 6 with overlap 6"),
    ("mmr_lambda", 1.5, "must be at most 1.0"),
    ("budget_ms", float("nan"), "expected a finite number"),
    ("candidate_pool", True, "expected int"),
    ("speaker_strip", "yes", "expected bool"),
    ("policy", "first_k", "choose from all, deadline"),
    ("weights", {"semantc": 1.0}, "unknown signals ['semantc']"),
    ("weights", {"semantic": "high"}, "signal semantic needs a finite number"),
    ("weights", [("semantic", 1.0)], "expected {signal: number}"),
])
def test_a_bad_value_is_refused_with_the_name_of_its_setting(name, value, message):
    with pytest.raises(SettingsError, match=re.escape(message)) as caught:
        MemoriaSettings(**{name: value})
    assert caught.value.field == name and str(caught.value).startswith(f"Memoria setting {name}: ")
    assert isinstance(caught.value, MemoriaError) and isinstance(caught.value, ValueError)
    with pytest.raises(SettingsError, match=f"Memoria setting {name}: {re.escape(message)}"):
        MemoryInterface(embedder=EMBEDDER, **{name: value})


def test_a_name_that_is_no_setting_is_refused_by_name():
    with pytest.raises(SettingsError, match="Memoria setting feedback_words: no such setting") as caught:
        MemoryInterface(embedder=EMBEDDER, feedback_words=3)
    assert caught.value.field == "feedback_words"
    assert MemoriaSettings().updated(rrf_k=10).rrf_k == 10
