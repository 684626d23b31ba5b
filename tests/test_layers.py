"""The layers point down (coordinator -> workers -> adapters -> memoria), and so do the sub-packages inside each
(`SUBLAYERS`); memoria stands alone, no module imports itself through others, and no product module outgrows what
one reader holds in mind."""

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("memoria", "adapters", "workers", "coordinator")  # bottom first
#: Developer tools above the product: they may import any layer, and nothing imports them.
TOOLS = ("devtools",)
#: Lines a product module may have.
MAX_MODULE_LINES = 450
#: Within a layer, its sub-packages in ranks, bottom first. A module may import the layer's own modules (those
#: directly in it), its own sub-package and any of a lower rank; the layer's own modules import no sub-package. A
#: new sub-package is placed here, or the check names it.
SUBLAYERS = {
    "memoria": (),
    "adapters": (("benchmarks", "ingestion"), ("generators", "systems")),
    "workers": (("item",), ("farm",)),
    # results (the typed results files and what reads them) below running (what makes them): the reducer writes
    # through the one writer, and nothing that reads a results file needs the executor
    "coordinator": (("operations",), ("results",), ("running",), ("benches", "board"), ("cli",)),
}
#: Imports against SUBLAYERS that stand until the change that ends each: (importing module or sub-package,
#: imported sub-package) -> why it is still there. Remove an entry with its import.
KNOWN_SUBLAYER_IMPORTS: dict = {}


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
    problems, order = [], LAYERS + TOOLS
    for rank, layer in enumerate(order):
        for path in sorted((root / layer).rglob("*.py")):
            for package, line in imported_packages(path, root):
                if package in order and order.index(package) > rank:
                    problems.append(f"{path.relative_to(root)}:{line} imports {package} (a higher layer)")
    return problems


def imported_modules(path: Path, root: Path = REPO) -> set[tuple[str, int]]:
    """Every module (or name inside one) this file imports, dotted and absolute, with its line."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {(alias.name, node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found |= {(f"{base}.{alias.name}", node.lineno) for alias in node.names}
    return found


def sublayer_violations(root: Path = REPO, sublayers=SUBLAYERS, known=KNOWN_SUBLAYER_IMPORTS) -> list[str]:
    """Imports of a sub-package beside or above the importer's own, or from a layer's own modules; and every
    sub-package that `sublayers` does not place."""
    problems = set()
    for layer, ranks in sublayers.items():
        rank = {sub: position + 1 for position, group in enumerate(ranks) for sub in group}
        subs = {p.relative_to(root / layer).parts[0] for p in (root / layer).rglob("*.py")
                if len(p.relative_to(root / layer).parts) > 1}
        problems |= {f"{layer}/{sub}: {layer}.{sub} is in no rank of SUBLAYERS" for sub in subs - set(rank)}
        for path in sorted((root / layer).rglob("*.py")):
            parts = path.relative_to(root / layer).parts
            own = parts[0] if len(parts) > 1 else None
            module = _module_name(path, root)
            for name, line in imported_modules(path, root):
                dotted = name.split(".")
                target = dotted[1] if len(dotted) > 2 and dotted[0] == layer else None
                if target not in subs or target == own or target not in rank or (own and own not in rank):
                    continue
                if any((module == who or module.startswith(f"{who}.")) and f"{layer}.{target}" == what
                       for who, what in known):
                    continue
                where = f"{path.relative_to(root)}:{line} imports {layer}.{target}"
                if own is None:
                    problems.add(f"{where} (a sub-package; the layer's own modules import none)")
                elif rank[target] >= rank[own]:
                    problems.add(f"{where} (not below {layer}.{own})")
    return sorted(problems)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = REPO, packages=LAYERS + TOOLS) -> dict[str, set[str]]:
    """Module -> the modules it imports, at module level or inside functions.

    `import a.b.c` and `from a.b import c` point at `a.b.c` where that is a module, else at the nearest
    enclosing module that exists. The parent packages Python runs first are not edges: a package's
    `__init__` that imports its own submodules would otherwise make every submodule a cycle.
    """
    files = {_module_name(p, root): p for package in packages for p in sorted((root / package).rglob("*.py"))}

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets |= {known(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                for alias in node.names:
                    targets.add(known(f"{base}.{alias.name}") if f"{base}.{alias.name}" in files else known(base))
        graph[module] = {t for t in targets if t and t != module}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted, in sorted order."""
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def oversized_modules(root: Path = REPO, limit: int = MAX_MODULE_LINES) -> list[str]:
    return [f"{path.relative_to(root)}: {lines} lines" for layer in LAYERS
            for path in sorted((root / layer).rglob("*.py"))
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > limit]


def test_no_import_cycles():
    assert import_cycles(import_graph()) == []


def test_the_check_catches_a_cycle_hidden_in_a_function(tmp_path):
    shutil.copytree(REPO / "memoria", tmp_path / "memoria")
    for other in LAYERS[1:] + TOOLS:
        (tmp_path / other).mkdir()
    assert import_cycles(import_graph(tmp_path)) == []
    store = tmp_path / "memoria" / "store.py"
    store.write_text(store.read_text() + "\n\ndef _late():\n    from memoria.engine import MemoryInterface\n")
    cycles = import_cycles(import_graph(tmp_path))
    assert cycles and all("memoria.store" in c and "memoria.engine" in c for c in cycles[:1])


def test_the_check_catches_a_relative_import_cycle(tmp_path):
    (tmp_path / "adapters" / "pkg").mkdir(parents=True)
    (tmp_path / "adapters" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "adapters" / "pkg" / "a.py").write_text("from . import b\n")
    (tmp_path / "adapters" / "pkg" / "b.py").write_text("def f():\n    from .a import thing\n")
    (tmp_path / "adapters" / "pkg" / "c.py").write_text("from adapters.pkg import a\n")
    assert import_cycles(import_graph(tmp_path, ("adapters",))) == [["adapters.pkg.a", "adapters.pkg.b"]]


def test_no_product_module_is_over_the_limit():
    assert oversized_modules() == []


def test_the_size_check_catches_a_long_module(tmp_path):
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    (tmp_path / "workers" / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "workers" / "fits.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert oversized_modules(tmp_path) == [f"workers/long.py: {MAX_MODULE_LINES + 1} lines"]


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


def test_no_module_imports_a_sub_package_beside_or_above_its_own():
    assert sublayer_violations() == []


def test_the_check_catches_a_sub_package_importing_sideways_or_up(tmp_path):
    for folder in ("cli", "running", "results", "benches", "board", "operations", "extra"):
        (tmp_path / "coordinator" / folder).mkdir(parents=True)
        (tmp_path / "coordinator" / folder / "__init__.py").write_text("")
    for layer in LAYERS[:-1]:
        (tmp_path / layer).mkdir()
    (tmp_path / "coordinator" / "cli" / "top.py").write_text("from coordinator.results import analyze\n")
    (tmp_path / "coordinator" / "running" / "fine.py").write_text("from coordinator.results import run_files\n")
    (tmp_path / "coordinator" / "results" / "late.py").write_text(
        "def f():\n    from coordinator.running.reducer import reduce\n")  # a running <-> results cycle
    (tmp_path / "coordinator" / "board" / "side.py").write_text("from ..benches import common\n")
    (tmp_path / "coordinator" / "base.py").write_text("import coordinator.operations.processes\n")
    (tmp_path / "coordinator" / "extra" / "new.py").write_text("from coordinator import base\n")
    assert sublayer_violations(tmp_path, known={}) == [
        "coordinator/base.py:1 imports coordinator.operations (a sub-package; the layer's own modules import none)",
        "coordinator/board/side.py:1 imports coordinator.benches (not below coordinator.board)",
        "coordinator/extra: coordinator.extra is in no rank of SUBLAYERS",
        "coordinator/results/late.py:2 imports coordinator.running (not below coordinator.results)",
    ]


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
