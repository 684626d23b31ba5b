"""The layers point down: coordinator -> workers -> adapters -> memoria, and memoria stands alone."""

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("memoria", "adapters", "workers", "coordinator")  # bottom first


def imported_packages(path: Path, root: Path = REPO) -> set[tuple[str, int]]:
    """Every top-level package this file imports (module level or inside functions), with its line."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {(alias.name.split(".")[0], node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.module.split(".")[0], node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.add((path.relative_to(root).parts[0], node.lineno))  # relative: its own package
    return found


def layer_violations(root: Path = REPO) -> list[str]:
    problems = []
    for rank, layer in enumerate(LAYERS):
        for path in sorted((root / layer).rglob("*.py")):
            for package, line in imported_packages(path, root):
                if package in LAYERS and LAYERS.index(package) > rank:
                    problems.append(f"{path.relative_to(root)}:{line} imports {package} (a higher layer)")
    return problems


def test_no_module_imports_from_a_higher_layer():
    assert layer_violations() == []


def test_the_check_catches_an_upward_import(tmp_path):
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    (tmp_path / "memoria" / "bad.py").write_text("def f():\n    from adapters.errors import MemfarmError\n")
    (tmp_path / "adapters" / "worse.py").write_text("import coordinator.cli\n")
    (tmp_path / "workers" / "fine.py").write_text("from adapters import records\nimport memoria\n")
    assert layer_violations(tmp_path) == ["memoria/bad.py:2 imports adapters (a higher layer)",
                                          "adapters/worse.py:1 imports coordinator (a higher layer)"]


def test_memoria_alone_imports_and_recalls(tmp_path):
    """A copy of memoria/ with every other package of this repository made unimportable."""
    shutil.copytree(REPO / "memoria", tmp_path / "memoria")
    code = textwrap.dedent("""
        import importlib.abc, sys
        class Refuse(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("adapters", "workers", "coordinator", "tests"):
                    raise ImportError(f"{name} is not part of the engine")
        sys.meta_path.insert(0, Refuse())
        sys.path.insert(0, sys.argv[1])
        import pkgutil, importlib
        import memoria
        assert memoria.__file__.startswith(sys.argv[1]), memoria.__file__
        for module in pkgutil.iter_modules(memoria.__path__):
            importlib.import_module(f"memoria.{module.name}")
        from memoria import BatchLoader, MemoryInterface
        memory = MemoryInterface()
        texts = ["the cat sat on the mat", "stock prices fell sharply", "rain is due on tuesday"]
        BatchLoader(memory).insert_batch(texts, [{"n": n} for n in range(3)], skip_embedding=True)
        hits = memory.recall("where did the cat sit", mode="bm25", limit=3)["results"]
        print(hits[0]["metadata"]["n"], len(hits))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "1"]
