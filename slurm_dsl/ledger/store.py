"""The ledger's store written once over its SQL dialects (docs/contract.md §9.1): every
``ledger.LedgerStore`` method, for SQLite (``ledger.sqlite``) and MariaDB (``ledger.mariadb``).

Strategy (peewee's: one query and transaction layer, each database a small subclass that states
only what differs): ``SqlStore`` holds every read and write of the store, the transactions'
shape (``_atomic``, ``batch``), the lease and ownership checks, the batches' reads and writes and
the migrations' driver; ``ledger_rules`` decides what operations do to objects and
``ledger.rows`` encodes, decodes and checks the rows.  A dialect subclass supplies what its
database does its own way, and nothing else:

- the connection, a cursor outside a transaction (``_new_cursor``) and a transaction that holds
  the ledger's one write lock (``_transaction``: SQLite's ``BEGIN IMMEDIATE``, MariaDB's
  ``write_lock`` row ``FOR UPDATE``), and the one place its errors become ``LedgerError``
  (``_errors``);
- its SQL: placeholders (every statement here is written with ``?``; ``_sql`` turns it into the
  driver's), upserts (``_upsert``), locking reads (``FOR_UPDATE``), a multi-row write
  (``_write_rows``), finishing history rows in bulk (``_finish_history``), how stderr is bound
  (``BLOB``, ``HEX_STDERR``), prune's pass for the triggers (``PRUNING``);
- its schema's version and migrations (``_migrations``, ``_version_on``, ``_migrating``,
  ``_set_version``); its clock (``now``), the sweep lock, its ``identity``; what prune does
  between batches and after them (``_prune_paused``, ``_checkpoint``).

Rule 1: every read-modify-write is one ``_atomic`` transaction under the write lock, and every
row it reads to decide is read there (``FOR UPDATE`` where the dialect needs it), so writers
queue and no update is lost.  Rule 2: reads outside a transaction (``_read``) take no lock.
Rule 3: every time comes in as ``now`` from the caller; only prune's pacing reads a monotonic
clock.  A store is one connection: one thread at a time.
"""

from __future__ import annotations

import abc
import time
from contextlib import contextmanager
from typing import (
    TYPE_CHECKING,
    Any,
    ContextManager,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Protocol,
    Self,
    Sequence,
    Set,
    Tuple,
)

from ..core.jobid import validate_job_id
from ..core.model import Op, Outcome, RequeueBit, Result
from . import rows as ledger_rows
from .base import LedgerError

if TYPE_CHECKING:
    from ..core.jobinfo import JobInfo
    from ..core.settle import Pending, Recorded, Verdict
    from .records import HistoryEntry, ImportResult, JobObject, PruneResult, SweepRecord, Unfinished

# The records (``ledger.records``) are imported by the reads and reports that build them: an
# operation never does (docs/benchmarks.md §7).


class Cursor(Protocol):
    """The DB-API cursor both drivers give (sqlite3's, PyMySQL's): what the store uses of it."""

    @property
    def rowcount(self) -> int: ...

    @property
    def lastrowid(self) -> Any: ...

    def execute(self, sql: str, args: Any = ..., /) -> object: ...

    def executemany(self, sql: str, args: Any, /) -> object: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Any: ...

    def fetchmany(self, size: int, /) -> Any: ...

    def close(self) -> None: ...


# The objects' bit and why (``_write_bit``, ``finish_operations``), VALUES (job_id, bit, why,
# updated_at): a job without an object gets one.
_WRITE_BIT = "INSERT INTO objects (job_id, bit, why, updated_at)"
_BIT_COLUMNS = ("bit", "why", "updated_at")
# What a batch reads under the write lock (``_keyed``): one row by its key, or the rows of an
# ``IN`` list with their key first.  The objects' bits for ``begin_operations``; the operations
# for ``finish_operations`` (``ledger_rows.finish``'s row); the leases for ``acquire_leases``.
_BIT_OF_ONE = "SELECT bit FROM objects WHERE job_id = ?"
_BITS_OF = "SELECT job_id, bit FROM objects WHERE job_id"
_FINISHING_ONE = (
    "SELECT h.job_id, h.op, h.nonce, h.prior_bit, h.finished_at, o.bit"
    ", EXISTS (SELECT 1 FROM history l WHERE l.job_id = h.job_id AND l.id > h.id)"
    " FROM history h JOIN objects o ON o.job_id = h.job_id WHERE h.id = ?"
)
_FINISHING_ROWS = (
    "SELECT h.id, h.job_id, h.op, h.nonce, h.prior_bit, h.finished_at, o.bit"
    ", EXISTS (SELECT 1 FROM history l WHERE l.job_id = h.job_id AND l.id > h.id)"
    " FROM history h JOIN objects o ON o.job_id = h.job_id WHERE h.id"
)
_LEASE_OF_ONE = "SELECT owner, expires_at FROM leases WHERE job_id = ?"
_LEASES_OF = "SELECT job_id, owner, expires_at FROM leases WHERE job_id"
_APPEND = (
    "INSERT INTO history (job_id, op, nonce, started_at, prior_bit, actor, baseline, baseline_at, op_key, retry_of,"
    " ends_by)"
)
# The rows the sweeper's writes and an import decide on (``FOR_UPDATE`` appended).
_HOLDS = "SELECT 1 FROM leases WHERE job_id = ? AND owner = ? AND expires_at > ?"
_OBJECT_THERE = "SELECT 1 FROM objects WHERE job_id = ?"
_FAILURES_OF = "SELECT lookup_failures FROM objects WHERE job_id = ?"
_FAILURES_OF_MANY = "SELECT job_id, lookup_failures FROM objects WHERE job_id"
_WRITE_FAILURES = "UPDATE objects SET lookup_failures = ?, next_lookup_at = ?, lookup_error = ? WHERE job_id"
# What writing a bit also does to its object: its lookup back-off starts again (``set_bits``).
_BACKOFF_RESET = "lookup_failures = 0, next_lookup_at = 0, lookup_error = ''"
# The rows ``pending_ids`` fetches at a time.
PENDING_CHUNK = 1000
# An imported history row, every column as stored; ``{blob}`` how the dialect binds stderr.
_IMPORT_HISTORY = (
    "INSERT INTO history (job_id, nonce, op, started_at, prior_bit, finished_at, result, requeue_bit, bit_after,"
    " reason, detail, exit_status, calls, stderr, stderr_len, actor, baseline, baseline_at, op_key, retry_of, ends_by)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {blob}, ?, ?, ?, ?, ?, ?, ?)"
)
_SETTLEMENTS_OF = "DELETE FROM settlements WHERE op_id"  # prune's, with an IN list
_HISTORY_THERE = "SELECT id FROM history WHERE job_id = ? AND nonce = ? AND op = ? AND started_at = ?"
# The settlements (schema 3): one per operation at most, appended, never changed.
_SETTLE = "INSERT INTO settlements (op_id, job_id, verdict, looked_at, record, settled_at, settled_by, detail)"
# ``add_settlements``' gone ones: each row still to settle (unknown or unfinished, no settlement)
# gets GONE, the time its lookup started, no record, the detail (parameters, then the IN list).
# A dialect may have a cheaper way to skip the settled ones (``SqlStore.SETTLE_GONE``).
_SETTLE_GONE = (
    "INSERT INTO settlements (op_id, job_id, verdict, looked_at, record, settled_at, settled_by, detail)"
    " SELECT h.id, h.job_id, 'gone', ?, NULL, ?, ?, ? FROM history h"
    " WHERE (h.result = 'unknown' OR h.finished_at IS NULL)"
    " AND NOT EXISTS (SELECT 1 FROM settlements s WHERE s.op_id = h.id) AND h.id"
)
# What ``add_settlements`` decides on: each operation's job, finish, result and whether it is settled.
_SETTLING_ONE = (
    "SELECT h.job_id, h.finished_at, h.result, EXISTS (SELECT 1 FROM settlements s WHERE s.op_id = h.id)"
    " FROM history h WHERE h.id = ?"
)
_SETTLING_ROWS = (
    "SELECT h.id, h.job_id, h.finished_at, h.result, EXISTS (SELECT 1 FROM settlements s WHERE s.op_id = h.id)"
    " FROM history h WHERE h.id"
)
# ``unsettled``: the rows the dialect's ``UNSETTLED`` index serves (unknown results and
# unfinished rows started since ``?``) with no settlement, an unfinished one only once it no
# longer runs (``ends_by`` passed, a later row of its job, or no unexpired lease: as
# ``ledger_rows.unfinished``'s "lapsed").  ``{unsettled}`` is the dialect's predicate.
_UNSETTLED_WHERE = (
    " WHERE {unsettled} AND s.id IS NULL"
    " AND (h.finished_at IS NOT NULL OR h.ends_by <= ?"
    " OR EXISTS (SELECT 1 FROM history l WHERE l.job_id = h.job_id AND l.id > h.id)"
    " OR NOT EXISTS (SELECT 1 FROM leases e WHERE e.job_id = h.job_id AND e.expires_at > ?))"
)
_EVER = -1.0e308  # ``since`` for every row
_STARTED = "SELECT h.started_at"  # what ``count_unsettled`` reads of each
# Prune's view of a batch of history rows: what ``rules.may_prune`` needs of each.
_PRUNE_ROWS = (
    "SELECT h.id, h.job_id, h.finished_at, o.bit,"
    "  h.id = (SELECT max(n.id) FROM history n WHERE n.job_id = h.job_id),"
    "  EXISTS (SELECT 1 FROM leases l WHERE l.job_id = h.job_id AND l.expires_at > ?)"
    " FROM history h JOIN objects o ON o.job_id = h.job_id"
    " WHERE h.id > ? AND h.finished_at < ? ORDER BY h.id LIMIT ?"
)


class SqlStore(abc.ABC):
    """``ledger.LedgerStore`` over one connection of a dialect subclass (this module's docstring)."""

    # -- what a dialect states -----------------------------------------------------------------

    FOR_UPDATE = ""  # appended to the reads a transaction decides on
    SETTLE_GONE = _SETTLE_GONE  # ``add_settlements``' gone ones, the IN list of ids appended
    BLOB = "?"  # how a stderr value is bound
    HEX_STDERR = False  # stderr passed as hex text (``ledger_rows``' Rule 3)
    ANOTHER = "another ledger"  # what to use instead of a ledger too new for this code
    PRUNING: Tuple[str, str] = ("", "")  # prune's pass for the history trigger: let it in, take it back
    # The rows ``unsettled`` may give, as the dialect's index on them serves them, ``?`` the
    # earliest start (``_UNSETTLED_WHERE``).
    UNSETTLED = "(h.result = 'unknown' OR h.finished_at IS NULL) AND h.started_at >= ?"

    path: str

    def __init__(self, path: str, backoff_base: float, backoff_cap: float) -> None:
        self.path = path
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._batched = False  # inside ``batch``: every _atomic joins its transaction
        self._tx: Optional[Cursor] = None  # the transaction's cursor, while one is open
        # ``import_records``: the id each history row imported (or found there) had in its source,
        # to this ledger's, so that a later row's ``retry_of`` names the same operation here.
        self._imported_ids: Dict[int, int] = {}

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def _errors(self, doing: str) -> ContextManager[None]:
        """The driver's errors turned into LedgerError (naming ``doing``), in this one place."""

    @abc.abstractmethod
    def _new_cursor(self) -> Cursor:
        """A cursor on the connection, outside a transaction (or on the open one's connection)."""

    @abc.abstractmethod
    def _transaction(self) -> ContextManager[Cursor]:
        """One transaction holding the write lock, its cursor in ``self._tx`` while it is open:
        committed if the block returns, else rolled back."""

    def _sql(self, sql: str) -> str:
        """``sql`` (``?`` placeholders) in the driver's placeholders."""
        return sql

    @abc.abstractmethod
    def _upsert(self, key: str, columns: Sequence[str], also: str = "") -> str:
        """The tail of an INSERT that updates ``columns`` (and sets ``also``) of the row with that
        ``key`` instead when there is one."""

    @abc.abstractmethod
    def _write_rows(self, cur: Cursor, insert: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
        """``insert`` (``INSERT INTO t (columns)``) of every row with ``tail``, in few statements."""

    @abc.abstractmethod
    def _finish_history(self, cur: Cursor, values: Sequence[Tuple[Any, ...]]) -> None:
        """Write ``ledger_rows.finished_values`` (the id last) into their history rows; the
        triggers see each row updated as one UPDATE of it would."""

    @abc.abstractmethod
    def _migrations(self) -> Tuple[Tuple[str, ...], ...]:
        """MIGRATIONS[i] takes the schema from version i to i + 1."""

    @abc.abstractmethod
    def _version_on(self, cur: Cursor) -> int:
        """The stored schema version (0: nothing there)."""

    @abc.abstractmethod
    def _migrating(self) -> ContextManager[Cursor]:
        """Where migrations run: one at a time per ledger, so that the version read again there
        is the one to start from."""

    @abc.abstractmethod
    def _set_version(self, cur: Cursor, version: int) -> None: ...

    def _before_first_migration(self, cur: Cursor) -> None:
        """Checks on a ledger without a schema before one is created in it."""
        return None

    @abc.abstractmethod
    def _prune_batch(self) -> int:
        """History rows per prune transaction."""

    def _prune_paused(self, held: float) -> None:
        """Between two prune batches, the last of which held the write lock ``held`` seconds."""
        return None

    def _checkpoint(self) -> Optional[bool]:
        """After a real prune: whether giving the freed pages back completed (None: no such step)."""
        return None

    @abc.abstractmethod
    def now(self) -> float: ...

    @abc.abstractmethod
    def sweep_lock(self) -> ContextManager[object]: ...

    @abc.abstractmethod
    def identity(self) -> str: ...

    # -- transactions and reads ----------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _locked(self, sql: str) -> str:
        """A read a transaction decides on, as the dialect locks it."""
        return sql + self.FOR_UPDATE

    def _run(self, cur: Cursor, sql: str, args: Sequence[Any] = ()) -> Cursor:
        cur.execute(self._sql(sql), tuple(args))
        return cur

    @contextmanager
    def _atomic(self, doing: str) -> Iterator[Cursor]:
        """One transaction under the write lock (``_transaction``), its errors LedgerError.
        Inside ``batch`` it is part of the batch's transaction."""
        if self._batched:
            assert self._tx is not None
            with self._errors(doing):
                yield self._tx
            return
        with self._errors(doing), self._transaction() as cur:
            yield cur

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every write inside is one transaction, committed when the block returns, rolled back if
        it raises.  Do not catch a ledger error inside: leave the block."""
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
        """A cursor for reads outside a transaction: they wait for no writer."""
        with self._errors(doing):
            cursor = self._new_cursor()
            try:
                yield cursor
            finally:
                cursor.close()

    def _read(self, doing: str, sql: str, args: Sequence[Any] = ()) -> List[Tuple[Any, ...]]:
        with self._reading(doing) as cursor:
            return [tuple(row) for row in self._run(cursor, sql, args).fetchall()]

    def _keyed(self, cur: Cursor, one: str, many: str, keys: Sequence[Any]) -> Dict[Any, Tuple[Any, ...]]:
        """The rows (``FOR_UPDATE``) whose key is one of ``keys``, by key, without it.  One key
        alone is read by ``one`` (``key = ?``, the key not read back: one key is every single
        operation, and with PyMySQL every column read costs); more in ``IN`` lists of
        ``ledger_rows.IN_PIECE`` appended to ``many``, which reads the key first."""
        if len(keys) == 1:
            row = self._run(cur, self._locked(one), (keys[0],)).fetchone()
            return {} if row is None else {keys[0]: tuple(row)}
        rows: Dict[Any, Tuple[Any, ...]] = {}
        for piece in ledger_rows.pieces(ledger_rows.distinct(keys)):
            self._run(cur, ledger_rows.in_list(many, len(piece), "?", self.FOR_UPDATE), piece)
            rows.update((row[0], tuple(row[1:])) for row in cur.fetchall())
        return rows

    # -- the schema ------------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self._reading("schema version") as cursor:
            return self._version_on(cursor)

    def _version(self, cur: Optional[Cursor] = None) -> int:
        """The schema version; LedgerError if it is newer than this code."""
        version = self.schema_version() if cur is None else self._version_on(cur)
        known = len(self._migrations())
        if version > known:
            raise LedgerError(
                f"ledger {self.path} has schema version {version}, newer than this slurm-dsl "
                f"knows ({known}); upgrade slurm-dsl or use {self.ANOTHER}",
                path=self.path,
            )
        return version

    def _migrate(self) -> None:
        """Bring the schema up to date where migrations run one at a time (``_migrating``), from
        the version read again there: of two processes opening a new ledger, the first migrates
        and the second finds the version current."""
        migrations = self._migrations()
        with self._errors("migrate"), self._migrating() as cur:
            version = self._version(cur)
            if version == 0:
                self._before_first_migration(cur)
            for number in range(version, len(migrations)):
                for statement in migrations[number]:
                    cur.execute(statement)
                self._set_version(cur, number + 1)

    # -- operations ------------------------------------------------------------------------------

    def begin_operation(
        self,
        job_id: str,
        op: Op,
        nonce: str,
        now: float,
        *,
        actor: str = "",
        baseline: Optional[JobInfo] = None,
        baseline_at: Optional[float] = None,
        key: Optional[str] = None,
        retry_of: Optional[int] = None,
        ends_by: Optional[float] = None,
    ) -> int:
        """Record that ``op`` starts on ``job_id``; return the history row's id.

        One committed transaction: the history row (with the object's bit before it and who runs
        it, ``actor``; "" is recorded as unknown; the job's ``baseline`` record and when its lookup
        started, ``baseline_at``, kept only with a baseline; the idempotency ``key``; the first
        operation it retries, ``retry_of``; and ``ends_by``), the object if it is new (bit clear),
        and for a requeue the intent: the object becomes may_be_set.  Call it while holding the
        job's lease, and start the script only after it returned.
        """
        return self.begin_operations(
            [(job_id, op, nonce)], now, actor=actor,
            baselines={} if baseline is None else {job_id: baseline}, baseline_at=baseline_at, key=key,
            retry_of={} if retry_of is None else {job_id: retry_of}, ends_by=ends_by,
        )[0]

    def begin_operations(
        self,
        starts: Sequence[Tuple[str, Op, str]],
        now: float,
        *,
        actor: str = "",
        baselines: Mapping[str, JobInfo] = {},
        baseline_at: Optional[float] = None,
        key: Optional[str] = None,
        retry_of: Mapping[str, int] = {},
        ends_by: Optional[float] = None,
    ) -> List[int]:
        """``begin_operation`` for many ``(job_id, op, nonce)`` in ONE committed transaction (a bulk
        chunk's intents): every intent is committed before any of their scripts may start.

        Set-based: the objects' bits read (``_keyed``) in ``IN`` lists of ``ledger_rows.IN_PIECE``
        ids, then the objects created or given an intent upserted and the history appended, many
        rows a statement (``_write_rows``); ``ledger_rows.begin_plan`` decides, as the starts one
        after the other would."""
        checked = ledger_rows.checked_starts(starts)
        now = ledger_rows.finite("now", now)
        fields = ledger_rows.start_fields(baselines, baseline_at, key, retry_of, ends_by)
        with self._atomic("begin operation") as cur:
            found = self._keyed(cur, _BIT_OF_ONE, _BITS_OF, [job_id for job_id, _, _ in checked])
            bits = {job_id: row[0] for job_id, row in found.items()}
            plan = ledger_rows.begin_plan(checked, bits, now, actor, fields)
            # A new object is inserted (back-off 0 by default); one there only gets an intent, and
            # a new intent is news for the sweeper: an old back-off must not delay it.
            tail = self._upsert("job_id", _BIT_COLUMNS, "lookup_failures = 0, next_lookup_at = 0")
            self._write_rows(cur, _WRITE_BIT, plan.objects, tail)
            self._write_quiet(cur, plan.quiet)
            return self._append_history(cur, plan.history)

    def _write_quiet(self, cur: Cursor, quiet: Sequence[ledger_rows.QuietWrite]) -> None:
        """The objects' ``quiet_at`` (``ledger_rows.QuietWrite``); their rows exist (written above
        in the same transaction, or before)."""
        if quiet:
            cur.executemany(self._sql("UPDATE objects SET quiet_at = ? WHERE job_id = ?"), list(quiet))

    def _append_history(self, cur: Cursor, rows: Sequence[Tuple[Any, ...]]) -> List[int]:
        """Append the history ``rows`` (``ledger_rows.HistoryStart``); their ids
        in their order.  Inside the write lock nobody else appends, so the rows above the largest
        id before are these (``ledger_rows.inserted_ids`` checks it; an
        ``auto_increment_increment`` above 1, as Galera sets, leaves gaps, which do not matter)."""
        if len(rows) <= 1:  # one operation: its lastrowid, in one statement as always
            ids: List[int] = []
            for row in rows:
                self._run(cur, _APPEND + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
                assert cur.lastrowid is not None
                ids.append(int(cur.lastrowid))
            return ids
        found = self._run(cur, "SELECT coalesce(max(id), 0) FROM history").fetchone()
        before = int(found[0]) if found else 0
        self._write_rows(cur, _APPEND, rows)
        self._run(
            cur,
            "SELECT id, job_id, op, nonce, prior_bit FROM history WHERE id > ? ORDER BY id LIMIT ?",
            (before, len(rows) + 1),
        )
        return ledger_rows.inserted_ids(self.path, rows, list(cur.fetchall()))

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

        Set-based: the operations read (``_keyed``) in ``IN`` lists of ``ledger_rows.IN_PIECE``
        ids, decided by ``ledger_rows.finish_plan`` (as the finishes one after the other would:
        the same operation twice is "already finished"), the objects changed in one multi-row
        upsert, the history rows by the dialect's ``_finish_history``."""
        now = ledger_rows.finite("now", now)
        finishes = list(finishes)
        with self._atomic("finish operation") as cur:
            rows = self._keyed(cur, _FINISHING_ONE, _FINISHING_ROWS, [op_id for op_id, _, _ in finishes])
            plan = ledger_rows.finish_plan(self.path, finishes, rows, now, hex_stderr=self.HEX_STDERR)
            self._write_rows(cur, _WRITE_BIT, plan.objects, self._upsert("job_id", _BIT_COLUMNS))
            self._write_quiet(cur, plan.quiet)
            self._finish_history(cur, plan.history)
        return plan.bits

    # -- leases ----------------------------------------------------------------------------------

    def acquire_lease(self, job_id: str, owner: str, now: float, ttl: float) -> bool:
        """Take (or renew) the job's lease until ``now + ttl``; False if another owner holds it."""
        return bool(self.acquire_leases([job_id], owner, now, ttl))

    def acquire_leases(
        self, job_ids: Sequence[str], owner: str, now: float, ttl: float, *, take_over_sweeps: bool = False
    ) -> List[str]:
        """``acquire_lease`` for many jobs in one transaction; returns the ids now held by ``owner``
        (in their order).  The leases there read (``_keyed``) in ``IN`` lists of
        ``ledger_rows.IN_PIECE`` ids, the ones taken written in one multi-row upsert
        (``ledger_rows.leases_taken`` decides).  With ``take_over_sweeps`` (only for the sweep
        holding the sweep lock), other sweeps' leases are taken too (``ledger_rules.sweep_owned``)."""
        ids = [validate_job_id(j) for j in job_ids]
        now, ttl = ledger_rows.finite("now", now), ledger_rows.positive_ttl(ttl)
        with self._atomic("acquire lease") as cur:
            rows = self._keyed(cur, _LEASE_OF_ONE, _LEASES_OF, ids)
            held = ledger_rows.leases_taken(ids, rows, owner, now, take_over_sweeps)
            self._write_rows(
                cur,
                "INSERT INTO leases (job_id, owner, expires_at)",
                [(job_id, owner, now + ttl) for job_id in ledger_rows.distinct(held)],
                self._upsert("job_id", ("owner", "expires_at")),
            )
        return held

    def release_lease(self, job_id: str, owner: str) -> bool:
        """Give the lease back; False if ``owner`` did not hold it (it lapsed and was taken)."""
        return self.release_leases([job_id], owner) > 0

    def release_leases(self, job_ids: Sequence[str], owner: str) -> int:
        """``release_lease`` for many jobs in one transaction; returns how many were held (a job
        named twice counts once, as the second release finds it gone).  One DELETE per ``IN``
        list of ``ledger_rows.IN_PIECE`` ids."""
        released = 0
        with self._atomic("release lease") as cur:
            for piece in ledger_rows.pieces(ledger_rows.distinct(job_ids)):
                sql = ledger_rows.in_list("DELETE FROM leases WHERE owner = ? AND job_id", len(piece), "?")
                released += self._run(cur, sql, (owner, *piece)).rowcount
        return released

    def _no_settlement(self, cur: Cursor, op_id: int) -> bool:
        return self._run(cur, "SELECT 1 FROM settlements WHERE op_id = ?", (op_id,)).fetchone() is None

    def _holds(self, cur: Cursor, job_id: str, owner: str, now: float) -> bool:
        return self._run(cur, self._locked(_HOLDS), (job_id, owner, now)).fetchone() is not None

    # -- objects and the sweeper -----------------------------------------------------------------

    def get(self, job_id: str) -> Optional[JobObject]:
        rows = self._read("get object", ledger_rows.SELECT_OBJECTS + " WHERE job_id = ?", (job_id,))
        return ledger_rows.job_object(rows[0]) if rows else None

    def pending(
        self, now: float, limit: Optional[int] = None, *, take_over_sweeps: bool = False
    ) -> List[JobObject]:
        """Objects whose bit is not clear that the sweeper may look at now, longest waiting first
        (by when they became due, then by when their bit last changed).

        Skips jobs with an unexpired lease (an operation or another sweeper is on them; with
        ``take_over_sweeps``, only an operation's) and jobs whose back-off after a failed lookup
        has not elapsed.  A negative ``limit``, as None, is no limit.
        """
        sql, args = self._pending_query(now, limit, take_over_sweeps, ids_only=False)
        return [ledger_rows.job_object(row) for row in self._read("list pending objects", sql, args)]

    def pending_ids(self, now: float, limit: Optional[int] = None, *, take_over_sweeps: bool = False) -> List[str]:
        """``pending``'s job ids alone, in its order: all the sweep reads of them.  Fetched
        ``PENDING_CHUNK`` rows at a time, so that a sweep of 100,000 objects holds their ids, never
        100,000 rows or records at once (docs/benchmarks.md §4)."""
        sql, args = self._pending_query(now, limit, take_over_sweeps, ids_only=True)
        ids: List[str] = []
        with self._reading("list pending objects") as cursor:
            self._run(cursor, sql, args)
            while chunk := cursor.fetchmany(PENDING_CHUNK):
                ids += [str(row[0]) for row in chunk]
        return ids

    def _pending_query(
        self, now: float, limit: Optional[int], take_over_sweeps: bool, *, ids_only: bool
    ) -> Tuple[str, List[Any]]:
        now = ledger_rows.finite("now", now)
        sql, args = ledger_rows.pending_query("?", now, take_over_sweeps, ids_only=ids_only)
        if limit is not None and limit >= 0:
            sql += " LIMIT ?"
            args.append(int(limit))
        return sql, args

    def quiet_times(self, job_ids: Sequence[str]) -> Dict[str, float]:
        """Each object's ``quiet_at`` (docs/contract.md §13: until when a call of slurm-dsl's may
        have changed its job's flag), or its ``updated_at`` where none was written (an object from
        before schema 4, or one only a sweep or a merge wrote); a job without an object is
        absent.  One query per ``IN`` list of ``ledger_rows.IN_PIECE`` ids; reads only."""
        found: Dict[str, float] = {}
        for piece in ledger_rows.pieces(ledger_rows.distinct(validate_job_id(j) for j in job_ids)):
            sql = ledger_rows.in_list("SELECT job_id, coalesce(quiet_at, updated_at) FROM objects WHERE job_id",
                                      len(piece), "?")
            found.update((str(r[0]), float(r[1])) for r in self._read("read quiet times", sql, piece))
        return found

    def count_not_clear(self) -> int:
        """How many objects have a bit that is not clear (leased and backed-off ones included)."""
        return int(self._read("count objects", "SELECT count(*) FROM objects WHERE bit <> 'clear'")[0][0])

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
        """``set_bit`` for many ``(job_id, bit, why)`` in one transaction; returns the ids written
        (in their order).  A piece of ``ledger_rows.IN_PIECE`` changes at a time: its leases read
        (``_keyed``) in one ``IN`` list, its bits (and the back-off reset) written in one multi-row
        upsert, so a sweep clearing 100,000 objects makes a few hundred statements, not three per
        object, and holds one piece's rows at a time, not 100,000."""
        checked = ledger_rows.checked_changes(changes)
        now = ledger_rows.finite("now", now)
        upsert = self._upsert("job_id", _BIT_COLUMNS, _BACKOFF_RESET)
        written: List[str] = []
        with self._atomic("set bit") as cur:
            for piece in ledger_rows.pieces(checked):
                leases = self._keyed(cur, _LEASE_OF_ONE, _LEASES_OF, [job_id for job_id, _, _ in piece])
                held = [change for change in piece if ledger_rows.holds(leases.get(change[0]), owner, now)]
                # One row per job, its last change: what writing them one after the other leaves.
                last = {job_id: (job_id, bit.value, why, now) for job_id, bit, why in held}
                self._write_rows(cur, _WRITE_BIT, list(last.values()), upsert)
                written += [job_id for job_id, _, _ in held]
        return written

    def watch(self, job_ids: Sequence[str], now: float, *, owner: str) -> List[str]:
        """Keep the objects as they are, to be looked at again by the next sweep without back-off.

        For a finished job still showing Requeue=1 (docs/contract.md §9.5).  The failure count is
        reset and the object goes behind the ones that have waited longer (``pending`` serves the
        longest waiting first), so watched objects cannot starve a ``--limit``.  Only while
        ``owner`` holds the job's unexpired lease; returns the ids written.
        """
        ids = [validate_job_id(j) for j in job_ids]
        now = ledger_rows.finite("now", now)
        written: List[str] = []
        with self._atomic("watch") as cur:
            for job_id in ids:
                # Decided by reading, not by the UPDATE's row count, which MariaDB gives for
                # changed rows only.
                there = self._run(cur, self._locked(_OBJECT_THERE), (job_id,))
                if there.fetchone() is None or not self._holds(cur, job_id, owner, now):
                    continue
                self._run(
                    cur,
                    "UPDATE objects SET lookup_failures = 0, next_lookup_at = ?, lookup_error = '' WHERE job_id = ?",
                    (now, job_id),
                )
                written.append(job_id)
        return written

    def lookup_failed(self, job_id: str, why: str, now: float) -> float:
        """Record that the job could not be looked up; return when the sweeper may try again.

        The wait doubles with each consecutive failure: ``min(cap, base * 2**(failures - 1))``.
        """
        return self.lookups_failed([job_id], why, now)[0]

    def lookups_failed(self, job_ids: Sequence[str], why: str, now: float) -> List[float]:
        """``lookup_failed`` for many jobs in one transaction; returns each one's next lookup time.
        The failure counts read (``_keyed``) in ``IN`` lists of ``ledger_rows.IN_PIECE`` ids (a job
        named twice counts twice, as one after the other), the new ones written an ``IN`` list of
        the jobs with the same count at a time: a lookup that could not ask for 100,000 objects
        (they have mostly failed as often) costs a few hundred statements, not 200,000."""
        ids = list(job_ids)
        why = ledger_rows.stored_text(why)
        now = ledger_rows.finite("now", now)
        times: List[float] = []
        with self._atomic("record failed lookup") as cur:
            rows = self._keyed(cur, _FAILURES_OF, _FAILURES_OF_MANY, ids)
            after: Dict[str, Tuple[int, float]] = {}
            for job_id in ids:
                after[job_id] = ledger_rows.failed_lookup(
                    self.path, job_id, rows.get(job_id), now, self.backoff_base, self.backoff_cap
                )
                rows[job_id] = (after[job_id][0],)
                times.append(after[job_id][1])
            alike: Dict[Tuple[int, float], List[str]] = {}
            for job_id, failed in after.items():
                alike.setdefault(failed, []).append(job_id)
            for (failures, next_at), jobs in alike.items():
                for piece in ledger_rows.pieces(jobs):
                    sql = ledger_rows.in_list(_WRITE_FAILURES, len(piece), "?")
                    self._run(cur, sql, (failures, next_at, why, *piece))
        return times

    def history(self, job_id: str) -> List[HistoryEntry]:
        """Every operation on the job, oldest first, each with its settlement if it has one."""
        rows = self._read("read history", ledger_rows.SELECT_HISTORY + " WHERE h.job_id = ? ORDER BY h.id", (job_id,))
        return [ledger_rows.entry(r, self.path) for r in rows]

    # -- settling (docs/contract.md §12) -----------------------------------------------------------

    def unsettled(
        self, now: float, *, since: float = 0.0, limit: Optional[int] = None, job_ids: Optional[Sequence[str]] = None
    ) -> List[Recorded]:
        """The operations to settle, newest first (started_at, then id, descending), at most
        ``limit`` (None or negative: no limit): rows without a settlement whose result is
        unknown, or without a result that no longer run at ``now`` (their ``ends_by`` passed, or
        their job has a later row or no unexpired lease), started at ``since`` or later; only
        those of ``job_ids`` if given.  Reads only.  Each as the core's ``settle.Recorded``: only
        what settling reads (``ledger_rows.SELECT_TO_SETTLE``), so a sweep that settles 10,000
        decodes no calls, stderr or detail (docs/benchmarks.md §9).

        Cost: the dialect's index (``UNSETTLED``) holds only the unknown and unfinished rows, by
        start, so one read walks those started since ``since``, newest first, and for each probes
        the settlements' unique ``op_id`` index, the job's later rows (``history_job``) and its
        lease: a ledger of 100,000 finished rows costs no more than an empty one, and settled
        unknown rows cost one probe each until prune removes them."""
        now, since = ledger_rows.finite("now", now), ledger_rows.finite("since", since)
        where = _UNSETTLED_WHERE.format(unsettled=self.UNSETTLED)
        order = " ORDER BY h.started_at DESC, h.id DESC"
        tail = (" LIMIT ?", [int(limit)]) if limit is not None and limit >= 0 else ("", [])
        if job_ids is None:
            sql = ledger_rows.SELECT_TO_SETTLE + where + order + tail[0]
            rows = self._read("read unsettled", sql, [since, now, now, *tail[1]])
            return ledger_rows.recorded(rows, self.path)
        ids = ledger_rows.distinct(validate_job_id(j) for j in job_ids)
        found: List[Recorded] = []
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(ledger_rows.SELECT_TO_SETTLE + where + " AND h.job_id", len(piece), "?")
            rows = self._read("read unsettled", sql + order + tail[0], [since, now, now, *piece, *tail[1]])
            found.extend(ledger_rows.recorded(rows, self.path))
        found.sort(key=lambda e: (e.started_at, e.id), reverse=True)
        return found if not tail[1] else found[: tail[1][0]]

    def to_settle(self, now: float, *, since: float = 0.0, limit: Optional[int] = None) -> List[Pending]:
        """``unsettled(now, since=since, limit=limit)``'s operations, as the core's
        ``settle.Pending``: without their baselines, which a sweep reads again (``recorded``) only
        for the operations whose verdict reads one (``OneLookup.gone_at_once``): a sweep that
        settles 10,000 operations of gone jobs decodes no JSON (docs/benchmarks.md §9)."""
        now, since = ledger_rows.finite("now", now), ledger_rows.finite("since", since)
        where = _UNSETTLED_WHERE.format(unsettled=self.UNSETTLED)
        tail = (" LIMIT ?", [int(limit)]) if limit is not None and limit >= 0 else ("", [])
        sql = ledger_rows.SELECT_PENDING + where + " ORDER BY h.started_at DESC, h.id DESC" + tail[0]
        return ledger_rows.pending(self._read("read unsettled", sql, [since, now, now, *tail[1]]))

    def acknowledged(self, from_id: int, since: float, limit: Optional[int] = None) -> List[Recorded]:
        """The rows a sweep reads again after a crash may have lost them (docs/contract.md §13.4,
        ``core.durable`` Rule 4): id ``from_id`` or more, started at ``since`` or later, without a
        settlement, whose result is ``ok`` or ``bit_set``, or none yet; in id order, at most
        ``limit`` (None: all).  Reads only; one range of the primary key, no other index."""
        from_id, since = ledger_rows.checked_op_id(from_id), ledger_rows.finite("since", since)
        tail = (" LIMIT ?", [int(limit)]) if limit is not None and limit >= 0 else ("", [])
        sql = (ledger_rows.SELECT_TO_SETTLE + " WHERE h.id >= ? AND h.started_at >= ? AND s.id IS NULL"
               " AND (h.result IS NULL OR h.result IN (?, ?)) ORDER BY h.id" + tail[0])
        args = [from_id, since, Result.OK.value, Result.BIT_SET.value, *tail[1]]
        return ledger_rows.recorded(self._read("read acknowledged operations", sql, args), self.path)

    def recorded(self, op_ids: Sequence[int]) -> Dict[int, Recorded]:
        """The history rows ``op_ids`` as the core's ``settle.Recorded`` (what settling reads of
        them, baseline and all), by id; an id with no row is absent.  Reads only."""
        ids = ledger_rows.distinct(ledger_rows.checked_op_id(i) for i in op_ids)
        found: Dict[int, Recorded] = {}
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(ledger_rows.SELECT_TO_SETTLE + " WHERE h.id", len(piece), "?")
            found.update((e.id, e) for e in ledger_rows.recorded(self._read("read operations", sql, piece), self.path))
        return found

    def count_unsettled(self, now: float, edges: Sequence[float] = (3600.0, 86400.0, 604800.0)) -> List[int]:
        """How many operations ``unsettled`` would give at ``now`` (no since, no limit), by age
        (``now - started_at``): ``len(edges) + 1`` counts, ``[0, e0), [e0, e1), ..., [e_last, inf)``."""
        now = ledger_rows.finite("now", now)
        sql = _STARTED + ledger_rows.SETTLED_HISTORY + _UNSETTLED_WHERE.format(unsettled=self.UNSETTLED)
        started = [float(r[0]) for r in self._read("count unsettled", sql, (_EVER, now, now))]
        return ledger_rows.age_counts(started, now, edges)

    def add_settlements(
        self,
        verdicts: Sequence[Tuple[int, Verdict, float, Optional[JobInfo], str]],
        now: float,
        *,
        by: str,
        gone: Sequence[int] = (),
        gone_at: float = 0.0,
    ) -> int:
        """Append the settlements ``(op_id, verdict, looked_at, record, detail)`` settled ``by``
        at ``now``, and for each id of ``gone`` the settlement ``(op_id, GONE, gone_at, None,
        GONE_DETAIL)`` (what a lookup that started at ``gone_at`` and found the job gone gives:
        ``OneLookup.gone``), in ONE transaction; return how many were written.  An operation that
        has a settlement keeps it (this one is skipped: verdicts are final, and two settlers may
        race; the ``verdicts`` go first); an ``op_id`` with no history row, or of a finished row
        whose result is not unknown, is LedgerError and nothing is written.

        Cost: the ``gone`` ones are written by ``INSERT ... SELECT`` from their history rows, a
        statement per ``IN_PIECE`` ids, a tuple of none made; their rows are read one by one only
        if fewer were written than given (to say which one is at fault, or already settled)."""
        from ..core.settle import GONE_DETAIL

        checked = ledger_rows.checked_verdicts(verdicts)
        now, who = ledger_rows.finite("now", now), ledger_rows.stored_text(by)
        gone_ids = ledger_rows.checked_op_ids(gone)
        if gone_ids:
            gone_at = ledger_rows.finite("gone_at", gone_at)
        if not checked and not gone_ids:
            return 0
        with self._atomic("add settlements") as cur:
            written = []
            if checked:
                rows = self._keyed(cur, _SETTLING_ONE, _SETTLING_ROWS, [op_id for op_id, *_ in checked])
                written = ledger_rows.settlement_plan(self.path, checked, rows, now, who)
                self._write_rows(cur, _SETTLE, written)
            count = len(written) + self._settle_gone(cur, gone_ids, gone_at, now, who, GONE_DETAIL)
        return count

    def _settle_gone(self, cur: Cursor, ids: Sequence[int], at: float, now: float, who: str, detail: str) -> int:
        """``add_settlements``' ``gone`` ones (distinct, checked ids): how many were written."""
        if not ids:
            return 0
        if self.FOR_UPDATE:
            self._keyed(cur, _SETTLING_ONE, _SETTLING_ROWS, ids)  # their rows locked, as the others'
        count = 0
        for piece in ledger_rows.pieces(ids):
            self._run(cur, ledger_rows.in_list(self.SETTLE_GONE, len(piece), "?"), [at, now, who, detail, *piece])
            count += max(cur.rowcount, 0)
        if count < len(ids):
            # Some were not written: already settled (skipped, as above), or not to settle at all
            # (LedgerError, as above: the transaction is rolled back).
            rows = self._keyed(cur, _SETTLING_ONE, _SETTLING_ROWS, ids)
            ledger_rows.settlement_plan(self.path, [(i, "gone", at, None, detail) for i in ids], rows, now, who)
        return count

    def keyed(self, job_ids: Sequence[str], op: Op, key: str) -> Dict[str, List[HistoryEntry]]:
        """The operations ``op`` with idempotency key ``key`` on each of ``job_ids``, oldest first,
        with their settlements; a job with none is absent.  Reads only (index ``history_key``)."""
        op, checked = Op(op), ledger_rows.checked_key(key)
        ids = ledger_rows.distinct(validate_job_id(j) for j in job_ids)
        found: Dict[str, List[HistoryEntry]] = {}
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(ledger_rows.SELECT_HISTORY + " WHERE h.op_key = ? AND h.op = ? AND h.job_id",
                                      len(piece), "?", " ORDER BY h.id")
            for r in self._read("read keyed operations", sql, [checked, op.value, *piece]):
                e = ledger_rows.entry(r, self.path)
                found.setdefault(e.job_id, []).append(e)
        return found

    def operations_by(
        self, job_ids: Sequence[str], op: Op, actor: str, since: float
    ) -> Dict[str, List[HistoryEntry]]:
        """The operations ``op`` on each of ``job_ids`` run by ``actor`` and started at ``since``
        or later, oldest first, with their settlements; a job with none is absent.  One query per
        ``IN`` list of ``ledger_rows.IN_PIECE`` ids (index ``history_job``); reads only."""
        op, since = Op(op), ledger_rows.finite("since", since)
        ids = ledger_rows.distinct(validate_job_id(j) for j in job_ids)
        found: Dict[str, List[HistoryEntry]] = {}
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(
                ledger_rows.SELECT_HISTORY + " WHERE h.op = ? AND h.actor = ? AND h.started_at >= ? AND h.job_id",
                len(piece), "?", " ORDER BY h.id",
            )
            for r in self._read("read own operations", sql, [op.value, str(actor), since, *piece]):
                e = ledger_rows.entry(r, self.path)
                found.setdefault(e.job_id, []).append(e)
        return found

    def later_operations(self, op_ids: Sequence[int]) -> Dict[int, List[HistoryEntry]]:
        """For each history id given, the rows of the same job with a larger id, oldest first,
        with their settlements, their stderr left out (b""); an id with none is absent.  One
        query per ``IN`` list of ``ledger_rows.IN_PIECE`` ids; reads only."""
        ids = ledger_rows.distinct(ledger_rows.checked_op_id(i) for i in op_ids)
        found: Dict[int, List[HistoryEntry]] = {}
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(ledger_rows.SELECT_LATER, len(piece), "?", " ORDER BY g.id, h.id")
            for r in self._read("read later operations", sql, piece):
                found.setdefault(int(r[0]), []).append(ledger_rows.entry(r[1:], self.path))
        return found

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
            ledger_rows.SELECT_OBJECTS + " WHERE bit <> 'clear' ORDER BY updated_at, job_id",
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
        with self._atomic("record sweep") as cur:
            self._write_rows(
                cur,
                "INSERT INTO last_sweep (one, started_at, finished_at, summary)",
                [(1, started, finished, text)],
                self._upsert("one", ("started_at", "finished_at", "summary")),
            )

    def last_sweep(self) -> Optional[SweepRecord]:
        """The last sweep ``record_sweep`` kept, or None if no sweep has run on this ledger."""
        found = self._read("read last sweep", "SELECT started_at, finished_at, summary FROM last_sweep")
        return ledger_rows.sweep_record(self.path, found[0]) if found else None

    def prune(self, before: float, now: float, *, dry_run: bool = False) -> PruneResult:
        """Remove the history rows ``rules.may_prune`` allows, then let the dialect give the space
        back (``_checkpoint``; ``checkpointed`` None if it has no such step).

        Rows that finished before ``before``, that are not their object's newest, of objects that
        are clear and not leased at ``now``.  In batches of the dialect's ``PRUNE_BATCH`` rows,
        each its own transaction that decides afresh under the write lock: an operation takes its
        job's lease (and a requeue marks it may_be_set) before its row exists, so whatever starts
        between two batches is left alone; and no batch keeps the write lock long enough for a
        concurrent operation to wait out its busy timeout.  The pass that lets the trigger delete
        (``PRUNING``) lives only inside each batch's transaction.  Between batches the dialect may
        pause (``_prune_paused``) so that waiting writers get in.  ``dry_run`` counts only.
        """
        before, now = ledger_rows.finite("before", before), ledger_rows.finite("now", now)
        batch = self._prune_batch()
        removed = 0
        jobs: Set[str] = set()
        after_id = 0
        while True:
            took = time.monotonic()
            with self._reading("prune (dry run)") if dry_run else self._atomic("prune") as cur:
                rows = list(self._run(cur, _PRUNE_ROWS, (now, after_id, before, batch)).fetchall())
                doomed = ledger_rows.doomed(rows, before)
                if doomed and not dry_run:
                    let_in, take_back = self.PRUNING
                    cur.execute(let_in)
                    cur.executemany(self._sql("DELETE FROM history WHERE id = ?"), [(op_id,) for op_id, _ in doomed])
                    # Their settlements go with them (the trigger lets none go whose row is there).
                    for piece in ledger_rows.pieces([op_id for op_id, _ in doomed]):
                        self._run(cur, ledger_rows.in_list(_SETTLEMENTS_OF, len(piece), "?"), piece)
                    cur.execute(take_back)
            removed += len(doomed)
            jobs.update(job_id for _, job_id in doomed)
            if len(rows) < batch:
                break
            after_id = int(rows[-1][0])
            if not dry_run:
                self._prune_paused(time.monotonic() - took)
        from .records import PruneResult

        return PruneResult(removed, len(jobs), None if dry_run else self._checkpoint())

    # -- ledger migrate ----------------------------------------------------------------------------

    def export_objects(self, *, not_clear: bool, after: str = "", limit: int = 500) -> List[JobObject]:
        """A page of the objects whose bit is (or is not) clear, by job id after ``after``."""
        rows = self._read(
            "export objects",
            ledger_rows.SELECT_OBJECTS + " WHERE (bit <> 'clear') = ? AND job_id > ? ORDER BY job_id LIMIT ?",
            (int(bool(not_clear)), str(after), int(limit)),
        )
        return [ledger_rows.job_object(row) for row in rows]

    def export_history(self, after_id: int, limit: int) -> List[HistoryEntry]:
        """A page of the history, in id order, from after ``after_id``."""
        rows = self._read(
            "export history",
            ledger_rows.SELECT_HISTORY + " WHERE h.id > ? ORDER BY h.id LIMIT ?",
            (int(after_id), int(limit)),
        )
        return [ledger_rows.entry(r, self.path) for r in rows]

    def import_records(
        self, objects: Sequence[JobObject], history: Sequence[HistoryEntry], *, merge: bool
    ) -> ImportResult:
        """Another ledger's objects, then its history rows, in one transaction holding the write
        lock (``ledger.LedgerStore.import_records``).  The history's triggers let rows be appended
        finished or not; nothing here updates or deletes one.  Each row's settlement comes with
        it (on its new id; one already there for the row is kept), and a ``retry_of`` is the id
        here of the row it named there, if that row was imported (or found) by this store
        before, else None."""
        checked = [ledger_rows.object_values(o) for o in objects]
        for e in history:  # checked before the transaction: a malformed row writes nothing
            ledger_rows.history_values(e, hex_stderr=self.HEX_STDERR)
            if e.settlement is not None:
                ledger_rows.settlement_values(e.settlement, e.id)
        imported = dict(self._imported_ids)
        copied = merged = kept = added = skipped = settled = 0
        with self._atomic("import records") as cur:
            for values in checked:
                found = self._run(cur, self._locked(_BIT_OF_ONE), values[:1])
                action = ledger_rows.import_action(self.path, values, found.fetchone(), merge)
                if action == "insert":
                    self._run(
                        cur,
                        "INSERT INTO objects (job_id, bit, why, updated_at, lookup_failures, next_lookup_at,"
                        " lookup_error) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        values,
                    )
                    copied += 1
                elif action == "update":
                    self._run(
                        cur,
                        "UPDATE objects SET bit = ?, why = ?, updated_at = ?, lookup_failures = ?,"
                        " next_lookup_at = ?, lookup_error = ? WHERE job_id = ?",
                        values[1:] + values[:1],
                    )
                    merged += 1
                else:
                    kept += 1
            for e in history:
                retry_of = None if e.retry_of is None else imported.get(e.retry_of)
                values = ledger_rows.history_values(e, hex_stderr=self.HEX_STDERR, retry_of=retry_of)
                there = self._run(cur, _HISTORY_THERE, values[:4]).fetchone() if merge else None
                if there is not None:
                    skipped += 1
                    op_id = int(there[0])
                else:
                    self._run(cur, _IMPORT_HISTORY.format(blob=self.BLOB), values)
                    op_id = int(cur.lastrowid)
                    added += 1
                imported[e.id] = op_id
                if e.settlement is not None and (there is None or self._no_settlement(cur, op_id)):
                    self._write_rows(cur, _SETTLE, [ledger_rows.settlement_values(e.settlement, op_id)])
                    settled += 1
        self._imported_ids = imported  # only once the transaction committed
        from .records import ImportResult

        return ImportResult(copied, merged, kept, added, skipped, settled)
