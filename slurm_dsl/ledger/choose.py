"""Which ledger a location names, opened (docs/contract.md §9.1): a path (or ``sqlite:PATH``) is an
SQLite file (``ledger.sqlite``), a ``mariadb://`` (or ``mysql://``) URL a database on a
MariaDB/MySQL server (``ledger.mariadb``, the ``slurm-dsl[mariadb]`` extra).  The backends are
imported only when one is opened, so naming a location costs nothing.
"""

from __future__ import annotations

import os
from typing import Callable, Optional, Union

from .base import BACKOFF_BASE, BACKOFF_CAP, BUSY_TIMEOUT, DEFAULT_PATH, LedgerStore

MARIADB_SCHEMES = ("mariadb://", "mysql://")


def is_url(location: str) -> bool:
    """Whether ``location`` names a database server rather than a file."""
    return location.startswith(MARIADB_SCHEMES)


def sqlite_path(location: str) -> str:
    """The file an SQLite location names (``sqlite:PATH`` or a bare path)."""
    return location[len("sqlite:"):] if location.startswith("sqlite:") else location


def open_ledger(
    location: Union[str, os.PathLike[str]] = DEFAULT_PATH,
    *,
    busy_timeout: Optional[float] = None,
    backoff_base: float = BACKOFF_BASE,
    backoff_cap: float = BACKOFF_CAP,
    clock: Optional[Callable[[], float]] = None,
    migrate_schema: bool = True,
) -> LedgerStore:
    """Open (creating and migrating if need be) the ledger at ``location``: an SQLite file (a
    path or ``sqlite:PATH``) or a ``mariadb://HOST[:PORT]/DATABASE`` URL.

    ``busy_timeout`` defaults to ``BUSY_TIMEOUT`` as it is when the ledger is opened.  ``clock``
    replaces the ledger's own (tests only): by default the host's for SQLite, the server's for
    MariaDB.  ``migrate_schema=False`` (a ledger that must not be written, such as the source of
    ``ledger migrate``) refuses a schema older than this code's with ``LedgerError`` instead of
    migrating it: an empty one too, so nothing is created there.
    """
    location = os.fspath(location)
    busy = BUSY_TIMEOUT if busy_timeout is None else busy_timeout
    if is_url(location):
        from .mariadb import MariaDbLedger

        return MariaDbLedger.open(
            location, busy_timeout=busy, backoff_base=backoff_base, backoff_cap=backoff_cap, clock=clock,
            migrate_schema=migrate_schema,
        )
    from .sqlite import SqliteLedger

    return SqliteLedger.open(
        sqlite_path(location), busy_timeout=busy, backoff_base=backoff_base, backoff_cap=backoff_cap, clock=clock,
        migrate_schema=migrate_schema,
    )
