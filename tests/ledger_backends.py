"""The ledger's two backends, as the shared behaviour tests see them (docs/contract.md §9.1).

``ledger_location`` (tests/conftest.py) yields an SQLite path or the ``mariadb://`` URL of a fresh
database; the helpers here tell the tests what differs between the two, and ``Raw`` sends SQL
past the ledger's code, as an admin's shell would, to each in its own dialect.  The MariaDB
server is the lab's (contrib/lab/up), reached with the option file named by
``$SLURM_DSL_TEST_MARIADB_CNF`` (default /etc/slurm-dsl/ledger.cnf); its account may create and
drop the databases ``slurm_dsl_t_*``.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Iterator, List, Optional, Sequence, Set, Tuple, Type

import slurm_dsl.ledger.mariadb as mariadb_module
import slurm_dsl.ledger.sqlite as sqlite_module
from slurm_dsl.core.model import DSLError, RequeueBit
from slurm_dsl.ledger.choose import is_url, open_ledger

try:
    import pymysql
except ImportError:  # then every mariadb parameter skips (or fails under CI=true)
    pymysql = None  # type: ignore[assignment]

DEFAULT_CNF = "/etc/slurm-dsl/ledger.cnf"
TEST_DATABASE_PREFIX = "slurm_dsl_t_"

RAW_ERRORS: Tuple[Type[BaseException], ...] = (sqlite3.DatabaseError,) + ((pymysql.Error,) if pymysql else ())


def bit(location: str, job: str) -> RequeueBit:
    """The bit of ``job``'s object in the ledger at ``location`` (which must have the object)."""
    with open_ledger(location) as ledger:
        obj = ledger.get(job)
    assert obj is not None
    return obj.bit


def is_mariadb(location: str) -> bool:
    return is_url(location)


def module(location: str) -> ModuleType:
    """The backend's module (its MIGRATIONS, PRUNE_BATCH...)."""
    return mariadb_module if is_mariadb(location) else sqlite_module


def store_class(location: str) -> Type[Any]:
    return mariadb_module.MariaDbLedger if is_mariadb(location) else sqlite_module.SqliteLedger


def shown(location: str) -> str:
    """The ledger's ``path``: the file, or the URL without its query."""
    return location.split("?", 1)[0]


def schema(location: str) -> int:
    """The schema version a current ledger of this backend has."""
    return len(module(location).MIGRATIONS)


def checkpointed(location: str) -> Optional[bool]:
    """What a real prune says of its checkpoint: SQLite's WAL is truncated; InnoDB has none."""
    return None if is_mariadb(location) else True


def timeouts_given(location: str) -> List[float]:
    """The timeout each recorded operation ran under, oldest first, as its row says it: ``ends_by``
    (its deadline + the kill grace + the guard margin) less ``started_at``.  The deadline is taken
    when the command or call starts, a little before the row's start: a timeout T reads just
    under T."""
    from slurm_dsl.core.script import KILL_GRACE
    from slurm_dsl.run.calls import GUARD_MARGIN

    with Raw(location) as raw:
        rows = raw.execute("SELECT ends_by - started_at FROM history ORDER BY id")
    return [float(span) - KILL_GRACE - GUARD_MARGIN for (span,) in rows]


class Raw:
    """A connection of its own to the ledger's storage, past the ledger's code, for what a test
    must do behind the ledger's back.  SQL is written with ``?`` placeholders in both dialects."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._sqlite: Optional[sqlite3.Connection] = None
        self._mariadb: Optional[Any] = None
        if is_mariadb(location):
            server = mariadb_module.Server.of(location)
            self._mariadb = server.connect(server.location.database)
        else:
            self._sqlite = sqlite3.connect(location, isolation_level=None)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> List[Tuple[Any, ...]]:
        if self._sqlite is not None:
            return list(self._sqlite.execute(sql, tuple(args)).fetchall())
        with self._mariadb.cursor() as cursor:  # type: ignore[union-attr]
            cursor.execute(sql.replace("?", "%s"), tuple(args))
            return list(cursor.fetchall())

    def begin(self) -> None:
        self.execute("BEGIN IMMEDIATE" if self._sqlite is not None else "START TRANSACTION")

    def lock_writers(self) -> None:
        """Take the ledger's write lock, as a stuck writer would, until ``rollback``."""
        if self._sqlite is not None:
            self.execute("BEGIN EXCLUSIVE")
        else:
            self.execute("START TRANSACTION")
            self.execute("SELECT one FROM write_lock WHERE one = 1 FOR UPDATE")

    def start_pruning(self) -> None:
        """Inside a transaction: let the triggers take this connection for prune's."""
        if self._sqlite is not None:
            self.execute("INSERT INTO pruning (one) VALUES (1)")
        else:
            self.execute("INSERT INTO pruning (connection_id) VALUES (CONNECTION_ID())")

    def connection_id(self) -> int:
        return int(self.execute("SELECT CONNECTION_ID()")[0][0])

    def rollback(self) -> None:
        self.execute("ROLLBACK")

    def commit(self) -> None:
        self.execute("COMMIT")

    def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()
        if self._mariadb is not None:
            self._mariadb.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MariaDbServer:
    """The server the mariadb parameters run against, reached with ``option_file``."""

    def __init__(self, option_file: str) -> None:
        self.option_file = option_file
        self.created: Set[str] = set()

    @classmethod
    def find(cls) -> Tuple[Optional[MariaDbServer], str]:
        """The server, or None and why it cannot be used."""
        option_file = os.environ.get("SLURM_DSL_TEST_MARIADB_CNF") or DEFAULT_CNF
        if pymysql is None:
            return None, "PyMySQL is not installed (pip install -e '.[test]')"
        if not os.path.exists(option_file):
            return None, f"no option file {option_file} ($SLURM_DSL_TEST_MARIADB_CNF names another)"
        server = cls(option_file)
        try:
            with server.admin() as conn, conn.cursor() as cursor:
                cursor.execute("SELECT VERSION()")
        except (DSLError, pymysql.Error, OSError) as exc:
            return None, f"cannot use the server of {option_file}: {exc}"
        return server, ""

    def url(self, database: str, *, host: str = "localhost") -> str:
        return f"mariadb://{host}/{database}?option_file={self.option_file}"

    @contextmanager
    def admin(self) -> Iterator[Any]:
        """A connection to no database in particular, with the ledger's own settings."""
        conn = mariadb_module.Server.of(self.url("x")).connect(None)
        try:
            with conn.cursor() as cursor:
                # A test that left a transaction open must not make dropping its database hang.
                cursor.execute("SET SESSION lock_wait_timeout = 10")
            yield conn
        finally:
            conn.close()

    def create(self) -> str:
        """A new, empty database; its name."""
        name = TEST_DATABASE_PREFIX + secrets.token_hex(8)
        with self.admin() as conn, conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        self.created.add(name)
        return name

    def drop(self, name: str) -> None:
        with self.admin() as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
        self.created.discard(name)

    @contextmanager
    def database(self) -> Iterator[str]:
        """The URL of a new, empty database, dropped afterwards."""
        name = self.create()
        try:
            yield self.url(name)
        finally:
            self.drop(name)
