"""The package route beside the checkout: a wheel built from the tree installs, and its `memfarm` runs a
benchmark and builds a board from any folder, importing nothing from the checkout."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_wheel_of_the_tree_installs_and_its_memfarm_runs_from_another_folder(tmp_path):
    # built from a copy of what the wheel is made of, so the build's own folders are not left in the checkout
    source = tmp_path / "source"
    for name in ("pyproject.toml", "README.md"):
        (source / name).parent.mkdir(exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    for package in ("memoria", "adapters", "workers", "coordinator"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                            "--wheel-dir", str(tmp_path / "dist"), str(source)],
                           capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("memoria_farm-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    # the four packages and the data they read at run time; nothing that needs a checkout or root
    for needed in ("coordinator/cli/__init__.py", "memoria/engine.py", "workers/farm/tasks.py",
                   "adapters/weights/realmem.json", "adapters/systems/http-systems.openapi.yaml"):
        assert needed in names, needed
    assert any(n.startswith("coordinator/board/static/") and n.endswith(".css") for n in names)
    assert not [n for n in names if n.split("/")[0] in ("tests", "devtools", "tools", "docs", "examples")]

    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
                                str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    memfarm = site / "bin" / "memfarm"
    assert memfarm.is_file(), "the console script is installed with the package"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # the wheel's packages come first on the path (the checkout's editable install would serve them otherwise)
    env = {**os.environ, "PYTHONPATH": str(site), "CI": os.environ.get("CI", "")}

    def memfarm_run(*args):
        done = subprocess.run([sys.executable, str(memfarm), *args], capture_output=True, text=True,
                              cwd=elsewhere, env=env, timeout=300)
        assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
        return done

    where = subprocess.run([sys.executable, "-c", "import coordinator, memoria; print(coordinator.__file__); "
                            "print(memoria.__file__)"], capture_output=True, text=True, cwd=elsewhere, env=env)
    assert all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout
    memfarm_run("synth", "longmemeval", "--questions", "2", "--scale", "0.02", "--seed", "3", "--output", "lme.json")
    memfarm_run("run", "longmemeval", "--dataset", "lme.json", "--system", "recency", "--output", "out.json")
    assert json.loads((elsewhere / "out.json").read_text())["question_count"] == 2
    memfarm_run("board", "out.json", "--output", "board")
    assert (elsewhere / "board" / "index.html").is_file() and list((elsewhere / "board").rglob("*.css"))
