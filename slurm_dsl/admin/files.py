"""The files the admin's commands touch beyond the ledger's store (docs/contract.md §9.1): the ledger
an admin command opens (never creating one), whether two locations name one ledger, and the sweep's
metrics textfile.  Errors are ``DSLError`` for ``cli``."""

from __future__ import annotations

import contextlib
import os
import stat
from typing import List, Optional

from ..core.model import DSLError, LedgerError
from ..host import world
from ..ledger.base import LedgerStore
from ..ledger.choose import is_url, open_ledger, sqlite_path


def existing_ledger(path: str) -> LedgerStore:
    """Open the ledger at ``path`` for an admin command without ever creating one (a mistyped ``--ledger``)."""
    if not is_url(path) and not os.path.lexists(sqlite_path(path)):
        raise LedgerError(
            f"no ledger at {path}: nothing has been recorded there (--ledger PATH, $SLURM_DSL_LEDGER or the"
            " config file's ledger names another; slurm-dsl config shows which is used)",
            path=path,
        )
    return open_ledger(path, clock=world.current().wall)


def same_location(a: str, b: str) -> bool:
    """Whether two ledger locations are one by their names alone (the stores' ``identity`` catches the rest)."""
    def name(location: str) -> str:  # a URL without its query, or the file's absolute path
        if is_url(location):
            return "mariadb://" + location.split("://", 1)[1].split("?", 1)[0]
        return os.path.abspath(sqlite_path(location))

    return name(a) == name(b)


def directory_problem(uid: int, mode: int, euid: int, *, own: bool) -> str:
    """Why a directory on the metrics file's path (``lstat``'s ``uid`` and ``mode``) is refused to ``euid``,
    '' if it is fine.  Pure.

    The file's ``own`` directory may be anyone's: no name in it is trusted (``write_atomically``)."""
    if stat.S_ISLNK(mode):
        return "is a symbolic link: name the metrics file by its real path"
    if not stat.S_ISDIR(mode):
        return "is not a directory"
    if own:
        return ""
    if uid not in (0, euid):
        return (f"belongs to uid {uid}, neither root nor uid {euid} that runs slurm-dsl, which could put a link"
                " in place of the directory below it")
    if mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX:
        return (f"is writable by group or others (mode {stat.S_IMODE(mode):04o}), who could put a link in place of"
                " the directory below it")
    return ""


def path_directories(directory: str) -> List[str]:
    """``/`` and every directory below it down to the absolute ``directory``, in that order."""
    parts = [part for part in directory.split("/") if part]
    return ["/"] + ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def check_metrics_path(path: str) -> str:
    """The metrics file's absolute path once every directory on it passes ``directory_problem``.

    ``DSLError`` naming the first that does not, or one that cannot be looked at."""
    absolute = os.path.abspath(path)
    own = os.path.dirname(absolute)
    for directory in path_directories(own):
        try:
            st = os.lstat(directory)
        except OSError as exc:
            raise DSLError(f"cannot write metrics file {path}: {directory}: {exc.strerror or exc}") from None
        problem = directory_problem(st.st_uid, st.st_mode, os.geteuid(), own=directory == own)
        if problem:
            raise DSLError(f"cannot write metrics file {path}: the directory {directory} {problem}; nothing written")
    return absolute


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text``, mode 0644 (node_exporter reads it as another user).

    A fresh ``mkstemp`` file, named so ``*.prom`` collectors skip it, then ``os.replace``: a symlink at
    ``path`` is replaced, never written through."""
    import tempfile

    path = check_metrics_path(path)
    directory, name = os.path.split(path)
    tmp: Optional[str] = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o644)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise DSLError(f"cannot write metrics file {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
