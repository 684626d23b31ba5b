"""Hashes and JSON files: the small helpers every layer of the harness shares.

`file_sha256` is the engine's (`memoria.checksums`), named here too so that the harness finds its
file helpers in one module.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path

from adapters.defaults import MAX_JSON_DEPTH
from adapters.errors import MemfarmError
from adapters.jsonstream import nesting_depth
from adapters.redaction import redact
from memoria.checksums import file_sha256

__all__ = ["content_hash", "dataset_checksums", "dataset_sha256", "file_sha256", "json_files", "read_json", "replacing",
           "write_json"]


def json_files(path: str | Path) -> list[Path]:
    """The files a `--dataset` names: the file itself, or each `*.json` file of a folder, by name."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
    if not files:
        raise MemfarmError(f"{path}: the folder holds no *.json files")
    return files


def dataset_sha256(path: str | Path) -> str:
    """The checksum of a `--dataset`: a file's own; for a folder, one over each of its JSON files' name and
    checksum, so that renaming, adding or changing a file changes it."""
    return dataset_checksums(path)[0]


def dataset_checksums(path: str | Path, files: list[Path] | None = None) -> tuple[str, list[str]]:
    """A `--dataset`'s checksum (`dataset_sha256`) and, for a folder, each of its JSON files' own, in name order
    (for a file, none), each file read once: one file of a folder is data the folder's run was on too.

    `files`: the files of the folder its benchmark reads, in its order, where they are not its top-level `*.json`
    (BEAM's chats, nested folders deep); each is named in the checksum by its path under the folder, which for a
    top-level file is its name, so a folder of top-level files has the same checksum either way."""
    path = Path(path)
    if not path.is_dir():
        return file_sha256(path), []
    digest, checksums = hashlib.sha256(), []
    for file in json_files(path) if files is None else files:
        checksums.append(file_sha256(file))
        digest.update(f"{Path(file).relative_to(path).as_posix()}\0{checksums[-1]}\n".encode())
    return digest.hexdigest(), checksums


def content_hash(value) -> str:
    """SHA-256 of a JSON-able value in canonical form."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def read_json(path: str | Path, what: str = "JSON file", error: type[MemfarmError] = MemfarmError,
              top: type | None = None):
    """The JSON value in the file at `path`, read whole.

    Raises `error` (the caller's kind: `DatasetError`, `ResultsError`, ...) naming the file, `what` it
    should hold and what was wrong: missing, unreadable, not UTF-8 JSON, or, with `top` (`dict` or
    `list`), a top level of another type. A byte order mark before the value is no part of it (some
    editors write one). Nesting past `MAX_JSON_DEPTH` is refused before parsing: Python's parser would end
    in a RecursionError."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: {exc.strerror or exc}") from exc
    if nesting_depth(raw) > MAX_JSON_DEPTH:
        raise error(f"{path}: cannot read the {what}: nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both say where
        raise error(f"{path}: cannot read the {what}: not valid UTF-8 JSON ({exc})") from exc
    if top is not None and not isinstance(data, top):
        raise error(f"{path}: the {what} is not {_json_type(top)} (its top level is {_json_type(type(data))})")
    return data


def _json_type(kind: type) -> str:
    for python, name in ((bool, "a boolean"), (dict, "a JSON object"), (list, "a JSON array"), (str, "a string"),
                         ((int, float), "a number"), (type(None), "null")):
        if issubclass(kind, python):
            return name
    return kind.__name__


def write_json(path: str | Path, data, indent: int | None = 1) -> Path:
    """Write JSON through `replacing`: readers never see half a file, and a link is never written through.

    Every password inside a URL is redacted on the way: no file this program writes holds one. A number
    that is not finite is refused, naming where it is: JSON has no NaN or Infinity, and browsers and jq
    refuse a file that holds one."""
    try:
        text = redact(json.dumps(data, ensure_ascii=False, indent=indent, allow_nan=False))
    except ValueError as exc:
        if "Out of range float" not in str(exc):  # a circular value: a fault of the caller's code
            raise
        raise MemfarmError(f"{path}: cannot write {_not_finite(data)}: not a finite number "
                           "(JSON has no NaN or Infinity)") from None
    # A lone surrogate that slipped past validation is written escaped rather than losing the file.
    with replacing(path, binary=True) as out:
        out.write(text.encode("utf-8", errors="backslashreplace"))
    return Path(path)


def _not_finite(data) -> str:
    """Where the first NaN or infinity in `data` is (`records[3].score = nan`)."""
    stack = [(data, "the value")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"{where} = {value!r}"
        if isinstance(value, dict):
            stack += [(item, f"{where}.{key}" if where != "the value" else str(key))
                      for key, item in value.items()]
        elif isinstance(value, (list, tuple)):
            stack += [(item, f"{where}[{n}]") for n, item in enumerate(value)]
    return "a number"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: The process's file-creation mask, read once (reading it means setting it, so never from a thread).
_UMASK = _umask()


@contextmanager
def replacing(path: str | Path, what: str = "output file", error: type[MemfarmError] = MemfarmError,
              binary: bool = False):
    """A file to write `path` through: a new file of its own in `path`'s folder, renamed over `path` on success.

    A link at `path` (or anything but a regular file) is refused before anything is written: writing through
    it would change whatever it points at. The new file is created exclusively under an unpredictable
    name, so no link planted beside the target is followed either. On any failure the new file is removed
    and an existing `path` is left as it was: a failed write never truncates an earlier output. The file
    gets the mode of the file it replaces, or a new file's usual mode."""
    path = Path(path)
    mode = _check_target(path, what, error)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise error(f"{path}: cannot write the {what}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(handle, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as out:
            yield out
        os.chmod(tmp, mode)
        _check_target(path, what, error)  # a link put there meanwhile is refused too (the rename would not follow it)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_target(path: Path, what: str, error: type[MemfarmError]) -> int:
    """The mode the written file gets; refuses a link or a special file at `path`."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0o666 & ~_UMASK
    except OSError as exc:
        raise error(f"{path}: cannot write the {what}: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise error(f"{path}: is a symbolic link; refusing to write the {what} through it (name the file itself)")
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{path}: is not a regular file; refusing to write the {what} over it")
    return stat.S_IMODE(info.st_mode)
