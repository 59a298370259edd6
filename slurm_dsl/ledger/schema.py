"""The ledger's tables, each column stated once with its type in both dialects (docs/contract.md §9.1).

``TABLES`` is the schema of ``CURRENT``: a new ledger is created from it, an older one migrated to it (a test
checks that both roads meet).  A change: a new migration in each dialect, the same change here (docs/wings.md §8)."""

from __future__ import annotations

from typing import Literal, Mapping, NamedTuple, Optional, Sequence, Tuple

Dialect = Literal["sqlite", "mariadb"]

# The schema these tables are, in each dialect (``user_version`` in SQLite, ``schema_version`` in
# MariaDB, which started at SQLite's schema 2).
CURRENT = {"sqlite": 9, "mariadb": 8}

BITS = "'clear', 'may_be_set', 'set'"
OPS = "'hold', 'release', 'requeue', 'restore', 'open'"
VERDICTS = "'present', 'absent', 'gone', 'undecidable'"
_ID = "VARCHAR(20) NOT NULL"  # MariaDB's job id: at most 10 ASCII digits (jobid.MAX_JOB_ID)
_TABLE = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"  # MariaDB's every table


class Column(NamedTuple):
    """One column: its type in each dialect (None: not there), the values it may hold, whether a start column."""

    name: str
    sqlite: Optional[str]
    mariadb: Optional[str]
    one_of: str = ""
    start: bool = False

    def ddl(self, dialect: Dialect) -> Optional[str]:
        """The column's definition in ``dialect`` (None: the dialect has no such column)."""
        kind = self.sqlite if dialect == "sqlite" else self.mariadb
        if kind is None:
            return None
        return f"{self.name} {kind}" + (f" CHECK ({self.name} IN ({self.one_of}))" if self.one_of else "")


class Table(NamedTuple):
    """A table: its columns in stored order, and MariaDB's keys (SQLite's indexes: ``ledger.sqlite``)."""

    name: str
    columns: Tuple[Column, ...]
    keys: Tuple[str, ...] = ()

    def names(self, dialect: Dialect = "sqlite") -> Tuple[str, ...]:
        """The columns ``dialect`` stores, in their order."""
        return tuple(c.name for c in self.columns if c.ddl(dialect) is not None)


def _s(name: str, sqlite: str, mariadb: str, one_of: str = "") -> Column:
    """A history row's start column: written at its start, never changed (``start_guard``)."""
    return Column(name, sqlite, mariadb, one_of, start=True)


OBJECTS = Table("objects", (
    Column("job_id", "TEXT PRIMARY KEY", f"{_ID} PRIMARY KEY"),
    Column("bit", "TEXT NOT NULL", "VARCHAR(16) NOT NULL", BITS),
    Column("why", "TEXT NOT NULL", "MEDIUMTEXT NOT NULL"),
    Column("updated_at", "REAL NOT NULL", "DOUBLE NOT NULL"),
    Column("lookup_failures", "INTEGER NOT NULL DEFAULT 0", "BIGINT NOT NULL DEFAULT 0"),
    Column("next_lookup_at", "REAL NOT NULL DEFAULT 0", "DOUBLE NOT NULL DEFAULT 0"),
    Column("lookup_error", "TEXT NOT NULL DEFAULT ''", "MEDIUMTEXT NOT NULL DEFAULT ''"),
    # When (the ledger's clock) a call of slurm-dsl's last could change the job's flag: shown, never
    # compared with slurmctld's clock (docs/contract.md §13).
    Column("quiet_at", "REAL", "DOUBLE NULL"),
    # Where the looks at slurmctld's saves stood once slurm-dsl's last call on the job was over, and
    # the look its own process took then (core.durable Rule 2: ``LOOKS``; NULL: not known yet).
    Column("quiet_mark", "INTEGER", "BIGINT NULL"),
    Column("quiet_look", "TEXT", "VARCHAR(1024) NULL"),
    # Where the looks stood when a lookup first said the job is gone, and the look taken after that
    # lookup (core.durable Rule 8; NULL: not seen gone).
    Column("gone_mark", "INTEGER", "BIGINT NULL"),
    Column("gone_look", "TEXT", "VARCHAR(1024) NULL"),
), keys=("KEY objects_pending (bit, next_lookup_at, updated_at)",))

# ids are never reused: prune never removes a job's newest row, so never the largest id.
HISTORY = Table("history", (
    _s("id", "INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY"),
    _s("job_id", "TEXT NOT NULL", _ID),
    _s("op", "TEXT NOT NULL", "VARCHAR(16) NOT NULL", OPS),
    _s("nonce", "TEXT NOT NULL", "VARCHAR(255) NOT NULL"),
    _s("started_at", "REAL NOT NULL", "DOUBLE NOT NULL"),
    _s("prior_bit", "TEXT NOT NULL", "VARCHAR(16) NOT NULL", BITS),
    Column("finished_at", "REAL", "DOUBLE NULL"),
    Column("result", "TEXT", "VARCHAR(32) NULL"),
    Column("requeue_bit", "TEXT", "VARCHAR(16) NULL"),
    Column("bit_after", "TEXT", "VARCHAR(16) NULL", BITS),
    Column("reason", "TEXT", "VARCHAR(64) NULL"),
    Column("detail", "TEXT", "MEDIUMTEXT NULL"),
    Column("exit_status", "INTEGER", "INT NULL"),
    Column("calls", "TEXT", "MEDIUMTEXT NULL"),
    Column("stderr", "BLOB", "MEDIUMBLOB NULL"),  # 64 KiB does not fit MariaDB's BLOB
    Column("stderr_len", "INTEGER", "BIGINT NULL"),
    _s("actor", "TEXT", "MEDIUMTEXT NULL"),  # who ran it (NULL: unknown)
    # What an operation records at its start for settling it later (docs/contract.md §12).
    _s("baseline", "TEXT", "MEDIUMTEXT NULL"),
    _s("baseline_at", "REAL", "DOUBLE NULL"),
    _s("op_key", "TEXT", "VARCHAR(255) NULL"),
    _s("retry_of", "INTEGER", "BIGINT UNSIGNED NULL"),
    _s("ends_by", "REAL", "DOUBLE NULL"),
    # No partial index in InnoDB: the start of an unknown or unfinished row, NULL for every other,
    # indexed, serves ``unsettled`` (SQLite's partial index history_unsettled does it there).
    Column("unsettled_at", None,
           "DOUBLE AS (IF(result = 'unknown' OR finished_at IS NULL, started_at, NULL)) VIRTUAL"),
    # Where and when that lookup started on a boot clock, ``host/boot/seconds`` (docs/contract.md
    # §13.7: how long after an earlier operation's end its record was read; NULL: not known).
    _s("baseline_boot", "TEXT", "VARCHAR(512) NULL"),
    # Why, as the admin said it (``--reason``, docs/contract.md §10.4; NULL: not said).
    _s("admin_reason", "TEXT", "VARCHAR(1024) NULL"),
    # 1: a requeue into hold (``requeue --hold``, docs/contract.md §1), whose ``op`` is stored as
    # 'requeue' (every ledger's CHECK allows it, and a key's requeues are one: a rerun of the key
    # with or without --hold never requeues the job again); NULL: not one.  Read back as the op
    # 'requeuehold' (``ledger.rows.OP_READ``).
    _s("hold", "INTEGER", "TINYINT NULL", "1"),
    # Which slurmctld was in control (``lookups.controller``: BOOT_TIME, and on a pair the
    # heartbeat's writer) before the baseline's lookup, and once the calls were over
    # (docs/contract.md §12, core.settle Rule 16: did a restart or takeover come between; NULL: not read).
    _s("baseline_ctl", "TEXT", "VARCHAR(512) NULL"),
    Column("calls_ctl", "TEXT", "VARCHAR(512) NULL"),
), keys=(
    "KEY history_job (job_id, id)", "KEY history_unsettled (unsettled_at, id)", "KEY history_key (op_key, job_id, op)",
))

LEASES = Table("leases", (
    Column("job_id", "TEXT PRIMARY KEY", f"{_ID} PRIMARY KEY"),
    Column("owner", "TEXT NOT NULL", "VARCHAR(1024) NOT NULL"),
    Column("expires_at", "REAL NOT NULL", "DOUBLE NOT NULL"),
))

# The last sweep that was not a dry run: one row, replaced each time.
LAST_SWEEP = Table("last_sweep", (
    Column("one", "INTEGER PRIMARY KEY CHECK (one = 1)", "TINYINT NOT NULL PRIMARY KEY CHECK (one = 1)"),
    Column("started_at", "REAL NOT NULL", "DOUBLE NOT NULL"),
    Column("finished_at", "REAL NOT NULL", "DOUBLE NOT NULL"),
    Column("summary", "TEXT NOT NULL", "MEDIUMTEXT NOT NULL"),
))

# Prune's pass for the history's triggers, inserted and deleted inside its own transaction: one
# row in SQLite, the pruning connection's in MariaDB.
PRUNING = Table("pruning", (
    Column("one", "INTEGER PRIMARY KEY CHECK (one = 1)", None),
    Column("connection_id", None, "BIGINT UNSIGNED NOT NULL PRIMARY KEY"),
))

# MariaDB's row every writer locks first: one writer at a time, as in SQLite.
WRITE_LOCK = Table("write_lock", (
    Column("one", None, "TINYINT NOT NULL PRIMARY KEY CHECK (one = 1)"),
))

# The verdicts (docs/contract.md §12): one per operation at most, appended, final.
SETTLEMENTS = Table("settlements", (
    Column("id", "INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY"),
    Column("op_id", "INTEGER NOT NULL UNIQUE", "BIGINT UNSIGNED NOT NULL"),
    Column("job_id", "TEXT NOT NULL", _ID),
    Column("verdict", "TEXT NOT NULL", "VARCHAR(16) NOT NULL", VERDICTS),
    Column("looked_at", "REAL NOT NULL", "DOUBLE NOT NULL"),
    Column("record", "TEXT", "MEDIUMTEXT NULL"),
    Column("settled_at", "REAL NOT NULL", "DOUBLE NOT NULL"),
    Column("settled_by", "TEXT NOT NULL", "MEDIUMTEXT NOT NULL"),
    Column("detail", "TEXT NOT NULL", "MEDIUMTEXT NOT NULL"),
), keys=("UNIQUE KEY settlements_op (op_id)",))

# The looks at slurmctld's job_state (core.durable Rules 1 and 2), each taken inside the write lock, so
# that ``seq`` is the order they were taken in: one observer's row kept only when it saw another file
# than its row before, its last ``LOOKS_KEPT`` kept.
LOOKS = Table("looks", (
    Column("seq", "INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY"),
    Column("observer", "TEXT NOT NULL", "VARCHAR(512) NOT NULL"),
    Column("seen", "TEXT NOT NULL", "VARCHAR(512) NOT NULL"),
    # This host's boot clock when it was taken (a heartbeat's: core.durable Rule 7; NULL: job_state's).
    Column("at_boot", "REAL", "DOUBLE NULL"),
), keys=("KEY looks_observer (observer, seq)",))

# Where the looks stood when an operation was over, and its own look then (core.durable Rule 4):
# written when it finishes, or by the sweep that reads it again (NULL look: not its own).
OP_LOOKS = Table("op_looks", (
    Column("op_id", "INTEGER PRIMARY KEY", "BIGINT UNSIGNED NOT NULL PRIMARY KEY"),
    Column("mark", "INTEGER NOT NULL", "BIGINT NOT NULL"),
    Column("look", "TEXT", "VARCHAR(1024) NULL"),
    # Where and when it was over on a boot clock: ``host/boot/seconds`` (docs/contract.md §13.7: the
    # settle delay counted on one clock that never steps; NULL: not known).
    Column("ended", "TEXT", "VARCHAR(512) NULL"),
))

# When each observer (``host/boot``) first found an operation over, on its boot clock: the settle
# delay of one that did not end on the observer's host and boot counts from there (docs/contract.md
# §13.7; core.settle Rule 15).
OP_SEEN = Table("op_seen", (
    Column("op_id", "INTEGER NOT NULL", "BIGINT UNSIGNED NOT NULL"),
    Column("observer", "TEXT NOT NULL", "VARCHAR(512) NOT NULL"),
    Column("at_boot", "REAL NOT NULL", "DOUBLE NOT NULL"),
), keys=("PRIMARY KEY (op_id, observer)",))

# The jobs a keyed run of selectors chose (docs/contract.md §10.3; core.select Rule 4): one row per
# key and operation, written by its first run, never changed, so that every rerun acts on that set.
SELECTIONS = Table("selections", (
    Column("op_key", "TEXT NOT NULL", "VARCHAR(255) NOT NULL"),
    Column("op", "TEXT NOT NULL", "VARCHAR(16) NOT NULL", OPS),
    Column("selector", "TEXT NOT NULL", "MEDIUMTEXT NOT NULL"),  # core.select.Selection.text
    Column("job_ids", "TEXT NOT NULL", "MEDIUMTEXT NOT NULL"),  # space-separated, in the listing's order
    Column("selected_at", "REAL NOT NULL", "DOUBLE NOT NULL"),
    Column("actor", "TEXT", "MEDIUMTEXT NULL"),
), keys=("PRIMARY KEY (op_key, op)",))

# The reason copied to a job's AdminComment after an operation (``--admin-comment``, docs/contract.md
# §10.4): asked (the intent, under the job's lease, before the call), then its result; NULL result:
# the call may have run and its end was never recorded.
COMMENTS = Table("comments", (
    Column("id", "INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY"),
    Column("op_id", "INTEGER NOT NULL", "BIGINT UNSIGNED NOT NULL"),  # the operation it follows
    Column("job_id", "TEXT NOT NULL", _ID),
    Column("text", "TEXT NOT NULL", "MEDIUMTEXT NOT NULL"),
    Column("asked_at", "REAL NOT NULL", "DOUBLE NOT NULL"),
    Column("result", "TEXT", "VARCHAR(32) NULL"),
    Column("detail", "TEXT", "MEDIUMTEXT NULL"),
    Column("finished_at", "REAL", "DOUBLE NULL"),
), keys=("KEY comments_op (op_id)",))

TABLES = (OBJECTS, HISTORY, LEASES, LAST_SWEEP, PRUNING, WRITE_LOCK, SETTLEMENTS, LOOKS, OP_LOOKS, OP_SEEN, SELECTIONS,
          COMMENTS)

# A history row's columns written at its start (``begin_operations``), in their order, its id
# apart; and those written when it finishes (``finish_operations``), in their order.
START = tuple(c.name for c in HISTORY.columns if c.start and c.name != "id")
FINISH = tuple(c.name for c in HISTORY.columns if not c.start and c.sqlite is not None)


def create_table(table: Table, dialect: Dialect) -> Optional[str]:
    """``table``'s ``CREATE TABLE`` in ``dialect`` (None: none there); MariaDB's is safe to run again."""
    lines = [d for d in (c.ddl(dialect) for c in table.columns) if d is not None]
    if not lines:
        return None
    if dialect == "sqlite":
        return f"CREATE TABLE {table.name} (\n    " + ",\n    ".join(lines) + "\n)"
    lines += table.keys
    return f"CREATE TABLE IF NOT EXISTS {table.name} (\n    " + ",\n    ".join(lines) + f"\n) {_TABLE}"


def create_tables(dialect: Dialect) -> Tuple[str, ...]:
    """Every table's ``CREATE TABLE`` in ``dialect``, in ``TABLES``' order."""
    return tuple(s for s in (create_table(t, dialect) for t in TABLES) if s is not None)


def start_guard(dialect: Dialect) -> str:
    """When an UPDATE of a history row is refused: it finished already, or one of its start columns changes."""
    changed = "NEW.{0} IS NOT OLD.{0}" if dialect == "sqlite" else "NOT (NEW.{0} <=> OLD.{0})"
    return " OR ".join(["OLD.finished_at IS NOT NULL"] + [changed.format(c.name) for c in HISTORY.columns if c.start])


# -- the column lists statements name (``?`` placeholders; a dialect turns them into its own) ----


def listed(columns: Sequence[str], alias: str = "", instead: Mapping[str, str] = {}) -> str:
    """``columns`` as a statement lists them (``alias.column``), or as the expression ``instead`` maps one to."""
    return ", ".join([instead.get(c, alias + c) for c in columns])


def insert(table: str, columns: Sequence[str], verb: str = "INSERT") -> str:
    """``INSERT INTO table (columns)``: a multi-row write appends its VALUES."""
    return "".join((verb, " INTO ", table, " (", listed(columns), ")"))


def values(columns: Sequence[str], instead: Mapping[str, str] = {}, mark: str = "?") -> str:
    """`` VALUES (?, ...)``: ``mark`` per column, or what ``instead`` maps it to (``{"stderr": "UNHEX(?)"}``)."""
    return "".join((" VALUES (", ", ".join([instead.get(c, mark) for c in columns]), ")"))


def assigned(
    columns: Sequence[str], value: str = "?", instead: Mapping[str, str] = {}, *, joint: str = ", ", alias: str = ""
) -> str:
    """``alias.column = value, ...`` of an UPDATE's SET (``joint`` `` AND ``: a WHERE's);
    ``value`` may name the column (``v.{0}``)."""
    return joint.join([f"{alias}{c} = {instead.get(c, value.format(c))}" for c in columns])
