"""The ledger on a MariaDB/MySQL server (docs/contract.md §9.1.1): the only module that imports pymysql.

``MariaDbLedger`` implements ``ledger.LedgerStore`` with the same rules as ``sqlite_ledger``
(``ledger_rules`` decides, ``ledger_rows`` encodes and checks the rows, this module stores), so
that a primary and a backup slurmctld host share one ledger.  Contract:

- Location: ``mariadb://[HOST[:PORT]]/DATABASE[?option_file=PATH]`` (or ``mysql://``).  No
  credentials in the URL, argv or the environment: they come from the option file's ``[client]``
  group (``user``, ``password``, ``host``, ``port``, ``socket``; default
  ``/etc/slurm-dsl/ledger.cnf``), which must be a regular file (no symlink followed), owned by
  this uid or root and 0600/0400 (``read_option_file``); the URL's host and port override it.
  Anything else is ``ConfigError`` before a connection is made.  ``path`` is the URL without
  its query: what messages show, never a password.
- The database must exist (the admin creates it with the account); an empty one is migrated.
  ``MIGRATIONS`` and a one-row ``schema_version`` table version it.  DDL commits by itself in
  MariaDB, so a migration cannot share a transaction with its version bump: every statement is
  safe to run again, the version is bumped after them, and all of it runs under
  ``GET_LOCK('slurm_dsl.migrate.<database>')`` with the version read again under the lock, so
  that hosts opening a new database at once migrate it exactly once.  A newer schema is refused.
- One writer at a time, as SQLite's ``BEGIN IMMEDIATE``: every read-modify-write is one InnoDB
  transaction that first locks the one row of ``write_lock`` (``SELECT ... FOR UPDATE``), then
  reads (``FOR UPDATE`` too) and writes.  Writers on every host queue on that row for up to the
  busy timeout (``innodb_lock_wait_timeout``), so no update is lost, a batch is all or none and
  two batches can never deadlock on jobs locked in different orders.  Readers take no lock
  (MVCC, READ COMMITTED): they never wait for a writer.
- Append-only history, enforced by the server: triggers SIGNAL on a delete or on a change to a
  finished row or to a row's start columns.  ``prune`` alone may delete: it inserts its own
  connection's row into ``pruning`` inside its transaction (never committed), and even then the
  trigger refuses what ``ledger_rules.may_prune`` never allows.
- Time is the server's: ``now()`` is ``UNIX_TIMESTAMP(NOW(6))`` in UTC, so hosts whose clocks
  disagree still agree on every lease and back-off.  Times are stored as DOUBLE epoch seconds.
- One sweep at a time per database: ``sweep_lock`` holds ``GET_LOCK('slurm_dsl.sweep.<database>')``
  on a connection of its own for the whole sweep; the server releases it if that host dies.
- Never a hang: connect, read and write timeouts bound every call.  A connection the server
  dropped is replaced before a new transaction or read (once); a transaction that lost its
  connection is never retried (its commit may or may not have happened).  Every pymysql or OS
  error leaves as ``LedgerError`` with the URL, in one place (``_errors``).

A ``MariaDbLedger`` is one connection: use it from one thread at a time (another thread may close it).
"""

from __future__ import annotations

import errno
import math
import os
import re
import shlex
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    final,
)
from urllib.parse import parse_qsl, urlsplit

from ..core.errors import ConfigError, LedgerError, SweepBusy
from ..core.jobid import validate_job_id
from ..core.model import Op, Outcome, RequeueBit
from . import rows as ledger_rows
from .base import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    BUSY_TIMEOUT,
    HistoryEntry,
    ImportResult,
    JobObject,
    PruneResult,
    SweepRecord,
    Unfinished,
)

try:
    import pymysql
except ImportError:  # the slurm-dsl[mariadb] extra is not installed: MariaDbLedger.open says so
    pymysql = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from pymysql.connections import Connection
    from pymysql.cursors import Cursor

DEFAULT_OPTION_FILE = "/etc/slurm-dsl/ledger.cnf"
SCHEMES = ("mariadb", "mysql")
CONNECT_TIMEOUT = 5.0  # seconds to reach the server: a dead host is a LedgerError, not a hang
# Seconds any one read may wait beyond the lock wait: a server that stopped answering (hung,
# SIGSTOPped, a half-open TCP connection) is a LedgerError after busy timeout + this.
READ_SLACK = 10.0
WRITE_TIMEOUT = 10.0
MIGRATE_WAIT = 30.0  # seconds to wait for another host's migration of the same database
PRUNE_BATCH = 500  # history rows per prune transaction (InnoDB queues waiting writers fairly: no pause)
OPTION_FILE_MAX = 64 * 1024

_BITS = "'clear', 'may_be_set', 'set'"
_OPS = "'hold', 'release', 'requeue', 'restore', 'open'"
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

# MIGRATIONS[i] takes a database from version i to i + 1.  DDL commits by itself, so every
# statement must be safe to run again after a crash half-way (IF NOT EXISTS, INSERT IGNORE,
# DROP ... IF EXISTS before CREATE); the version is bumped after the last one.  The columns are
# SQLite's schema 2 (sqlite_ledger.MIGRATIONS): this list starts there.
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
)
_VERSION_TABLE = f"""CREATE TABLE IF NOT EXISTS schema_version (
    one TINYINT NOT NULL PRIMARY KEY CHECK (one = 1),
    version INT NOT NULL
) {_TABLE}"""
# The tables this code creates: a database holding any other one is not a slurm-dsl ledger.
OWN_TABLES = frozenset(
    ["schema_version"] + [m for s in MIGRATIONS for m in re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", "".join(s))]
)

# Prune's view of a batch of history rows: what ``rules.may_prune`` needs of each.
_PRUNE_ROWS = (
    "SELECT h.id, h.job_id, h.finished_at, o.bit,"
    "  h.id = (SELECT MAX(n.id) FROM history n WHERE n.job_id = h.job_id),"
    "  EXISTS (SELECT 1 FROM leases l WHERE l.job_id = h.job_id AND l.expires_at > %s)"
    " FROM history h JOIN objects o ON o.job_id = h.job_id"
    " WHERE h.id > %s AND h.finished_at < %s ORDER BY h.id LIMIT %s"
)

# The object's bit and why (``_write_bit``): a job without an object gets one.
_WRITE_BIT = (
    "INSERT INTO objects (job_id, bit, why, updated_at) VALUES (%s, %s, %s, %s)"
    " ON DUPLICATE KEY UPDATE bit = VALUES(bit), why = VALUES(why), updated_at = VALUES(updated_at)"
)
# Finishing one operation (``ledger_rows.finished_values``, stderr as hex: whatever the driver
# version, bytes never pass as utf8mb4 text).  Up to this many in a batch are written so, one
# round trip each; more go through the temporary table (``_finish_history``): three round trips
# whatever their number (and one more on a connection's first).
_FINISH_ONE = (
    "UPDATE history SET finished_at = %s, result = %s, requeue_bit = %s, bit_after = %s, reason = %s,"
    " detail = %s, exit_status = %s, calls = %s, stderr = UNHEX(%s), stderr_len = %s WHERE id = %s"
)
_DIRECT_FINISHES = 3
# What a batch reads under the write lock (``_keyed``): one row by its key, or the rows of an
# ``IN`` list with their key first.  The objects' bits for ``begin_operations``; the operations
# for ``finish_operations`` (``ledger_rows.finish``'s row); the leases for ``acquire_leases``.
_BIT_OF_ONE = "SELECT bit FROM objects WHERE job_id = %s FOR UPDATE"
_BITS_OF = "SELECT job_id, bit FROM objects WHERE job_id"
_FINISHING_ONE = (
    "SELECT h.job_id, h.op, h.nonce, h.prior_bit, h.finished_at, o.bit"
    ", EXISTS (SELECT 1 FROM history l WHERE l.job_id = h.job_id AND l.id > h.id)"
    " FROM history h JOIN objects o ON o.job_id = h.job_id WHERE h.id = %s FOR UPDATE"
)
_FINISHING_ROWS = (
    "SELECT h.id, h.job_id, h.op, h.nonce, h.prior_bit, h.finished_at, o.bit"
    ", EXISTS (SELECT 1 FROM history l WHERE l.job_id = h.job_id AND l.id > h.id)"
    " FROM history h JOIN objects o ON o.job_id = h.job_id WHERE h.id"
)
_LEASE_OF_ONE = "SELECT owner, expires_at FROM leases WHERE job_id = %s FOR UPDATE"
_LEASES_OF = "SELECT job_id, owner, expires_at FROM leases WHERE job_id"
# A connection's own table of a batch's finished values, created once per connection.  It is
# TEMPORARY: no other connection sees it, creating it commits nothing, it is gone with the
# connection, and (InnoDB) its rows are rolled back with the transaction.  History's finish
# columns, and the stderr as hex text (a multi-row insert takes plain placeholders only).
_FINISHING_TABLE = f"""CREATE TEMPORARY TABLE IF NOT EXISTS slurm_dsl_finishing (
    id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    finished_at DOUBLE NOT NULL,
    result VARCHAR(32) NULL,
    requeue_bit VARCHAR(16) NULL,
    bit_after VARCHAR(16) NULL,
    reason VARCHAR(64) NULL,
    detail MEDIUMTEXT NULL,
    exit_status INT NULL,
    calls MEDIUMTEXT NULL,
    stderr_hex MEDIUMTEXT CHARACTER SET ascii COLLATE ascii_bin NULL,
    stderr_len BIGINT NULL
) {_TABLE}"""
_FINISHING_INSERT = (
    "INSERT INTO slurm_dsl_finishing (finished_at, result, requeue_bit, bit_after, reason, detail, exit_status,"
    " calls, stderr_hex, stderr_len, id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_FINISHING_UPDATE = (
    "UPDATE history h JOIN slurm_dsl_finishing f ON f.id = h.id SET h.finished_at = f.finished_at,"
    " h.result = f.result, h.requeue_bit = f.requeue_bit, h.bit_after = f.bit_after, h.reason = f.reason,"
    " h.detail = f.detail, h.exit_status = f.exit_status, h.calls = f.calls, h.stderr = UNHEX(f.stderr_hex),"
    " h.stderr_len = f.stderr_len"
)

# MariaDB's error numbers this module explains.
ER_LOCK_WAIT_TIMEOUT = 1205
ER_NEED_SUPER_FOR_TRIGGER = 1419
ER_BAD_DB = 1049
ER_ACCESS_DENIED = 1045
ER_DB_ACCESS_DENIED = 1044
ER_NO_SUCH_TABLE = 1146
CR_CONNECTION_ERRORS = {2002, 2003, 2006, 2013, 2055}


# -- where: the URL and the option file --------------------------------------------------------


@dataclass(frozen=True)
class Location:
    """What a ``mariadb://`` URL names: ``url`` is it without its query (the ledger's ``path``)."""

    url: str
    host: Optional[str]
    port: Optional[int]
    database: str
    option_file: str


@dataclass(frozen=True)
class ClientOptions:
    """The ``[client]`` group of an option file (the password is never shown)."""

    user: str
    password: Optional[bytes] = field(repr=False)
    host: Optional[str] = None
    port: Optional[int] = None
    socket: Optional[str] = None


_DATABASE = re.compile(r"[A-Za-z0-9_]{1,64}\Z")
_HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?\Z|\[[0-9A-Fa-f:.]+\]\Z")


def _shown(url: str) -> str:
    """The URL as it may appear in a message: without anything before an ``@`` nor a query."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return scheme + sep + netloc + slash + tail.split("?", 1)[0].split("#", 1)[0]


def parse_url(url: str) -> Location:
    """``mariadb://[HOST[:PORT]]/DATABASE[?option_file=PATH]``, or ConfigError saying what is wrong.

    Credentials in the URL are refused (they would show in ``ps``, logs and shell histories), as
    is any query key but ``option_file``; neither is ever repeated in the message.
    """
    shown = _shown(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"ledger URL {shown}: {exc}") from None
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"ledger URL {shown}: the scheme must be mariadb:// or mysql://")
    if "@" in parts.netloc:
        raise ConfigError(
            f"ledger URL {shown}: no user or password in the URL (they would show in ps, logs and shell"
            " history): put user= and password= in the [client] group of the option file"
            f" (default {DEFAULT_OPTION_FILE}, mode 0600)"
        )
    host = parts.netloc.rsplit(":", 1)[0] if port is not None else parts.netloc
    if host and not _HOSTNAME.match(host):
        raise ConfigError(f"ledger URL {shown}: {host!r} is not a host name or address")
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"ledger URL {shown}: port {port} is out of range")
    database = parts.path[1:] if parts.path.startswith("/") else ""
    if not _DATABASE.match(database):
        raise ConfigError(
            f"ledger URL {shown}: name one database after the host, of letters, digits and _"
            " (mariadb://HOST[:PORT]/DATABASE)"
        )
    if parts.fragment or url.endswith("#"):
        raise ConfigError(f"ledger URL {shown}: no #fragment")
    option_file = DEFAULT_OPTION_FILE
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ConfigError(f"ledger URL {shown}: its query is not KEY=VALUE&...") from None
    keys = [key for key, _ in pairs]
    unknown = sorted({key for key in keys if key != "option_file"})
    if unknown:
        raise ConfigError(
            f"ledger URL {shown}: unknown query key(s) {', '.join(map(repr, unknown))}: the only one is"
            " option_file=PATH (connection settings and credentials go in that file's [client] group)"
        )
    if keys.count("option_file") > 1:
        raise ConfigError(f"ledger URL {shown}: option_file given more than once")
    for _, value in pairs:
        if not value.startswith("/") or "\0" in value:
            raise ConfigError(f"ledger URL {shown}: option_file must be an absolute path")
        option_file = value
    return Location(
        url=f"{parts.scheme}://{parts.netloc}/{database}",
        host=host.strip("[]") or None,
        port=port,
        database=database,
        option_file=option_file,
    )


def read_option_file(path: str) -> ClientOptions:
    """The ``[client]`` group of the option file at ``path``, checked first (ConfigError).

    It holds the password, and root reads it: it must be a regular file, opened without following
    a symlink, owned by this process's uid or root, and neither readable nor writable by group or
    others.  ``!include`` is refused (an included file would escape these checks).  Keys are read
    as the MariaDB client does (``-`` or ``_``, ``# comments``, quotes, ``\\`` escapes); keys other
    than user, password, host, port and socket are ignored.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    quoted = shlex.quote(path)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(
                f"option file {path} is a symbolic link: refusing to follow it; point option_file= at the"
                " real file"
            ) from None
        if exc.errno == errno.ENOENT:
            raise ConfigError(
                f"no option file at {path}: create it (mode 0600) with a [client] group holding user= and"
                " password= of the ledger's account, or name another with ?option_file=PATH"
            ) from None
        raise ConfigError(f"cannot open option file {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        euid = os.geteuid()
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"option file {path} is not a regular file")
        if st.st_uid not in (euid, 0):
            raise ConfigError(
                f"option file {path} is owned by uid {st.st_uid}, not by uid {euid} that runs slurm-dsl nor"
                f" by root, so that account could change the ledger's account: chown {euid} {quoted}"
            )
        if st.st_mode & 0o077:
            raise ConfigError(
                f"option file {path} has mode {stat.S_IMODE(st.st_mode):04o}: other accounts may read or change"
                f" the ledger's password: chmod 600 {quoted}"
            )
        data = os.read(fd, OPTION_FILE_MAX + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read option file {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > OPTION_FILE_MAX:
        raise ConfigError(f"option file {path} is larger than {OPTION_FILE_MAX} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"option file {path} is not UTF-8") from None
    return _client_group(text, path)


_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "r": "\r", "s": " ", "\\": "\\"}


def _option_value(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] in "'\"" and raw.endswith(raw[0]):
        raw = raw[1:-1]
    else:
        raw = raw.split("#", 1)[0].rstrip()
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), raw)


def _client_group(text: str, path: str) -> ClientOptions:
    group = ""
    found: Dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("!"):
            raise ConfigError(
                f"option file {path}, line {number}: {line.split()[0]} is not supported (an included file"
                " would escape the file's permission checks): put the settings in this file"
            )
        if line.startswith("["):
            if not line.endswith("]"):
                raise ConfigError(f"option file {path}, line {number}: a group header must end with ]")
            group = line[1:-1].strip().lower()
            continue
        if group != "client":
            continue
        key, sep, value = line.partition("=")
        key = key.strip().lower().replace("-", "_")
        if key in ("user", "password", "host", "port", "socket"):
            if not sep:
                raise ConfigError(f"option file {path}, line {number}: {key} needs a value ({key}=...)")
            found[key] = _option_value(value)
    if not found.get("user"):
        raise ConfigError(f"option file {path} names no user= in its [client] group")
    port: Optional[int] = None
    if found.get("port"):
        if not found["port"].isdigit() or not 0 < int(found["port"]) < 65536:
            raise ConfigError(f"option file {path}: port={found['port']!r} is not a port number")
        port = int(found["port"])
    password = found.get("password")
    return ClientOptions(
        user=found["user"],
        password=None if password is None else password.encode("utf-8"),
        host=found.get("host") or None,
        port=port,
        socket=found.get("socket") or None,
    )


# -- the server --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """How to reach the server: the URL's host and port over the option file's.

    ``localhost`` means the option file's socket when it names one and the URL gives no port
    (as the mariadb client does); anything else is TCP.
    """

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
        """A new connection in autocommit mode with this module's session settings; pymysql errors
        leave as they are (the caller's ``_errors`` turns them into LedgerError)."""
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


def _keyed(cur: Cursor, one: str, many: str, keys: Sequence[Any]) -> Dict[Any, Tuple[Any, ...]]:
    """The rows (locked: ``FOR UPDATE``) whose key is one of ``keys``, by key, without it.  One key
    alone is read by ``one`` (``key = %s``, the key not read back: with PyMySQL every column read
    costs, and one key is every single operation); more in ``IN`` lists of
    ``ledger_rows.IN_PIECE`` appended to ``many``, which reads the key first."""
    if len(keys) == 1:
        cur.execute(one, (keys[0],))
        row = cur.fetchone()
        return {} if row is None else {keys[0]: tuple(row)}
    rows: Dict[Any, Tuple[Any, ...]] = {}
    for piece in ledger_rows.pieces(ledger_rows.distinct(keys)):
        cur.execute(ledger_rows.in_list(many, len(piece), "%s", " FOR UPDATE"), tuple(piece))
        rows.update((row[0], tuple(row[1:])) for row in cur.fetchall())
    return rows


def _write_rows(cur: Cursor, insert: str, rows: Sequence[Sequence[Any]]) -> None:
    """``insert`` (``INSERT ... VALUES (%s, ...)``, with its ``ON DUPLICATE KEY UPDATE``) of every
    row: PyMySQL's ``executemany`` sends them as one multi-row statement (more only past its
    ``max_stmt_length``); a single row as a plain ``execute``, a little cheaper."""
    if len(rows) == 1:
        cur.execute(insert, tuple(rows[0]))
    elif rows:
        cur.executemany(insert, rows)


# -- the ledger --------------------------------------------------------------------------------


@final
class MariaDbLedger:
    """A ledger in a MariaDB/MySQL database.  Open with ``MariaDbLedger.open(url)`` (or
    ``ledger.open_ledger``); use as a context manager to close it."""

    def __init__(
        self,
        server: Server,
        backoff_base: float,
        backoff_cap: float,
        clock: Optional[Callable[[], float]] = None,
    ) -> None:
        self._server = server
        self._conn: Optional[Connection[Cursor]] = None
        self._cursor: Optional[Cursor] = None  # the transaction's, while one is open
        self._finishing_on: Optional[Connection[Cursor]] = None  # the connection slurm_dsl_finishing exists on
        self._batched = False  # inside ``batch``: every _atomic joins its transaction
        self.path = server.location.url
        self.database = server.location.database
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
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
        """Connect to the database ``url`` names and migrate it; ``now`` reads ``clock`` (default:
        the server's).  ConfigError for a bad URL or option file, LedgerError for the server.
        ``migrate_schema=False``: migrate nothing; an older schema (an empty database too) is
        LedgerError (``ledger.open_ledger``)."""
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
        if conn is not None:
            try:
                conn.close()
            except (pymysql.Error, OSError):
                pass  # the server ends the session (and any transaction) itself

    def __enter__(self) -> MariaDbLedger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
        if self._cursor is not None:
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

    @contextmanager
    def _atomic(self, doing: str) -> Iterator[Cursor]:
        """One transaction, holding the write lock: committed if the block returns, else rolled
        back.  Never retried: a transaction whose connection broke may or may not have committed.
        Inside ``batch`` it is part of the batch's transaction."""
        if self._batched:
            assert self._cursor is not None
            with self._errors(doing):
                yield self._cursor
            return
        with self._errors(doing):
            conn = self._connection()
            cursor = conn.cursor()
            self._cursor = cursor
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
                self._cursor = None
                try:
                    cursor.close()
                except (pymysql.Error, OSError):
                    pass  # the connection is gone: _errors has the error that says so

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every write inside is one transaction (holding the write lock), committed when the
        block returns, rolled back if it raises.  Do not catch a ledger error inside: leave the block."""
        if self._batched:
            raise RuntimeError("batches do not nest")
        with self._atomic("batch"):
            self._batched = True
            try:
                yield
            finally:
                self._batched = False

    @contextmanager
    def _reading(self, doing: str) -> Iterator[Cursor]:
        """A cursor for reads outside a transaction (autocommit: each statement sees the latest
        commits, and waits for no writer)."""
        with self._errors(doing):
            cursor = self._connection().cursor()
            try:
                yield cursor
            finally:
                cursor.close()

    def _read(self, doing: str, sql: str, args: Sequence[Any] = ()) -> List[Tuple[Any, ...]]:
        with self._reading(doing) as cursor:
            cursor.execute(sql, tuple(args))
            return list(cursor.fetchall())

    # -- the schema ------------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self._reading("schema version") as cursor:
            return self._version_on(cursor)

    @staticmethod
    def _version_on(cursor: Cursor) -> int:
        """0 for a database without the version table (new, or not slurm-dsl's)."""
        try:
            cursor.execute("SELECT version FROM schema_version WHERE one = 1")
        except pymysql.Error as exc:
            if _error_number(exc) == ER_NO_SUCH_TABLE:
                return 0
            raise
        row = cursor.fetchone()
        return int(row[0]) if row else 0

    def _version(self, cursor: Optional[Cursor] = None) -> int:
        """The database's schema version; LedgerError if it is newer than this code."""
        version = self.schema_version() if cursor is None else self._version_on(cursor)
        if version > len(MIGRATIONS):
            raise LedgerError(
                f"ledger {self.path} has schema version {version}, newer than this slurm-dsl "
                f"knows ({len(MIGRATIONS)}); upgrade slurm-dsl or use another database",
                path=self.path,
            )
        return version

    def _migrate(self) -> None:
        """Bring the schema up to date under the migration lock, reading the version again under
        it: whoever got the lock first migrated; the others find the version current."""
        name = f"slurm_dsl.migrate.{self.database}"
        with self._errors("migrate"):
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
                version = self._version(cursor)  # on the connection that holds the lock
                if version == 0:
                    self._refuse_foreign_tables(cursor)
                cursor.execute(_VERSION_TABLE)
                for number in range(version, len(MIGRATIONS)):
                    for statement in MIGRATIONS[number]:
                        cursor.execute(statement)
                    cursor.execute(
                        "INSERT INTO schema_version (one, version) VALUES (1, %s)"
                        " ON DUPLICATE KEY UPDATE version = VALUES(version)",
                        (number + 1,),
                    )
            finally:
                try:
                    cursor.execute("SELECT RELEASE_LOCK(%s)", (name,))
                except (pymysql.Error, OSError):
                    pass  # a connection that is gone holds no lock
                cursor.close()

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

    def _refuse_foreign_tables(self, cursor: Cursor) -> None:
        """A database with tables of its own and no schema version is someone else's: leave it."""
        cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
        foreign = sorted({str(row[0]) for row in cursor.fetchall()} - OWN_TABLES)
        if foreign:
            raise LedgerError(
                f"ledger {self.path}: database {self.database} holds tables that are not slurm-dsl's"
                f" ({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}): give the ledger a"
                " database of its own",
                path=self.path,
            )

    # -- the clock and the sweep lock ------------------------------------------------------------

    def now(self) -> float:
        """The database server's clock (UTC epoch seconds, to the microsecond): every host sharing
        the ledger reads the same one.  The ``clock`` given to ``open`` instead, in tests."""
        if self._clock is not None:
            return self._clock()
        return float(self._read("read the server's clock", "SELECT UNIX_TIMESTAMP(NOW(6))")[0][0])

    def sweep_lock(self) -> MariaDbSweepLock:
        return MariaDbSweepLock(self)

    def _sweep_connection(self) -> Connection[Cursor]:
        with self._errors("sweep lock"):
            return self._server.connect(self.database)

    # -- operations ------------------------------------------------------------------------------

    def begin_operation(self, job_id: str, op: Op, nonce: str, now: float, *, actor: str = "") -> int:
        """Record that ``op`` starts on ``job_id``; return the history row's id (as SQLite's)."""
        return self.begin_operations([(job_id, op, nonce)], now, actor=actor)[0]

    def begin_operations(
        self, starts: Sequence[Tuple[str, Op, str]], now: float, *, actor: str = ""
    ) -> List[int]:
        """``begin_operation`` for many ``(job_id, op, nonce)`` in ONE committed transaction: every
        intent is committed before this returns, so before any of their scripts may start.

        Set-based, as SQLite's: the objects read (``FOR UPDATE``, ``_keyed``) in ``IN`` lists of
        ``ledger_rows.IN_PIECE``, the objects created or given an intent in one multi-row upsert,
        the history in one multi-row insert (``_write_rows``, ``_append_history``);
        ``ledger_rows.begin_plan`` decides, as the starts one after the other would."""
        checked = ledger_rows.checked_starts(starts)
        now = ledger_rows.finite("now", now)
        with self._atomic("begin operation") as cur:
            found = _keyed(cur, _BIT_OF_ONE, _BITS_OF, [job_id for job_id, _, _ in checked])
            plan = ledger_rows.begin_plan(checked, {job_id: row[0] for job_id, row in found.items()}, now, actor)
            # A new object is inserted (back-off 0 by default); one there only gets an intent, and
            # a new intent is news for the sweeper: an old back-off must not delay it.
            _write_rows(
                cur,
                "INSERT INTO objects (job_id, bit, why, updated_at) VALUES (%s, %s, %s, %s)"
                " ON DUPLICATE KEY UPDATE bit = VALUES(bit), why = VALUES(why), updated_at = VALUES(updated_at),"
                " lookup_failures = 0, next_lookup_at = 0",
                plan.objects,
            )
            op_ids = self._append_history(cur, plan.history)
        return op_ids

    def _append_history(self, cur: Cursor, rows: Sequence[Tuple[Any, ...]]) -> List[int]:
        """Append the history ``rows`` (job_id, op, nonce, started_at, prior_bit, actor); their ids
        in their order.  Every writer holds the write lock, so nobody else appends meanwhile: the
        rows above the largest id before are these (``ledger_rows.inserted_ids`` checks it; an
        ``auto_increment_increment`` above 1, as Galera sets, leaves gaps, which do not matter)."""
        insert = (
            "INSERT INTO history (job_id, op, nonce, started_at, prior_bit, actor) VALUES (%s, %s, %s, %s, %s, %s)"
        )
        if len(rows) <= 1:  # one operation: its lastrowid, in one statement as always
            ids: List[int] = []
            for row in rows:
                cur.execute(insert, row)
                ids.append(int(cur.lastrowid))
            return ids
        cur.execute("SELECT COALESCE(MAX(id), 0) FROM history")
        found = cur.fetchone()
        before = int(found[0]) if found else 0
        cur.executemany(insert, rows)
        cur.execute(
            "SELECT id, job_id, op, nonce, prior_bit FROM history WHERE id > %s ORDER BY id LIMIT %s",
            (before, len(rows) + 1),
        )
        return ledger_rows.inserted_ids(self.path, rows, list(cur.fetchall()))

    def finish_operation(self, op_id: int, outcome: Outcome, stderr: bytes, now: float) -> RequeueBit:
        """Fill in operation ``op_id`` with its outcome; return the object's new bit (as SQLite's)."""
        return self.finish_operations([(op_id, outcome, stderr)], now)[0]

    def finish_operations(self, finishes: Sequence[Tuple[int, Outcome, bytes]], now: float) -> List[RequeueBit]:
        """``finish_operation`` for many ``(op_id, outcome, stderr)`` in ONE transaction; if any is
        refused, none is written.

        Set-based: the operations read (``FOR UPDATE``, ``_keyed``) in ``IN`` lists of
        ``ledger_rows.IN_PIECE``, decided by ``ledger_rows.finish_plan`` (as the finishes one after
        the other would), the objects changed in one multi-row upsert, the history rows in
        ``_finish_history``."""
        now = ledger_rows.finite("now", now)
        finishes = list(finishes)
        with self._atomic("finish operation") as cur:
            rows = _keyed(cur, _FINISHING_ONE, _FINISHING_ROWS, [op_id for op_id, _, _ in finishes])
            plan = ledger_rows.finish_plan(self.path, finishes, rows, now, hex_stderr=True)
            _write_rows(cur, _WRITE_BIT, plan.objects)
            self._finish_history(cur, plan.history)
        return plan.bits

    def _finish_history(self, cur: Cursor, values: Sequence[Tuple[Any, ...]]) -> None:
        """Write ``ledger_rows.finished_values`` (stderr as hex, id last) into their history rows.

        PyMySQL's ``executemany`` of an UPDATE is one round trip per row, so past
        ``_DIRECT_FINISHES`` rows the values go, in one multi-row insert, into this connection's
        TEMPORARY table ``slurm_dsl_finishing`` (InnoDB: rolled back with the transaction, seen by
        no other connection, created without an implicit commit) and one ``UPDATE ... JOIN`` fills
        in every row; the table is emptied again in the same transaction, so it is empty whenever
        no transaction is open.  The triggers see each row updated as by one UPDATE of it."""
        if len(values) <= _DIRECT_FINISHES:
            for row in values:
                cur.execute(_FINISH_ONE, row)
            return
        if self._finishing_on is not self._conn:
            cur.execute(_FINISHING_TABLE)
            self._finishing_on = self._conn
        cur.executemany(_FINISHING_INSERT, values)
        updated = cur.execute(_FINISHING_UPDATE)
        cur.execute("DELETE FROM slurm_dsl_finishing")
        if updated != len(values):  # every row was read unfinished under the lock: each one changes
            raise LedgerError(
                f"ledger {self.path}: finishing {len(values)} operations updated {updated} history rows",
                path=self.path,
            )

    @staticmethod
    def _write_bit(cur: Cursor, job_id: str, bit: RequeueBit, why: str, now: float) -> None:
        cur.execute(_WRITE_BIT, (job_id, bit.value, why, now))

    # -- leases ----------------------------------------------------------------------------------

    def acquire_lease(self, job_id: str, owner: str, now: float, ttl: float) -> bool:
        """Take (or renew) the job's lease until ``now + ttl``; False if another owner holds it."""
        return bool(self.acquire_leases([job_id], owner, now, ttl))

    def acquire_leases(
        self, job_ids: Sequence[str], owner: str, now: float, ttl: float, *, take_over_sweeps: bool = False
    ) -> List[str]:
        """``acquire_lease`` for many jobs in one transaction; returns the ids now held by ``owner``
        (in their order).  The leases there read (``FOR UPDATE``, ``_keyed``) in ``IN`` lists of
        ``ledger_rows.IN_PIECE``, the ones taken written in one multi-row upsert
        (``ledger_rows.leases_taken`` decides; ``take_over_sweeps`` as SQLite's)."""
        ids = [validate_job_id(j) for j in job_ids]
        now, ttl = ledger_rows.finite("now", now), ledger_rows.positive_ttl(ttl)
        with self._atomic("acquire lease") as cur:
            rows = _keyed(cur, _LEASE_OF_ONE, _LEASES_OF, ids)
            held = ledger_rows.leases_taken(ids, rows, owner, now, take_over_sweeps)
            _write_rows(
                cur,
                "INSERT INTO leases (job_id, owner, expires_at) VALUES (%s, %s, %s)"
                " ON DUPLICATE KEY UPDATE owner = VALUES(owner), expires_at = VALUES(expires_at)",
                [(job_id, owner, now + ttl) for job_id in ledger_rows.distinct(held)],
            )
        return held

    def release_lease(self, job_id: str, owner: str) -> bool:
        """Give the lease back; False if ``owner`` did not hold it (it lapsed and was taken)."""
        return self.release_leases([job_id], owner) > 0

    def release_leases(self, job_ids: Sequence[str], owner: str) -> int:
        """``release_lease`` for many jobs in one transaction; returns how many were held (a job
        named twice counts once).  One DELETE per ``IN`` list of ``ledger_rows.IN_PIECE`` ids."""
        released = 0
        with self._atomic("release lease") as cur:
            for piece in ledger_rows.pieces(ledger_rows.distinct(job_ids)):
                sql = ledger_rows.in_list("DELETE FROM leases WHERE owner = %s AND job_id", len(piece), "%s")
                released += cur.execute(sql, (owner, *piece))
        return released

    @staticmethod
    def _holds(cur: Cursor, job_id: str, owner: str, now: float) -> bool:
        cur.execute(
            "SELECT 1 FROM leases WHERE job_id = %s AND owner = %s AND expires_at > %s FOR UPDATE",
            (job_id, owner, now),
        )
        return cur.fetchone() is not None

    # -- objects and the sweeper -----------------------------------------------------------------

    def get(self, job_id: str) -> Optional[JobObject]:
        rows = self._read("get object", ledger_rows.SELECT_OBJECTS + " WHERE job_id = %s", (job_id,))
        return ledger_rows.job_object(rows[0]) if rows else None

    def pending(
        self, now: float, limit: Optional[int] = None, *, take_over_sweeps: bool = False
    ) -> List[JobObject]:
        """Objects whose bit is not clear that the sweeper may look at now, longest waiting first
        (as SQLite's): no unexpired lease (with ``take_over_sweeps``: but another sweep's), back-off
        elapsed."""
        now = ledger_rows.finite("now", now)
        sql, args = ledger_rows.pending_query("%s", now, take_over_sweeps)
        if limit is not None and limit >= 0:  # SQLite's LIMIT -1: no limit
            sql += " LIMIT %s"
            args.append(int(limit))
        return [ledger_rows.job_object(row) for row in self._read("list pending objects", sql, args)]

    def count_not_clear(self) -> int:
        """How many objects have a bit that is not clear (leased and backed-off ones included)."""
        return int(self._read("count objects", "SELECT COUNT(*) FROM objects WHERE bit <> 'clear'")[0][0])

    def set_bit(self, job_id: str, bit: RequeueBit, why: str, now: float, *, owner: str) -> bool:
        """Set the job's bit and reset its back-off, only while ``owner`` holds its unexpired lease."""
        return bool(self.set_bits([(job_id, bit, why)], now, owner=owner))

    def set_bits(
        self, changes: Sequence[Tuple[str, RequeueBit, str]], now: float, *, owner: str
    ) -> List[str]:
        """``set_bit`` for many ``(job_id, bit, why)`` in one transaction; returns the ids written."""
        checked = ledger_rows.checked_changes(changes)
        now = ledger_rows.finite("now", now)
        written: List[str] = []
        with self._atomic("set bit") as cur:
            for job_id, bit, why in checked:
                if not self._holds(cur, job_id, owner, now):
                    continue
                self._write_bit(cur, job_id, bit, why, now)
                cur.execute(
                    "UPDATE objects SET lookup_failures = 0, next_lookup_at = 0, lookup_error = ''"
                    " WHERE job_id = %s",
                    (job_id,),
                )
                written.append(job_id)
        return written

    def watch(self, job_ids: Sequence[str], now: float, *, owner: str) -> List[str]:
        """Keep the objects as they are, due again at ``now`` without back-off (as SQLite's), only
        while ``owner`` holds the job's unexpired lease; returns the ids written."""
        ids = [validate_job_id(j) for j in job_ids]
        now = ledger_rows.finite("now", now)
        written: List[str] = []
        with self._atomic("watch") as cur:
            for job_id in ids:
                cur.execute("SELECT 1 FROM objects WHERE job_id = %s FOR UPDATE", (job_id,))
                # Decided by reading, not by the UPDATE's row count, which counts changed rows only.
                if cur.fetchone() is None or not self._holds(cur, job_id, owner, now):
                    continue
                cur.execute(
                    "UPDATE objects SET lookup_failures = 0, next_lookup_at = %s, lookup_error = ''"
                    " WHERE job_id = %s",
                    (now, job_id),
                )
                written.append(job_id)
        return written

    def lookup_failed(self, job_id: str, why: str, now: float) -> float:
        """Record that the job could not be looked up; return when the sweeper may try again."""
        return self.lookups_failed([job_id], why, now)[0]

    def lookups_failed(self, job_ids: Sequence[str], why: str, now: float) -> List[float]:
        """``lookup_failed`` for many jobs in one transaction; returns each one's next lookup time."""
        why = ledger_rows.stored_text(why)
        now = ledger_rows.finite("now", now)
        times: List[float] = []
        with self._atomic("record failed lookup") as cur:
            for job_id in job_ids:
                cur.execute("SELECT lookup_failures FROM objects WHERE job_id = %s FOR UPDATE", (job_id,))
                failures, next_at = ledger_rows.failed_lookup(
                    self.path, job_id, cur.fetchone(), now, self.backoff_base, self.backoff_cap
                )
                cur.execute(
                    "UPDATE objects SET lookup_failures = %s, next_lookup_at = %s, lookup_error = %s"
                    " WHERE job_id = %s",
                    (failures, next_at, why, job_id),
                )
                times.append(next_at)
        return times

    def history(self, job_id: str) -> List[HistoryEntry]:
        """Every operation on the job, oldest first."""
        rows = self._read(
            "read history",
            ledger_rows.SELECT_HISTORY + " WHERE job_id = %s ORDER BY id",
            (job_id,),
        )
        return [ledger_rows.entry(r) for r in rows]

    # -- the admin's view ------------------------------------------------------------------------

    def count_by_bit(self) -> Dict[RequeueBit, int]:
        """How many objects hold each bit (every bit named, 0 if none)."""
        counts = {bit: 0 for bit in RequeueBit}
        for bit, n in self._read("count objects", "SELECT bit, COUNT(*) FROM objects GROUP BY bit"):
            counts[RequeueBit(bit)] = int(n)
        return counts

    def objects_not_clear(self) -> List[JobObject]:
        """Every object whose bit is not clear, leased and backed-off ones too, oldest change first."""
        rows = self._read(
            "list objects not clear",
            ledger_rows.SELECT_OBJECTS + " WHERE bit <> 'clear' ORDER BY updated_at, job_id",
        )
        return [ledger_rows.job_object(row) for row in rows]

    def count_history(self) -> int:
        """How many history rows the ledger holds (what ``prune`` keeps in check)."""
        return int(self._read("count history", "SELECT COUNT(*) FROM history")[0][0])

    def unfinished(self, now: float) -> Unfinished:
        """The operations without a result (``ledger.Unfinished``), read in one statement."""
        now = ledger_rows.finite("now", now)
        sql = ledger_rows.SELECT_UNFINISHED.format(mark="%s")
        return ledger_rows.unfinished(self._read("read unfinished operations", sql, (now,)))

    def record_sweep(self, started: float, finished: float, summary: Mapping[str, Any]) -> None:
        """Keep this sweep as the last one: its times and ``summary`` (JSON values), replacing the previous."""
        started, finished = ledger_rows.finite("started", started), ledger_rows.finite("finished", finished)
        text = ledger_rows.sweep_summary(summary)
        with self._atomic("record sweep") as cur:
            cur.execute(
                "INSERT INTO last_sweep (one, started_at, finished_at, summary) VALUES (1, %s, %s, %s)"
                " ON DUPLICATE KEY UPDATE started_at = VALUES(started_at), finished_at = VALUES(finished_at),"
                " summary = VALUES(summary)",
                (started, finished, text),
            )

    def last_sweep(self) -> Optional[SweepRecord]:
        """The last sweep ``record_sweep`` kept, or None if no sweep has run on this ledger."""
        found = self._read("read last sweep", "SELECT started_at, finished_at, summary FROM last_sweep")
        return ledger_rows.sweep_record(self.path, found[0]) if found else None

    def prune(self, before: float, now: float, *, dry_run: bool = False) -> PruneResult:
        """Remove the history rows ``rules.may_prune`` allows (as SQLite's: in batches of
        ``PRUNE_BATCH``, each its own transaction that decides afresh under the write lock, so that
        whatever starts between two batches is left alone).  ``checkpointed`` is None: InnoDB has
        no WAL to give back.  ``dry_run`` counts only."""
        before, now = ledger_rows.finite("before", before), ledger_rows.finite("now", now)
        removed = 0
        jobs: Set[str] = set()
        after_id = 0
        while True:
            with self._reading("prune (dry run)") if dry_run else self._atomic("prune") as cur:
                cur.execute(_PRUNE_ROWS, (now, after_id, before, PRUNE_BATCH))
                rows = list(cur.fetchall())
                doomed = ledger_rows.doomed(rows, before)
                if doomed and not dry_run:
                    cur.execute("INSERT INTO pruning (connection_id) VALUES (CONNECTION_ID())")
                    cur.executemany("DELETE FROM history WHERE id = %s", [(op_id,) for op_id, _ in doomed])
                    cur.execute("DELETE FROM pruning WHERE connection_id = CONNECTION_ID()")
            removed += len(doomed)
            jobs.update(job_id for _, job_id in doomed)
            if len(rows) < PRUNE_BATCH:
                break
            after_id = int(rows[-1][0])
        return PruneResult(removed, len(jobs), None)

    # -- ledger migrate ----------------------------------------------------------------------------

    def identity(self) -> str:
        """The server (its own host name and port, whatever name reached it) and the database."""
        host, port, database = self._read("identity", "SELECT @@hostname, @@port, DATABASE()")[0]
        return f"mariadb {host}:{port}/{database}"

    def export_objects(self, *, not_clear: bool, after: str = "", limit: int = 500) -> List[JobObject]:
        """A page of the objects whose bit is (or is not) clear, by job id after ``after``."""
        rows = self._read(
            "export objects",
            ledger_rows.SELECT_OBJECTS + " WHERE (bit <> 'clear') = %s AND job_id > %s ORDER BY job_id LIMIT %s",
            (int(bool(not_clear)), str(after), int(limit)),
        )
        return [ledger_rows.job_object(row) for row in rows]

    def export_history(self, after_id: int, limit: int) -> List[HistoryEntry]:
        """A page of the history, in id order, from after ``after_id``."""
        rows = self._read(
            "export history",
            ledger_rows.SELECT_HISTORY + " WHERE id > %s ORDER BY id LIMIT %s",
            (int(after_id), int(limit)),
        )
        return [ledger_rows.entry(r) for r in rows]

    def import_records(
        self, objects: Sequence[JobObject], history: Sequence[HistoryEntry], *, merge: bool
    ) -> ImportResult:
        """Another ledger's objects, then its history rows, in one transaction holding the write
        lock (``ledger.LedgerStore.import_records``).  The triggers let rows be appended finished
        or not; nothing here updates or deletes one."""
        checked = [ledger_rows.object_values(o) for o in objects]
        rows = [ledger_rows.history_values(e, hex_stderr=True) for e in history]
        copied = merged = kept = added = skipped = 0
        with self._atomic("import records") as cur:
            for values in checked:
                job_id = values[0]
                cur.execute("SELECT bit FROM objects WHERE job_id = %s FOR UPDATE", (job_id,))
                action = ledger_rows.import_action(self.path, values, cur.fetchone(), merge)
                if action == "insert":
                    cur.execute(
                        "INSERT INTO objects (job_id, bit, why, updated_at, lookup_failures, next_lookup_at,"
                        " lookup_error) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        values,
                    )
                    copied += 1
                elif action == "update":
                    cur.execute(
                        "UPDATE objects SET bit = %s, why = %s, updated_at = %s, lookup_failures = %s,"
                        " next_lookup_at = %s, lookup_error = %s WHERE job_id = %s",
                        values[1:] + values[:1],
                    )
                    merged += 1
                else:
                    kept += 1
            for values in rows:
                if merge:
                    cur.execute(
                        "SELECT 1 FROM history WHERE job_id = %s AND nonce = %s AND op = %s AND started_at = %s",
                        values[:4],
                    )
                    if cur.fetchone() is not None:
                        skipped += 1
                        continue
                # The stderr as hex, as _finish writes it: bytes never pass as utf8mb4 text.
                cur.execute(
                    "INSERT INTO history (job_id, nonce, op, started_at, prior_bit, finished_at, result,"
                    " requeue_bit, bit_after, reason, detail, exit_status, calls, stderr, stderr_len, actor)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, UNHEX(%s), %s, %s)",
                    values,
                )
                added += 1
        return ImportResult(copied, merged, kept, added, skipped)


# -- doctor: the server, looked at without opening the ledger ----------------------------------


@dataclass(frozen=True)
class Probe:
    """What ``probe`` found: the server's version, its clock read between two readings of this
    host's (``before`` <= ``server_time`` <= ``after`` if the clocks agree), the database's schema
    version (0: empty) and, if it is current, how many objects are not clear."""

    version: str
    before: float
    server_time: float
    after: float
    schema: int
    not_clear: Optional[int]

    @property
    def clock_offset(self) -> float:
        """How far the server's clock is ahead of this host's (negative: behind), in seconds,
        give or take half the round trip."""
        return self.server_time - (self.before + self.after) / 2


def probe(url: str, *, busy_timeout: float = 1.0, clock: Callable[[], float] = time.time) -> Probe:
    """Reach the server and read, never write: nothing is created or migrated, and every call is
    bounded by the connect and read timeouts (the read one is ``busy_timeout`` + ``READ_SLACK``).
    ConfigError for the URL, the option file or a missing PyMySQL; LedgerError for the server."""
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


class MariaDbSweepLock:
    """One sweep at a time per database: ``GET_LOCK('slurm_dsl.sweep.<database>', 0)`` on a
    connection of its own, held until the sweep ends.  The server releases it when that
    connection ends, so a host that dies mid-sweep does not block the next one.

    ``connection_id`` is the holder's connection (an admin may ``KILL`` it).
    """

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
