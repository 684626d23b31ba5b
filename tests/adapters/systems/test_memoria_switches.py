"""Memoria's `full` parts each have a switch, and the manifest's system block says how each is set."""

import pytest

from adapters.systems.memoria_system import MemoriaSystem
from memoria import defaults


def test_each_new_part_of_full_can_be_switched_off_and_the_config_says_so():
    full = MemoriaSystem(mode="full")
    assert full.memory.window_size == defaults.DEFAULT_WINDOW_SIZE and "window" in full.sources
    ranking = full.config["ranking"]
    assert ranking["session_top_n"] == defaults.DEFAULT_SESSION_TOP_N and ranking["switched_off"] == []
    assert full.config["windows"] == {"size": defaults.DEFAULT_WINDOW_SIZE, "overlap": defaults.DEFAULT_WINDOW_OVERLAP,
                                      "turn_chars": defaults.DEFAULT_WINDOW_TURN_CHARS}
    for part in defaults.RANKING_SWITCHES:
        off = MemoriaSystem(mode="full", without=(part,))
        assert off.memory.weights[part] == 0.0 and off.config["ranking"]["switched_off"] == [part]
        assert off.sources == full.sources  # a ranking part is no source
    no_windows = MemoriaSystem(mode="full", without=("window",))
    assert no_windows.memory.window_size == 0 and "window" not in no_windows.sources
    assert MemoriaSystem(mode="full", window_size=4, window_overlap=2, session_top_n=5).config["windows"]["size"] == 4


def test_modes_without_the_window_source_build_no_windows_and_refuse_ranking_switches():
    assert MemoriaSystem(mode="fusion").memory.window_size == 0
    with pytest.raises(ValueError, match="no sources or ranking parts"):
        MemoriaSystem(mode="fusion", without=("session",))
    with pytest.raises(ValueError, match="no sources or ranking parts"):
        MemoriaSystem(mode="full", without=("cross_encoder",))
