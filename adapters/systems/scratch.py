"""A system's scratch folder for the life of its process: made in the temporary folder, held by a lock on a file
inside it, and removed when the system is closed, collected or its process ends normally.

A process that ends by `os._exit` (a Celery pool process) or is killed runs no clean-up; its folder's lock is
then free, and the next system made with the same prefix removes every such folder (`remove_abandoned`), so
nothing is left behind for long. A folder whose lock is held belongs to a living process and is kept; a link
named like a scratch folder, or another user's folder, is never followed or touched.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import stat
import tempfile
import weakref

#: The file inside a scratch folder whose lock marks the folder alive.
OWNER_LOCK = "owner.lock"
logger = logging.getLogger(__name__)


def held_scratch(holder, prefix: str) -> tuple[str, weakref.finalize]:
    """A new scratch folder named `prefix...` for `holder`, after removing the abandoned ones of that prefix, and
    the finalizer that removes it: called by `holder`'s close, else when `holder` is collected or at exit."""
    remove_abandoned(prefix)
    root = tempfile.mkdtemp(prefix=prefix)
    pending = os.path.join(root, OWNER_LOCK + ".new")  # locked before its name appears: no cleaner finds it free
    owner = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(pending, os.path.join(root, OWNER_LOCK))
    return root, weakref.finalize(holder, _remove, root, owner)


def _remove(root: str, owner: int) -> None:
    shutil.rmtree(root, ignore_errors=True)
    os.close(owner)


def remove_abandoned(prefix: str, parent: str | None = None) -> list[str]:
    """Remove the scratch folders named `prefix...` in `parent` (the temporary folder) whose owner lock is free:
    their process ended without removing them (os._exit, a kill). Returns the folders removed."""
    parent = parent or tempfile.gettempdir()
    removed = []
    try:
        names = [name for name in os.listdir(parent) if name.startswith(prefix)]
    except OSError:
        return removed
    for name in sorted(names):
        folder = os.path.join(parent, name)
        try:
            found = os.lstat(folder)
            if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():  # a link, or not this user's
                continue
            owner = os.open(os.path.join(folder, OWNER_LOCK), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:  # not one of these folders, or another user's: left alone
            continue
        try:
            fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its process is alive
            os.close(owner)
            continue
        shutil.rmtree(folder, ignore_errors=True)
        os.close(owner)
        removed.append(folder)
        logger.info("removed the scratch folder %s, left by a process that ended", folder)
    return removed
