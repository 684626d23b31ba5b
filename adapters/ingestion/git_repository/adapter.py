"""GitRepositoryAdapter: a local Git repository as repository, directory, file and symbol records."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from adapters.ingestion.git_repository.parser import DEFAULT_MAX_FILE_BYTES, GitRepositoryParser
from adapters.ingestion.records import SourceAdapter, existing_folder, validate_record

#: Symbol and file texts are cut here: the embedder reads 256 tokens anyway, BM25 keeps the head.
MAX_TEXT_CHARS = 8000


class GitRepositoryAdapter(SourceAdapter):
    source_name = "git"

    def __init__(self, repo: str | Path, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES):
        repo = existing_folder(repo, "repository")
        if not (repo / ".git").exists():
            raise ValueError(f"not a Git repository (no .git): {repo}")
        self.root = repo
        self.parser = GitRepositoryParser(repo, max_file_bytes=max_file_bytes)
        self._info = None

    def _repo_info(self):
        if self._info is None:
            self._info = self.parser.repository()
        return self._info

    def _base(self, record_type: str, path: str) -> dict:
        info = self._repo_info()
        return {"source": self.source_name, "record_type": record_type, "repository": info.name,
                "commit": info.commit, "path": path}

    def repository(self) -> list[dict]:
        info = self._repo_info()
        text = (f"Repository {info.name}" + (f" at commit {info.commit[:12]}" if info.commit else " (no commits)")
                + f" on branch {info.branch or 'unknown'}: {info.file_count} text files.")
        return [validate_record({"text": text, "metadata": {**self._base("repository", ""), "branch": info.branch,
                                                            "file_count": info.file_count}})]

    def directories(self) -> list[dict]:
        out = []
        for folder in self.parser.directories():
            name = folder.path or "(repository root)"
            text = (f"Directory {name} holds files {', '.join(Path(f).name for f in folder.files) or 'none'}"
                    f" and folders {', '.join(Path(d).name for d in folder.subdirectories) or 'none'}.")
            out.append(validate_record({"text": text, "metadata": {**self._base("directory", folder.path),
                                                                   "files": folder.files,
                                                                   "subdirectories": folder.subdirectories}}))
        return out

    def files(self) -> list[dict]:
        out = []
        for info in self.parser.files():
            text = f"File {info.path}\n\n{info.text}"[:MAX_TEXT_CHARS]
            out.append(validate_record({"text": text, "metadata": {**self._base("file", info.path), "size": info.size,
                                                                   "language": info.language,
                                                                   "filename": Path(info.path).name}}))
        return out

    def symbols(self) -> list[dict]:
        out = []
        for symbol in self.parser.symbols():
            header = f"{symbol.symbol_type.replace('_', ' ')} {symbol.qualified_name} in {symbol.path}"
            header += f" (lines {symbol.line_start}-{symbol.line_end})"
            if symbol.bases:
                header += f", bases {', '.join(symbol.bases)}"
            text = f"{header}\n{symbol.docstring or ''}\n{symbol.source}"[:MAX_TEXT_CHARS]
            out.append(validate_record({"text": text, "metadata": {
                **self._base("symbol", symbol.path), "name": symbol.name, "qualified_name": symbol.qualified_name,
                "symbol_type": symbol.symbol_type, "line_start": symbol.line_start, "line_end": symbol.line_end,
                "parent": symbol.parent, "bases": symbol.bases, "language": "python"}}))
        return out

    def iter_records(self) -> Iterator[dict]:
        """Repository, then directories, files and symbols, each kind in path order."""
        yield from self.repository()
        yield from self.directories()
        yield from self.files()
        yield from self.symbols()

    def stats(self) -> dict:
        records = self.records()
        kinds = {kind: sum(1 for r in records if r["metadata"]["record_type"] == kind)
                 for kind in ("repository", "directory", "file", "symbol")}
        return {"source": self.source_name, "repository": self._repo_info().name, "commit": self._repo_info().commit,
                "records": len(records), **{f"{k}_records": v for k, v in kinds.items()},
                "skipped": [{"path": s.path, "reason": s.reason} for s in self.parser.skipped]}
