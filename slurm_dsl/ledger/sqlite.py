"""The ledger's SQLite dialect (docs/contract.md §9.1): one file, the only module that imports sqlite3.

``SqliteLedger`` is ``store.SqlStore`` stating what SQLite does its own way: the file and its owner rule
(``not_private``), WAL, ``BEGIN IMMEDIATE`` (a deferred transaction that reads, then writes fails at once, whatever
the busy timeout, when another commits between), ``PRAGMA user_version`` migrations, the host's clock, the flock
sweep lock.  One connection: one thread at a time (another may close it); open a new one after a fork.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shlex
import sqlite3
import stat
import time
from contextlib import contextmanager
from typing import Any, Callable, ContextManager, Iterator, Optional, Sequence, Tuple, Union, final
from urllib.parse import quote

from ..core.model import LedgerError, SweepBusy
from . import rows as ledger_rows
from . import schema
from .base import BACKOFF_BASE, BACKOFF_CAP, BUSY_TIMEOUT, DEFAULT_PATH
from .query import Cursor
from .store import SqlStore

_BITS, _OPS, _VERDICTS = schema.BITS, schema.OPS, schema.VERDICTS

# The indexes and triggers of the current schema: created by the migrations below, and with a new
# file's tables at once (``SCHEMA``).
_PENDING_INDEX = "CREATE INDEX objects_pending ON objects (updated_at, job_id) WHERE bit != 'clear'"
_JOB_INDEX = "CREATE INDEX history_job ON history (job_id, id)"
_LOOKS_INDEX = "CREATE INDEX looks_observer ON looks (observer, seq)"
_SEEN_KEY = "CREATE UNIQUE INDEX op_seen_key ON op_seen (op_id, observer)"
_SELECTIONS_KEY = "CREATE UNIQUE INDEX selections_key ON selections (op_key, op)"
_COMMENTS_OP = "CREATE INDEX comments_op ON comments (op_id)"
# Prune alone may delete history (``pruning``), and never an unfinished row, a row of an object
# whose bit is not clear, or an object's newest row (ledger_rules.may_prune).
_NO_DELETE = """CREATE TRIGGER history_no_delete BEFORE DELETE ON history
            WHEN NOT EXISTS (SELECT 1 FROM pruning)
              OR OLD.finished_at IS NULL
              OR OLD.id = (SELECT max(h.id) FROM history h WHERE h.job_id = OLD.job_id)
              OR NOT EXISTS (SELECT 1 FROM objects o WHERE o.job_id = OLD.job_id AND o.bit = 'clear')
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END"""
# The operations still to settle (``unsettled``, every sweep): only the unknown and the
# unfinished rows, by start, so that the sweep's read walks those alone however many finished
# rows the ledger keeps.  Its WHERE is SqlStore.UNSETTLED's, word for word.
_UNSETTLED_INDEX = """CREATE INDEX history_unsettled ON history (started_at, id)
            WHERE result = 'unknown' OR finished_at IS NULL"""
# The earlier operations of one key (``keyed``): only rows that have a key.
_KEY_INDEX = "CREATE INDEX history_key ON history (op_key, job_id, op) WHERE op_key IS NOT NULL"
_SETTLEMENTS_NO_UPDATE = """CREATE TRIGGER settlements_no_update BEFORE UPDATE ON settlements
            BEGIN SELECT RAISE(ABORT, 'settlements are append-only'); END"""
# Prune alone deletes one, and only once its history row is gone.
_SETTLEMENTS_NO_DELETE = """CREATE TRIGGER settlements_no_delete BEFORE DELETE ON settlements
            WHEN NOT EXISTS (SELECT 1 FROM pruning)
              OR EXISTS (SELECT 1 FROM history h WHERE h.id = OLD.op_id)
            BEGIN SELECT RAISE(ABORT, 'settlements are append-only'); END"""

# history_finish_once as schemas 6 and 7 made it (each later one adds its new start columns).
_FINISH_ONCE_6 = """CREATE TRIGGER history_finish_once BEFORE UPDATE ON history
            WHEN OLD.finished_at IS NOT NULL OR NEW.id IS NOT OLD.id OR NEW.job_id IS NOT OLD.job_id
              OR NEW.op IS NOT OLD.op OR NEW.nonce IS NOT OLD.nonce
              OR NEW.started_at IS NOT OLD.started_at OR NEW.prior_bit IS NOT OLD.prior_bit
              OR NEW.actor IS NOT OLD.actor OR NEW.baseline IS NOT OLD.baseline
              OR NEW.baseline_at IS NOT OLD.baseline_at OR NEW.op_key IS NOT OLD.op_key
              OR NEW.retry_of IS NOT OLD.retry_of OR NEW.ends_by IS NOT OLD.ends_by
              OR NEW.baseline_boot IS NOT OLD.baseline_boot
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END"""
_FINISH_ONCE_7 = _FINISH_ONCE_6.replace(
    "OR NEW.baseline_boot IS NOT OLD.baseline_boot\n",
    "OR NEW.baseline_boot IS NOT OLD.baseline_boot OR NEW.admin_reason IS NOT OLD.admin_reason\n"
    "              OR NEW.hold IS NOT OLD.hold\n")
# MIGRATIONS[i] takes a file from version i to i + 1.  Statements one by one (executescript
# would commit first): each list runs inside the transaction that bumps user_version.
MIGRATIONS: Tuple[Tuple[str, ...], ...] = (
    (
        f"""CREATE TABLE objects (
            job_id TEXT PRIMARY KEY,
            bit TEXT NOT NULL CHECK (bit IN ({_BITS})),
            why TEXT NOT NULL,
            updated_at REAL NOT NULL,
            lookup_failures INTEGER NOT NULL DEFAULT 0,
            next_lookup_at REAL NOT NULL DEFAULT 0,
            lookup_error TEXT NOT NULL DEFAULT ''
        )""",
        _PENDING_INDEX,
        f"""CREATE TABLE history (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL,
            op TEXT NOT NULL CHECK (op IN ({_OPS})),
            nonce TEXT NOT NULL,
            started_at REAL NOT NULL,
            prior_bit TEXT NOT NULL CHECK (prior_bit IN ({_BITS})),
            finished_at REAL,
            result TEXT,
            requeue_bit TEXT,
            bit_after TEXT CHECK (bit_after IN ({_BITS})),
            reason TEXT,
            detail TEXT,
            exit_status INTEGER,
            calls TEXT,
            stderr BLOB,
            stderr_len INTEGER
        )""",
        _JOB_INDEX,
        # Append-only, enforced by the file itself: no delete, a row is finished once, and the
        # columns written at its start never change.
        """CREATE TRIGGER history_no_delete BEFORE DELETE ON history
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END""",
        """CREATE TRIGGER history_finish_once BEFORE UPDATE ON history
            WHEN OLD.finished_at IS NOT NULL OR NEW.id IS NOT OLD.id OR NEW.job_id IS NOT OLD.job_id
              OR NEW.op IS NOT OLD.op OR NEW.nonce IS NOT OLD.nonce
              OR NEW.started_at IS NOT OLD.started_at OR NEW.prior_bit IS NOT OLD.prior_bit
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END""",
        """CREATE TABLE leases (
            job_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            expires_at REAL NOT NULL
        )""",
    ),
    (
        # Who ran each operation (NULL in rows written before: shown as unknown), written at its
        # start, so history_finish_once below guards it like the other start columns.
        "ALTER TABLE history ADD COLUMN actor TEXT",
        # The last sweep that was not a dry run (``ledger status``): one row, replaced each time.
        """CREATE TABLE last_sweep (
            one INTEGER PRIMARY KEY CHECK (one = 1),
            started_at REAL NOT NULL,
            finished_at REAL NOT NULL,
            summary TEXT NOT NULL
        )""",
        # Prune is the one writer that may delete history.  It inserts this table's one row and
        # deletes it again inside its own transaction, so no other transaction ever sees the row
        # (a crash rolls it back with the rest).  Even then the file itself refuses to delete an
        # unfinished row, a row of an object whose bit is not clear, and an object's newest row
        # (ledger_rules.may_prune; its cutoff and the leases are prune's own business).
        """CREATE TABLE pruning (
            one INTEGER PRIMARY KEY CHECK (one = 1)
        )""",
        "DROP TRIGGER history_no_delete",
        _NO_DELETE,
        "DROP TRIGGER history_finish_once",
        """CREATE TRIGGER history_finish_once BEFORE UPDATE ON history
            WHEN OLD.finished_at IS NOT NULL OR NEW.id IS NOT OLD.id OR NEW.job_id IS NOT OLD.job_id
              OR NEW.op IS NOT OLD.op OR NEW.nonce IS NOT OLD.nonce
              OR NEW.started_at IS NOT OLD.started_at OR NEW.prior_bit IS NOT OLD.prior_bit
              OR NEW.actor IS NOT OLD.actor
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END""",
    ),
    (
        # What an operation records at its start for settling it later (docs/contract.md §12):
        # the job's record looked up before its first call (JSON, ledger.rows.job_info_text) and
        # when that lookup started, its idempotency key, the first operation it retries, and the
        # time by which every process of it is dead.  NULL in older rows.  Start columns:
        # history_finish_once below guards them like the others.
        "ALTER TABLE history ADD COLUMN baseline TEXT",
        "ALTER TABLE history ADD COLUMN baseline_at REAL",
        "ALTER TABLE history ADD COLUMN op_key TEXT",
        "ALTER TABLE history ADD COLUMN retry_of INTEGER",
        "ALTER TABLE history ADD COLUMN ends_by REAL",
        "DROP TRIGGER history_finish_once",
        """CREATE TRIGGER history_finish_once BEFORE UPDATE ON history
            WHEN OLD.finished_at IS NOT NULL OR NEW.id IS NOT OLD.id OR NEW.job_id IS NOT OLD.job_id
              OR NEW.op IS NOT OLD.op OR NEW.nonce IS NOT OLD.nonce
              OR NEW.started_at IS NOT OLD.started_at OR NEW.prior_bit IS NOT OLD.prior_bit
              OR NEW.actor IS NOT OLD.actor OR NEW.baseline IS NOT OLD.baseline
              OR NEW.baseline_at IS NOT OLD.baseline_at OR NEW.op_key IS NOT OLD.op_key
              OR NEW.retry_of IS NOT OLD.retry_of OR NEW.ends_by IS NOT OLD.ends_by
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END""",
        _UNSETTLED_INDEX,
        _KEY_INDEX,
        # The verdicts (docs/contract.md §12): one per operation at most, appended, final.
        f"""CREATE TABLE settlements (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            op_id INTEGER NOT NULL UNIQUE,
            job_id TEXT NOT NULL,
            verdict TEXT NOT NULL CHECK (verdict IN ({_VERDICTS})),
            looked_at REAL NOT NULL,
            record TEXT,
            settled_at REAL NOT NULL,
            settled_by TEXT NOT NULL,
            detail TEXT NOT NULL
        )""",
        _SETTLEMENTS_NO_UPDATE,
        _SETTLEMENTS_NO_DELETE,
    ),
    (
        # Until when a call of slurm-dsl's may change the job's flag (docs/contract.md §13): the
        # sweep clears an object only from a lookup after a save that began after it.
        "ALTER TABLE objects ADD COLUMN quiet_at REAL",
    ),
    (
        # Saves proven by what was seen of them, in order (core.durable Rules 1, 2, 8), not by
        # comparing clocks.  NULL marks in older rows: not known yet (the sweep anchors them).
        "ALTER TABLE objects ADD COLUMN quiet_mark INTEGER",
        "ALTER TABLE objects ADD COLUMN quiet_look TEXT",
        "ALTER TABLE objects ADD COLUMN gone_mark INTEGER",
        "ALTER TABLE objects ADD COLUMN gone_look TEXT",
        """CREATE TABLE looks (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            observer TEXT NOT NULL,
            seen TEXT NOT NULL,
            at_boot REAL
        )""",
        _LOOKS_INDEX,
        """CREATE TABLE op_looks (
            op_id INTEGER PRIMARY KEY,
            mark INTEGER NOT NULL,
            look TEXT,
            ended TEXT
        )""",
    ),
    (
        # When each observer first found an operation over, on its boot clock, and where and when
        # an operation's baseline lookup started on one (docs/contract.md §13.7: the settle delay
        # of an operation that ended elsewhere; how long after an earlier one's end a record was
        # read).  A start column: history_finish_once guards it like the others.
        """CREATE TABLE op_seen (
            op_id INTEGER NOT NULL,
            observer TEXT NOT NULL,
            at_boot REAL NOT NULL
        )""",
        _SEEN_KEY,
        "ALTER TABLE history ADD COLUMN baseline_boot TEXT",
        "DROP TRIGGER history_finish_once",
        _FINISH_ONCE_6,
    ),
    (
        # The set a keyed run of selectors chose, kept for its reruns (core.select Rule 4), and
        # why the admin said an operation ran (--reason) and whether a requeue was into hold
        # (--hold), start columns guarded like the others.
        "ALTER TABLE history ADD COLUMN admin_reason TEXT",
        "ALTER TABLE history ADD COLUMN hold INTEGER CHECK (hold IN (1))",
        "DROP TRIGGER history_finish_once",
        _FINISH_ONCE_7,
        f"""CREATE TABLE selections (
            op_key TEXT NOT NULL,
            op TEXT NOT NULL CHECK (op IN ({_OPS})),
            selector TEXT NOT NULL,
            job_ids TEXT NOT NULL,
            selected_at REAL NOT NULL,
            actor TEXT
        )""",
        _SELECTIONS_KEY,
    ),
    (
        # Which slurmctld was in control before a baseline's lookup and once the calls were over
        # (docs/contract.md §12, core.settle Rule 16): a start column, guarded, and a finish column.
        "ALTER TABLE history ADD COLUMN baseline_ctl TEXT",
        "ALTER TABLE history ADD COLUMN calls_ctl TEXT",
        "DROP TRIGGER history_finish_once",
        _FINISH_ONCE_7.replace("OR NEW.hold IS NOT OLD.hold",
                               "OR NEW.hold IS NOT OLD.hold OR NEW.baseline_ctl IS NOT OLD.baseline_ctl"),
    ),
    (
        # The reason copied to a job's AdminComment after an operation (--admin-comment).
        """CREATE TABLE comments (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            op_id INTEGER NOT NULL,
            job_id TEXT NOT NULL,
            text TEXT NOT NULL,
            asked_at REAL NOT NULL,
            result TEXT,
            detail TEXT,
            finished_at REAL
        )""",
        _COMMENTS_OP,
    ),
)

# A new file's schema at once: ``schema.CURRENT["sqlite"]``, the version MIGRATIONS reach (a test
# checks that both give the same schema).  Its tables come from ``ledger.schema``.
SCHEMA: Tuple[str, ...] = (
    *schema.create_tables("sqlite"),
    _PENDING_INDEX,
    _JOB_INDEX,
    _NO_DELETE,
    f"""CREATE TRIGGER history_finish_once BEFORE UPDATE ON history
            WHEN {schema.start_guard("sqlite")}
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END""",
    _UNSETTLED_INDEX,
    _KEY_INDEX,
    _SETTLEMENTS_NO_UPDATE,
    _SETTLEMENTS_NO_DELETE,
    _LOOKS_INDEX,
    _SEEN_KEY,
    _SELECTIONS_KEY,
    _COMMENTS_OP,
)

# Finishing operations: their ``ledger_rows.finished_values`` (the id last) into their rows, one
# alone, or many around their VALUES.
_FINISH_ONE = " ".join(("UPDATE history SET", schema.assigned(schema.FINISH), "WHERE id = ?"))
_FINISH_MANY_HEAD = "".join(("WITH v (", schema.listed((*schema.FINISH, "id")), ") AS ("))
_FINISH_MANY_TAIL = " ".join((
    ") UPDATE history SET", schema.assigned(schema.FINISH, "v.{0}"), "FROM v WHERE history.id = v.id",
))

UPDATE_FROM = (3, 33, 0)  # the first SQLite with UPDATE ... FROM

# History rows ``prune`` deletes per transaction: each holds the write lock only briefly, so that
# operations starting or finishing meanwhile wait milliseconds, far within the busy timeout.
PRUNE_BATCH = 500
# And between two batches prune lets go for as long as the last one held the lock, at least this
# long.  SQLite's lock is not fair: a writer waiting in its busy handler tries again only every
# few (later 100) milliseconds, so batches back to back could starve it past its busy timeout.
PRUNE_PAUSE = 0.005


def _create_file(path: str) -> None:
    """Create the parent directory (0700) and the file (0600) unless they exist; check both.  Root runs the sweep,
    so both must be this account's and not group/world-writable before SQLite opens anything: else another account could
    plant the ledger, its -wal/-shm files or the sweep lock as links to root's files."""
    parent = os.path.dirname(path)
    # Every directory above the ledger's, as given and as resolved, must be one no other account
    # can change: else it could swap the directory made below for a link after the checks.
    _check_ancestors(parent or ".", path)
    if parent:
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise LedgerError(f"cannot create ledger {path}: {exc}", path=path) from None
    _check_ancestors(parent or ".", path)
    _check_private_directory(parent or ".", path)
    # An existing file is checked by its name, never opened: closing any descriptor of it would
    # drop every POSIX lock this process holds on it, those of a connection already open on it
    # included (fcntl(2)); another process would then take itself for the last connection and
    # checkpoint and delete the WAL this one still writes to.  The directory is private (just
    # checked), so nobody else can change what the name points at before SQLite opens it.
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise LedgerError(f"cannot use ledger {path}: {exc.strerror}", path=path) from None
    if st is None:
        # Created here, so no connection of this process has it open yet.  SQLite gives the
        # -wal and -shm files the database file's permissions.
        os.close(open_private_file(path, "ledger", ledger=path))
        return
    _check_file(path, st)


def _check_file(path: str, st: os.stat_result) -> None:
    """LedgerError, with the fix, unless the existing file ``path`` (``st``: its lstat) is a real, private file of
    this account's or root's that it can read and write."""
    if stat.S_ISLNK(st.st_mode):
        raise LedgerError(
            f"ledger {path} is a symbolic link: refusing to follow it; remove it"
            f" (rm {shlex.quote(path)}) and check who can write its directory",
            path=path,
        )
    if stat.S_ISDIR(st.st_mode):
        raise LedgerError(f"cannot open ledger {path}: {os.strerror(errno.EISDIR)}", path=path)
    problem = _file_problem(st, path)
    if problem:
        raise LedgerError(f"ledger {path} {problem}", path=path)
    if not os.access(path, os.R_OK | os.W_OK, effective_ids=True):
        raise _denied("ledger", path, path)


class Look:
    """What ``look`` found: the directory's owner, the file's mode (None: not there), its schema version (0: none),
    how many objects are not clear (None: another schema).  A plain class: a NamedTuple compiles code at import."""

    __slots__ = ("directory_uid", "mode", "not_clear", "schema")

    def __init__(
        self, directory_uid: Optional[int], mode: Optional[int], schema: int, not_clear: Optional[int]
    ) -> None:
        self.directory_uid, self.mode, self.schema, self.not_clear = directory_uid, mode, schema, not_clear


def look(path: str, *, busy_timeout: float = BUSY_TIMEOUT) -> Look:
    """The ledger at ``path`` looked at (``doctor``), never created, migrated or switched to WAL: what is there is held
    to ``open``'s rules, then read; LedgerError with the fix, or for a file that is no SQLite database."""
    parent = os.path.dirname(path) or "."
    try:
        st = os.lstat(parent)
    except FileNotFoundError:
        return Look(None, None, 0, None)
    except OSError as exc:
        raise LedgerError(f"cannot use ledger directory {parent}: {exc.strerror}", path=path) from None
    _check_private_directory(parent, path)
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return Look(st.st_uid, None, 0, None)
    except OSError as exc:
        raise LedgerError(f"cannot use ledger {path}: {exc.strerror}", path=path) from None
    _check_file(path, found)
    try:
        # mode=rw: an existing file only; a name that went away since is not made again.
        conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=rw", uri=True, timeout=busy_timeout,
                               isolation_level=None)
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot open ledger {path}: {exc}", path=path) from exc
    ledger = SqliteLedger(conn, path, BACKOFF_BASE, BACKOFF_CAP)
    try:
        version = ledger.schema_version()
        not_clear = ledger.count_not_clear() if version == len(MIGRATIONS) else None
    finally:
        ledger.close()
    return Look(st.st_uid, stat.S_IMODE(found.st_mode), version, not_clear)


def _check_ancestors(directory: str, ledger: str) -> None:
    """LedgerError unless every directory above ``directory`` that exists, as given and as resolved, is root's or
    this account's and writable by neither group nor others, or sticky (/tmp)."""
    euid = os.geteuid()
    for start in dict.fromkeys((os.path.abspath(directory), os.path.realpath(directory))):
        above = os.path.dirname(start)
        while True:
            try:
                st = os.stat(above)
            except FileNotFoundError:
                st = None
            except OSError as exc:
                raise LedgerError(f"cannot use ledger directory {above}: {exc.strerror}", path=ledger) from None
            if st is not None and (st.st_uid not in (0, euid) or (
                    st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX)):
                raise LedgerError(
                    f"ledger directory {start}: {above} above it is uid {st.st_uid}'s, mode"
                    f" {stat.S_IMODE(st.st_mode):04o}: another account could swap the ledger's directory for a link;"
                    " keep the ledger under directories only root (or this account) can change",
                    path=ledger,
                )
            if above == os.path.dirname(above):
                break
            above = os.path.dirname(above)


def _file_problem(st: os.stat_result, path: str) -> str:
    """Why a file with this status may not be a ledger or a lock file, or "" when it may."""
    if not stat.S_ISREG(st.st_mode):
        return f"is {_kind(st.st_mode)}, not a regular file: remove it"
    if st.st_nlink != 1:
        return f"has {st.st_nlink} hard links, so it may be another file's: remove it"
    return _not_private(st, path, "600")


def _check_private_directory(directory: str, ledger: str) -> None:
    """LedgerError unless ``directory`` (lstat: not a symlink) is ours and not group/world-writable."""
    shown = directory if directory != "." else os.path.abspath(directory)
    try:
        st = os.lstat(directory)
    except OSError as exc:
        raise LedgerError(f"cannot use ledger directory {shown}: {exc.strerror}", path=ledger) from None
    if stat.S_ISLNK(st.st_mode):
        problem = "is a symbolic link: point the ledger path at the real directory"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "is not a directory"
    else:
        problem = _not_private(st, shown, "go-w")
    if not problem and not os.access(directory, os.W_OK | os.X_OK):
        # Root's directory passes the owner rule, but SQLite makes the -wal and -shm files (and the
        # sweep its lock) beside the ledger: said here rather than as "readonly database".
        euid = os.geteuid()
        problem = (
            f"is not writable by uid {euid} that runs slurm-dsl (the ledger's -wal, -shm and lock files"
            f" are made there): chown {euid} {shlex.quote(shown)}, or run slurm-dsl as its owner"
        )
    if problem:
        raise LedgerError(f"ledger directory {shown} {problem}", path=ledger)


def _not_private(st: os.stat_result, path: str, chmod: str) -> str:
    """Why a file or directory another account could change is refused, and the fix ('' if fine)."""
    return not_private(st.st_uid, st.st_mode, os.geteuid(), path, chmod)


def not_private(uid: int, mode: int, euid: int, path: str, chmod: str) -> str:
    """The ledger's owner rule, pure (docs/contract.md §9.1): why a file or directory of owner ``uid`` and
    ``mode`` is refused to a process of ``euid``, with the fix ('' if fine)."""
    if uid not in (euid, 0):
        whose = "root that runs slurm-dsl" if euid == 0 else f"uid {euid} that runs slurm-dsl nor by root"
        return (
            f"is owned by uid {uid}, not by {whose}, so that account could swap the ledger's files:"
            f" run slurm-dsl as its owner (uid {uid}: the SlurmUser's ledger is used as the SlurmUser),"
            f" chown {euid} {shlex.quote(path)}, or use another ledger path"
        )
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"is group- or world-writable (mode {stat.S_IMODE(mode):04o}), so another account could"
            f" swap the ledger's files: chmod {chmod} {shlex.quote(path)}"
        )
    return ""


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def open_private_file(path: str, what: str, *, ledger: str) -> int:
    """Open ``path`` read-write, creating it 0600, never through a symlink; the fd.  LedgerError (naming
    ``what``; its ``path`` is ``ledger``) unless it is a regular file with one link, this euid's or root's, not
    group/world-writable.  O_NONBLOCK, O_NOCTTY: a FIFO or device there is refused, not waited on or made a tty."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LedgerError(
                f"{what} {path} is a symbolic link: refusing to follow it; remove it"
                f" (rm {shlex.quote(path)}) and check who can write its directory",
                path=ledger,
            ) from None
        if exc.errno == errno.EACCES:
            raise _denied(what, path, ledger) from None
        raise LedgerError(f"cannot open {what} {path}: {exc.strerror}", path=ledger) from None
    try:
        problem = _file_problem(os.fstat(fd), path)
        if problem:
            raise LedgerError(f"{what} {path} {problem}", path=ledger)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _denied(what: str, path: str, ledger: str) -> LedgerError:
    """The error for a file this account may not open (a ledger made by root, opened by the SlurmUser, or back)."""
    euid = os.geteuid()
    return LedgerError(
        f"cannot open {what} {path}: {os.strerror(errno.EACCES)} (uid {euid} runs slurm-dsl: run it as"
        f" the account that owns the ledger, or chown {euid} the ledger's directory and files)",
        path=ledger,
    )


def _refuse_older(path: str, version: int, current: int) -> None:
    """LedgerError if ``version`` is older than ``current``: for a ledger opened not to be written."""
    if version == 0:
        raise LedgerError(f"no ledger in {path}: it holds no slurm-dsl schema (nothing was created)", path=path)
    if version < current:
        raise LedgerError(
            f"ledger {path} has schema version {version}, older than this slurm-dsl's ({current}), and is"
            f" not migrated here since it must not be written: 'slurm-dsl ledger status --ledger"
            f" {shlex.quote(path)}' migrates it",
            path=path,
        )


@final
class SqliteLedger(SqlStore):
    """The ledger file: ``store.SqlStore`` in SQLite's dialect (``open``, or ``ledger.choose.open_ledger``)."""

    ANOTHER = "another ledger file"
    PRUNING = ("INSERT OR REPLACE INTO pruning (one) VALUES (1)", "DELETE FROM pruning")
    # The settled ones skipped by the unique op_id itself, not a probe per row first (a quarter
    # cheaper: docs/benchmarks.md §9.1).  OR IGNORE skips any constraint a row breaks; the only
    # one these can break is that one: every other value is a checked constant or a history
    # column that is NOT NULL there too.
    SETTLE_GONE = "".join((
        schema.insert("settlements", ledger_rows.SETTLE_COLUMNS, "INSERT OR IGNORE"),
        " SELECT h.id, h.job_id, 'gone', ?, NULL, ?, ?, ? FROM history h"
        " WHERE (h.result = 'unknown' OR h.finished_at IS NULL) AND h.id",
    ))

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: str,
        backoff_base: float,
        backoff_cap: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(path, backoff_base, backoff_cap)
        self._conn = conn
        self._clock = clock

    @classmethod
    def open(
        cls,
        path: Union[str, os.PathLike[str]] = DEFAULT_PATH,
        *,
        busy_timeout: float = BUSY_TIMEOUT,
        backoff_base: float = BACKOFF_BASE,
        backoff_cap: float = BACKOFF_CAP,
        clock: Optional[Callable[[], float]] = None,
        migrate_schema: bool = True,
    ) -> SqliteLedger:
        """Open (creating if need be) and migrate the ledger at ``path``; ``clock``: the host's by default.
        ``migrate_schema=False``: nothing created or migrated, as ``ledger.choose.open_ledger``'s."""
        path = os.fspath(path)
        backoff_base = ledger_rows.finite("backoff_base", backoff_base)
        backoff_cap = ledger_rows.finite("backoff_cap", backoff_cap)
        if not migrate_schema and not os.path.lexists(path):
            raise LedgerError(f"no ledger at {path}: nothing has been recorded there", path=path)
        _create_file(path)
        try:
            # isolation_level=None: no implicit transactions; _transaction says BEGIN IMMEDIATE.
            # check_same_thread=False only so that the owner of several per-thread ledgers can
            # close them all from one thread; each is still used by one thread at a time.
            conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {path}: {exc}", path=path) from exc
        ledger = cls(conn, path, backoff_base, backoff_cap, clock or time.time)
        try:
            ledger._setup(busy_timeout, migrate_schema)
        except BaseException:
            conn.close()
            raise
        return ledger

    def _setup(self, busy_timeout: float, migrate_schema: bool = True) -> None:
        with self._errors("open"):
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        if not migrate_schema:
            # Before WAL is switched on: a file that must not be written is refused as it is.
            _refuse_older(self.path, self._version(), len(MIGRATIONS))
        with self._errors("open"):
            mode = self._switch_to_wal(time.monotonic() + busy_timeout)
            if mode.lower() != "wal":
                raise LedgerError(
                    f"ledger {self.path}: cannot use WAL (journal mode stays {mode})", path=self.path
                )
            self._conn.execute("PRAGMA synchronous = FULL")
        # An up-to-date file is opened without taking the write lock.
        if self._version() < len(MIGRATIONS):
            self._migrate()

    def _switch_to_wal(self, deadline: float) -> str:
        """Set WAL (kept in the file); the journal mode the file ends up in.  A new file's switch may say "database
        is locked" without calling the busy handler when another process opens it: retried until ``deadline``."""
        delay = 0.001
        while True:
            try:
                return str(self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def close(self) -> None:
        self._conn.close()

    # -- the dialect -----------------------------------------------------------------------------

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Turn sqlite3 errors into LedgerError, in this one place."""
        try:
            yield
        except sqlite3.Error as exc:
            raise LedgerError(f"ledger {self.path}: {doing}: {exc}", path=self.path) from exc

    def _new_cursor(self) -> sqlite3.Cursor:
        return self._conn.cursor()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """One BEGIN IMMEDIATE transaction: it takes the write lock up front."""
        cursor = self._conn.cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except BaseException:
            cursor.close()
            raise
        self._tx = cursor
        try:
            yield cursor
            cursor.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        finally:
            self._tx = None
            cursor.close()

    def _upsert(self, key: str, columns: Sequence[str], also: str = "") -> str:
        sets = ", ".join([f"{c} = excluded.{c}" for c in columns] + ([also] if also else []))
        return f" ON CONFLICT ({key}) DO UPDATE SET {sets}"

    def _write_rows(self, cur: Cursor, insert: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
        """Many rows a statement (``ledger_rows.multi_row``: at most ``IN_PIECE`` placeholders each)."""
        for sql, values in ledger_rows.multi_row(insert, rows, "?", tail):
            cur.execute(sql, values)

    def _finish_history(self, cur: Cursor, values: Sequence[Tuple[Any, ...]]) -> None:
        """Many rows a statement (one: a plain UPDATE); UPDATE ... FROM needs SQLite 3.33, else one per row."""
        if len(values) == 1 or sqlite3.sqlite_version_info < UPDATE_FROM:
            cur.executemany(_FINISH_ONE, values)
            return
        for sql, flat in ledger_rows.multi_row(_FINISH_MANY_HEAD, values, "?", _FINISH_MANY_TAIL):
            cur.execute(sql, flat)

    def _migrations(self) -> Tuple[Tuple[str, ...], ...]:
        return MIGRATIONS

    def _schema(self) -> Tuple[Tuple[str, ...], int]:
        return SCHEMA, schema.CURRENT["sqlite"]

    def _version_on(self, cur: Cursor) -> int:
        return int(self._run(cur, "PRAGMA user_version").fetchone()[0])

    def _migrating(self) -> ContextManager[Cursor]:
        # Under the write lock, in the transaction that bumps the version: all or none.
        return self._transaction()

    def _set_version(self, cur: Cursor, version: int) -> None:
        cur.execute(f"PRAGMA user_version = {int(version)}")

    def _prune_batch(self) -> int:
        return PRUNE_BATCH

    def _prune_paused(self, held: float) -> None:
        time.sleep(max(held, PRUNE_PAUSE))

    def _checkpoint(self) -> Optional[bool]:
        """Give the WAL's pages back; one that waited out the busy timeout is "not done" (False), not an error."""
        with self._errors("checkpoint"):
            busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        return bool(busy == 0)

    def now(self) -> float:
        """This host's clock: a file has only one host's operations to order."""
        return self._clock()

    def sweep_lock(self) -> SweepLock:
        return SweepLock(self.path)

    def identity(self) -> str:
        """The file itself (device and inode): two names for one file are one ledger."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise LedgerError(f"ledger {self.path}: {exc.strerror}", path=self.path) from None
        return f"sqlite file {st.st_dev}:{st.st_ino}"


class SweepLock:
    """One sweep at a time: an exclusive, non-blocking flock on ``<ledger>.sweep.lock``, opened as the ledger
    is (``open_private_file``), since root truncates it."""

    def __init__(self, ledger_path: str) -> None:
        self.ledger_path = ledger_path
        self.path = ledger_path + ".sweep.lock"
        self._fd: Optional[int] = None

    def __enter__(self) -> SweepLock:
        fd = open_private_file(self.path, "sweep lock", ledger=self.ledger_path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise SweepBusy(self.path) from None
            raise LedgerError(f"sweep lock {self.path}: {exc.strerror or exc}", path=self.ledger_path) from exc
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None
