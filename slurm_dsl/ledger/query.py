"""The ledger's query layer (docs/contract.md §9.1; docs/wings.md §3): the SQL text of every statement (``?``
placeholders), the transactions and reads a store runs, and the hooks a dialect fills in (``SqlQueries``).

Rule: every read-modify-write is one ``_atomic`` transaction under the write lock, and every row it decides on is
read there (``FOR UPDATE`` where the dialect needs it): writers queue, no update is lost.  Reads take no lock."""

from __future__ import annotations

import abc
from contextlib import contextmanager
from typing import Any, ContextManager, Dict, Iterator, List, Mapping, Optional, Protocol, Sequence, Tuple

from ..core.model import LedgerError
from . import rows as ledger_rows
from . import schema


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
BIT_COLUMNS = ("bit", "why", "updated_at")
WRITE_BIT = schema.insert("objects", ("job_id", *BIT_COLUMNS))
# What a batch reads under the write lock (``_keyed``): one row by its key, or the rows of an
# ``IN`` list with their key first.  The objects' bits for ``begin_operations``; the operations
# for ``finish_operations`` (``ledger_rows.finish``'s row); the leases for ``acquire_leases``.
BIT_OF_ONE = "SELECT bit FROM objects WHERE job_id = ?"
BITS_OF = "SELECT job_id, bit FROM objects WHERE job_id"
FINISHING_ONE = "".join((
    "SELECT h.job_id, ", ledger_rows.OP_READ["op"], ", h.nonce, h.prior_bit, h.finished_at, o.bit"
    ", EXISTS (SELECT 1 FROM history l WHERE l.job_id = h.job_id AND l.id > h.id)"
    " FROM history h JOIN objects o ON o.job_id = h.job_id WHERE h.id = ?",
))
FINISHING_ROWS = "".join((
    "SELECT h.id, h.job_id, ", ledger_rows.OP_READ["op"], ", h.nonce, h.prior_bit, h.finished_at, o.bit"
    ", EXISTS (SELECT 1 FROM history l WHERE l.job_id = h.job_id AND l.id > h.id)"
    " FROM history h JOIN objects o ON o.job_id = h.job_id WHERE h.id",
))
LEASE_OF_ONE = "SELECT owner, expires_at FROM leases WHERE job_id = ?"
LEASES_OF = "SELECT job_id, owner, expires_at FROM leases WHERE job_id"
APPEND = schema.insert("history", schema.START)
# The rows one transaction appended, read back (``ledger_rows.inserted_ids``).
APPENDED = " ".join(
    ("SELECT id,", schema.listed(ledger_rows.APPENDED), "FROM history WHERE id > ? ORDER BY id LIMIT ?")
)
# The rows the sweep's writes and an import decide on (``FOR_UPDATE`` appended).
HOLDS = "SELECT 1 FROM leases WHERE job_id = ? AND owner = ? AND expires_at > ?"
OBJECT_THERE = "SELECT 1 FROM objects WHERE job_id = ?"
FAILURES_OF = "SELECT lookup_failures FROM objects WHERE job_id = ?"
FAILURES_OF_MANY = "SELECT job_id, lookup_failures FROM objects WHERE job_id"
WRITE_FAILURES = "UPDATE objects SET lookup_failures = ?, next_lookup_at = ?, lookup_error = ? WHERE job_id"
# What a new intent also does to an object there: its back-off starts again (``begin_operations``).
INTENT_NEWS = "lookup_failures = 0, next_lookup_at = 0"
# What writing a bit also does to its object: its lookup back-off starts again (``set_bits``).
BACKOFF_RESET = "lookup_failures = 0, next_lookup_at = 0, lookup_error = ''"
# The reads and writes of one statement each, the store's method named first.
RELEASE = "DELETE FROM leases WHERE owner = ? AND job_id"  # ``release_leases``, with an IN list
OBJECT_OF = ledger_rows.SELECT_OBJECTS + " WHERE job_id = ?"  # ``get``
# The looks at slurmctld's saves (schema 5, core.durable Rules 1, 2, 8), and the marks they anchor.
LAST_PLACE = "SELECT coalesce(max(seq), 0) FROM looks"
LAST_LOOK = "SELECT seen FROM looks WHERE observer = ? ORDER BY seq DESC LIMIT 1"
ADD_LOOK = "INSERT INTO looks (observer, seen, at_boot) VALUES (?, ?, ?)"
LOOKS_OF = "SELECT seq, seen, at_boot FROM looks WHERE observer = ? ORDER BY seq DESC LIMIT ?"
DROP_LOOKS = "DELETE FROM looks WHERE observer = ? AND seq < ?"
WRITE_QUIET = "UPDATE objects SET quiet_at = ?, quiet_mark = ?, quiet_look = ? WHERE job_id = ?"
MARKS_OF = (  # an IN list follows
    "SELECT job_id, quiet_mark, quiet_look, gone_mark, gone_look, coalesce(quiet_at, updated_at)"
    " FROM objects WHERE job_id"
)
# The distinct anchors of objects (quiet marks and their looks, those there; gone marks and theirs, a
# job not marked gone as (NULL, NULL)), an IN list of job ids following each.
QUIET_ANCHORS = "SELECT DISTINCT quiet_mark, quiet_look FROM objects WHERE quiet_mark IS NOT NULL AND job_id"
GONE_ANCHORS = "SELECT DISTINCT gone_mark, gone_look FROM objects WHERE job_id"
# Each with the mark and the look, then an IN list of job ids.
ANCHOR_QUIET = "UPDATE objects SET quiet_mark = ?, quiet_look = ? WHERE quiet_mark IS NULL AND job_id"
MARK_GONE = "UPDATE objects SET gone_mark = ?, gone_look = ? WHERE gone_mark IS NULL AND job_id"
FORGET_GONE = "UPDATE objects SET gone_mark = NULL, gone_look = NULL WHERE gone_mark IS NOT NULL AND job_id"
OP_LOOK = schema.insert("op_looks", schema.OP_LOOKS.names())
OP_MARKS_OF = "SELECT op_id, mark, look, ended FROM op_looks WHERE op_id"  # an IN list follows
SEEN_OVER = schema.insert("op_seen", schema.OP_SEEN.names())  # ``seen_over``: kept once an observer
SEEN_OF = "SELECT op_id, at_boot FROM op_seen WHERE observer = ? AND op_id"  # the observer, an IN list
ANCHOR_OPERATIONS = (  # the mark and the look, then an IN list of history ids
    "INSERT INTO op_looks (op_id, mark, look) SELECT h.id, ?, ? FROM history h"
    " WHERE NOT EXISTS (SELECT 1 FROM op_looks o WHERE o.op_id = h.id) AND h.id"
)
COUNT_NOT_CLEAR = "SELECT count(*) FROM objects WHERE bit <> 'clear'"
WATCH = "UPDATE objects SET lookup_failures = 0, next_lookup_at = ?, lookup_error = '' WHERE job_id = ?"
HISTORY_OF = ledger_rows.SELECT_HISTORY + " WHERE h.job_id = ? ORDER BY h.id"  # ``history``
TO_SETTLE_OF = ledger_rows.SELECT_TO_SETTLE + " WHERE h.id"  # ``recorded``, with an IN list
# ``acknowledged``: one range of the primary key, oldest first; its two results are ok and bit_set.
ACKNOWLEDGED = (ledger_rows.SELECT_TO_SETTLE + " WHERE h.id >= ? AND h.started_at >= ? AND s.id IS NULL"
                " AND (h.result IS NULL OR h.result IN (?, ?)) ORDER BY h.id")
# ``keyed`` and ``operations_by``, with an IN list of job ids and OLDEST_FIRST.
# ``lost``: acknowledged operations (life S12) read again absent or gone, with no later acknowledged
# operation of the same op on the job (a redo; lost too, it is listed itself); oldest first.  Its
# parameters: the acknowledged results (life.ACKNOWLEDGED_RESULTS), the lost verdicts
# (life.LOST_VERDICTS), the acknowledged results again, the limit.
LOST = "".join((
    ledger_rows.SELECT_HISTORY, " WHERE h.result IN (?, ?) AND s.verdict IN (?, ?)"
    " AND NOT EXISTS (SELECT 1 FROM history l"
    " WHERE l.job_id = h.job_id AND l.op = h.op AND l.id > h.id AND l.result IN (?, ?)) ORDER BY h.id LIMIT ?",
))
SELECTION_OF = "SELECT selector, job_ids FROM selections WHERE op_key = ? AND op = ?"  # ``select_once``
ADD_SELECTION = schema.insert("selections", schema.SELECTIONS.names()) + schema.values(schema.SELECTIONS.names())
KEYED = ledger_rows.SELECT_HISTORY + " WHERE h.op_key = ? AND h.op = ? AND h.job_id"
OPERATIONS_BY = ledger_rows.SELECT_HISTORY + " WHERE h.op = ? AND h.actor = ? AND h.started_at >= ? AND h.job_id"
OLDEST_FIRST = " ORDER BY h.id"
OPERATIONS = ledger_rows.SELECT_HISTORY + " WHERE h.id"  # ``operations``: an IN list of history ids follows
LATER_ORDER = " ORDER BY g.id, h.id"  # ``later_operations``: by the given id, then oldest first
COUNT_BY_BIT = "SELECT bit, count(*) FROM objects GROUP BY bit"
NOT_CLEAR = ledger_rows.SELECT_OBJECTS + " WHERE bit <> 'clear' ORDER BY updated_at, job_id"  # ``objects_not_clear``
COUNT_HISTORY = "SELECT count(*) FROM history"
UNFINISHED = ledger_rows.SELECT_UNFINISHED.format(mark="?")
LAST_SWEEP = "SELECT started_at, finished_at, summary FROM last_sweep"
DELETE_HISTORY = "DELETE FROM history WHERE id = ?"  # prune's, the trigger's pass in
# ``ledger migrate``'s pages.
EXPORT_OBJECTS = ledger_rows.SELECT_OBJECTS + " WHERE (bit <> 'clear') = ? AND job_id > ? ORDER BY job_id LIMIT ?"
EXPORT_HISTORY = ledger_rows.SELECT_HISTORY + " WHERE h.id > ? ORDER BY h.id LIMIT ?"
# ``unsettled`` and ``to_settle``: newest first, and only the given jobs' (an IN list follows).
NEWEST_FIRST = " ORDER BY h.started_at DESC, h.id DESC"
OF_JOBS = " AND h.job_id"
LIMIT = " LIMIT ?"
# The rows ``due_ids`` fetches at a time.
DUE_CHUNK = 1000
# An imported history row, every column as stored (``ledger_rows.IMPORT_COLUMNS``), and an
# imported object's; an object there updated to an imported one.
IMPORT_HISTORY = schema.insert("history", ledger_rows.IMPORT_COLUMNS)
IMPORT_OBJECT = schema.insert("objects", ledger_rows.OBJECT_COLUMNS) + schema.values(ledger_rows.OBJECT_COLUMNS)
OBJECT_SET = tuple(c for c in ledger_rows.OBJECT_COLUMNS if c != "job_id")
UPDATE_OBJECT = " ".join(("UPDATE objects SET", schema.assigned(OBJECT_SET), "WHERE job_id = ?"))
SETTLEMENTS_OF = "DELETE FROM settlements WHERE op_id"  # prune's, with an IN list
# What else is kept of an operation, which prune deletes with it (an IN list of ids follows each).
OPERATION_EXTRAS = ("DELETE FROM op_looks WHERE op_id", "DELETE FROM op_seen WHERE op_id",
                    "DELETE FROM comments WHERE op_id")
# The AdminComment copies (``ask_comment``, ``comment_done``, ``comments``; docs/contract.md §10.4).
_ASKED = ("op_id", "job_id", "text", "asked_at")
ADD_COMMENT = schema.insert("comments", _ASKED) + schema.values(_ASKED)
FINISH_COMMENT = "UPDATE comments SET result = ?, detail = ?, finished_at = ? WHERE id = ? AND finished_at IS NULL"
COMMENTS_OF = " ".join(("SELECT", schema.listed(schema.COMMENTS.names()), "FROM comments WHERE op_id"))  # an IN list
HISTORY_THERE = " ".join(("SELECT id FROM history WHERE", schema.assigned(ledger_rows.SAME_ROW, joint=" AND ")))
# The settlements (schema 3): one per operation at most, appended, never changed.
SETTLE = schema.insert("settlements", ledger_rows.SETTLE_COLUMNS)
# ``add_settlements``' gone ones: each row still to settle (unknown or unfinished, no settlement)
# gets GONE, the time its lookup started, no record, the detail (parameters, then the IN list).
# A dialect may have a cheaper way to skip the settled ones (``SqlStore.SETTLE_GONE``).
SETTLE_GONE = "".join((
    SETTLE,
    " SELECT h.id, h.job_id, 'gone', ?, NULL, ?, ?, ? FROM history h"
    " WHERE (h.result = 'unknown' OR h.finished_at IS NULL)"
    " AND NOT EXISTS (SELECT 1 FROM settlements s WHERE s.op_id = h.id) AND h.id",
))
# What ``add_settlements`` decides on: each operation's job, finish, result and whether it is settled.
SETTLING_ONE = (
    "SELECT h.job_id, h.finished_at, h.result, EXISTS (SELECT 1 FROM settlements s WHERE s.op_id = h.id)"
    " FROM history h WHERE h.id = ?"
)
SETTLING_ROWS = (
    "SELECT h.id, h.job_id, h.finished_at, h.result, EXISTS (SELECT 1 FROM settlements s WHERE s.op_id = h.id)"
    " FROM history h WHERE h.id"
)
# ``unsettled``: the rows the dialect's ``UNSETTLED`` index serves (unknown results and
# unfinished rows started since ``?``) with no settlement, an unfinished one only once it no
# longer runs (``ends_by`` passed, a later row of its job, or no lease not lapsed: as
# ``ledger_rows.unfinished``'s "lapsed").  ``{unsettled}`` is the dialect's predicate.
UNSETTLED_WHERE = (
    " WHERE {unsettled} AND s.id IS NULL"
    " AND (h.finished_at IS NOT NULL OR h.ends_by <= ?"
    " OR EXISTS (SELECT 1 FROM history l WHERE l.job_id = h.job_id AND l.id > h.id)"
    " OR NOT EXISTS (SELECT 1 FROM leases e WHERE e.job_id = h.job_id AND e.expires_at > ?))"
)
EVER = -1.0e308  # ``since`` for every row
STARTED = "SELECT h.started_at"  # what ``count_unsettled`` reads of each
# Prune's view of a batch of history rows: what ``rules.may_prune`` needs of each.
PRUNE_ROWS = (
    "SELECT h.id, h.job_id, h.finished_at, o.bit,"
    "  h.id = (SELECT max(n.id) FROM history n WHERE n.job_id = h.job_id),"
    "  EXISTS (SELECT 1 FROM leases l WHERE l.job_id = h.job_id AND l.expires_at > ?)"
    " FROM history h JOIN objects o ON o.job_id = h.job_id"
    " WHERE h.id > ? AND h.finished_at < ? ORDER BY h.id LIMIT ?"
)


class SqlQueries(abc.ABC):
    """The statements of ``ledger.store.SqlStore`` over one connection; a dialect subclass fills in the hooks."""

    # -- what a dialect states -----------------------------------------------------------------

    FOR_UPDATE = ""  # appended to the reads a transaction decides on
    SETTLE_GONE = SETTLE_GONE  # ``add_settlements``' gone ones, the IN list of ids appended
    BLOB = "?"  # how a stderr value is bound
    HEX_STDERR = False  # stderr passed as hex text (``ledger_rows``' Rule 3)
    ANOTHER = "another ledger"  # what to use instead of a ledger too new for this code
    PRUNING: Tuple[str, str] = ("", "")  # prune's pass for the history trigger: let it in, take it back
    # The rows ``unsettled`` may give, as the dialect's index on them serves them, ``?`` the
    # earliest start (``UNSETTLED_WHERE``).
    UNSETTLED = "(h.result = 'unknown' OR h.finished_at IS NULL) AND h.started_at >= ?"

    path: str

    def __init__(self, path: str) -> None:
        self.path = path
        self._batched = False  # inside ``batch``: every _atomic joins its transaction
        self._tx: Optional[Cursor] = None  # the transaction's cursor, while one is open

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
        """One transaction holding the write lock, its cursor in ``self._tx`` while open; rolled back if it raises."""

    def _sql(self, sql: str) -> str:
        """``sql`` (``?`` placeholders) in the driver's placeholders."""
        return sql

    @abc.abstractmethod
    def _upsert(self, key: str, columns: Sequence[str], also: str = "") -> str:
        """The tail of an INSERT that instead updates ``columns`` (and sets ``also``) of a row with that ``key``."""

    @abc.abstractmethod
    def _write_rows(self, cur: Cursor, insert: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
        """``insert`` (``INSERT INTO t (columns)``) of every row with ``tail``, in few statements."""

    @abc.abstractmethod
    def _finish_history(self, cur: Cursor, values: Sequence[Tuple[Any, ...]]) -> None:
        """Write ``ledger_rows.finished_values`` (the id last) into their rows, as one UPDATE each would."""

    @abc.abstractmethod
    def _migrations(self) -> Tuple[Tuple[str, ...], ...]:
        """MIGRATIONS[i] takes the schema from version i to i + 1."""

    @abc.abstractmethod
    def _schema(self) -> Tuple[Tuple[str, ...], int]:
        """A new ledger's schema, created at once, and its version (``schema.CURRENT``)."""

    @abc.abstractmethod
    def _version_on(self, cur: Cursor) -> int:
        """The stored schema version (0: nothing there)."""

    @abc.abstractmethod
    def _migrating(self) -> ContextManager[Cursor]:
        """Where migrations run: one at a time per ledger, the version read again there."""

    @abc.abstractmethod
    def _set_version(self, cur: Cursor, version: int) -> None: ...

    def _before_first_migration(self, cur: Cursor) -> bool:
        """Checks on a ledger without a schema; whether it holds none of the ledger's tables, so that the
        current schema may be created at once (else the migrations, each safe to run again, carry on from a crash)."""
        return True

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

    def _locked(self, sql: str) -> str:
        """A read a transaction decides on, as the dialect locks it."""
        return sql + self.FOR_UPDATE

    def _run(self, cur: Cursor, sql: str, args: Sequence[Any] = ()) -> Cursor:
        cur.execute(self._sql(sql), tuple(args))
        return cur

    @contextmanager
    def _atomic(self, doing: str) -> Iterator[Cursor]:
        """One transaction under the write lock, its errors LedgerError; inside ``batch``, part of the batch's."""
        if self._batched:
            assert self._tx is not None
            with self._errors(doing):
                yield self._tx
            return
        with self._errors(doing), self._transaction() as cur:
            yield cur

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
        """The rows (``FOR_UPDATE``) whose key is one of ``keys``, by key, the key left out: one key by ``one``
        (``key = ?``: with PyMySQL every column read costs), more by ``many`` (key first) in ``IN`` lists."""
        if len(keys) == 1:
            row = self._run(cur, self._locked(one), (keys[0],)).fetchone()
            return {} if row is None else {keys[0]: tuple(row)}
        rows: Dict[Any, Tuple[Any, ...]] = {}
        for piece in ledger_rows.pieces(ledger_rows.distinct(keys)):
            self._run(cur, ledger_rows.in_list(many, len(piece), "?", self.FOR_UPDATE), piece)
            rows.update((row[0], tuple(row[1:])) for row in cur.fetchall())
        return rows

    def _stored_version(self) -> int:
        with self._reading("schema version") as cursor:
            return self._version_on(cursor)

    def _version(self, cur: Optional[Cursor] = None) -> int:
        """The schema version; LedgerError if it is newer than this code."""
        version = self._stored_version() if cur is None else self._version_on(cur)
        known = len(self._migrations())
        if version > known:
            raise LedgerError(
                f"ledger {self.path} has schema version {version}, newer than this slurm-dsl "
                f"knows ({known}); upgrade slurm-dsl or use {self.ANOTHER}",
                path=self.path,
            )
        return version

    def _migrate(self) -> None:
        """Bring the schema up to date under ``_migrating``, from the version read there: one process migrates."""
        migrations = self._migrations()
        with self._errors("migrate"), self._migrating() as cur:
            version = self._version(cur)
            if version == 0 and self._before_first_migration(cur):
                statements, version = self._schema()
                for statement in statements:
                    cur.execute(statement)
                self._set_version(cur, version)
            for number in range(version, len(migrations)):
                for statement in migrations[number]:
                    cur.execute(statement)
                self._set_version(cur, number + 1)

    def _write_quiet(self, cur: Cursor, quiet: Sequence[ledger_rows.QuietWrite]) -> None:
        """The objects' quiet moment (``ledger_rows.QuietWrite``); their rows exist already."""
        if quiet:
            cur.executemany(self._sql(WRITE_QUIET), list(quiet))

    def _last_place(self, cur: Cursor) -> int:
        """Where the looks at slurmctld's saves stand: the place of the last one taken (0: none)."""
        found = self._run(cur, LAST_PLACE).fetchone()
        return int(found[0]) if found and found[0] is not None else 0

    def _in_lists(self, cur: Cursor, sql: str, head: Sequence[Any], keys: Sequence[Any]) -> int:
        """``sql`` with ``head``'s parameters and an ``IN`` list per piece of ``keys``; how many rows changed."""
        changed = 0
        for piece in ledger_rows.pieces(ledger_rows.distinct(keys)):
            changed += max(self._run(cur, ledger_rows.in_list(sql, len(piece), "?"), (*head, *piece)).rowcount, 0)
        return changed

    def _append_history(self, cur: Cursor, rows: Sequence[Tuple[Any, ...]]) -> List[int]:
        """Append the history ``rows``; their ids, in order: under the write lock, the rows above the largest id
        before (``ledger_rows.inserted_ids``; the gaps of Galera's ``auto_increment_increment`` do not matter)."""
        if len(rows) <= 1:  # one operation: its lastrowid, in one statement as always
            ids: List[int] = []
            for row in rows:
                self._run(cur, APPEND + schema.values(schema.START), row)
                assert cur.lastrowid is not None
                ids.append(int(cur.lastrowid))
            return ids
        found = self._run(cur, "SELECT coalesce(max(id), 0) FROM history").fetchone()
        before = int(found[0]) if found else 0
        self._write_rows(cur, APPEND, rows)
        self._run(cur, APPENDED, (before, len(rows) + 1))
        return ledger_rows.inserted_ids(self.path, rows, list(cur.fetchall()))

    def _no_settlement(self, cur: Cursor, op_id: int) -> bool:
        return self._run(cur, "SELECT 1 FROM settlements WHERE op_id = ?", (op_id,)).fetchone() is None

    def _holds(self, cur: Cursor, job_id: str, owner: str, now: float) -> bool:
        return self._run(cur, self._locked(HOLDS), (job_id, owner, now)).fetchone() is not None

    def _due_query(
        self, now: float, limit: Optional[int], reclaim_sweeps: bool, *, ids_only: bool
    ) -> Tuple[str, List[Any]]:
        now = ledger_rows.finite("now", now)
        sql, args = ledger_rows.due_query("?", now, reclaim_sweeps, ids_only=ids_only)
        if limit is not None and limit >= 0:
            sql += LIMIT
            args.append(int(limit))
        return sql, args

    def _settle_gone(self, cur: Cursor, ids: Sequence[int], at: float, now: float, who: str, detail: str) -> int:
        """``add_settlements``' ``gone`` ones (distinct, checked ids): how many were written."""
        if not ids:
            return 0
        if self.FOR_UPDATE:
            self._keyed(cur, SETTLING_ONE, SETTLING_ROWS, ids)  # their rows locked, as the others'
        count = 0
        for piece in ledger_rows.pieces(ids):
            self._run(cur, ledger_rows.in_list(self.SETTLE_GONE, len(piece), "?"), [at, now, who, detail, *piece])
            count += max(cur.rowcount, 0)
        if count < len(ids):
            # Some were not written: already settled (skipped, as above), or not to settle at all
            # (LedgerError, as above: the transaction is rolled back).
            rows = self._keyed(cur, SETTLING_ONE, SETTLING_ROWS, ids)
            ledger_rows.settlement_plan(self.path, [(i, "gone", at, None, detail) for i in ids], rows, now, who)
        return count

    def _unsettled(self, select: str, more: str = "") -> str:
        """``select`` (``h``: history, ``s``: settlement), ``unsettled``'s WHERE, ``more``; args: since, now, now."""
        return select + UNSETTLED_WHERE.format(unsettled=self.UNSETTLED) + more

    def _write_leases(self, cur: Cursor, leases: Sequence[Tuple[str, str, float]]) -> None:
        """Each ``(job_id, owner, expires_at)`` as its job's lease, taken or renewed."""
        key, *taken = schema.LEASES.names()
        self._write_rows(cur, schema.insert("leases", (key, *taken)), leases, self._upsert(key, taken))

    def _write_last_sweep(self, cur: Cursor, row: Tuple[int, float, float, str]) -> None:
        """The last sweep's one row ``(1, started_at, finished_at, summary)``, replacing the one there."""
        key, *kept = schema.LAST_SWEEP.names()
        self._write_rows(cur, schema.insert("last_sweep", (key, *kept)), [row], self._upsert(key, kept))

    def _import_history(self, cur: Cursor, values: Mapping[str, Any]) -> int:
        """Append an imported history row (``ledger_rows.history_values``); its id here."""
        sql = IMPORT_HISTORY + schema.values(ledger_rows.IMPORT_COLUMNS, {"stderr": self.BLOB})
        self._run(cur, sql, ledger_rows.ordered(ledger_rows.IMPORT_COLUMNS, values))
        return int(cur.lastrowid)
