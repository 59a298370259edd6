"""The ledger (docs/contract.md §9): what slurm-dsl may have left in each job's Requeue flag, and why.

This module is the interface: the values a ledger holds (``JobObject``, ``HistoryEntry``),
what every storage backend provides (``LedgerStore``), and ``open_ledger``, which opens the
one a location names: a path (or ``sqlite:PATH``) is an SQLite file (``ledger.sqlite``), a
``mariadb://`` (or ``mysql://``) URL a database on a MariaDB/MySQL server (``ledger.mariadb``,
the ``slurm-dsl[mariadb]`` extra).  ``ledger_rules`` decides what operations do to objects; the
backends only store them, through one store written once over their dialects (``ledger.store``),
and the same behaviour tests run against both.

Contract of every ``LedgerStore``: intent first (``begin_operation`` of a requeue commits
``may_be_set`` before it returns); ``finish_operation`` stores ``ledger_rules.after``; the
history is append-only; a lease per job keeps operations and sweepers apart and lapses at its
expiry; the sweeper only writes while it holds the job's lease; every time comes in as ``now``
from the caller, who reads it from the ledger's own clock (``now``: the host's for SQLite, the
database server's for MariaDB, so that hosts sharing a ledger agree on every lease and back-off
whatever their clocks say); one sweep at a time per ledger (``sweep_lock``, ``SweepBusy``
otherwise); every storage failure is ``LedgerError``.  The one exception to append-only is
``prune``: it removes old history rows of settled objects only (``ledger_rules.may_prune``: never
an object whose bit is not clear or that is leased, never an unfinished row, never an object's
newest row).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ContextManager, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from ..core.errors import LedgerError as LedgerError  # re-exported: where it has always been imported from
from ..core.model import Op, Outcome, Reason, RequeueBit, Result

DEFAULT_PATH = "/var/lib/slurm-dsl/ledger.sqlite3"
BUSY_TIMEOUT = 5.0  # seconds a writer waits for another one before LedgerError
STDERR_CAP = 64 * 1024  # bytes of a script's stderr kept in the history (the head)
BACKOFF_BASE = 60.0  # seconds before the sweeper looks a job up again after one failed lookup
BACKOFF_CAP = 3600.0  # the back-off doubles per failed lookup up to this



@dataclass(frozen=True)
class JobObject:
    """A job's object: what slurm-dsl may have left in its Requeue flag, and why.

    ``updated_at`` is when ``bit``/``why`` last changed (``pending`` serves the oldest first);
    ``lookup_failures``, ``next_lookup_at`` and ``lookup_error`` are the sweeper's back-off.
    """

    job_id: str
    bit: RequeueBit
    why: str
    updated_at: float
    lookup_failures: int
    next_lookup_at: float
    lookup_error: str


@dataclass(frozen=True)
class CallRecord:
    """One call of a finished operation, as the history keeps it (``Call`` without its stderr)."""

    number: int
    status: Optional[int]
    status_text: str
    outcome: str
    message: Optional[str]
    reason: Optional[str]

    def to_json(self) -> Dict[str, Any]:
        """As ``Call.to_json`` (a status that is no number, such as "-", as its text), and why unknown."""
        return {
            "number": self.number,
            "status": self.status if self.status is not None else self.status_text,
            "outcome": self.outcome,
            "message": self.message,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class HistoryEntry:
    """One operation.  Everything after ``prior_bit`` is None (or empty) until it finished.

    ``prior_bit`` is the object's bit before the operation; ``bit_after`` what it became.
    ``stderr`` is the script's stderr up to ``STDERR_CAP`` bytes; ``stderr_len`` its full length.
    """

    id: int
    job_id: str
    op: Op
    nonce: str
    started_at: float
    prior_bit: RequeueBit
    finished_at: Optional[float]
    result: Optional[Result]
    requeue_bit: Optional[RequeueBit]
    bit_after: Optional[RequeueBit]
    reason: Optional[Reason]
    detail: str
    exit_status: Optional[int]
    calls: Tuple[CallRecord, ...]
    stderr: bytes
    stderr_len: int
    # Who ran it ("uid 0 (root) on ctl1, pid 4711"); None for a row written before schema 2.
    actor: Optional[str] = None

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def to_json(self) -> Dict[str, Any]:
        """The ``history --json`` object of one operation (``kind`` ``operation``); times both as
        ISO-8601 UTC and as epoch seconds, None until it finished."""
        return {
            "kind": "operation",
            "job_id": self.job_id,
            "id": self.id,
            "op": self.op.value,
            "nonce": self.nonce,
            "started_at": iso_utc(self.started_at),
            "started_at_epoch": self.started_at,
            "finished_at": None if self.finished_at is None else iso_utc(self.finished_at),
            "finished_at_epoch": self.finished_at,
            "result": None if self.result is None else self.result.value,
            "requeue_bit": None if self.requeue_bit is None else self.requeue_bit.value,
            "bit_before": self.prior_bit.value,
            "bit_after": None if self.bit_after is None else self.bit_after.value,
            "reason": None if self.reason is None else self.reason.value,
            "detail": self.detail or None,
            "exit_status": self.exit_status,
            "calls": [c.to_json() for c in self.calls],
            "stderr": self.stderr.decode("utf-8", "backslashreplace"),
            "stderr_len": self.stderr_len,
            "actor": self.actor,
        }


@dataclass(frozen=True)
class SweepRecord:
    """When the last sweep (not a dry run) started and finished, and its summary (JSON values)."""

    started_at: float
    finished_at: float
    summary: Mapping[str, Any]


@dataclass(frozen=True)
class PruneResult:
    """What ``prune`` removed (or would, in a dry run): history rows, of how many jobs, and whether
    the WAL checkpoint that follows a real prune completed (None: not attempted)."""

    removed: int
    jobs: int
    checkpointed: Optional[bool]


@dataclass(frozen=True)
class Unfinished:
    """The operations that began and have no result, as ``ledger status`` shows them.

    ``count``: every history row without a result.  ``lapsed``: of them, those no longer running:
    their job has a later row, or no unexpired lease (an operation holds its job's lease from
    before its row is written until its result is); each is the trace of a process that died, or
    of a ledger that failed after the script ran (``NotRecorded``).  ``lapsed_requeues``: of the
    lapsed, the requeues, whose object the intent left ``may_be_set`` for the sweeper.
    ``oldest_lapsed``: (id, job_id, op, started_at) of the lapsed row that started first.
    """

    count: int = 0
    lapsed: int = 0
    lapsed_requeues: int = 0
    oldest_lapsed: Optional[Tuple[int, str, Op, float]] = None


@dataclass(frozen=True)
class ImportResult:
    """What ``import_records`` did: objects new to the ledger (``copied``), objects it had whose
    bit the incoming, less clear one replaced (``merged``) or that it kept as they were
    (``kept``); history rows added (``copied``) or already there (``skipped``)."""

    objects_copied: int = 0
    objects_merged: int = 0
    objects_kept: int = 0
    history_copied: int = 0
    history_skipped: int = 0


def iso_utc(epoch: float) -> str:
    """``2024-05-01T12:00:03Z``: an epoch time as ISO-8601 UTC, to the second."""
    from datetime import UTC, datetime  # only reports need it: not on every command's start

    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LedgerStore(Protocol):
    """What the tracker and the sweeper need of a ledger (one connection, one thread at a time)."""

    path: str

    def close(self) -> None: ...

    def __enter__(self) -> LedgerStore: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def schema_version(self) -> int: ...

    def now(self) -> float:
        """The ledger's clock (epoch seconds), which every ``now`` given to it comes from."""
        ...

    def sweep_lock(self) -> ContextManager[object]:
        """Held for a whole sweep: one sweep at a time per ledger, across hosts if the ledger is
        shared.  Entering raises ``SweepBusy`` at once if another sweep holds it; a holder that
        dies releases it."""
        ...

    def batch(self) -> ContextManager[None]:
        """The writes inside are one transaction, all-or-none, committed when the block returns:
        a chunk's leases with its intents, its results with giving the leases back.  A ledger
        error inside leaves the block (never caught there); batches do not nest."""
        ...

    def begin_operation(self, job_id: str, op: Op, nonce: str, now: float, *, actor: str = "") -> int: ...

    def finish_operation(self, op_id: int, outcome: Outcome, stderr: bytes, now: float) -> RequeueBit: ...

    def begin_operations(self, starts: Sequence[Tuple[str, Op, str]], now: float, *, actor: str = "") -> List[int]: ...

    def finish_operations(self, finishes: Sequence[Tuple[int, Outcome, bytes]], now: float) -> List[RequeueBit]: ...

    def acquire_lease(self, job_id: str, owner: str, now: float, ttl: float) -> bool: ...

    def acquire_leases(
        self, job_ids: Sequence[str], owner: str, now: float, ttl: float, *, take_over_sweeps: bool = False
    ) -> List[str]: ...

    def release_lease(self, job_id: str, owner: str) -> bool: ...

    def release_leases(self, job_ids: Sequence[str], owner: str) -> int: ...

    def get(self, job_id: str) -> Optional[JobObject]: ...

    def pending(
        self, now: float, limit: Optional[int] = None, *, take_over_sweeps: bool = False
    ) -> List[JobObject]: ...

    def count_not_clear(self) -> int: ...

    def set_bit(self, job_id: str, bit: RequeueBit, why: str, now: float, *, owner: str) -> bool: ...

    def set_bits(self, changes: Sequence[Tuple[str, RequeueBit, str]], now: float, *, owner: str) -> List[str]: ...

    def watch(self, job_ids: Sequence[str], now: float, *, owner: str) -> List[str]: ...

    def lookup_failed(self, job_id: str, why: str, now: float) -> float: ...

    def lookups_failed(self, job_ids: Sequence[str], why: str, now: float) -> List[float]: ...

    def history(self, job_id: str) -> List[HistoryEntry]: ...

    # -- the admin's view (``slurm-dsl history``, ``ledger status``, ``ledger prune``) --------------

    def count_by_bit(self) -> Dict[RequeueBit, int]: ...

    def objects_not_clear(self) -> List[JobObject]: ...

    def count_history(self) -> int: ...

    def unfinished(self, now: float) -> Unfinished:
        """The operations without a result at ``now`` (``Unfinished``): how many, how many of
        them no longer run, the oldest of those."""
        ...

    def record_sweep(self, started: float, finished: float, summary: Mapping[str, Any]) -> None: ...

    def last_sweep(self) -> Optional[SweepRecord]: ...

    def prune(self, before: float, now: float, *, dry_run: bool = False) -> PruneResult: ...

    # -- ``ledger migrate``: one ledger copied into another (docs/contract.md §9.1.2) ---------------

    def identity(self) -> str:
        """What storage this is, for telling two locations that name one ledger apart: the file
        (device and inode), or the server's host name, port and the database."""
        ...

    def export_objects(self, *, not_clear: bool, after: str = "", limit: int = 500) -> List[JobObject]:
        """Up to ``limit`` objects whose bit is (``not_clear``) or is not clear, every field as
        stored, by job id from after ``after``: a page of the whole set.  Reads only."""
        ...

    def export_history(self, after_id: int, limit: int) -> List[HistoryEntry]:
        """Up to ``limit`` history rows with ids above ``after_id``, in id order, every column as
        stored (unfinished rows unfinished).  Reads only."""
        ...

    def import_records(
        self, objects: Sequence[JobObject], history: Sequence[HistoryEntry], *, merge: bool
    ) -> ImportResult:
        """Store another ledger's objects, then its history rows (new ids, in the order given), in
        ONE transaction.  Objects keep every field.  Without ``merge`` every object must be new
        (else ``LedgerError``, nothing written).  With ``merge`` an object the ledger has keeps
        the less clear bit (``ledger_rules.less_clear``: the incoming one replaces it only if its
        bit is less clear), and a history row it has (same job, nonce, op and start) is skipped.
        Leases and the last sweep are not part of it."""
        ...
