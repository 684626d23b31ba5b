"""`make bench-mutation`: how many small wrong changes to the scoring and bookkeeping code the tests notice.

Two mutators, one report:

- Python: `mutmut` mutates the metric code, the official profile, RRF, the
  gold and abstention rules and the ledger's Python side, and runs the tests
  that cover each mutated function.
- Lua: the ledger's transitions are Lua scripts, which mutmut does not touch;
  each comparison, literal and `redis.call` of those scripts is changed one at
  a time here and the ledger's tests are run against a real redis-server.

Everything runs in a scratch copy of the repository, never in the checkout.
A mutant is killed when a test fails; it survives when every test passes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

from adapters.files import write_json

REPO = Path(__file__).resolve().parent.parent

#: Area -> mutmut mutant-name patterns (module.x_function or module.xǁClassǁmethod).
PYTHON_SCOPE = {
    "metrics": ("adapters.metrics.*",),
    "official profile": ("adapters.benchmarks.longmemeval.official.*",),
    "RRF": ("memoria.rrf.*",),
    "gold": ("adapters.benchmarks.longmemeval.reader.xǁLongMemEvalǁ_question__mutmut_*", "adapters.benchmarks.longmemeval.reader.x_first_answer_turn__*",
             "adapters.benchmarks.locomo.reader.xǁLoCoMoǁ_question__mutmut_*", "adapters.benchmarks.locomo.reader.x_normalise_evidence__*",
             "adapters.benchmarks.locomo.reader.x_session_of__*"),
    "abstention": ("adapters.benchmarks.longmemeval.reader.x_abstention_reason__*",),
    "ledger (Python)": ("workers.farm.ledger.xǁLedgerǁbegin__*", "workers.farm.ledger.xǁLedgerǁheartbeat__*",
                        "workers.farm.ledger.xǁLedgerǁfinish__*", "workers.farm.ledger.xǁLedgerǁfail__*",
                        "workers.farm.ledger.x_stale_after__*"),
}
PYTHON_FILES = ("adapters/metrics.py", "adapters/benchmarks/longmemeval/official.py", "memoria/rrf.py", "adapters/benchmarks/longmemeval/reader.py",
                "adapters/benchmarks/locomo/reader.py", "workers/farm/ledger.py")
#: The tests mutmut may pick from (it runs, per mutant, those that cover the mutated function).
TESTS = ("tests/adapters/benchmarks/longmemeval/test_official.py", "tests/adapters/test_metrics.py", "tests/adapters/test_records.py",
         "tests/adapters/benchmarks/longmemeval/test_reader.py", "tests/adapters/benchmarks/locomo/test_reader.py", "tests/memoria/test_rrf.py",
         "tests/workers/farm/test_ledger.py")

LUA_SCRIPTS = ("BEGIN", "HEARTBEAT", "FINISH", "FAIL")
#: (pattern, replacement) applied at one match at a time.
LUA_OPERATORS = ((r" > ", " >= "), (r" < ", " <= "), (r" == ", " ~= "), (r" ~= ", " == "), (r"'1'", "'0'"),
                 (r"(?<!\[)(?<!return )\b1\b(?!\])", "2"), (r"'done'", "'failed'"), (r"'failed_final'", "'failed'"),
                 (r"'started'", "'queued'"), (r"\bnot state\b", "state"))
LUA_TESTS = ("tests/workers/farm/test_ledger.py",)


def scratch_copy(target: Path) -> Path:
    """The repository's files (tracked and not ignored) copied under `target`."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.split("\n")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _environment() -> dict:
    shared = os.environ.get("MEMFARM_SHARED_DATA", str(REPO.parent / "shared" / "data"))
    return {**os.environ, "MEMFARM_SHARED_DATA": shared, "PYTHONDONTWRITEBYTECODE": "1"}


def run_mutmut(workdir: Path, scope: dict[str, tuple[str, ...]], files, tests, timeout: float) -> dict[str, str]:
    """{mutant name: status} for the mutants in `scope`, from mutmut run in `workdir`."""
    config = ("\n[tool.mutmut]\n"
              'source_paths = ["adapters/", "memoria/", "workers/"]\n'
              f"only_mutate = {json.dumps(list(files))}\n"
              f"pytest_add_cli_args_test_selection = {json.dumps(list(tests))}\n"
              'pytest_add_cli_args = ["-m", "not slow", "-p", "no:cacheprovider", "-q"]\n'
              'also_copy = ["coordinator/", "tests/", "memoria/", "workers/", "adapters/"]\n')
    with open(workdir / "pyproject.toml", "a", encoding="utf-8") as handle:
        handle.write(config)
    mutmut = [sys.executable, "-c", "import sys; from mutmut.__main__ import cli; sys.exit(cli())"]
    patterns = [p for patterns in scope.values() for p in patterns]
    subprocess.run(mutmut + ["run", *patterns], cwd=workdir, env=_environment(), timeout=timeout,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    listing = subprocess.run(mutmut + ["results", "--all", "true"], cwd=workdir, env=_environment(),
                             capture_output=True, text=True, timeout=300).stdout
    statuses = {}
    for line in listing.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and any(fnmatch(name, p) for p in patterns):
            statuses[name] = status
    return statuses


def show_mutant(workdir: Path, name: str) -> str:
    """The diff of one mutant, as mutmut shows it (only the changed lines)."""
    mutmut = [sys.executable, "-c", "import sys; from mutmut.__main__ import cli; sys.exit(cli())"]
    diff = subprocess.run(mutmut + ["show", name], cwd=workdir, env=_environment(), capture_output=True, text=True,
                          timeout=120).stdout
    return "\n".join(line for line in diff.splitlines()
                     if line[:1] in "+-" and not line.startswith(("+++", "---")))


def lua_mutants(source: str) -> list[tuple[str, str, str]]:
    """(script, description, mutated module source) for every one-place change of the ledger's Lua scripts."""
    mutants = []
    for script in LUA_SCRIPTS:
        match = re.search(rf'^{script} = """\n(.*?)"""', source, re.S | re.M)
        body, start = match.group(1), match.start(1)
        lines = body.split("\n")
        offset = 0
        for number, line in enumerate(lines, start=1):
            for pattern, replacement in LUA_OPERATORS:
                for found in re.finditer(pattern, line):
                    changed = line[:found.start()] + replacement + line[found.end():]
                    mutants.append((script, f"line {number}: {line.strip()} -> {changed.strip()}",
                                    source[:start + offset] + changed + source[start + offset + len(line):]))
            if line.strip().startswith("redis.call(") and line.count("(") == line.count(")"):
                removed = "-- " + line
                mutants.append((script, f"line {number}: {line.strip()} removed",
                                source[:start + offset] + removed + source[start + offset + len(line):]))
            offset += len(line) + 1
    return mutants


def run_lua_mutants(workdir: Path, tests, timeout_each: float, limit: int | None = None) -> list[dict]:
    ledger = workdir / "workers" / "farm" / "ledger_scripts.py"
    original = ledger.read_text(encoding="utf-8")
    results = []
    try:
        for script, description, mutated in lua_mutants(original)[:limit]:
            ledger.write_text(mutated, encoding="utf-8")
            try:
                code = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                                      cwd=workdir, env=_environment(), capture_output=True,
                                      timeout=timeout_each).returncode
                status = "killed" if code != 0 else "survived"
            except subprocess.TimeoutExpired:
                status = "timeout"
            results.append({"script": script, "mutant": description, "status": status})
    finally:
        ledger.write_text(original, encoding="utf-8")
    return results


def _area(name: str, scope) -> str:
    return next(area for area, patterns in scope.items() if any(fnmatch(name, p) for p in patterns))


def mutation_report(python: dict[str, str], lua: list[dict], scope, diffs: dict[str, str]) -> dict:
    rows: dict[str, Counter] = {}
    for name, status in python.items():
        rows.setdefault(_area(name, scope), Counter())[status] += 1
    for mutant in lua:
        rows.setdefault("ledger (Lua)", Counter())[mutant["status"]] += 1

    def summary(counts: Counter) -> dict:
        made = sum(counts.values())
        # a timeout counts as killed: the mutant made a test hang, which a run would notice
        killed = counts["killed"] + counts["timeout"]
        return {"made": made, "killed": killed, "survived": counts["survived"], "timeouts": counts["timeout"],
                "other": made - killed - counts["survived"], "killed_share": killed / made if made else None}

    total = sum(rows.values(), Counter())
    survivors = [{"area": _area(n, scope), "mutant": n, "diff": diffs.get(n, "")}
                 for n, s in sorted(python.items()) if s == "survived"]
    survivors += [{"area": "ledger (Lua)", "mutant": f"{m['script']} {m['mutant']}", "diff": ""}
                  for m in lua if m["status"] == "survived"]
    return {"areas": {area: summary(counts) for area, counts in sorted(rows.items())}, "total": summary(total),
            "survivors": survivors, "statuses": dict(sorted(python.items()))}


def mutation_bench(output: str | Path, *, scope=None, tests=TESTS, lua_tests=LUA_TESTS, lua_limit: int | None = None,
                   timeout: float = 3600, keep: bool = False) -> dict:
    """Run both mutators in a scratch copy and write the report; returns it."""
    scope = scope or PYTHON_SCOPE
    files = [f for f in PYTHON_FILES if any(p.startswith(f[:-3].replace("/", ".") + ".") for ps in scope.values()
                                            for p in ps)]
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="memfarm-mutation-"))
    try:
        scratch_copy(workdir)
        python = run_mutmut(workdir, scope, files, tests, timeout) if files else {}
        diffs = {name: show_mutant(workdir, name) for name, status in python.items() if status == "survived"}
        lua = run_lua_mutants(workdir, lua_tests, timeout_each=120, limit=lua_limit) if lua_limit != 0 else []
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    report = {"bench": "mutation", "tool": "mutmut (Python) + memfarm's Lua mutator (ledger scripts)",
              "tests": list(tests), "lua_tests": list(lua_tests), **mutation_report(python, lua, scope, diffs),
              "seconds": round(time.perf_counter() - started, 1), "workdir": str(workdir) if keep else None}
    write_json(output, report)
    return report


def render(report: dict) -> str:
    head = f"{'area':<20}{'made':>6}{'killed':>8}{'survived':>10}{'killed %':>10}"
    lines = [head, "-" * len(head)]
    for area, row in list(report["areas"].items()) + [("all", report["total"])]:
        share = f"{100 * row['killed_share']:.1f}" if row["killed_share"] is not None else "-"
        lines.append(f"{area:<20}{row['made']:>6}{row['killed']:>8}{row['survived']:>10}{share:>10}")
    if report["survivors"]:
        lines += ["", "survivors:"]
        for survivor in report["survivors"]:
            diff = survivor["diff"].replace("\n", " | ")
            lines.append(f"  [{survivor['area']}] {survivor['mutant']}" + (f"  {diff}" if diff else ""))
    return "\n".join(lines)
