"""The files the admin's commands touch beyond the ledger's own store: the ledger an admin
command opens (never creating one), whether two ledger locations name one ledger, and the sweep's
metrics textfile, written atomically.  Nothing here prints: errors are ``DSLError`` for ``cli``.
"""

from __future__ import annotations

import contextlib
import os
from typing import Optional

from ..core.errors import DSLError, LedgerError
from ..ledger.base import LedgerStore
from ..ledger.choose import is_url, open_ledger, sqlite_path
from ..run.tracked import ledger_path


def existing_ledger(explicit: Optional[str]) -> LedgerStore:
    """Open the ledger for an admin command, which never creates one: a mistyped ``--ledger``
    must not leave a fresh, empty ledger (and its directory) behind, nor report that as clean."""
    path = ledger_path(explicit)
    if not is_url(path) and not os.path.lexists(sqlite_path(path)):
        raise LedgerError(
            f"no ledger at {path}: nothing has been recorded there (--ledger PATH or $SLURM_DSL_LEDGER"
            " names another)",
            path=path,
        )
    return open_ledger(path)


def same_location(a: str, b: str) -> bool:
    """Whether two ledger locations are one by their names alone (the stores' ``identity`` then
    catches two names for one ledger)."""
    def name(location: str) -> str:  # a URL without its query, or the file's absolute path
        if is_url(location):
            return "mariadb://" + location.split("://", 1)[1].split("?", 1)[0]
        return os.path.abspath(sqlite_path(location))

    return name(a) == name(b)


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text``, mode 0644 (node_exporter reads it as another user).

    Root runs the sweep and the directory may be another account's, so no name there is trusted:
    the temp file is a new one (``mkstemp``: random name, O_EXCL, never through a symlink) in the
    target's directory, named so that a textfile collector (``*.prom``) skips it, chmod-ed through
    its fd; ``os.replace`` then swaps the name itself, so a symlink at ``path`` is replaced, never
    written through.  The temp file is removed on any failure.
    """
    import tempfile

    directory, name = os.path.split(path)
    tmp: Optional[str] = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory or ".")
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
