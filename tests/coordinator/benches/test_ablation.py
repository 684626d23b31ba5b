"""`memfarm bench ablation`: a row for every source and every part of `full`, each building the system it names."""

from adapters.systems.memoria_system import MemoriaSystem
from coordinator.benches.ablation import ABLATION_TRIAL_WEIGHT, ablation_configs
from memoria import defaults


def test_every_source_and_part_of_full_has_a_row_that_builds_what_it_says():
    configs = ablation_configs()
    labels = [label for label, _, _ in configs]
    assert len(labels) == len(set(labels))
    systems = {label: MemoriaSystem(mode=mode, **settings) for label, mode, settings in configs}
    full = systems["full"]
    for source in defaults.MODE_SOURCES["full"]:
        if source == "window":  # weighs nothing by default: its row switches it on
            assert "window" in systems[f"full + window {ABLATION_TRIAL_WEIGHT}"].sources
        else:
            assert set(full.sources) - set(systems[f"full - {source}"].sources) == {source}
    for part in defaults.RANKING_SWITCHES:
        on = defaults.DEFAULT_WEIGHTS[part] > 0
        row = systems[f"full - {part}" if on else f"full + {part} {ABLATION_TRIAL_WEIGHT}"]
        assert row.memory.weights[part] == (0.0 if on else ABLATION_TRIAL_WEIGHT)
    for part in defaults.QUERY_SWITCHES:
        assert getattr(full.memory, part) is True and getattr(systems[f"full - {part}"].memory, part) is False
    bare = systems["full, no new parts"]
    assert all(bare.memory.weights[p] == 0.0 for p in defaults.RANKING_SWITCHES)
    assert not any(getattr(bare.memory, p) for p in defaults.QUERY_SWITCHES)
    assert systems["full, no MMR"].memory.mmr_lambda == 1.0 and systems["fusion"].mode == "fusion"
