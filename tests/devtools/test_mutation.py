"""`make bench-mutation`: the Lua mutator's mutants, the report's arithmetic, and one small real run."""

import ast
import json
import re
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from devtools.__main__ import devtools
from devtools.mutation import LUA_SCRIPTS, REPO, lua_mutants, mutation_report


def test_every_lua_mutant_changes_one_line_of_one_script_and_still_parses():
    source = (REPO / "workers" / "farm" / "ledger_scripts.py").read_text(encoding="utf-8")
    mutants = lua_mutants(source)
    assert len(mutants) > 30
    original = source.splitlines()
    for script, description, mutated in mutants:
        assert script in LUA_SCRIPTS
        changed = [i for i, (a, b) in enumerate(zip(original, mutated.splitlines())) if a != b]
        assert len(changed) == 1 and len(mutated.splitlines()) == len(original), description
        ast.parse(mutated)
    descriptions = [d for _, d, _ in mutants]
    # the attempt cap and the state guards are among the changes
    assert any("used > tonumber(ARGV[6]) then -> if used >= tonumber(ARGV[6]) then" in d for d in descriptions)
    assert any(re.search(r"'started' then return 0 end -> .*'started' then return 0 end", d) for d in descriptions)
    assert any(d.endswith("removed") and "DEL" in d for d in descriptions)


def test_the_report_counts_timeouts_as_killed_and_lists_survivors():
    scope = {"A": ("m.x_f__*",), "B": ("m.x_g__*",)}
    python = {"m.x_f__mutmut_1": "killed", "m.x_f__mutmut_2": "survived", "m.x_g__mutmut_1": "timeout",
              "m.x_g__mutmut_2": "no tests"}
    lua = [{"script": "_BEGIN", "mutant": "line 3", "status": "killed"},
           {"script": "_FAIL", "mutant": "line 4", "status": "survived"}]
    report = mutation_report(python, lua, scope, {"m.x_f__mutmut_2": "-a\n+b"})
    assert report["areas"]["A"] == {"made": 2, "killed": 1, "survived": 1, "timeouts": 0, "other": 0,
                                    "killed_share": 0.5}
    assert report["areas"]["B"]["killed"] == 1 and report["areas"]["B"]["other"] == 1
    assert report["total"]["made"] == 6 and report["total"]["killed"] == 3 and report["total"]["survived"] == 2
    assert [s["mutant"] for s in report["survivors"]] == ["m.x_f__mutmut_2", "_FAIL line 4"]
    assert report["survivors"][0]["diff"] == "-a\n+b"


@pytest.mark.slow
def test_a_small_mutation_run_writes_its_report(tmp_path, monkeypatch):
    temp = tmp_path / "temp"  # this process's temp dir for the run: the bench's scratch copy is made in here
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    made, mkdtemp = [], tempfile.mkdtemp

    def recording_mkdtemp(*args, **kwargs):
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    out = tmp_path / "mutation.json"
    result = CliRunner().invoke(devtools, ["mutation", "--area", "RRF", "--lua-limit", "2", "--output", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    rrf, lua = report["areas"]["RRF"], report["areas"]["ledger (Lua)"]
    assert rrf["made"] >= 10 and rrf["killed"] + rrf["survived"] + rrf["other"] == rrf["made"]
    assert rrf["killed_share"] >= 0.9  # the RRF tests pin the formula, the tie order and the default constant
    assert lua["made"] == 2 and lua["killed"] == 2
    assert "RRF" in result.output and "killed %" in result.output
    scratch = [Path(p) for p in made if Path(p).name.startswith("memfarm-mutation-")]
    assert [p.parent for p in scratch] == [temp], f"one scratch copy, made in the temp dir: {made}"
    assert not scratch[0].exists() and list(temp.iterdir()) == [], "the scratch copy is removed"
