"""Reads a local Git repository: tracked and untracked-not-ignored files, Python symbols via ast."""

from __future__ import annotations

import ast
import logging
import subprocess
from pathlib import Path, PurePosixPath

from adapters.sources.git_repository.models import DirectoryInfo, FileInfo, RepositoryInfo, SkippedFile, SymbolInfo

logger = logging.getLogger(__name__)

DEFAULT_MAX_FILE_BYTES = 256 * 1024
LANGUAGES = {".py": "python", ".md": "markdown", ".rst": "rst", ".txt": "text", ".toml": "toml", ".json": "json",
             ".yml": "yaml", ".yaml": "yaml", ".js": "javascript", ".ts": "typescript", ".go": "go", ".rs": "rust",
             ".c": "c", ".h": "c", ".cpp": "cpp", ".java": "java", ".sh": "shell", ".cfg": "ini", ".ini": "ini"}


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or f"git {' '.join(args)} failed")
    return proc.stdout


class GitRepositoryParser:
    def __init__(self, root: str | Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES):
        self.root = Path(root)
        self.max_file_bytes = max_file_bytes
        self.skipped: list[SkippedFile] = []
        self._files: list[FileInfo] | None = None

    def repository(self) -> RepositoryInfo:
        try:
            commit = _git(self.root, "rev-parse", "HEAD").strip()
        except RuntimeError:
            commit = None  # a repository without commits yet
        try:
            branch = _git(self.root, "rev-parse", "--abbrev-ref", "HEAD").strip() or None
        except RuntimeError:
            branch = None
        return RepositoryInfo(name=self.root.resolve().name, root=str(self.root.resolve()), commit=commit,
                              branch=branch, file_count=len(self.files()))

    def discover(self) -> list[str]:
        """Repository-relative paths git knows or would add: .gitignore is honoured."""
        listing = _git(self.root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return sorted({p for p in listing.split("\0") if p})

    def files(self) -> list[FileInfo]:
        if self._files is not None:
            return self._files
        self.skipped, files = [], []
        for relative in self.discover():
            path = self.root / relative
            if not path.is_file() or path.is_symlink():
                continue
            size = path.stat().st_size
            if size > self.max_file_bytes:
                self.skipped.append(SkippedFile(relative, f"larger than {self.max_file_bytes} bytes ({size})"))
                continue
            raw = path.read_bytes()
            if b"\0" in raw[:8192]:
                self.skipped.append(SkippedFile(relative, "binary"))
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.skipped.append(SkippedFile(relative, "binary (not UTF-8)"))
                continue
            files.append(FileInfo(path=relative, size=size, language=LANGUAGES.get(PurePosixPath(relative).suffix.lower()),
                                  text=text))
        self._files = files
        return files

    def directories(self) -> list[DirectoryInfo]:
        folders: dict[str, DirectoryInfo] = {"": DirectoryInfo("")}
        for info in self.files():
            parts = PurePosixPath(info.path).parts
            for depth in range(1, len(parts)):
                parent, child = "/".join(parts[: depth - 1]), "/".join(parts[:depth])
                folders.setdefault(child, DirectoryInfo(child))
                if child not in folders[parent].subdirectories:
                    folders[parent].subdirectories.append(child)
            folders["/".join(parts[:-1])].files.append(info.path)
        return [folders[k] for k in sorted(folders)]

    def symbols(self) -> list[SymbolInfo]:
        found = []
        for info in self.files():
            if info.language != "python":
                continue
            try:
                tree = ast.parse(info.text, filename=info.path)
            except SyntaxError as exc:
                logger.warning("%s: no symbols, not valid Python (line %s)", info.path, exc.lineno)
                self.skipped.append(SkippedFile(info.path, f"symbols skipped: syntax error at line {exc.lineno}"))
                continue
            lines = info.text.split("\n")
            found += list(_walk(tree.body, info.path, lines, parent=None, parent_is_class=False))
        return found


def _walk(nodes, path: str, lines: list[str], parent: SymbolInfo | None, parent_is_class: bool):
    for node in nodes:
        if isinstance(node, ast.ClassDef):
            kind = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            asynchronous = isinstance(node, ast.AsyncFunctionDef)
            kind = ("async_" if asynchronous else "") + ("method" if parent_is_class else "function")
        else:
            continue
        qualified = f"{parent.qualified_name}.{node.name}" if parent else node.name
        end = getattr(node, "end_lineno", node.lineno) or node.lineno
        symbol = SymbolInfo(
            path=path, name=node.name, qualified_name=qualified, symbol_type=kind, line_start=node.lineno,
            line_end=end, parent=parent.qualified_name if parent else None,
            bases=[ast.unparse(b) for b in node.bases] if isinstance(node, ast.ClassDef) else [],
            docstring=ast.get_docstring(node), source="\n".join(lines[node.lineno - 1:end]),
        )
        yield symbol
        yield from _walk(node.body, path, lines, symbol, isinstance(node, ast.ClassDef))
