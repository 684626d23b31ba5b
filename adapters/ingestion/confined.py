"""Reading files of a tree someone else wrote (a vault, a repository) without ever leaving it.

A source folder is untrusted content: a symlink in it can point at `/proc/self/environ`
or a home folder, a FIFO blocks a reader forever, a "note" can be tens of megabytes.
So a file is resolved and checked against the resolved root *before* anything is
opened, then opened one component at a time beneath the root with O_NOFOLLOW (a link
swapped in after the check is refused, not followed) and read no further than a cap.
A regular file with more than one name (a hard link) is refused too: a hard link is
the file itself, not a path to it, so nothing above can tell a second name inside the
root from one made for a secret outside it (`ln ~/.ssh/id_ed25519 vault/note.md`, or a
tarball's link member unpacked by Python's tarfile without the `data` filter).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

#: Most bytes asked of the OS in one read call; a capped read never asks past the cap plus one byte.
_READ_CHUNK = 1024 * 1024
_NOFOLLOW, _NONBLOCK = getattr(os, "O_NOFOLLOW", 0), getattr(os, "O_NONBLOCK", 0)
_DIRECTORY, _CLOEXEC = getattr(os, "O_DIRECTORY", 0), getattr(os, "O_CLOEXEC", 0)
_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class RefusedFile(Exception):
    """A path the adapter will not read; `str(exc)` is the reason that goes into the skipped list."""


def file_kind(mode: int) -> str:
    """'a folder', 'a FIFO', ...: what a non-regular file is, for a skip reason."""
    return next((name for test, name in _FILE_KINDS if test(mode)), "an unknown kind of file")


def _hard_link(names: int, label: str) -> str:
    return (f"a hard link ({names} names): its other names may lie outside the {label}, so it is not read; "
            "copy the file in instead")


class ConfinedRoot:
    """A folder whose files are read only when they, and every link on the way to them, stay inside it."""

    def __init__(self, root: str | Path, label: str):
        self.root = Path(root).resolve(strict=True)
        self.label = label

    def relative(self, resolved: Path) -> str:
        """The root-relative, forward-slash form of a resolved path inside the root ('' for the root)."""
        return PurePosixPath(*resolved.relative_to(self.root).parts).as_posix() if resolved != self.root else ""

    def resolve(self, relative: str | PurePosixPath) -> Path:
        """The fully resolved path of root/relative; RefusedFile when it is missing or leaves the root.

        Only names are looked at here (readlink and stat of each component), nothing is opened.
        """
        candidate = self.root.joinpath(*PurePosixPath(relative).parts)
        try:
            resolved = candidate.resolve(strict=True)
        except FileNotFoundError:
            raise RefusedFile("missing (or a symlink to nothing)") from None
        except RuntimeError:
            raise RefusedFile("symlink loop") from None
        except OSError as exc:
            raise RefusedFile(f"cannot be resolved ({exc.strerror or exc.__class__.__name__})") from None
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise RefusedFile(f"symlink leads outside the {self.label} (to {resolved})")
        return resolved

    def read_bytes(self, relative: str | PurePosixPath, max_bytes: int) -> bytes:
        """The bytes of root/relative, or RefusedFile: outside the root, not a regular file, over `max_bytes`."""
        resolved = self.resolve(relative)
        try:
            before = resolved.lstat()
        except OSError as exc:
            raise RefusedFile(f"cannot be read ({exc.strerror or exc.__class__.__name__})") from None
        if not stat.S_ISREG(before.st_mode):
            raise RefusedFile(f"not a regular file ({file_kind(before.st_mode)})")
        if before.st_nlink > 1:
            raise RefusedFile(_hard_link(before.st_nlink, self.label))
        if before.st_size > max_bytes:
            raise RefusedFile(f"larger than {max_bytes} bytes ({before.st_size})")
        try:
            fd = self._open_beneath(resolved)
        except OSError as exc:
            raise RefusedFile(f"cannot be read ({exc.strerror or exc.__class__.__name__})") from None
        try:
            after = os.fstat(fd)
            if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                raise RefusedFile("changed while it was being read")
            if after.st_nlink > 1:  # a name added between the check and the open
                raise RefusedFile(_hard_link(after.st_nlink, self.label))
            chunks, total = [], 0
            while total <= max_bytes:
                chunk = os.read(fd, min(_READ_CHUNK, max_bytes + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
        except OSError as exc:
            raise RefusedFile(f"cannot be read ({exc.strerror or exc.__class__.__name__})") from None
        finally:
            os.close(fd)
        if total > max_bytes:
            raise RefusedFile(f"larger than {max_bytes} bytes (grew while being read)")
        return b"".join(chunks)

    def _open_beneath(self, resolved: Path) -> int:
        """A read-only descriptor of `resolved`, walked from the root with no symlink followed on the way.

        O_NONBLOCK keeps a FIFO swapped in after the check from blocking the open; the caller's
        fstat then refuses it. Where the platform has no dir_fd, the checked path is opened directly.
        """
        leaf_flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
        if os.open not in os.supports_dir_fd:
            return os.open(resolved, leaf_flags)
        parts = resolved.relative_to(self.root).parts
        fd = os.open(self.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for part in parts[:-1]:
                inner = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = inner
            return os.open(parts[-1], leaf_flags, dir_fd=fd)
        finally:
            os.close(fd)
