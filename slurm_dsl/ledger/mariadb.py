"""The ledger on a MariaDB/MySQL server (docs/contract.md §9.1.1): the only module that imports pymysql.

``MariaDbLedger`` is ``store.SqlStore`` stating what MariaDB does its own way: the connection and its session, the
``write_lock`` row every transaction locks first, ``%s`` placeholders, stderr as hex, ``MIGRATIONS`` under a
``GET_LOCK``, the server's clock, the sweep lock and a run's lock (docs/contract.md §13.7).  One connection: one
thread at a time (another may close it).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import math
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence, Tuple, final

from ..core.model import ConfigError, LedgerError, SweepBusy
from . import query, schema, store
from . import rows as ledger_rows
from .base import BACKOFF_BASE, BACKOFF_CAP, BUSY_TIMEOUT
from .mariadb_config import ClientOptions, Location, parse_url, read_option_file

log = logging.getLogger("slurm_dsl")

try:
    import pymysql
except ImportError:  # the slurm-dsl[mariadb] extra is not installed: MariaDbLedger.open says so
    pymysql = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from pymysql.connections import Connection
    from pymysql.cursors import Cursor


CONNECT_TIMEOUT = 5.0  # seconds to reach the server: a dead host is a LedgerError, not a hang
# Seconds any one read may wait beyond the lock wait: a server that stopped answering (hung,
# SIGSTOPped, a half-open TCP connection) is a LedgerError after busy timeout + this.
READ_SLACK = 10.0
WRITE_TIMEOUT = 10.0
MIGRATE_WAIT = 30.0  # seconds to wait for another host's migration of the same database
PRUNE_BATCH = 500  # history rows per prune transaction (InnoDB queues waiting writers fairly: no pause)

_BITS, _OPS, _VERDICTS = schema.BITS, schema.OPS, schema.VERDICTS
_TABLE = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
_ID = "VARCHAR(20) NOT NULL"  # a job id: at most 10 ASCII digits (jobid.MAX_JOB_ID)
# Some of MariaDB's signals do not come as errors: STRICT makes a value that does not fit one,
# UTC makes NOW() and UNIX_TIMESTAMP() agree whatever the server's zone (and its DST).
_SESSION = (
    "SET SESSION innodb_lock_wait_timeout = {wait}, lock_wait_timeout = {wait},"
    " time_zone = '+00:00', sql_mode = 'TRADITIONAL,NO_ENGINE_SUBSTITUTION'",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
)

# The history is append-only: no delete (but prune's, below), a row is finished once, and the
# columns written at its start never change.  A trigger may read the table it fires on.
_NO_DELETE = """CREATE TRIGGER history_no_delete BEFORE DELETE ON history FOR EACH ROW
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pruning p WHERE p.connection_id = CONNECTION_ID())
       OR OLD.finished_at IS NULL
       OR OLD.id = (SELECT MAX(h.id) FROM history h WHERE h.job_id = OLD.job_id)
       OR NOT EXISTS (SELECT 1 FROM objects o WHERE o.job_id = OLD.job_id AND o.bit = 'clear')
    THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'history is append-only';
    END IF;
END"""
_FINISH_ONCE = """CREATE TRIGGER history_finish_once BEFORE UPDATE ON history FOR EACH ROW
BEGIN
    IF OLD.finished_at IS NOT NULL OR NOT (NEW.id <=> OLD.id) OR NOT (NEW.job_id <=> OLD.job_id)
       OR NOT (NEW.op <=> OLD.op) OR NOT (NEW.nonce <=> OLD.nonce)
       OR NOT (NEW.started_at <=> OLD.started_at) OR NOT (NEW.prior_bit <=> OLD.prior_bit)
       OR NOT (NEW.actor <=> OLD.actor)
    THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'history is append-only';
    END IF;
END"""

# Schema 3: the start columns of settling are guarded too.
_FINISH_ONCE_3 = """CREATE TRIGGER history_finish_once BEFORE UPDATE ON history FOR EACH ROW
BEGIN
    IF OLD.finished_at IS NOT NULL OR NOT (NEW.id <=> OLD.id) OR NOT (NEW.job_id <=> OLD.job_id)
       OR NOT (NEW.op <=> OLD.op) OR NOT (NEW.nonce <=> OLD.nonce)
       OR NOT (NEW.started_at <=> OLD.started_at) OR NOT (NEW.prior_bit <=> OLD.prior_bit)
       OR NOT (NEW.actor <=> OLD.actor) OR NOT (NEW.baseline <=> OLD.baseline)
       OR NOT (NEW.baseline_at <=> OLD.baseline_at) OR NOT (NEW.op_key <=> OLD.op_key)
       OR NOT (NEW.retry_of <=> OLD.retry_of) OR NOT (NEW.ends_by <=> OLD.ends_by)
    THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'history is append-only';
    END IF;
END"""
# Schema 5: the baseline's boot clock reading is a start column too.
_FINISH_ONCE_5 = """CREATE TRIGGER history_finish_once BEFORE UPDATE ON history FOR EACH ROW
BEGIN
    IF OLD.finished_at IS NOT NULL OR NOT (NEW.id <=> OLD.id) OR NOT (NEW.job_id <=> OLD.job_id)
       OR NOT (NEW.op <=> OLD.op) OR NOT (NEW.nonce <=> OLD.nonce)
       OR NOT (NEW.started_at <=> OLD.started_at) OR NOT (NEW.prior_bit <=> OLD.prior_bit)
       OR NOT (NEW.actor <=> OLD.actor) OR NOT (NEW.baseline <=> OLD.baseline)
       OR NOT (NEW.baseline_at <=> OLD.baseline_at) OR NOT (NEW.op_key <=> OLD.op_key)
       OR NOT (NEW.retry_of <=> OLD.retry_of) OR NOT (NEW.ends_by <=> OLD.ends_by)
       OR NOT (NEW.baseline_boot <=> OLD.baseline_boot)
    THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'history is append-only';
    END IF;
END"""
_FINISH_ONCE_6 = """CREATE TRIGGER history_finish_once BEFORE UPDATE ON history FOR EACH ROW
BEGIN
    IF OLD.finished_at IS NOT NULL OR NOT (NEW.id <=> OLD.id) OR NOT (NEW.job_id <=> OLD.job_id)
       OR NOT (NEW.op <=> OLD.op) OR NOT (NEW.nonce <=> OLD.nonce)
       OR NOT (NEW.started_at <=> OLD.started_at) OR NOT (NEW.prior_bit <=> OLD.prior_bit)
       OR NOT (NEW.actor <=> OLD.actor) OR NOT (NEW.baseline <=> OLD.baseline)
       OR NOT (NEW.baseline_at <=> OLD.baseline_at) OR NOT (NEW.op_key <=> OLD.op_key)
       OR NOT (NEW.retry_of <=> OLD.retry_of) OR NOT (NEW.ends_by <=> OLD.ends_by)
       OR NOT (NEW.baseline_boot <=> OLD.baseline_boot) OR NOT (NEW.admin_reason <=> OLD.admin_reason)
       OR NOT (NEW.hold <=> OLD.hold)
    THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'history is append-only';
    END IF;
END"""
_FINISH_ONCE_7 = _FINISH_ONCE_6.replace(
    "OR NOT (NEW.hold <=> OLD.hold)", "OR NOT (NEW.hold <=> OLD.hold) OR NOT (NEW.baseline_ctl <=> OLD.baseline_ctl)")
_SETTLEMENTS_NO_UPDATE = """CREATE TRIGGER settlements_no_update BEFORE UPDATE ON settlements FOR EACH ROW
SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'settlements are append-only'"""
# Prune alone deletes one (its connection's row in ``pruning``), and only once its history row is gone.
_SETTLEMENTS_NO_DELETE = """CREATE TRIGGER settlements_no_delete BEFORE DELETE ON settlements FOR EACH ROW
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pruning p WHERE p.connection_id = CONNECTION_ID())
       OR EXISTS (SELECT 1 FROM history h WHERE h.id = OLD.op_id)
    THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'settlements are append-only';
    END IF;
END"""

# MIGRATIONS[i] takes a database from version i to i + 1.  DDL commits by itself, so every
# statement must be safe to run again after a crash half-way (IF NOT EXISTS, INSERT IGNORE,
# DROP ... IF EXISTS before CREATE); the version is bumped after the last one.  The columns are
# SQLite's schema 2 (ledger.sqlite.MIGRATIONS): this list starts there.
MIGRATIONS: Tuple[Tuple[str, ...], ...] = (
    (
        f"""CREATE TABLE IF NOT EXISTS objects (
            job_id {_ID} PRIMARY KEY,
            bit VARCHAR(16) NOT NULL CHECK (bit IN ({_BITS})),
            why MEDIUMTEXT NOT NULL,
            updated_at DOUBLE NOT NULL,
            lookup_failures BIGINT NOT NULL DEFAULT 0,
            next_lookup_at DOUBLE NOT NULL DEFAULT 0,
            lookup_error MEDIUMTEXT NOT NULL DEFAULT '',
            KEY objects_pending (bit, next_lookup_at, updated_at)
        ) {_TABLE}""",
        # ids are never reused: prune never removes a job's newest row, so never the largest id.
        f"""CREATE TABLE IF NOT EXISTS history (
            id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
            job_id {_ID},
            op VARCHAR(16) NOT NULL CHECK (op IN ({_OPS})),
            nonce VARCHAR(255) NOT NULL,
            started_at DOUBLE NOT NULL,
            prior_bit VARCHAR(16) NOT NULL CHECK (prior_bit IN ({_BITS})),
            finished_at DOUBLE NULL,
            result VARCHAR(32) NULL,
            requeue_bit VARCHAR(16) NULL,
            bit_after VARCHAR(16) NULL CHECK (bit_after IN ({_BITS})),
            reason VARCHAR(64) NULL,
            detail MEDIUMTEXT NULL,
            exit_status INT NULL,
            calls MEDIUMTEXT NULL,
            stderr MEDIUMBLOB NULL,
            stderr_len BIGINT NULL,
            actor MEDIUMTEXT NULL,
            KEY history_job (job_id, id)
        ) {_TABLE}""",
        f"""CREATE TABLE IF NOT EXISTS leases (
            job_id {_ID} PRIMARY KEY,
            owner VARCHAR(1024) NOT NULL,
            expires_at DOUBLE NOT NULL
        ) {_TABLE}""",
        f"""CREATE TABLE IF NOT EXISTS last_sweep (
            one TINYINT NOT NULL PRIMARY KEY CHECK (one = 1),
            started_at DOUBLE NOT NULL,
            finished_at DOUBLE NOT NULL,
            summary MEDIUMTEXT NOT NULL
        ) {_TABLE}""",
        # Prune's pass for the trigger: its connection's row, inserted and deleted inside its
        # own transaction, so never committed and never seen by another connection.
        f"""CREATE TABLE IF NOT EXISTS pruning (
            connection_id BIGINT UNSIGNED NOT NULL PRIMARY KEY
        ) {_TABLE}""",
        # The row every writer locks first: one writer at a time, as in SQLite.
        f"""CREATE TABLE IF NOT EXISTS write_lock (
            one TINYINT NOT NULL PRIMARY KEY CHECK (one = 1)
        ) {_TABLE}""",
        "INSERT IGNORE INTO write_lock (one) VALUES (1)",
        "DROP TRIGGER IF EXISTS history_no_delete",
        _NO_DELETE,
        "DROP TRIGGER IF EXISTS history_finish_once",
        _FINISH_ONCE,
    ),
    (
        # SQLite's schema 3: the start columns for settling (docs/contract.md §12), NULL in older
        # rows, guarded by the new history_finish_once; the settlements, append-only.
        "ALTER TABLE history ADD COLUMN IF NOT EXISTS baseline MEDIUMTEXT NULL,"
        " ADD COLUMN IF NOT EXISTS baseline_at DOUBLE NULL,"
        " ADD COLUMN IF NOT EXISTS op_key VARCHAR(255) NULL,"
        " ADD COLUMN IF NOT EXISTS retry_of BIGINT UNSIGNED NULL,"
        " ADD COLUMN IF NOT EXISTS ends_by DOUBLE NULL",
        # No partial index in InnoDB: a virtual column that is the start of an unknown or
        # unfinished row and NULL for every other, indexed, serves ``unsettled``'s range
        # (SqlStore.UNSETTLED) from those rows alone; the NULLs of the finished rows sort first
        # and are never read.
        "ALTER TABLE history ADD COLUMN IF NOT EXISTS unsettled_at DOUBLE AS"
        " (IF(result = 'unknown' OR finished_at IS NULL, started_at, NULL)) VIRTUAL",
        "CREATE INDEX IF NOT EXISTS history_unsettled ON history (unsettled_at, id)",
        "CREATE INDEX IF NOT EXISTS history_key ON history (op_key, job_id, op)",
        f"""CREATE TABLE IF NOT EXISTS settlements (
            id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
            op_id BIGINT UNSIGNED NOT NULL,
            job_id {_ID},
            verdict VARCHAR(16) NOT NULL CHECK (verdict IN ({_VERDICTS})),
            looked_at DOUBLE NOT NULL,
            record MEDIUMTEXT NULL,
            settled_at DOUBLE NOT NULL,
            settled_by MEDIUMTEXT NOT NULL,
            detail MEDIUMTEXT NOT NULL,
            UNIQUE KEY settlements_op (op_id)
        ) {_TABLE}""",
        "DROP TRIGGER IF EXISTS history_finish_once",
        _FINISH_ONCE_3,
        "DROP TRIGGER IF EXISTS settlements_no_update",
        _SETTLEMENTS_NO_UPDATE,
        "DROP TRIGGER IF EXISTS settlements_no_delete",
        _SETTLEMENTS_NO_DELETE,
    ),
    (
        # Until when a call of slurm-dsl's may change the job's flag (docs/contract.md §13).
        "ALTER TABLE objects ADD COLUMN IF NOT EXISTS quiet_at DOUBLE NULL",
    ),
    (
        # SQLite's schema 5: saves proven by what was seen of them, in order (core.durable Rules 1,
        # 2, 8), not by comparing clocks.  NULL marks in older rows: not known yet (the sweep anchors them).
        "ALTER TABLE objects ADD COLUMN IF NOT EXISTS quiet_mark BIGINT NULL,"
        " ADD COLUMN IF NOT EXISTS quiet_look VARCHAR(1024) NULL,"
        " ADD COLUMN IF NOT EXISTS gone_mark BIGINT NULL,"
        " ADD COLUMN IF NOT EXISTS gone_look VARCHAR(1024) NULL",
        f"""CREATE TABLE IF NOT EXISTS looks (
            seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
            observer VARCHAR(512) NOT NULL,
            seen VARCHAR(512) NOT NULL,
            at_boot DOUBLE NULL,
            KEY looks_observer (observer, seq)
        ) {_TABLE}""",
        f"""CREATE TABLE IF NOT EXISTS op_looks (
            op_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
            mark BIGINT NOT NULL,
            look VARCHAR(1024) NULL,
            ended VARCHAR(512) NULL
        ) {_TABLE}""",
    ),
    (
        # SQLite's schema 6: when each observer first found an operation over, on its boot clock,
        # and where and when an operation's baseline lookup started on one (docs/contract.md §13.7),
        # a start column guarded by history_finish_once.
        f"""CREATE TABLE IF NOT EXISTS op_seen (
            op_id BIGINT UNSIGNED NOT NULL,
            observer VARCHAR(512) NOT NULL,
            at_boot DOUBLE NOT NULL,
            PRIMARY KEY (op_id, observer)
        ) {_TABLE}""",
        "ALTER TABLE history ADD COLUMN IF NOT EXISTS baseline_boot VARCHAR(512) NULL",
        "DROP TRIGGER IF EXISTS history_finish_once",
        _FINISH_ONCE_5,
    ),
    (
        # SQLite's schema 7: the set a keyed run of selectors chose, kept for its reruns
        # (core.select Rule 4), why the admin said an operation ran (--reason) and whether a
        # requeue was into hold (--hold), start columns.
        "ALTER TABLE history ADD COLUMN IF NOT EXISTS admin_reason VARCHAR(1024) NULL",
        "ALTER TABLE history ADD COLUMN IF NOT EXISTS hold TINYINT NULL CHECK (hold IN (1))",
        "DROP TRIGGER IF EXISTS history_finish_once",
        _FINISH_ONCE_6,
        f"""CREATE TABLE IF NOT EXISTS selections (
            op_key VARCHAR(255) NOT NULL,
            op VARCHAR(16) NOT NULL CHECK (op IN ({_OPS})),
            selector MEDIUMTEXT NOT NULL,
            job_ids MEDIUMTEXT NOT NULL,
            selected_at DOUBLE NOT NULL,
            actor MEDIUMTEXT NULL,
            PRIMARY KEY (op_key, op)
        ) {_TABLE}""",
    ),
    (
        # SQLite's schema 8: which slurmctld was in control before a baseline's lookup and once the
        # calls were over (core.settle Rule 16), a start column and a finish column.
        "ALTER TABLE history ADD COLUMN IF NOT EXISTS baseline_ctl VARCHAR(512) NULL",
        "ALTER TABLE history ADD COLUMN IF NOT EXISTS calls_ctl VARCHAR(512) NULL",
        "DROP TRIGGER IF EXISTS history_finish_once",
        _FINISH_ONCE_7,
    ),
    (
        # SQLite's schema 9: the reason copied to a job's AdminComment after an operation.
        f"""CREATE TABLE IF NOT EXISTS comments (
            id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
            op_id BIGINT UNSIGNED NOT NULL,
            job_id {_ID},
            text MEDIUMTEXT NOT NULL,
            asked_at DOUBLE NOT NULL,
            result VARCHAR(32) NULL,
            detail MEDIUMTEXT NULL,
            finished_at DOUBLE NULL,
            KEY comments_op (op_id)
        ) {_TABLE}""",
    ),
)
# The current history_finish_once around its condition (``schema.start_guard``).
_FINISH_ONCE_HEAD = "CREATE TRIGGER history_finish_once BEFORE UPDATE ON history FOR EACH ROW\nBEGIN\n    IF "
_FINISH_ONCE_TAIL = "\n    THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'history is append-only';\n    END IF;\nEND"
# A new database's schema at once: ``schema.CURRENT["mariadb"]``, the version MIGRATIONS reach (a
# test checks that both give the same schema).  Its tables come from ``ledger.schema``.  Only for
# a database without any of the ledger's tables (``_before_first_migration``): a crash half-way
# leaves some, and the migrations carry on from there.
SCHEMA: Tuple[str, ...] = (
    *schema.create_tables("mariadb"),
    "INSERT IGNORE INTO write_lock (one) VALUES (1)",
    _NO_DELETE,
    _FINISH_ONCE_HEAD + schema.start_guard("mariadb") + _FINISH_ONCE_TAIL,
    _SETTLEMENTS_NO_UPDATE,
    _SETTLEMENTS_NO_DELETE,
)
_VERSION_TABLE = f"""CREATE TABLE IF NOT EXISTS schema_version (
    one TINYINT NOT NULL PRIMARY KEY CHECK (one = 1),
    version INT NOT NULL
) {_TABLE}"""
# The tables this code creates: a database holding any other one is not a slurm-dsl ledger.
OWN_TABLES = frozenset(
    ["schema_version"] + [m for s in MIGRATIONS for m in re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", "".join(s))]
)

# Finishing one operation (``ledger_rows.finished_values``, stderr as hex: whatever the driver
# version, bytes never pass as utf8mb4 text).  Up to this many in a batch are written so, one
# round trip each; more go through the temporary table (``_finish_history``): three round trips
# whatever their number (and one more on a connection's first).
_FINISH_ONE = " ".join(
    ("UPDATE history SET", schema.assigned(schema.FINISH, "%s", {"stderr": "UNHEX(%s)"}), "WHERE id = %s")
)
_DIRECT_FINISHES = 3
# A connection's own table of a batch's finished values, created once per connection.  It is
# TEMPORARY: no other connection sees it, creating it commits nothing, it is gone with the
# connection, and (InnoDB) its rows are rolled back with the transaction.  History's finish
# columns, and the stderr as hex text (a multi-row insert takes plain placeholders only).
_HEX = {"stderr": "stderr_hex"}
_FINISHING_KINDS = {"finished_at": "DOUBLE NOT NULL", "stderr": "MEDIUMTEXT CHARACTER SET ascii COLLATE ascii_bin NULL"}
_FINISHING_TABLE = "".join((
    "CREATE TEMPORARY TABLE IF NOT EXISTS slurm_dsl_finishing (\n    id BIGINT UNSIGNED NOT NULL PRIMARY KEY,\n    ",
    ",\n    ".join([
        f"{_HEX.get(c.name, c.name)} {_FINISHING_KINDS.get(c.name, c.mariadb)}"
        for c in schema.HISTORY.columns if c.name in schema.FINISH
    ]),
    f"\n) {_TABLE}",
))
_FINISHING_INSERT = schema.insert("slurm_dsl_finishing", [_HEX.get(c, c) for c in (*schema.FINISH, "id")]) + (
    schema.values((*schema.FINISH, "id"), mark="%s")
)
_FINISHING_UPDATE = " ".join((
    "UPDATE history h JOIN slurm_dsl_finishing f ON f.id = h.id SET",
    schema.assigned(schema.FINISH, "f.{0}", {"stderr": "UNHEX(f.stderr_hex)"}, alias="h."),
))

# MariaDB's error numbers this module explains.
ER_LOCK_WAIT_TIMEOUT = 1205
ER_NEED_SUPER_FOR_TRIGGER = 1419
ER_BAD_DB = 1049
ER_ACCESS_DENIED = 1045
ER_DB_ACCESS_DENIED = 1044
ER_NO_SUCH_TABLE = 1146
CR_CONNECTION_ERRORS = {2002, 2003, 2006, 2013, 2055}

# -- the server --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """How to reach the server: the URL's host and port over the option file's; ``localhost`` is the option file's
    socket when it names one and the URL gives no port (as the mariadb client does), else TCP."""

    location: Location
    options: ClientOptions = field(repr=False)
    lock_wait: int  # innodb_lock_wait_timeout, whole seconds

    @classmethod
    def of(cls, url: str, busy_timeout: float = BUSY_TIMEOUT) -> Server:
        """ConfigError unless ``url`` and its option file are usable, and PyMySQL is installed."""
        location = parse_url(url)
        if pymysql is None:
            raise ConfigError(
                f"ledger {location.url}: a MariaDB ledger needs PyMySQL: pip install 'slurm-dsl[mariadb]'"
            )
        busy = ledger_rows.finite("busy_timeout", busy_timeout)
        return cls(location, read_option_file(location.option_file), max(1, math.ceil(busy)))

    def connect(self, database: Optional[str]) -> Connection[Cursor]:
        """A new autocommit connection with this module's session settings; pymysql errors leave as they are."""
        host = self.location.host or self.options.host or "localhost"
        port = self.location.port or self.options.port or 3306
        socket = self.options.socket if host == "localhost" and self.location.port is None else None
        conn = pymysql.connect(
            host=host,
            port=port,
            unix_socket=socket,
            user=self.options.user,
            password=self.options.password or b"",
            database=database,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT,
            read_timeout=self.lock_wait + READ_SLACK,
            write_timeout=WRITE_TIMEOUT,
            local_infile=False,
        )
        try:
            with conn.cursor() as cursor:
                for statement in _SESSION:
                    cursor.execute(statement.format(wait=self.lock_wait))
        except BaseException:
            conn.close()
            raise
        return conn


def _error_number(exc: BaseException) -> Optional[int]:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _explain(exc: BaseException, location: Location, lock_wait: int) -> str:
    """What a pymysql or OS error means for an admin (its own text follows)."""
    number = _error_number(exc)
    text = str(exc.args[1]) if number is not None and len(exc.args) > 1 else str(exc) or type(exc).__name__
    if number == ER_LOCK_WAIT_TIMEOUT:
        return f"the ledger is locked by another writer: waited {lock_wait} s ({text})"
    if number == ER_NEED_SUPER_FOR_TRIGGER:
        return (
            "binary logging is on, and then MariaDB lets only SUPER (or BINLOG ADMIN) create the history's"
            " append-only triggers: have an admin SET GLOBAL log_bin_trust_function_creators = 1 (and put it"
            " in the server's configuration), or open the ledger once as an account that may"
            f" ({text})"
        )
    if number == ER_BAD_DB:
        return (
            f"database {location.database} does not exist: create it (CREATE DATABASE {location.database}"
            " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin) and grant the ledger's account ALL on it"
        )
    if number in (ER_ACCESS_DENIED, ER_DB_ACCESS_DENIED):
        return f"{text} (the account is the one in {location.option_file})"
    if number in CR_CONNECTION_ERRORS or isinstance(exc, OSError):
        return f"cannot reach the server: {text}"
    return text


# -- the ledger: SqlStore in MariaDB's dialect --------------------------------------------------


@functools.lru_cache(maxsize=512)
def _percent(sql: str) -> str:
    """``?`` placeholders as PyMySQL's ``%s`` (the store's SQL holds no other ``?`` nor ``%``)."""
    return sql.replace("?", "%s")


@final
class MariaDbLedger(store.SqlStore):
    """A ledger in a MariaDB/MySQL database: ``store.SqlStore`` in MariaDB's dialect (``open``, or
    ``ledger.choose.open_ledger``)."""

    FOR_UPDATE = " FOR UPDATE"
    BLOB = "UNHEX(?)"  # stderr as hex, as _FINISH_ONE writes it: bytes never pass as utf8mb4 text
    HEX_STDERR = True
    ANOTHER = "another database"
    UNSETTLED = "h.unsettled_at >= ?"  # the indexed virtual column of schema 2 -> 3
    PRUNING = (
        "INSERT INTO pruning (connection_id) VALUES (CONNECTION_ID())",
        "DELETE FROM pruning WHERE connection_id = CONNECTION_ID()",
    )

    def __init__(
        self,
        server: Server,
        backoff_base: float,
        backoff_cap: float,
        clock: Optional[Callable[[], float]] = None,
    ) -> None:
        super().__init__(server.location.url, backoff_base, backoff_cap)
        self._server = server
        self._conn: Optional[Connection[Cursor]] = None
        self._finishing_on: Optional[Connection[Cursor]] = None  # the connection slurm_dsl_finishing exists on
        self._marking: Optional[Tuple[str, Connection[Cursor]]] = None  # the run marked, and its connection
        self.database = server.location.database
        self._clock = clock

    @classmethod
    def open(
        cls,
        url: str,
        *,
        busy_timeout: float = BUSY_TIMEOUT,
        backoff_base: float = BACKOFF_BASE,
        backoff_cap: float = BACKOFF_CAP,
        clock: Optional[Callable[[], float]] = None,
        migrate_schema: bool = True,
    ) -> MariaDbLedger:
        """Connect to the database ``url`` names and migrate it; ``clock``: the server's by default.  ConfigError for
        the URL or option file, LedgerError for the server; ``migrate_schema``: as ``ledger.choose.open_ledger``."""
        backoff_base = ledger_rows.finite("backoff_base", backoff_base)
        backoff_cap = ledger_rows.finite("backoff_cap", backoff_cap)
        ledger = cls(Server.of(url, busy_timeout), backoff_base, backoff_cap, clock)
        try:
            with ledger._errors("open"):
                ledger._connection()
            version = ledger._version()
            if version < len(MIGRATIONS) and not migrate_schema:
                ledger._refuse_older(version)
            if version < len(MIGRATIONS):
                ledger._migrate()
        except BaseException:
            ledger.close()
            raise
        return ledger

    def close(self) -> None:
        conn, self._conn = self._conn, None
        self._finishing_on = None
        self._unmark()
        if conn is not None:
            try:
                conn.close()
            except (pymysql.Error, OSError):
                pass  # the server ends the session (and any transaction) itself

    # -- the connection and the one place errors are turned into LedgerError ---------------------

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Turn pymysql and OS errors into LedgerError, in this one place."""
        try:
            yield
        except (pymysql.Error, OSError) as exc:
            if _error_number(exc) in CR_CONNECTION_ERRORS or isinstance(exc, OSError):
                self.close()  # the next transaction starts on a new connection
            why = _explain(exc, self._server.location, self._server.lock_wait)
            raise LedgerError(f"ledger {self.path}: {doing}: {why}", path=self.path) from exc

    def _connection(self) -> Connection[Cursor]:
        """The connection, replaced first (once) if the server dropped it since its last use.
        Inside a transaction never: a write there is never retried on another connection."""
        if self._tx is not None:
            if self._conn is None:
                raise LedgerError(f"ledger {self.path}: the connection was lost inside a transaction", path=self.path)
            return self._conn
        if self._conn is not None:
            try:
                self._conn.ping(False)
                return self._conn
            except (pymysql.Error, OSError):
                self.close()
        self._conn = self._server.connect(self.database)
        return self._conn

    def _new_cursor(self) -> Cursor:
        """Outside a transaction the connection autocommits: a read sees the latest commits, waits for no writer."""
        return self._connection().cursor()

    @contextmanager
    def _transaction(self) -> Iterator[Cursor]:
        """One InnoDB transaction, ``write_lock``'s row locked first; never retried: a broken one may have committed."""
        conn = self._connection()
        cursor = conn.cursor()
        self._tx = cursor
        try:
            cursor.execute("START TRANSACTION")
            cursor.execute("SELECT one FROM write_lock WHERE one = 1 FOR UPDATE")
            if cursor.fetchone() is None:
                raise LedgerError(f"ledger {self.path}: the write_lock row is missing", path=self.path)
            yield cursor
            conn.commit()
        except BaseException:
            try:
                conn.rollback()
            except (pymysql.Error, OSError):
                self.close()  # closing rolls it back on the server
            raise
        finally:
            self._tx = None
            try:
                cursor.close()
            except (pymysql.Error, OSError):
                pass  # the connection is gone: _errors has the error that says so

    # -- the SQL dialect -------------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return _percent(sql)

    def _upsert(self, key: str, columns: Sequence[str], also: str = "") -> str:
        sets = ", ".join([f"{c} = VALUES({c})" for c in columns] + ([also] if also else []))
        return f" ON DUPLICATE KEY UPDATE {sets}"

    def _write_rows(self, cur: query.Cursor, insert: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
        """One multi-row statement by ``executemany`` (more past ``max_stmt_length``); one row by ``execute``."""
        if not rows:
            return
        sql, first = next(ledger_rows.multi_row(insert, rows[:1], "%s", tail))  # one row's statement
        if len(rows) == 1:
            cur.execute(sql, first)
        else:
            cur.executemany(sql, rows)

    def _finish_history(self, cur: query.Cursor, values: Sequence[Tuple[Any, ...]]) -> None:
        """Stderr as hex.  ``executemany`` of an UPDATE is a round trip per row, so past ``_DIRECT_FINISHES`` rows
        they go into the TEMPORARY table ``slurm_dsl_finishing`` (rolled back with the transaction, seen by no other
        connection, no implicit commit) for one ``UPDATE ... JOIN``; it is emptied again in the same transaction."""
        if len(values) <= _DIRECT_FINISHES:
            for row in values:
                cur.execute(_FINISH_ONE, row)
            return
        if self._finishing_on is not self._conn:
            cur.execute(_FINISHING_TABLE)
            self._finishing_on = self._conn
        cur.executemany(_FINISHING_INSERT, values)
        cur.execute(_FINISHING_UPDATE)
        updated = cur.rowcount
        cur.execute("DELETE FROM slurm_dsl_finishing")
        if updated != len(values):  # every row was read unfinished under the lock: each one changes
            raise LedgerError(
                f"ledger {self.path}: finishing {len(values)} operations updated {updated} history rows",
                path=self.path,
            )

    def _prune_batch(self) -> int:
        return PRUNE_BATCH

    # -- the schema ------------------------------------------------------------------------------

    def _migrations(self) -> Tuple[Tuple[str, ...], ...]:
        return MIGRATIONS

    def _schema(self) -> Tuple[Tuple[str, ...], int]:
        return SCHEMA, schema.CURRENT["mariadb"]

    def _version_on(self, cur: query.Cursor) -> int:
        """0 for a database without the version table (new, or not slurm-dsl's)."""
        try:
            cur.execute("SELECT version FROM schema_version WHERE one = 1")
        except pymysql.Error as exc:
            if _error_number(exc) == ER_NO_SUCH_TABLE:
                return 0
            raise
        row = cur.fetchone()
        return int(row[0]) if row else 0

    @contextmanager
    def _migrating(self) -> Iterator[Cursor]:
        """DDL commits by itself, so no transaction: under ``GET_LOCK('slurm_dsl.migrate.<database>')``."""
        name = f"slurm_dsl.migrate.{self.database}"
        cursor = self._connection().cursor()
        deadline = time.monotonic() + MIGRATE_WAIT
        while True:
            cursor.execute("SELECT GET_LOCK(%s, 1)", (name,))
            got = cursor.fetchone()
            if got is not None and got[0] == 1:
                break
            if got is None or got[0] is None or time.monotonic() >= deadline:
                raise LedgerError(
                    f"ledger {self.path}: migrate: could not take lock {name} within {MIGRATE_WAIT:g} s"
                    " (another slurm-dsl is migrating this database, or is stuck doing it)",
                    path=self.path,
                )
        try:
            yield cursor
        finally:
            try:
                cursor.execute("SELECT RELEASE_LOCK(%s)", (name,))
            except (pymysql.Error, OSError):
                pass  # a connection that is gone holds no lock
            cursor.close()

    def _before_first_migration(self, cur: query.Cursor) -> bool:
        """A database with tables of its own and no schema version is someone else's: LedgerError.  Else the
        version table is created; True (the current schema at once) only where none of the ledger's tables is."""
        cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
        tables = {str(row[0]) for row in cur.fetchall()}
        foreign = sorted(tables - OWN_TABLES)
        if foreign:
            raise LedgerError(
                f"ledger {self.path}: database {self.database} holds tables that are not slurm-dsl's"
                f" ({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}): give the ledger a"
                " database of its own",
                path=self.path,
            )
        cur.execute(_VERSION_TABLE)
        return not tables & OWN_TABLES - {"schema_version"}

    def _set_version(self, cur: query.Cursor, version: int) -> None:
        cur.execute(
            "INSERT INTO schema_version (one, version) VALUES (1, %s)"
            " ON DUPLICATE KEY UPDATE version = VALUES(version)",
            (version,),
        )

    def _refuse_older(self, version: int) -> None:
        """LedgerError for a schema older than this code's, in a ledger that must not be written."""
        if version == 0:
            raise LedgerError(
                f"no ledger in {self.path}: database {self.database} holds no slurm-dsl schema (nothing was"
                " created)",
                path=self.path,
            )
        raise LedgerError(
            f"ledger {self.path} has schema version {version}, older than this slurm-dsl's ({len(MIGRATIONS)}),"
            f" and is not migrated here since it must not be written: 'slurm-dsl ledger status --ledger"
            f" {self.path}' migrates it",
            path=self.path,
        )

    # -- the clock, the sweep lock, the identity -------------------------------------------------

    def now(self) -> float:
        """The server's clock (UTC epoch seconds, to the microsecond), the same for every host; ``clock`` in tests."""
        if self._clock is not None:
            return self._clock()
        return float(self._read("read the server's clock", "SELECT UNIX_TIMESTAMP(NOW(6))")[0][0])

    def lock_run(self, run: str) -> None:
        """Hold ``run``'s lock (``run_lock_name``) on a connection of its own, or renew it; a refusal is a warning."""
        if self._marking is not None and self._marking[0] == run:
            try:
                self._marking[1].ping(False)  # the idle time starts again
                return
            except (pymysql.Error, OSError):
                self._unmark()
        self._unmark()
        name = run_lock_name(run)
        try:
            conn = self._server.connect(self.database)
        except (pymysql.Error, OSError) as exc:  # the ledger's own next use says why, as it would without
            log.debug("could not mark this run in %s: %s", self.path, exc)
            return
        try:
            with conn.cursor() as cur:
                cur.execute(f"SET SESSION wait_timeout = {RUN_LOCK_IDLE}")
                cur.execute("SELECT GET_LOCK(%s, 0)", (name,))
                row = cur.fetchone()
        except (pymysql.Error, OSError) as exc:
            row = None
            log.warning("could not mark this run in %s: %s", self.path, exc)
        if row is None or row[0] != 1:
            with contextlib.suppress(pymysql.Error, OSError):
                conn.close()
            return
        self._marking = (run, conn)

    def _unmark(self) -> None:
        marking, self._marking = self._marking, None
        if marking is not None:
            try:
                marking[1].close()  # the server lets the lock go with the connection
            except (pymysql.Error, OSError):
                pass

    def run_locked(self, run: str) -> Optional[bool]:
        """True when ``run``'s lock is held; None when it is free (nothing told)."""
        found = self._read("read a run's lock", "SELECT IS_USED_LOCK(?)", (run_lock_name(run),))
        return True if found and found[0][0] is not None else None

    def sweep_lock(self) -> MariaDbSweepLock:
        return MariaDbSweepLock(self)

    def _sweep_connection(self) -> Connection[Cursor]:
        with self._errors("sweep lock"):
            return self._server.connect(self.database)

    def identity(self) -> str:
        """The server (its own host name and port, whatever name reached it) and the database."""
        host, port, database = self._read("identity", "SELECT @@hostname, @@port, DATABASE()")[0]
        return f"mariadb {host}:{port}/{database}"


# -- doctor: the server, looked at without opening the ledger ----------------------------------


@dataclass(frozen=True)
class Probe:
    """What ``probe`` found: the server's version, its clock read between two of this host's (``before``, ``after``),
    the schema version (0: empty) and, if current, how many objects are not clear."""

    version: str
    before: float
    server_time: float
    after: float
    schema: int
    not_clear: Optional[int]

    @property
    def clock_offset(self) -> float:
        """How far the server's clock is ahead of this host's (negative: behind), in seconds, ± half the round trip."""
        return self.server_time - (self.before + self.after) / 2


def probe(url: str, *, busy_timeout: float = 1.0, clock: Callable[[], float] = time.time) -> Probe:
    """Reach the server and read, never write, within the connect and read timeouts (``doctor``).  ConfigError for
    the URL, the option file or a missing PyMySQL; LedgerError for the server."""
    ledger = MariaDbLedger(Server.of(url, busy_timeout), BACKOFF_BASE, BACKOFF_CAP)
    try:
        with ledger._errors("connect"):
            ledger._connection()
        before = clock()
        version, server_time = ledger._read("read the server's clock", "SELECT VERSION(), UNIX_TIMESTAMP(NOW(6))")[0]
        after = clock()
        schema = ledger.schema_version()
        not_clear = ledger.count_not_clear() if schema == len(MIGRATIONS) else None
    finally:
        ledger.close()
    return Probe(str(version), before, float(server_time), after, schema, not_clear)


RUN_LOCK_IDLE = 600  # seconds a run's lock outlives its last renewal without a word from the run


def run_lock_name(run: str) -> str:
    """The server-wide lock that marks ``run``: 54 characters, under MariaDB's 64."""
    return "slurm_dsl.run." + hashlib.blake2b(run.encode("utf-8", "replace"), digest_size=20).hexdigest()


class MariaDbSweepLock:
    """One sweep at a time per database: ``GET_LOCK('slurm_dsl.sweep.<database>', 0)`` on a connection of its
    own, released by the server if it dies; ``connection_id``: the holder's connection (an admin may ``KILL`` it)."""

    def __init__(self, ledger: MariaDbLedger) -> None:
        self._ledger = ledger
        self.name = f"slurm_dsl.sweep.{ledger.database}"
        self.connection_id: Optional[int] = None
        self._conn: Optional[Connection[Cursor]] = None

    def __enter__(self) -> MariaDbSweepLock:
        ledger = self._ledger
        conn = ledger._sweep_connection()
        try:
            with ledger._errors("sweep lock"), conn.cursor() as cur:
                cur.execute("SELECT GET_LOCK(%s, 0), IS_USED_LOCK(%s), CONNECTION_ID()", (self.name, self.name))
                row = cur.fetchone()
            if row is None or row[0] is None:
                raise LedgerError(f"ledger {ledger.path}: sweep lock: GET_LOCK({self.name}) failed", path=ledger.path)
            if row[0] != 1:
                holder = f" (connection {row[1]})" if row[1] is not None else ""
                raise SweepBusy(f"{self.name} on {ledger.path}{holder}")
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self.connection_id = int(row[2])
        return self

    def __exit__(self, *exc: object) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT RELEASE_LOCK(%s)", (self.name,))
        except (pymysql.Error, OSError):
            pass  # a connection the server dropped holds no lock any more
        finally:
            try:
                conn.close()
            except (pymysql.Error, OSError):
                pass
