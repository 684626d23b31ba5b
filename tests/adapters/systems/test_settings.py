"""A system's settings are described once: the command line, the spec and a worker's check all read it."""

from dataclasses import fields, replace

import click
import pytest
from click.testing import CliRunner

from adapters.systems import SYSTEMS
from adapters.systems.settings import BY_NAME, SETTINGS, Kind, Setting
from coordinator.cli import main
from coordinator.cli.run import system_option
from coordinator.running.spec import RunSpec
from memoria.settings import MemoriaSettings
from workers.farm import run_settings
from workers.farm.config import WorkerConfig


def test_every_described_setting_is_a_spec_field_with_the_description_s_default():
    spec_fields = {field.name: field for field in fields(RunSpec)}
    for setting in SETTINGS:
        assert setting.option in spec_fields, f"{setting.name}: RunSpec has no field {setting.option}"
        assert getattr(RunSpec("locomo", dataset="d.json"), setting.option) == setting.default


def test_every_setting_a_system_takes_is_described_or_the_engine_s():
    engine = {field.name for field in fields(MemoriaSettings)}
    for info in SYSTEMS.values():
        assert set(info.settings) <= set(BY_NAME) | engine, info.name


@pytest.mark.parametrize("command", ["run", "submit"])
def test_each_described_setting_is_an_option_spelled_defaulted_and_explained_by_it(command):
    params = {param.name: param for param in main.commands[command].params}
    for setting in SETTINGS:
        param = params[setting.option]
        assert setting.flag in param.opts and param.help == setting.help_for(SYSTEMS.values())
        if setting.kind is not Kind.PARTS:  # a repeated option's default is click's own empty tuple
            assert param.default == setting.default
    every_mode = sorted({mode for info in SYSTEMS.values() for mode in info.modes})
    assert list(params["retrieval_mode"].type.choices) == every_mode


def test_a_setting_added_to_the_description_is_an_option_and_the_worker_checks_it(monkeypatch):
    depth = Setting("rerank_depth", "rerank_depth", Kind.COUNT, minimum=2,
                    help="Candidates the reranker reads.")

    @click.command()
    @system_option(depth)
    def probe(rerank_depth):
        click.echo(rerank_depth)

    assert CliRunner().invoke(probe, ["--rerank-depth", "3"]).output == "3\n"
    assert CliRunner().invoke(probe, ["--rerank-depth", "1"]).exit_code == 2
    monkeypatch.setitem(run_settings.BY_NAME, depth.name, depth)
    monkeypatch.setitem(run_settings.SYSTEMS, "memoria", replace(SYSTEMS["memoria"], settings=(
        *SYSTEMS["memoria"].settings, depth.name)))
    meta = {"system": "memoria", "system_settings": {"rerank_depth": 1}}
    with pytest.raises(Exception, match="run setting rerank_depth: expected a whole number of at least 2"):
        run_settings.checked_settings(meta, WorkerConfig())


def test_a_per_machine_setting_is_sent_only_where_the_run_chose_it(tmp_path):
    plain = RunSpec("locomo", dataset="d.json").system_settings()
    assert not {"embedder", "embedder_backend", "max_seq_length", "embedding_store"} & set(plain)
    chosen = RunSpec("locomo", dataset="d.json", embedder="mpnet", embedder_backend="onnx", max_seq_length=64,
                     cache_dir=str(tmp_path)).system_settings()
    assert (chosen["embedder"], chosen["embedder_backend"], chosen["max_seq_length"]) == ("mpnet", "onnx", 64)
    assert chosen["embedding_store"] == str(tmp_path.resolve() / "embeddings.sqlite")
