"""`memfarm run` and `submit` offer one option per Memoria setting marked `option`, built from its field."""

import json
from dataclasses import fields, make_dataclass

import click
import pytest
from click.testing import CliRunner

from adapters.benchmarks.longmemeval.reader import extract_questions
from coordinator.cli import main
from coordinator.cli.run import settings_options, spec_from
from memoria import defaults
from memoria.settings import MemoriaSettings, default_of, setting
from tests.helpers import write_dataset

OFFERED = [spec for spec in fields(MemoriaSettings) if spec.metadata["option"]]


@pytest.mark.parametrize("command", ["run", "submit"])
def test_each_setting_marked_option_is_an_option_and_no_other_setting_is(command):
    params = {param.name: param for param in main.commands[command].params}
    assert {name for name in params if name in {spec.name for spec in fields(MemoriaSettings)}} == \
        {spec.name for spec in OFFERED}
    for spec in OFFERED:
        param, scope = params[spec.name], "full: " if spec.metadata["ranked"] else ""
        assert param.opts == [f"--{spec.name.replace('_', '-')}"] and param.default is None
        assert (param.type.min, param.type.max) == (spec.metadata["minimum"], spec.metadata["maximum"])
        assert param.help.startswith(f"{scope}{spec.metadata['doc']} (default {default_of(spec)}")
    assert params["window_size"].help == (f"full: turns per window (default {defaults.DEFAULT_WINDOW_SIZE}; used "
                                          "where --weights gives `window` a weight).")
    assert params["feedback_terms"].help == f"full: feedback words searched (default {defaults.DEFAULT_FEEDBACK_TERMS})."


def test_a_setting_added_to_a_copy_of_the_settings_becomes_an_option():
    extended = make_dataclass("Extended", [
        ("rerank_depth", int, setting(7, "candidates the reranker reads", minimum=2, ranked=True, option=True)),
        ("rerank_seed", int, setting(1, "not offered on the command line", minimum=0)),
    ], bases=(MemoriaSettings,), frozen=True)

    def probe(**params):
        click.echo(json.dumps(params))

    for option in reversed(settings_options(extended)):
        probe = option(probe)
    probe = click.command()(probe)
    assert [param.name for param in probe.params] == [spec.name for spec in OFFERED] + ["rerank_depth"]
    assert probe.params[-1].help == "full: candidates the reranker reads (default 7)."
    assert json.loads(CliRunner().invoke(probe, ["--rerank-depth", "3"]).output)["rerank_depth"] == 3
    assert CliRunner().invoke(probe, ["--rerank-depth", "1"]).exit_code == 2


def test_every_option_reaches_the_spec_its_record_and_the_engine(tmp_path):
    data = write_dataset(tmp_path / "d.json", questions=2, seed=1, scale=0.05)
    extract_questions(data, tmp_path / "q.json")
    weights = tmp_path / "w.json"  # windows are built only where they weigh something
    weights.write_text(json.dumps({**defaults.DEFAULT_WEIGHTS, "window": 0.2}))
    chosen = {spec.name: default_of(spec) + 1 for spec in OFFERED}
    args = ["longmemeval", "--dataset", str(data), "--questions", str(tmp_path / "q.json"), "--retrieval-mode", "full",
            "--weights", str(weights)]
    for name, value in chosen.items():
        args += [f"--{name.replace('_', '-')}", str(value)]
    ctx = main.commands["run"].make_context("run", args)
    spec = spec_from(ctx, "memfarm run", dict(ctx.params), farm=False)
    assert spec.memoria_settings == chosen and spec.check(farm=False) == []
    assert {name: spec.arguments()[name] for name in chosen} == chosen
    system = spec.make_system()
    assert {name: getattr(system.settings, name) for name in chosen} == chosen
    assert {name: getattr(system.memory, name) for name in chosen} == chosen


def test_a_missing_dataset_is_named_with_where_the_benchmark_comes_from(tmp_path):
    result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(tmp_path / "locomo10.json")])
    assert result.exit_code == 2
    assert "does not exist" in result.output and "snap-research/LoCoMo" in result.output, result.output


def test_threads_are_set_for_a_local_run_and_refused_for_a_farm(tmp_path, locomo_path, monkeypatch):
    import os

    import torch

    monkeypatch.setenv("MEMFARM_TORCH_THREADS", "")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # both come back as they were after the test
    before = torch.get_num_threads()
    try:
        result = CliRunner().invoke(main, ["run", "locomo", "--dataset", str(locomo_path), "--limit", "1",
                                           "--system", "recency", "--threads", "1",
                                           "--output", str(tmp_path / "r.json")])
        assert result.exit_code == 0, result.output
        assert torch.get_num_threads() == 1 and os.environ["MEMFARM_TORCH_THREADS"] == "1"
    finally:
        torch.set_num_threads(before)
    for command in (["run", "--broker", "redis://127.0.0.1:1/0"], ["submit", "--broker", "redis://127.0.0.1:1/0"]):
        refused = CliRunner().invoke(main, [command[0], "locomo", "--dataset", str(locomo_path), *command[1:],
                                            "--threads", "2"])
        assert refused.exit_code == 2 and "--threads is for local runs" in refused.output


def test_doctor_warns_when_a_runs_threads_would_oversubscribe_the_cores():
    from coordinator.operations.doctor import busy_cores

    assert busy_cores(2, load=6.3, cores=2).startswith("load 6.3 on 2 cores")
    assert busy_cores(2, load=0.4, cores=2) is None
    assert busy_cores(1, load=9.0, cores=2) is None, "one thread oversubscribes nothing"
