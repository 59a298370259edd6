"""The ledger's SQLite storage (docs/contract.md §9.1): one file, the only module that imports sqlite3.

``SqliteLedger`` implements ``ledger.LedgerStore``; what an operation does to an object
(intent first, the bit after, why, the back-off) is decided by ``ledger_rules`` and only
stored here; the rows are encoded, decoded and checked by ``ledger_rows``, as MariaDB's.  Contract:

- One *object* per job id with its ``RequeueBit`` and why; an append-only *history* of every
  operation; a *lease* per job that an operation or a sweeper holds while it acts on the job.
  Triggers keep the history append-only in the file itself; ``prune`` alone may delete, through
  the ``pruning`` table, and only old, finished rows of settled objects (``rules.may_prune``).
- Intent first.  ``begin_operation`` of a requeue marks the object ``may_be_set`` and commits
  before the caller may start the script; ``finish_operation`` then stores ``next_bit(prior,
  outcome)`` (``combine``).  A crash anywhere in between leaves ``may_be_set`` and an unfinished
  history row: nothing is ever lost, the sweeper finds it.  ``synchronous=FULL`` so that a
  committed intent also survives a power cut.
- WAL, so that readers (``get``, ``pending``, ``history``) never block a writer and a writer never
  blocks readers; and a busy timeout, so that concurrent writers wait instead of failing.
- Every read-modify-write is one ``BEGIN IMMEDIATE`` transaction (``_atomic``): it takes the write
  lock up front.  A deferred transaction that reads and then writes can fail with "database is
  locked" at once, whatever the busy timeout, when another process committed in between; taking
  the lock first makes two processes queue instead, and no update is lost.
- The schema is versioned by ``PRAGMA user_version``; each migration runs in the same transaction
  as its version bump, and a file newer than this code is refused.
- The sweeper never touches a leased job: ``pending`` skips jobs with an unexpired lease, and
  ``set_bit`` only writes while its caller holds the job's lease.  A lease expires, so a crashed
  holder's lease lapses; its ttl must outlast the operation's deadline.
- Every time comes in as ``now`` (epoch seconds) from the caller, who reads it from ``now()``
  (the host's clock): no other wall clock here (only a monotonic one, to bound the retries of
  ``open`` and to pace ``prune``'s batches).
- One sweep at a time: ``SweepLock`` is an flock on ``<ledger>.sweep.lock`` beside the file.  Enums are
  stored by their ``.value``.
  Every sqlite3 or OS error leaves as ``LedgerError`` with the path.
- Root opens it, so nobody else may be able to choose what its names point at: the file and its
  directory must be real (no symlink is followed), this process's own and not group/world-
  writable, checked before SQLite opens anything (``_create_file``, ``open_private_file``).

A ``SqliteLedger`` is one connection: use it from one thread at a time (another thread may close it),
and open a new one after a fork.
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
from typing import (
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
    Union,
    final,
)

from ..core.errors import SweepBusy
from ..core.jobid import validate_job_id
from ..core.model import Op, Outcome, RequeueBit
from . import rows as ledger_rows
from .base import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    BUSY_TIMEOUT,
    DEFAULT_PATH,
    HistoryEntry,
    ImportResult,
    JobObject,
    LedgerError,
    PruneResult,
    SweepRecord,
    Unfinished,
)

_BITS = "'clear', 'may_be_set', 'set'"
_OPS = "'hold', 'release', 'requeue', 'restore', 'open'"

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
        "CREATE INDEX objects_pending ON objects (updated_at, job_id) WHERE bit != 'clear'",
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
        "CREATE INDEX history_job ON history (job_id, id)",
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
        """CREATE TRIGGER history_no_delete BEFORE DELETE ON history
            WHEN NOT EXISTS (SELECT 1 FROM pruning)
              OR OLD.finished_at IS NULL
              OR OLD.id = (SELECT max(h.id) FROM history h WHERE h.job_id = OLD.job_id)
              OR NOT EXISTS (SELECT 1 FROM objects o WHERE o.job_id = OLD.job_id AND o.bit = 'clear')
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END""",
        "DROP TRIGGER history_finish_once",
        """CREATE TRIGGER history_finish_once BEFORE UPDATE ON history
            WHEN OLD.finished_at IS NOT NULL OR NEW.id IS NOT OLD.id OR NEW.job_id IS NOT OLD.job_id
              OR NEW.op IS NOT OLD.op OR NEW.nonce IS NOT OLD.nonce
              OR NEW.started_at IS NOT OLD.started_at OR NEW.prior_bit IS NOT OLD.prior_bit
              OR NEW.actor IS NOT OLD.actor
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END""",
    ),
)

# The objects' bit and why (``_write_bit``, ``finish_operations``), around their VALUES (job_id,
# bit, why, updated_at): a job without an object gets one.
_WRITE_BIT_HEAD = "INSERT INTO objects (job_id, bit, why, updated_at)"
_WRITE_BIT_TAIL = (
    " ON CONFLICT (job_id) DO UPDATE SET bit = excluded.bit, why = excluded.why, updated_at = excluded.updated_at"
)

# The operations ``finish_operations`` reads (``ledger_rows.finish``'s row after the id), by id.
_FINISHING_ROWS = (
    "SELECT h.id, h.job_id, h.op, h.nonce, h.prior_bit, h.finished_at, o.bit"
    ", EXISTS (SELECT 1 FROM history l WHERE l.job_id = h.job_id AND l.id > h.id)"
    " FROM history h JOIN objects o ON o.job_id = h.job_id WHERE h.id"
)

# Finishing operations: their ``ledger_rows.finished_values`` (the id last) into their rows, one
# alone, or many around their VALUES.
_FINISH_ONE = (
    "UPDATE history SET finished_at = ?, result = ?, requeue_bit = ?, bit_after = ?, reason = ?, detail = ?,"
    " exit_status = ?, calls = ?, stderr = ?, stderr_len = ? WHERE id = ?"
)
_FINISH_MANY_HEAD = (
    "WITH v (finished_at, result, requeue_bit, bit_after, reason, detail, exit_status, calls, stderr, stderr_len, id)"
    " AS ("
)
_FINISH_MANY_TAIL = (
    ") UPDATE history SET finished_at = v.finished_at, result = v.result, requeue_bit = v.requeue_bit,"
    " bit_after = v.bit_after, reason = v.reason, detail = v.detail, exit_status = v.exit_status, calls = v.calls,"
    " stderr = v.stderr, stderr_len = v.stderr_len FROM v WHERE history.id = v.id"
)

UPDATE_FROM = (3, 33, 0)  # the first SQLite with UPDATE ... FROM

# History rows ``prune`` deletes per transaction: each holds the write lock only briefly, so that
# operations starting or finishing meanwhile wait milliseconds, far within the busy timeout.
PRUNE_BATCH = 500
# And between two batches prune lets go for as long as the last one held the lock, at least this
# long.  SQLite's lock is not fair: a writer waiting in its busy handler tries again only every
# few (later 100) milliseconds, so batches back to back could starve it past its busy timeout.
PRUNE_PAUSE = 0.005


def _create_file(path: str) -> None:
    """Create the parent directory (0700) and the file (0600) unless they exist; check both.

    Root runs the sweeper, so whoever else can write the directory could plant the ledger, its
    -wal/-shm files or the sweep lock as symlinks (or hard links) to root's files, and SQLite or
    the lock would write through them.  So the directory must be a real one, this process's own
    and not group/world-writable, and the file too (``open_private_file``), before SQLite opens
    it.  Then only this account can change what the names point at.
    """
    parent = os.path.dirname(path)
    if parent:
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise LedgerError(f"cannot create ledger {path}: {exc}", path=path) from None
    _check_private_directory(parent or ".", path)
    # SQLite gives the -wal and -shm files the database file's permissions.
    os.close(open_private_file(path, "ledger", ledger=path))


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
    if problem:
        raise LedgerError(f"ledger directory {shown} {problem}", path=ledger)


def _not_private(st: os.stat_result, path: str, chmod: str) -> str:
    """Why a file or directory another account could change is refused, and the fix ('' if fine)."""
    euid = os.geteuid()
    if st.st_uid != euid:
        return (
            f"is owned by uid {st.st_uid}, not by uid {euid} that runs slurm-dsl, so that account could"
            f" swap the ledger's files: chown {euid} {shlex.quote(path)}, or use another ledger path"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"is group- or world-writable (mode {stat.S_IMODE(st.st_mode):04o}), so another account could"
            f" swap the ledger's files: chmod {chmod} {shlex.quote(path)}"
        )
    return ""


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def open_private_file(path: str, what: str, *, ledger: str) -> int:
    """Open ``path`` read-write, creating it 0600, never through a symlink; return the fd.

    LedgerError (naming ``what``, e.g. "ledger" or "sweep lock"; its ``path`` is ``ledger``)
    unless the file opened is a regular file with one link, owned by this process's euid and not
    group/world-writable.  Nothing is written before these checks.  O_NONBLOCK and O_NOCTTY so
    that a FIFO or a device planted there is refused rather than waited on or made a terminal.
    """
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
        raise LedgerError(f"cannot open {what} {path}: {exc.strerror}", path=ledger) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            problem = f"is {_kind(st.st_mode)}, not a regular file: remove it"
        elif st.st_nlink != 1:
            problem = f"has {st.st_nlink} hard links, so it may be another file's: remove it"
        else:
            problem = _not_private(st, path, "600")
        if problem:
            raise LedgerError(f"{what} {path} {problem}", path=ledger)
    except BaseException:
        os.close(fd)
        raise
    return fd


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
class SqliteLedger:
    """The ledger file.  Open with ``SqliteLedger.open(path)`` (or ``ledger.open_ledger``); use as a
    context manager to close it."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: str,
        backoff_base: float,
        backoff_cap: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._conn = conn
        self.path = path
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._clock = clock
        self._batched = False  # inside ``batch``: every _atomic joins its transaction

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
        """Open (creating if need be) and migrate the ledger at ``path``; ``now`` reads ``clock``
        (default: the host's).  ``migrate_schema=False``: create nothing and migrate nothing; a
        missing file or an older schema is LedgerError (``ledger.open_ledger``)."""
        path = os.fspath(path)
        backoff_base = ledger_rows.finite("backoff_base", backoff_base)
        backoff_cap = ledger_rows.finite("backoff_cap", backoff_cap)
        if not migrate_schema and not os.path.lexists(path):
            raise LedgerError(f"no ledger at {path}: nothing has been recorded there", path=path)
        _create_file(path)
        try:
            # isolation_level=None: no implicit transactions; _atomic says BEGIN IMMEDIATE itself.
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
        if self._version() < len(MIGRATIONS):
            with self._atomic("migrate") as conn:
                # Read the version again under the write lock: two processes opening a new file
                # migrate it once.  (An up-to-date file is opened without taking the write lock.)
                for number in range(self._version(), len(MIGRATIONS)):
                    for statement in MIGRATIONS[number]:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {number + 1}")

    def _switch_to_wal(self, deadline: float) -> str:
        """Set WAL (it persists in the file); return the journal mode the file ends up in.

        Switching a new file needs an exclusive lock, and SQLite returns "database is locked"
        there without calling the busy handler when another process opens the file at the same
        moment: retry until the busy timeout instead.  A file already in WAL needs no lock.
        """
        delay = 0.001
        while True:
            try:
                return str(self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _version(self) -> int:
        """The file's schema version; LedgerError if it is newer than this code."""
        version = self.schema_version()
        if version > len(MIGRATIONS):
            raise LedgerError(
                f"ledger {self.path} has schema version {version}, newer than this slurm-dsl "
                f"knows ({len(MIGRATIONS)}); upgrade slurm-dsl or use another ledger file",
                path=self.path,
            )
        return version

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> SqliteLedger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Turn sqlite3 errors into LedgerError, in this one place."""
        try:
            yield
        except sqlite3.Error as exc:
            raise LedgerError(f"ledger {self.path}: {doing}: {exc}", path=self.path) from exc

    @contextmanager
    def _atomic(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One BEGIN IMMEDIATE transaction: committed if the block returns, else rolled back.
        Inside ``batch`` it is part of the batch's transaction."""
        if self._batched:
            with self._errors(doing):
                yield self._conn
            return
        with self._errors(doing):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every write inside is one transaction, committed when the block returns (one fsync),
        rolled back if it raises.  Do not catch a ledger error inside: leave the block."""
        if self._batched:
            raise RuntimeError("batches do not nest")
        with self._atomic("batch"):
            self._batched = True
            try:
                yield
            finally:
                self._batched = False

    def _read(self, doing: str, sql: str, args: Sequence[Any] = ()) -> List[Tuple[Any, ...]]:
        with self._errors(doing):
            return list(self._conn.execute(sql, args).fetchall())

    def schema_version(self) -> int:
        return int(self._read("schema version", "PRAGMA user_version")[0][0])

    def now(self) -> float:
        """This host's clock: a file has only one host's operations to order."""
        return self._clock()

    def sweep_lock(self) -> SweepLock:
        return SweepLock(self.path)

    # -- operations ------------------------------------------------------------------------------

    def begin_operation(self, job_id: str, op: Op, nonce: str, now: float, *, actor: str = "") -> int:
        """Record that ``op`` starts on ``job_id``; return the history row's id.

        One committed transaction: the history row (with the object's bit before it and who runs
        it, ``actor``; "" is recorded as unknown), the object if it is new (bit clear), and for a
        requeue the intent: the object becomes may_be_set.  Call it while holding the job's
        lease, and start the script only after it returned.
        """
        return self.begin_operations([(job_id, op, nonce)], now, actor=actor)[0]

    def begin_operations(
        self, starts: Sequence[Tuple[str, Op, str]], now: float, *, actor: str = ""
    ) -> List[int]:
        """``begin_operation`` for many ``(job_id, op, nonce)`` in ONE committed transaction (a bulk
        chunk's intents): every intent is committed before any of their scripts may start.

        Set-based: the objects' bits read in ``IN`` lists of ``ledger_rows.IN_PIECE`` ids, then the
        objects created or given an intent upserted and the history appended, many rows a statement
        (``ledger_rows.multi_row``: at most ``IN_PIECE`` placeholders each); ``ledger_rows.begin_plan``
        decides, as the starts one after the other would."""
        checked = ledger_rows.checked_starts(starts)
        now = ledger_rows.finite("now", now)
        with self._atomic("begin operation") as conn:
            bits: Dict[str, str] = {}
            for piece in ledger_rows.pieces(ledger_rows.distinct(job_id for job_id, _, _ in checked)):
                sql = ledger_rows.in_list("SELECT job_id, bit FROM objects WHERE job_id", len(piece), "?")
                bits.update(conn.execute(sql, piece).fetchall())
            plan = ledger_rows.begin_plan(checked, bits, now, actor)
            # A new object is inserted (back-off 0 by default); one there only gets an intent, and
            # a new intent is news for the sweeper: an old back-off must not delay it.
            for sql, values in ledger_rows.multi_row(
                "INSERT INTO objects (job_id, bit, why, updated_at)",
                plan.objects,
                "?",
                " ON CONFLICT (job_id) DO UPDATE SET bit = excluded.bit, why = excluded.why,"
                " updated_at = excluded.updated_at, lookup_failures = 0, next_lookup_at = 0",
            ):
                conn.execute(sql, values)
            op_ids = self._append_history(conn, plan.history)
        return op_ids

    def _append_history(self, conn: sqlite3.Connection, rows: Sequence[Tuple[Any, ...]]) -> List[int]:
        """Append the history ``rows`` (job_id, op, nonce, started_at, prior_bit, actor); their ids
        in their order.  Inside the write lock (BEGIN IMMEDIATE) nobody else appends, so the rows
        above the largest id before are these (``ledger_rows.inserted_ids`` checks it)."""
        inserts = ledger_rows.multi_row(
            "INSERT INTO history (job_id, op, nonce, started_at, prior_bit, actor)", rows, "?"
        )
        if len(rows) <= 1:  # one operation: its lastrowid, in one statement as always
            ids: List[int] = []
            for sql, values in inserts:
                cursor = conn.execute(sql, values)
                assert cursor.lastrowid is not None
                ids.append(cursor.lastrowid)
            return ids
        before = conn.execute("SELECT coalesce(max(id), 0) FROM history").fetchone()[0]
        for sql, values in inserts:
            conn.execute(sql, values)
        found = conn.execute(
            "SELECT id, job_id, op, nonce, prior_bit FROM history WHERE id > ? ORDER BY id LIMIT ?",
            (before, len(rows) + 1),
        ).fetchall()
        return ledger_rows.inserted_ids(self.path, rows, found)

    def finish_operation(self, op_id: int, outcome: Outcome, stderr: bytes, now: float) -> RequeueBit:
        """Fill in operation ``op_id`` with its outcome; return the object's new bit.

        One transaction.  The bit becomes ``ledger_rules.after``: ``next_bit(prior, outcome)``, where
        for a requeue ``prior`` is the bit recorded at begin (its intent overwrote the object's);
        other ops never wrote it, so it is the object's current bit.  A requeue or restore records
        why; hold, release and open leave the object as it is.
        """
        return self.finish_operations([(op_id, outcome, stderr)], now)[0]

    def finish_operations(self, finishes: Sequence[Tuple[int, Outcome, bytes]], now: float) -> List[RequeueBit]:
        """``finish_operation`` for many ``(op_id, outcome, stderr)`` in ONE transaction (a bulk
        chunk's results); if any is refused, none is written.

        Set-based: the operations read in ``IN`` lists of ``ledger_rows.IN_PIECE`` ids, decided by
        ``ledger_rows.finish_plan`` (as the finishes one after the other would: the same operation
        twice is "already finished"), then the objects and the history written many rows a
        statement (``ledger_rows.multi_row``)."""
        now = ledger_rows.finite("now", now)
        finishes = list(finishes)
        with self._atomic("finish operation") as conn:
            rows: Dict[int, Tuple[Any, ...]] = {}
            for piece in ledger_rows.pieces(ledger_rows.distinct(op_id for op_id, _, _ in finishes)):
                sql = ledger_rows.in_list(_FINISHING_ROWS, len(piece), "?")
                for row in conn.execute(sql, piece):
                    rows[row[0]] = row[1:]
            plan = ledger_rows.finish_plan(self.path, finishes, rows, now)
            for sql, values in ledger_rows.multi_row(_WRITE_BIT_HEAD, plan.objects, "?", _WRITE_BIT_TAIL):
                conn.execute(sql, values)
            # Each operation's values (``ledger_rows.finished_values``, the id last) into its row;
            # many rows a statement (one alone is a plain UPDATE, cheaper): the triggers see each
            # row updated as one UPDATE of it would.  UPDATE ... FROM needs SQLite 3.33 (Debian 12
            # has 3.40); an older library gets one UPDATE per row.
            if len(plan.history) == 1 or sqlite3.sqlite_version_info < UPDATE_FROM:
                conn.executemany(_FINISH_ONE, plan.history)
            else:
                for sql, values in ledger_rows.multi_row(_FINISH_MANY_HEAD, plan.history, "?", _FINISH_MANY_TAIL):
                    conn.execute(sql, values)
        return plan.bits

    @staticmethod
    def _write_bit(conn: sqlite3.Connection, job_id: str, bit: RequeueBit, why: str, now: float) -> None:
        conn.execute(_WRITE_BIT_HEAD + " VALUES (?, ?, ?, ?)" + _WRITE_BIT_TAIL, (job_id, bit.value, why, now))

    # -- leases ----------------------------------------------------------------------------------

    def acquire_lease(self, job_id: str, owner: str, now: float, ttl: float) -> bool:
        """Take (or renew) the job's lease until ``now + ttl``; False if another owner holds it."""
        return bool(self.acquire_leases([job_id], owner, now, ttl))

    def acquire_leases(
        self, job_ids: Sequence[str], owner: str, now: float, ttl: float, *, take_over_sweeps: bool = False
    ) -> List[str]:
        """``acquire_lease`` for many jobs in one transaction; returns the ids now held by ``owner``
        (in their order).  The leases there read in ``IN`` lists of ``ledger_rows.IN_PIECE`` ids,
        the ones taken written many rows a statement (``ledger_rows.multi_row``).  With
        ``take_over_sweeps`` (only for the sweep holding the sweep lock), other sweeps' leases are
        taken too (``ledger_rules.sweep_owned``)."""
        ids = [validate_job_id(j) for j in job_ids]
        now, ttl = ledger_rows.finite("now", now), ledger_rows.positive_ttl(ttl)
        with self._atomic("acquire lease") as conn:
            rows: Dict[str, Tuple[Any, ...]] = {}
            for piece in ledger_rows.pieces(ledger_rows.distinct(ids)):
                sql = ledger_rows.in_list("SELECT job_id, owner, expires_at FROM leases WHERE job_id", len(piece), "?")
                for row in conn.execute(sql, piece):
                    rows[row[0]] = tuple(row[1:])
            held = ledger_rows.leases_taken(ids, rows, owner, now, take_over_sweeps)
            taken = [(job_id, owner, now + ttl) for job_id in ledger_rows.distinct(held)]
            for sql, values in ledger_rows.multi_row(
                "INSERT OR REPLACE INTO leases (job_id, owner, expires_at)", taken, "?"
            ):
                conn.execute(sql, values)
        return held

    def release_lease(self, job_id: str, owner: str) -> bool:
        """Give the lease back; False if ``owner`` did not hold it (it lapsed and was taken)."""
        return self.release_leases([job_id], owner) > 0

    def release_leases(self, job_ids: Sequence[str], owner: str) -> int:
        """``release_lease`` for many jobs in one transaction; returns how many were held (a job
        named twice counts once, as the second release finds it gone).  One DELETE per ``IN``
        list of ``ledger_rows.IN_PIECE`` ids."""
        released = 0
        with self._atomic("release lease") as conn:
            for piece in ledger_rows.pieces(ledger_rows.distinct(job_ids)):
                sql = ledger_rows.in_list("DELETE FROM leases WHERE owner = ? AND job_id", len(piece), "?")
                released += conn.execute(sql, (owner, *piece)).rowcount
        return released

    # -- objects and the sweeper -----------------------------------------------------------------

    def get(self, job_id: str) -> Optional[JobObject]:
        rows = self._read(
            "get object",
            ledger_rows.SELECT_OBJECTS + " WHERE job_id = ?",
            (job_id,),
        )
        return ledger_rows.job_object(rows[0]) if rows else None

    def pending(
        self, now: float, limit: Optional[int] = None, *, take_over_sweeps: bool = False
    ) -> List[JobObject]:
        """Objects whose bit is not clear that the sweeper may look at now, longest waiting first
        (by when they became due, then by when their bit last changed).

        Skips jobs with an unexpired lease (an operation or another sweeper is on them; with
        ``take_over_sweeps``, only an operation's) and jobs whose back-off after a failed lookup
        has not elapsed.
        """
        now = ledger_rows.finite("now", now)
        sql, args = ledger_rows.pending_query("?", now, take_over_sweeps)
        rows = self._read("list pending objects", sql + " LIMIT ?", (*args, -1 if limit is None else limit))
        return [ledger_rows.job_object(row) for row in rows]

    def count_not_clear(self) -> int:
        """How many objects have a bit that is not clear (leased and backed-off ones included)."""
        return int(self._read("count objects", "SELECT count(*) FROM objects WHERE bit != 'clear'")[0][0])

    def set_bit(self, job_id: str, bit: RequeueBit, why: str, now: float, *, owner: str) -> bool:
        """Set the job's bit (e.g. the sweeper clearing it) and reset its lookup back-off.

        Only while ``owner`` holds the job's unexpired lease: a sweeper whose lease lapsed during
        a slow lookup must not overwrite the intent of an operation that took the job since.
        Returns False (and writes nothing) when it does not hold it.
        """
        return bool(self.set_bits([(job_id, bit, why)], now, owner=owner))

    def set_bits(
        self, changes: Sequence[Tuple[str, RequeueBit, str]], now: float, *, owner: str
    ) -> List[str]:
        """``set_bit`` for many ``(job_id, bit, why)`` in one transaction; returns the ids written."""
        checked = ledger_rows.checked_changes(changes)
        now = ledger_rows.finite("now", now)
        written: List[str] = []
        with self._atomic("set bit") as conn:
            for job_id, bit, why in checked:
                held = conn.execute(
                    "SELECT 1 FROM leases WHERE job_id = ? AND owner = ? AND expires_at > ?",
                    (job_id, owner, now),
                ).fetchone()
                if held is None:
                    continue
                self._write_bit(conn, job_id, bit, why, now)
                conn.execute(
                    "UPDATE objects SET lookup_failures = 0, next_lookup_at = 0, lookup_error = ''"
                    " WHERE job_id = ?",
                    (job_id,),
                )
                written.append(job_id)
        return written

    def watch(self, job_ids: Sequence[str], now: float, *, owner: str) -> List[str]:
        """Keep the objects as they are, to be looked at again by the next sweep without back-off.

        For a finished job still showing Requeue=1 (docs/contract.md §9.5).  The failure count is reset and the
        object goes behind the ones that have waited longer (``pending`` serves the longest
        waiting first), so watched objects cannot starve a ``--limit``.  Only while ``owner``
        holds the job's unexpired lease; returns the ids written.
        """
        ids = [validate_job_id(j) for j in job_ids]
        now = ledger_rows.finite("now", now)
        written: List[str] = []
        with self._atomic("watch") as conn:
            for job_id in ids:
                cursor = conn.execute(
                    "UPDATE objects SET lookup_failures = 0, next_lookup_at = ?, lookup_error = ''"
                    " WHERE job_id = ? AND EXISTS (SELECT 1 FROM leases l"
                    "  WHERE l.job_id = objects.job_id AND l.owner = ? AND l.expires_at > ?)",
                    (now, job_id, owner, now),
                )
                if cursor.rowcount:
                    written.append(job_id)
        return written

    def lookup_failed(self, job_id: str, why: str, now: float) -> float:
        """Record that the job could not be looked up; return when the sweeper may try again.

        The wait doubles with each consecutive failure: ``min(cap, base * 2**(failures - 1))``.
        """
        return self.lookups_failed([job_id], why, now)[0]

    def lookups_failed(self, job_ids: Sequence[str], why: str, now: float) -> List[float]:
        """``lookup_failed`` for many jobs in one transaction; returns each one's next lookup time."""
        why = ledger_rows.stored_text(why)
        now = ledger_rows.finite("now", now)
        times: List[float] = []
        with self._atomic("record failed lookup") as conn:
            for job_id in job_ids:
                row = conn.execute("SELECT lookup_failures FROM objects WHERE job_id = ?", (job_id,)).fetchone()
                failures, next_at = ledger_rows.failed_lookup(
                    self.path, job_id, row, now, self.backoff_base, self.backoff_cap
                )
                conn.execute(
                    "UPDATE objects SET lookup_failures = ?, next_lookup_at = ?, lookup_error = ?"
                    " WHERE job_id = ?",
                    (failures, next_at, why, job_id),
                )
                times.append(next_at)
        return times

    def history(self, job_id: str) -> List[HistoryEntry]:
        """Every operation on the job, oldest first."""
        rows = self._read(
            "read history",
            ledger_rows.SELECT_HISTORY + " WHERE job_id = ? ORDER BY id",
            (job_id,),
        )
        return [ledger_rows.entry(r) for r in rows]

    # -- the admin's view ------------------------------------------------------------------------

    def count_by_bit(self) -> Dict[RequeueBit, int]:
        """How many objects hold each bit (every bit named, 0 if none)."""
        counts = {bit: 0 for bit in RequeueBit}
        for bit, n in self._read("count objects", "SELECT bit, count(*) FROM objects GROUP BY bit"):
            counts[RequeueBit(bit)] = int(n)
        return counts

    def objects_not_clear(self) -> List[JobObject]:
        """Every object whose bit is not clear, leased and backed-off ones too, oldest change first."""
        rows = self._read(
            "list objects not clear",
            ledger_rows.SELECT_OBJECTS + " WHERE bit != 'clear' ORDER BY updated_at, job_id",
        )
        return [ledger_rows.job_object(row) for row in rows]

    def count_history(self) -> int:
        """How many history rows the ledger holds (what ``prune`` keeps in check)."""
        return int(self._read("count history", "SELECT count(*) FROM history")[0][0])

    def unfinished(self, now: float) -> Unfinished:
        """The operations without a result (``ledger.Unfinished``), read in one statement."""
        now = ledger_rows.finite("now", now)
        sql = ledger_rows.SELECT_UNFINISHED.format(mark="?")
        return ledger_rows.unfinished(self._read("read unfinished operations", sql, (now,)))

    def record_sweep(self, started: float, finished: float, summary: Mapping[str, Any]) -> None:
        """Keep this sweep as the last one: its times and ``summary`` (JSON values), replacing the previous."""
        started, finished = ledger_rows.finite("started", started), ledger_rows.finite("finished", finished)
        text = ledger_rows.sweep_summary(summary)
        with self._atomic("record sweep") as conn:
            conn.execute(
                "INSERT OR REPLACE INTO last_sweep (one, started_at, finished_at, summary) VALUES (1, ?, ?, ?)",
                (started, finished, text),
            )

    def last_sweep(self) -> Optional[SweepRecord]:
        """The last sweep ``record_sweep`` kept, or None if no sweep has run on this ledger."""
        found = self._read("read last sweep", "SELECT started_at, finished_at, summary FROM last_sweep")
        return ledger_rows.sweep_record(self.path, found[0]) if found else None

    def prune(self, before: float, now: float, *, dry_run: bool = False) -> PruneResult:
        """Remove the history rows ``rules.may_prune`` allows, then checkpoint the WAL (TRUNCATE).

        Rows that finished before ``before``, that are not their object's newest, of objects that
        are clear and not leased at ``now``.  In batches of ``PRUNE_BATCH`` rows, each its own
        BEGIN IMMEDIATE transaction that decides afresh under the write lock: an operation takes
        its job's lease (and a requeue marks it may_be_set) before its row exists, so whatever
        starts between two batches is left alone; and no batch keeps the write lock long enough
        for a concurrent operation to wait out its busy timeout.  The ``pruning`` row that lets
        the trigger pass lives only inside each batch's transaction.  Between batches it pauses
        (``PRUNE_PAUSE``) so that waiting writers get in.  ``dry_run`` counts only.
        """
        before, now = ledger_rows.finite("before", before), ledger_rows.finite("now", now)
        removed = 0
        jobs: Set[str] = set()
        after_id = 0
        while True:
            took = time.monotonic()
            with self._errors("prune (dry run)") if dry_run else self._atomic("prune"):
                rows = self._conn.execute(
                    "SELECT h.id, h.job_id, h.finished_at, o.bit,"
                    "  h.id = (SELECT max(n.id) FROM history n WHERE n.job_id = h.job_id),"
                    "  EXISTS (SELECT 1 FROM leases l WHERE l.job_id = h.job_id AND l.expires_at > ?)"
                    " FROM history h JOIN objects o ON o.job_id = h.job_id"
                    " WHERE h.id > ? AND h.finished_at < ? ORDER BY h.id LIMIT ?",
                    (now, after_id, before, PRUNE_BATCH),
                ).fetchall()
                doomed = ledger_rows.doomed(rows, before)
                if doomed and not dry_run:
                    self._conn.execute("INSERT OR REPLACE INTO pruning (one) VALUES (1)")
                    self._conn.executemany("DELETE FROM history WHERE id = ?", [(op_id,) for op_id, _ in doomed])
                    self._conn.execute("DELETE FROM pruning")
            removed += len(doomed)
            jobs.update(job_id for _, job_id in doomed)
            if len(rows) < PRUNE_BATCH:
                break
            after_id = rows[-1][0]
            if not dry_run:
                time.sleep(max(time.monotonic() - took, PRUNE_PAUSE))
        checkpointed: Optional[bool] = None
        if not dry_run:
            # Give the WAL's pages back to the main file and the file system: a checkpoint that
            # waited out the busy timeout for a reader or a writer is "not done", not an error.
            with self._errors("checkpoint"):
                busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            checkpointed = busy == 0
        return PruneResult(removed, len(jobs), checkpointed)

    # -- ledger migrate ----------------------------------------------------------------------------

    def identity(self) -> str:
        """The file itself (device and inode): two names for one file are one ledger."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise LedgerError(f"ledger {self.path}: {exc.strerror}", path=self.path) from None
        return f"sqlite file {st.st_dev}:{st.st_ino}"

    def export_objects(self, *, not_clear: bool, after: str = "", limit: int = 500) -> List[JobObject]:
        """A page of the objects whose bit is (or is not) clear, by job id after ``after``."""
        rows = self._read(
            "export objects",
            ledger_rows.SELECT_OBJECTS + " WHERE (bit != 'clear') = ? AND job_id > ? ORDER BY job_id LIMIT ?",
            (int(bool(not_clear)), str(after), int(limit)),
        )
        return [ledger_rows.job_object(row) for row in rows]

    def export_history(self, after_id: int, limit: int) -> List[HistoryEntry]:
        """A page of the history, in id order, from after ``after_id``."""
        rows = self._read(
            "export history",
            ledger_rows.SELECT_HISTORY + " WHERE id > ? ORDER BY id LIMIT ?",
            (int(after_id), int(limit)),
        )
        return [ledger_rows.entry(r) for r in rows]

    def import_records(
        self, objects: Sequence[JobObject], history: Sequence[HistoryEntry], *, merge: bool
    ) -> ImportResult:
        """Another ledger's objects, then its history rows, in one BEGIN IMMEDIATE transaction
        (``ledger.LedgerStore.import_records``).  The history's triggers let rows be appended
        finished or not; nothing here updates or deletes one."""
        checked = [ledger_rows.object_values(o) for o in objects]
        rows = [ledger_rows.history_values(e) for e in history]
        copied = merged = kept = added = skipped = 0
        with self._atomic("import records") as conn:
            for values in checked:
                job_id = values[0]
                row = conn.execute("SELECT bit FROM objects WHERE job_id = ?", (job_id,)).fetchone()
                action = ledger_rows.import_action(self.path, values, row, merge)
                if action == "insert":
                    conn.execute(
                        "INSERT INTO objects (job_id, bit, why, updated_at, lookup_failures, next_lookup_at,"
                        " lookup_error) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        values,
                    )
                    copied += 1
                elif action == "update":
                    conn.execute(
                        "UPDATE objects SET bit = ?, why = ?, updated_at = ?, lookup_failures = ?,"
                        " next_lookup_at = ?, lookup_error = ? WHERE job_id = ?",
                        values[1:] + values[:1],
                    )
                    merged += 1
                else:
                    kept += 1
            for values in rows:
                if merge and conn.execute(
                    "SELECT 1 FROM history WHERE job_id = ? AND nonce = ? AND op = ? AND started_at = ?",
                    values[:4],
                ).fetchone():
                    skipped += 1
                    continue
                conn.execute(
                    "INSERT INTO history (job_id, nonce, op, started_at, prior_bit, finished_at, result,"
                    " requeue_bit, bit_after, reason, detail, exit_status, calls, stderr, stderr_len, actor)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    values,
                )
                added += 1
        return ImportResult(copied, merged, kept, added, skipped)


class SweepLock:
    """One sweeper at a time: an exclusive, non-blocking flock on ``<ledger>.sweep.lock``.

    Root takes it and then truncates it, so it is opened as the ledger is (``open_private_file``):
    never through a symlink, and only a regular file with one link that is this process's own
    (else ``LedgerError``, before anything is written or locked).
    """

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
