import subprocess

import pytest
from click.testing import CliRunner

from adapters.ingestion.git_repository import GitRepositoryAdapter
from coordinator.cli import main


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin"})


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "shop"
    (root / "shop" / "billing").mkdir(parents=True)
    (root / "build").mkdir()
    (root / "shop" / "__init__.py").write_text('"""The shop package."""\n')
    (root / "shop" / "billing" / "__init__.py").write_text("")
    (root / "shop" / "billing" / "invoice.py").write_text(
        "import dataclasses\n\n\n"
        "class Base:\n    pass\n\n\n"
        "@dataclasses.dataclass\n"
        "class Invoice(Base, dataclasses.Protocol if False else object):\n"
        '    """An invoice with line items."""\n\n'
        "    number: str\n\n"
        "    def total(self, tax_rate=0.2):\n"
        '        """Sum the lines and add tax."""\n'
        "        def line_sum(lines):\n"
        "            return sum(lines)\n"
        "        return line_sum([]) * (1 + tax_rate)\n\n"
        "    async def send(self):\n        return None\n\n\n"
        "def parse_invoice(text):\n    return Invoice(text)\n"
    )
    (root / "shop" / "broken.py").write_text("def oops(:\n")
    (root / "README.md").write_text("# Shop\nA tiny shop with invoices.\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build" / "generated.py").write_text("IGNORED = True\n")
    (root / "debug.log").write_text("ignored\n")
    (root / "logo.bin").write_bytes(b"\x00\x01\x02binary")
    (root / "big.txt").write_text("x" * 5000)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "first")
    (root / "notes.txt").write_text("untracked but not ignored\n")
    return root


def _by_type(records, kind):
    return [r for r in records if r["metadata"]["record_type"] == kind]


def test_discovery_honours_gitignore_binaries_and_size(repo):
    adapter = GitRepositoryAdapter(repo, max_file_bytes=4096)
    files = sorted(r["metadata"]["path"] for r in adapter.files())
    assert files == [".gitignore", "README.md", "notes.txt", "shop/__init__.py", "shop/billing/__init__.py",
                     "shop/billing/invoice.py", "shop/broken.py"]
    skipped = {s["path"]: s["reason"] for s in adapter.stats()["skipped"]}
    assert skipped["logo.bin"] == "binary" and skipped["big.txt"].startswith("larger than 4096")
    assert "syntax error" in skipped["shop/broken.py"]


def test_repository_and_directory_records(repo):
    adapter = GitRepositoryAdapter(repo)
    [repository] = adapter.repository()
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert repository["metadata"]["commit"] == commit and repository["metadata"]["repository"] == "shop"
    dirs = {d["metadata"]["path"]: d["metadata"] for d in adapter.directories()}
    assert set(dirs) == {"", "shop", "shop/billing"}
    assert dirs["shop"]["subdirectories"] == ["shop/billing"]
    assert "shop/billing/invoice.py" in dirs["shop/billing"]["files"]


def test_python_symbols_with_qualified_names_lines_bases_and_parents(repo):
    symbols = {s["metadata"]["qualified_name"]: s["metadata"] for s in GitRepositoryAdapter(repo).symbols()}
    assert set(symbols) == {"Base", "Invoice", "Invoice.total", "Invoice.total.line_sum", "Invoice.send",
                            "parse_invoice"}
    invoice = symbols["Invoice"]
    assert invoice["symbol_type"] == "class" and invoice["bases"] == ["Base", "dataclasses.Protocol if False else object"]
    assert (invoice["line_start"], invoice["line_end"]) == (9, 21)
    assert symbols["Invoice.total"]["symbol_type"] == "method" and symbols["Invoice.total"]["parent"] == "Invoice"
    assert symbols["Invoice.total.line_sum"]["symbol_type"] == "function"
    assert symbols["Invoice.total.line_sum"]["parent"] == "Invoice.total"
    assert symbols["Invoice.send"]["symbol_type"] == "async_method"
    assert all(s["path"] == "shop/billing/invoice.py" and s["commit"] for s in symbols.values())


def test_iter_records_load_and_stats_agree(repo):
    adapter = GitRepositoryAdapter(repo)
    records = adapter.records()
    assert list(adapter.iter_records()) == records
    inserted = []
    assert adapter.load(lambda t, m: inserted.append(m)) == len(inserted) == len(records)
    with pytest.raises(TypeError):
        adapter.load(None)
    stats = adapter.stats()
    assert stats["records"] == len(records)
    assert (stats["repository_records"], stats["directory_records"], stats["symbol_records"]) == (1, 3, 6)
    assert all(isinstance(r["text"], str) and r["text"] for r in records)


def test_empty_and_invalid_repositories(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q")
    adapter = GitRepositoryAdapter(empty)
    assert adapter.files() == [] and adapter.symbols() == []
    assert adapter.repository()[0]["metadata"]["commit"] is None
    with pytest.raises(FileNotFoundError):
        GitRepositoryAdapter(tmp_path / "missing")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ValueError, match="not a Git repository"):
        GitRepositoryAdapter(plain)


@pytest.mark.slow
def test_ingest_git_then_recall_a_symbol(repo, tmp_path):
    store = tmp_path / "store"
    result = CliRunner().invoke(main, ["ingest", "git", str(repo), "--store", str(store)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["recall", "--store", str(store), "--limit", "3", "how is the invoice total with tax computed"])
    assert result.exit_code == 0, result.output
    assert "shop/billing/invoice.py" in result.output.splitlines()[0]
