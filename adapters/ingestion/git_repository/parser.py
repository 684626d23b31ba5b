"""Reads a local Git repository: tracked and untracked-not-ignored files, Python symbols via ast.

A repository is untrusted content. Its own configuration can name programs that git runs
(`core.fsmonitor`, hooks), so every git call switches those off and ignores GIT_* overrides
from the caller's environment; and its working tree can hold symlinks (a tracked folder
replaced by a link to `/`), so every file is read through `ConfinedRoot` and nothing outside
the repository is opened.
"""

from __future__ import annotations

import ast
import logging
import os
import subprocess
from pathlib import Path, PurePosixPath

from adapters.ingestion.confined import ConfinedRoot, RefusedFile
from adapters.ingestion.git_repository.models import DirectoryInfo, FileInfo, RepositoryInfo, SkippedFile, SymbolInfo

logger = logging.getLogger(__name__)

#: Files larger than this are skipped (and listed as such): source files are small, generated blobs are not.
DEFAULT_MAX_FILE_BYTES = 256 * 1024
#: Seconds one git call may take before ingestion gives up on the repository.
GIT_TIMEOUT_S = 60
#: Configuration given on every git call; command-line config wins over the repository's own.
#: No fsmonitor program and no hooks run, no untracked cache is written into the index.
GIT_SAFE_CONFIG = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.untrackedCache=false")
LANGUAGES = {".py": "python", ".md": "markdown", ".rst": "rst", ".txt": "text", ".toml": "toml", ".json": "json",
             ".yml": "yaml", ".yaml": "yaml", ".js": "javascript", ".ts": "typescript", ".go": "go", ".rs": "rust",
             ".c": "c", ".h": "c", ".cpp": "cpp", ".java": "java", ".sh": "shell", ".cfg": "ini", ".ini": "ini"}


def git_environment() -> dict[str, str]:
    """The caller's environment without GIT_* (GIT_DIR, GIT_CONFIG_*, GIT_EXTERNAL_DIFF... all redirect git),
    with the system config, terminal prompts, optional index locks and the pager switched off."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_PAGER="cat")
    return env


def git_command(root: Path, *args: str) -> list[str]:
    """The hardened argv for `git args` in `root`.

    `--work-tree` pins the working tree to the repository itself (a `core.worktree` in the
    repository's config could point it anywhere); `-C` keeps git's own discovery and with it
    the safe.directory ownership check.
    """
    return ["git", "--no-pager", "--no-optional-locks", *GIT_SAFE_CONFIG, "-C", str(root), f"--work-tree={root}",
            *args]


def _git(root: Path, *args: str) -> bytes:
    try:
        proc = subprocess.run(git_command(root, *args), capture_output=True, stdin=subprocess.DEVNULL,
                              env=git_environment(), timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"git {' '.join(args)} took longer than {GIT_TIMEOUT_S} s") from exc
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode("utf-8", "replace").strip() or f"git {' '.join(args)} failed")
    return proc.stdout


class GitRepositoryParser:
    def __init__(self, root: str | Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES):
        self.root = Path(root)
        self.confined = ConfinedRoot(self.root, "repository")
        self.max_file_bytes = max_file_bytes
        self.skipped: list[SkippedFile] = []
        self._files: list[FileInfo] | None = None
        self._symbols: list[SymbolInfo] | None = None

    def repository(self) -> RepositoryInfo:
        try:
            commit = _git(self.confined.root, "rev-parse", "--verify", "-q", "HEAD").decode().strip() or None
        except RuntimeError:
            commit = None  # a repository without commits yet
        try:
            branch = _git(self.confined.root, "rev-parse", "--abbrev-ref", "HEAD").decode().strip() or None
        except RuntimeError:
            branch = None
        return RepositoryInfo(name=self.confined.root.name, root=str(self.confined.root), commit=commit,
                              branch=branch, file_count=len(self.files()))

    def discover(self) -> list[str]:
        """Repository-relative paths git knows or would add: .gitignore is honoured.

        A name that is not UTF-8 cannot become JSON metadata: it is listed in `skipped` instead.
        """
        listing = _git(self.confined.root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        paths = set()
        for raw in {p for p in listing.split(b"\0") if p}:
            try:
                paths.add(raw.decode("utf-8"))
            except UnicodeDecodeError:
                self.skipped.append(SkippedFile(raw.decode("utf-8", "backslashreplace"), "file name is not UTF-8"))
        return sorted(paths)

    def files(self) -> list[FileInfo]:
        """Readable text files; each path passed over is in `skipped` with its reason."""
        if self._files is not None:
            return self._files
        self.skipped, files = [], []
        listed = self.discover()
        known = set(listed)
        for relative in listed:
            try:
                raw = self._read(relative, known)
            except RefusedFile as exc:
                self.skipped.append(SkippedFile(relative, str(exc)))
                continue
            if b"\0" in raw[:8192]:
                self.skipped.append(SkippedFile(relative, "binary"))
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.skipped.append(SkippedFile(relative, "binary (not UTF-8)"))
                continue
            files.append(FileInfo(path=relative, size=len(raw),
                                  language=LANGUAGES.get(PurePosixPath(relative).suffix.lower()), text=text))
        self._files = files
        return files

    def _read(self, relative: str, known: set[str]) -> bytes:
        """The bytes of a listed path, read only when no symlink lies on its way.

        A link leading outside is refused outright; one staying inside either repeats a file
        read under its own path or reaches one git does not list (ignored, untracked or under
        .git, e.g. a `.env` or `.git/config`), so it is refused as well.
        """
        resolved = self.confined.resolve(relative)
        target = self.confined.relative(resolved)
        if target != relative:
            if target in known:
                raise RefusedFile(f"symlink to {target}, which is read under its own path")
            raise RefusedFile(f"symlink to {target or 'the repository root'}, which git does not list")
        return self.confined.read_bytes(relative, self.max_file_bytes)

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
        """Python classes and functions; a file ast cannot parse is listed in `skipped`, once."""
        if self._symbols is not None:
            return self._symbols
        found = []
        for info in self.files():
            if info.language != "python":
                continue
            try:
                tree = ast.parse(info.text, filename=info.path)
                found += list(_walk(tree.body, info.path, info.text.split("\n"), parent=None, parent_is_class=False))
            except SyntaxError as exc:
                logger.warning("%s: no symbols, not valid Python (line %s)", info.path, exc.lineno)
                self.skipped.append(SkippedFile(info.path, f"symbols skipped: syntax error at line {exc.lineno}"))
            except (ValueError, RecursionError, MemoryError) as exc:
                logger.warning("%s: no symbols (%s)", info.path, exc.__class__.__name__)
                reason = f"symbols skipped: ast cannot parse it ({exc.__class__.__name__})"
                self.skipped.append(SkippedFile(info.path, reason))
        self._symbols = found
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
