"""Memoria's `full` parts each have a switch, and the manifest's system block says how each is set."""

import pytest

from adapters.systems.memoria_system import MemoriaSystem
from memoria import defaults


def test_each_new_part_of_full_can_be_switched_off_and_the_config_says_so():
    with_windows = {**defaults.DEFAULT_WEIGHTS, "window": 0.1}
    full = MemoriaSystem(mode="full", weights=with_windows)
    assert full.memory.window_size == defaults.DEFAULT_WINDOW_SIZE and "window" in full.sources
    ranking = full.config["ranking"]
    assert ranking["session_top_n"] == defaults.DEFAULT_SESSION_TOP_N and ranking["switched_off"] == []
    assert ranking["feedback"] == {"turns": defaults.DEFAULT_FEEDBACK_TURNS, "terms": defaults.DEFAULT_FEEDBACK_TERMS}
    assert full.config["windows"] == {"size": defaults.DEFAULT_WINDOW_SIZE, "overlap": defaults.DEFAULT_WINDOW_OVERLAP,
                                      "turn_chars": defaults.DEFAULT_WINDOW_TURN_CHARS}
    for part in defaults.RANKING_SWITCHES:
        off = MemoriaSystem(mode="full", weights=with_windows, without=(part,))
        assert off.memory.weights[part] == 0.0 and off.config["ranking"]["switched_off"] == [part]
        assert off.sources == full.sources  # a ranking part is no source
    assert full.memory.speaker_strip and ranking["speaker_strip"] is True
    for part in defaults.QUERY_SWITCHES:  # a query part is no weight: switched off, the engine leaves it out
        off = MemoriaSystem(mode="full", weights=with_windows, without=(part,))
        assert getattr(off.memory, part) is False and off.config["ranking"][part] is False
        assert off.memory.weights == full.memory.weights and off.config["ranking"]["switched_off"] == [part]
    no_windows = MemoriaSystem(mode="full", weights=with_windows, without=("window",))
    assert no_windows.memory.window_size == 0 and "window" not in no_windows.sources
    sized = MemoriaSystem(mode="full", weights=with_windows, window_size=4, window_overlap=2, session_top_n=5,
                          feedback_turns=2, feedback_terms=5)
    assert sized.config["windows"]["size"] == 4 and sized.config["ranking"]["session_top_n"] == 5
    assert sized.config["ranking"]["feedback"] == {"turns": 2, "terms": 5}


def test_windows_weighing_nothing_are_neither_built_nor_searched():
    weightless = MemoriaSystem(mode="full", weights={**defaults.DEFAULT_WEIGHTS, "window": 0.0})
    assert weightless.memory.window_size == 0 and "window" not in weightless.sources
    assert weightless.memory.mode_sources["full"] == weightless.sources


def test_modes_without_the_window_source_build_no_windows_and_refuse_ranking_switches():
    assert MemoriaSystem(mode="fusion").memory.window_size == 0
    with pytest.raises(ValueError, match="no sources or ranking parts"):
        MemoriaSystem(mode="fusion", without=("session",))
    with pytest.raises(ValueError, match="no sources or ranking parts"):
        MemoriaSystem(mode="fusion", without=("speaker_strip",))
    with pytest.raises(ValueError, match="no sources or ranking parts"):
        MemoriaSystem(mode="full", without=("cross_encoder",))
