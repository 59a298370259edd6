"""Which account a command runs as (issue 19): root's commands on another account's SQLite ledger
run as that account (docs/contract.md §9.1).

The package's ledger directory, /var/lib/slurm-dsl, is the SlurmUser's (slurm), whom the units
run as.  A ledger must be its account's or root's, and root writing there is no fix either: the
-wal and -shm files SQLite would make as root would be root's, and the units could no longer open
the ledger.  So ``cli.main`` (never the library API: a site plugin's process is not ours to
setuid), run as root on an SQLite ledger whose directory is real (not a symlink) and another
account's, becomes that account, whole and for good (groups, gid, uid), before it opens the
ledger or runs anything.  Dropping privilege is always safe: the account can do nothing it could
not before, and Slurm applies its rights (the SlurmUser may act on every job; another account's
operations are honestly ``rejected``, and doctor's caller check says so).

A MariaDB ledger has no directory and decides nothing: a command on it alone stays as it is, and
``ledger migrate`` between the package's SQLite ledger and MariaDB runs as the SQLite ledger's
owner, who reads the option file as the units do (root's, readable by their group:
contrib/README.md §5; issue 31, item 8).  ``account_to_become`` is the pure decision;
``become_ledger_owner`` the thin edge (the passwd entry, ``os.initgroups``/``setgid``/``setuid``),
a ``DSLError`` when it cannot.
"""

from __future__ import annotations

import logging
import os
import stat
from typing import NamedTuple, Optional, Sequence

from ..core.errors import DSLError
from ..ledger.choose import is_url, sqlite_path

log = logging.getLogger("slurm_dsl")

SQLITE = "sqlite"
MARIADB = "mariadb"


class Directory(NamedTuple):
    """A ledger's directory as ``os.lstat`` found it."""

    uid: int
    mode: int


class Ledger(NamedTuple):
    """One ledger a command uses: its backend and, for SQLite, its directory (None if missing)."""

    backend: str
    directory: Optional[Directory]


def account_to_become(euid: int, ledgers: Sequence[Ledger]) -> Optional[int]:
    """The uid a command run as ``euid`` on ``ledgers`` becomes, or None to stay.  Pure.

    Only root changes, and only when every SQLite ledger (there must be one) is in a directory that
    exists, is a directory (lstat: a symlink is not) and belongs to one and the same account other
    than root; MariaDB ledgers are left out of it.  Anything else (MariaDB alone, a missing or
    root's directory, two owners, no ledger) stays: the ledger's own rules then apply as they
    always did."""
    if euid != 0:
        return None
    owners = set()
    for ledger in ledgers:
        found = ledger.directory
        if ledger.backend != SQLITE:
            continue
        if found is None or not stat.S_ISDIR(found.mode) or found.uid == 0:
            return None
        owners.add(found.uid)
    return owners.pop() if len(owners) == 1 else None


def ledger_directory(location: str) -> str:
    """The directory an SQLite ledger's files are made in, as the ledger checks it."""
    return os.path.dirname(sqlite_path(location)) or "."


def _looked_at(location: str) -> Ledger:
    if is_url(location):
        return Ledger(MARIADB, None)
    try:
        st = os.lstat(ledger_directory(location))
    except OSError:  # missing (the ledger makes it) or unreadable: the ledger's rules say which
        return Ledger(SQLITE, None)
    return Ledger(SQLITE, Directory(st.st_uid, st.st_mode))


def become_ledger_owner(locations: Sequence[str]) -> Optional[str]:
    """As root, on SQLite ledgers in another account's directory (``account_to_become``): become
    that account (its groups, primary gid, uid) for the rest of the process, log it at INFO and
    return the directory (None: nothing changed).  ``DSLError``, with nothing run, if the account
    has no passwd entry, the switch fails or the account cannot read this Python."""
    import pwd

    uid = account_to_become(os.geteuid(), [_looked_at(location) for location in locations])
    if uid is None:
        return None
    where = os.path.abspath(ledger_directory(locations[0]))
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        raise DSLError(
            f"the ledger directory {where} is owned by uid {uid}, which has no passwd entry: root's commands on"
            f" a ledger of another account's run as that account, and there is none; chown root {where}, or"
            " use another ledger path (--ledger)"
        ) from None
    try:
        os.initgroups(entry.pw_name, entry.pw_gid)
        os.setgid(entry.pw_gid)
        os.setuid(uid)
    except OSError as exc:
        raise DSLError(
            f"cannot run as {entry.pw_name} (uid {uid}), the owner of the ledger directory {where}:"
            f" {exc.strerror or exc}; nothing ran"
        ) from None
    # What the command imports from here on is read as the account: an interpreter or a package
    # it cannot read (a Python under /root) would fail at the first lazy import, mid-command.
    for needed in (os.path.dirname(os.__file__), os.path.dirname(os.path.dirname(__file__))):
        if not os.access(needed, os.R_OK | os.X_OK):
            raise DSLError(
                f"running as {entry.pw_name} (uid {uid}), the owner of the ledger directory {where}, which cannot"
                f" read {needed}: install Python and slurm-dsl where that account can read them, or run as"
                f" {entry.pw_name} a slurm-dsl it can; nothing ran"
            )
    log.info("running as %s (uid %d), the owner of the ledger directory %s", entry.pw_name, uid, where)
    return where
