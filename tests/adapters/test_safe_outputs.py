"""Generators and converters write a new file and rename it over a regular one: never through a link, never
truncating an earlier output on failure, and a size beyond the bound refused before anything is touched."""

import json
import math
import os
import resource
import subprocess
import sys

import pytest
from click.testing import CliRunner

from adapters.errors import DatasetError, MemfarmError
from adapters.files import replacing, write_json
from adapters.generators.longmemeval_s import write_array
from coordinator.cli import main


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture()
def victim(tmp_path):
    """A file a link points at: what must survive."""
    path = tmp_path / "precious.txt"
    path.write_text("keep me\n")
    return path


@pytest.fixture()
def locomo_file(tmp_path, locomo_path):
    """The first conversation of the real LoCoMo file."""
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(json.loads(open(locomo_path).read())[:1]))
    return path


def _link(tmp_path, victim, name="out.json"):
    link = tmp_path / name
    link.symlink_to(victim)
    return link


@pytest.mark.parametrize("command", [
    lambda out, locomo: ["synth", "longmemeval", "--questions", 2, "--scale", 0.1, "--output", out],
    lambda out, locomo: ["synth", "longmemeval", "--shape", "m", "--questions", 2, "--sessions", 8, "--output", out],
    lambda out, locomo: ["convert", "locomo-longmemeval", locomo, out],
    lambda out, locomo: ["convert", "locomo", locomo, out],
    lambda out, locomo: ["extract-questions", "--input", locomo, "--output", out],
])
def test_an_output_that_is_a_link_is_refused_and_its_target_untouched(tmp_path, victim, locomo_file, command):
    link = _link(tmp_path, victim)
    result = _invoke(*command(link, locomo_file))
    assert result.exit_code == 2, result.output
    assert f"{link}: is a symbolic link; refusing to write" in result.output
    assert victim.read_text() == "keep me\n" and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locomo.json", "out.json", "precious.txt"]


def test_a_regular_output_is_replaced_with_its_mode_kept(tmp_path, locomo_file):
    out = tmp_path / "converted.json"
    out.write_text("old")
    out.chmod(0o640)
    assert _invoke("convert", "locomo-longmemeval", locomo_file, out).exit_code == 0
    assert json.loads(out.read_text()) and (out.stat().st_mode & 0o777) == 0o640


def test_a_failure_part_way_leaves_the_earlier_output_whole_and_no_stray_file(tmp_path):
    out = tmp_path / "gen.json"
    out.write_text('["earlier"]\n')

    def values():
        yield {"q": 1}
        raise RuntimeError("disk full, say")

    with pytest.raises(RuntimeError):
        write_array(out, values())
    assert out.read_text() == '["earlier"]\n' and [p.name for p in tmp_path.iterdir()] == ["gen.json"]


def test_a_special_file_is_refused_and_write_json_refuses_a_link(tmp_path, victim):
    with pytest.raises(MemfarmError, match="is not a regular file"):
        with replacing(tmp_path):
            pass
    with pytest.raises(MemfarmError, match="is a symbolic link"):
        write_json(_link(tmp_path, victim, "r.json"), {"a": 1})
    assert victim.read_text() == "keep me\n"


def _limited(args, gigabytes=3):
    """The command line in a process that may map at most `gigabytes` (a run-away allocation ends in MemoryError
    there, not on the machine)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (gigabytes << 30, gigabytes << 30))
    return subprocess.run([sys.executable, "-m", "coordinator.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=300, preexec_fn=limit)


@pytest.mark.parametrize("args", [["--shape", "m", "--sessions", 50_000_000],
                                  ["--shape", "m", "--questions", 1100, "--sessions", 476],
                                  ["--questions", 20_000]])
def test_a_size_past_the_bound_is_refused_before_the_output_is_touched(tmp_path, args):
    out = tmp_path / "m.json"
    out.write_text('["earlier"]\n')
    done = _limited(["synth", "longmemeval", *args, "--output", out])
    assert done.returncode == 2, done.stderr[-2000:]
    assert "a generated file holds at most 500,000" in done.stderr and "Traceback" not in done.stderr
    assert out.read_text() == '["earlier"]\n'


def test_a_session_number_of_5000_digits_is_a_clear_error_naming_the_field(tmp_path, locomo_file):
    conversation = json.loads(locomo_file.read_text())[0]
    conversation["conversation"]["session_" + "9" * 5000] = []
    source = tmp_path / "locomo.json"
    source.write_text(json.dumps([conversation]))
    for command in (["convert", "locomo-longmemeval", source, tmp_path / "a.json"],
                    ["convert", "locomo", source, tmp_path / "b.jsonl"]):
        result = _invoke(*command)
        assert result.exit_code == 2, result.output
        assert "field session_9999" in result.output and conversation["sample_id"] in result.output
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "b.jsonl").exists()


def test_a_file_with_nothing_to_convert_is_an_error_and_writes_nothing(tmp_path, locomo_file):
    conversation = json.loads(locomo_file.read_text())[0]
    conversation["qa"] = []
    source = tmp_path / "locomo.json"
    source.write_text(json.dumps([conversation]))
    for command, target in ((["convert", "locomo-longmemeval"], tmp_path / "a.json"),
                            (["convert", "locomo"], tmp_path / "b.jsonl")):
        result = _invoke(*command, source, target)
        assert result.exit_code == 2, result.output
        assert "nothing" in result.output or "no query" in result.output or "no question" in result.output
        assert not target.exists()
    with pytest.raises(DatasetError):
        from adapters.generators.locomo_to_longmemeval import write
        write(source, tmp_path / "c.json")


@pytest.mark.parametrize("share", [0.01, 0.015, 0.02, 0.3, 0.804, 0.99])
def test_the_distinct_share_asked_for_is_the_one_solved_for_even_below_0_02(share):
    from adapters.generators.longmemeval_s import _draws_per_session

    x = _draws_per_session(share)
    assert (1 - math.exp(-x)) / x == pytest.approx(share, rel=1e-6)
