"""Which ledger a location names, opened (docs/contract.md §9.1, §9.1.1): a path or ``sqlite:PATH`` is SQLite,
a ``mariadb://`` or ``mysql://`` URL MariaDB.  A backend is imported only when one is opened."""

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
    """Open (creating and migrating if need be) the ledger at ``location``.  ``busy_timeout`` None:
    ``BUSY_TIMEOUT`` as it is now; ``clock`` replaces the ledger's own (tests only); ``migrate_schema=False``:
    create and migrate nothing, and an older schema, an empty one too, is LedgerError (docs/contract.md §9.1.2)."""
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
