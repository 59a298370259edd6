"""The ledger (docs/contract.md §9): what slurm-dsl may have left in each job's Requeue flag, and why.

This module is the interface: what every storage backend provides (``LedgerStore``); the
records its reads return are ``ledger.records``.  ``ledger.choose.open_ledger`` opens the one a
location names: a path (or ``sqlite:PATH``) is an SQLite file (``ledger.sqlite``), a
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

from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    ContextManager,
    Dict,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
)

from ..core.model import Op, Outcome, RequeueBit

if TYPE_CHECKING:
    from ..core.jobinfo import JobInfo
    from ..core.model import Verdict
    from ..core.settle import Pending, Recorded
    from .records import CommentRecord, HistoryEntry, ImportResult, JobObject, PruneResult, SweepRecord, Unfinished

DEFAULT_PATH = "/var/lib/slurm-dsl/ledger.sqlite3"
BUSY_TIMEOUT = 5.0  # seconds a writer waits for another one before LedgerError
STDERR_CAP = 64 * 1024  # bytes of a script's stderr kept in the history (the head)
BACKOFF_BASE = 60.0  # seconds before the sweeper looks a job up again after one failed lookup
BACKOFF_CAP = 3600.0  # the back-off doubles per failed lookup up to this


# Whether a lease's holder is known alive (True), known gone (False) or cannot be told (None).
Alive = Callable[[str], Optional[bool]]


class Looks(NamedTuple):
    """What ``LedgerStore.look_at_saves`` returns: where the looks at slurmctld's saves stand
    (``place``: the last one's), the observer's kept looks, oldest first (``core.durable.Chain``),
    and what the look just taken saw (None: nothing)."""

    place: int
    chain: Tuple[Tuple[int, str], ...]
    seen: Optional[str]


class Marks(NamedTuple):
    """An object's marks (core.durable Rules 2 and 8): where the looks stood once slurm-dsl's last
    call on its job was over (None: not known yet) and the look taken then (None: none), and where
    they stood when a lookup first said the job is gone (None: it did not) and the look taken then."""

    quiet: Optional[int]
    quiet_look: Optional[str]
    gone: Optional[int]
    gone_look: Optional[str]
    # When (the ledger's clock) a call of slurm-dsl's last could change the job's flag, or its
    # object last changed where that was not written (core.durable Rule 6).
    quiet_at: Optional[float] = None


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
        baseline_boot: Optional[str] = None,
        baseline_ctl: Optional[str] = None,
    ) -> int:
        """The history row and, for a requeue, the intent, in one committed transaction; with
        the job's ``baseline`` (the record looked up before the first call), when that lookup
        STARTED (``baseline_at``, kept only with a baseline), the idempotency ``key``, the first
        operation it retries (``retry_of``) and ``ends_by`` (its deadline + kill grace + guard
        margin): written at the start, never changed.  Times on the ledger's clock, but
        ``baseline_boot``: where and when the baseline's lookup started on a boot clock
        (``host/boot/seconds``, kept only with a baseline)."""
        ...

    def finish_operation(
        self, op_id: int, outcome: Outcome, stderr: bytes, now: float, *, look: Optional[str] = None,
        ended: Optional[str] = None,
    ) -> RequeueBit: ...

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
        baseline_boot: Optional[str] = None,
        admin_reason: Optional[str] = None,
        baseline_ctl: Optional[str] = None,
    ) -> List[int]:
        """``begin_operation`` for many in one transaction; ``baselines`` and ``retry_of`` by job
        id (a job not in them gets None); ``baseline_ctl``: which slurmctld was in charge before
        the baselines' lookup (kept only with a baseline)."""
        ...

    def finish_operations(
        self, finishes: Sequence[Tuple[int, Outcome, bytes]], now: float, *, look: Optional[str] = None,
        ended: Optional[str] = None, controller: Optional[str] = None,
    ) -> List[RequeueBit]:
        """``finish_operation`` for many; ``look``: the finishing process's own look at slurmctld's
        job_state after their calls (core.durable Rule 2), kept with each one's mark; ``ended``:
        where and when their calls were over on a boot clock (``host/boot/seconds``); ``controller``:
        which slurmctld was in charge then (``lookups.controller``)."""
        ...

    def acquire_lease(
        self, job_id: str, owner: str, now: float, ttl: float, *, alive: Optional[Alive] = None
    ) -> bool: ...

    def acquire_leases(
        self, job_ids: Sequence[str], owner: str, now: float, ttl: float, *, take_over_sweeps: bool = False,
        alive: Optional[Alive] = None,
    ) -> List[str]:
        """The leases ``owner`` could take; one past its expiry whose holder ``alive`` says is known
        alive is not taken (docs/contract.md §13.7)."""
        ...

    def lease_holders(self, job_ids: Sequence[str], *, lapsed_at: Optional[float] = None) -> Dict[str, str]:
        """Who holds each job's lease (with ``lapsed_at``: only leases expired by then on the
        ledger's clock); a job with none is absent.  Reads only."""
        ...

    def mark_run(self, run: str) -> None:
        """While this ledger is open, let the hosts that share it tell ``run`` (``host.runs``)
        alive (``run_marked``): a MariaDB ledger holds a lock named after it on a connection of
        its own, which the server drops only with the run (or its host); a SQLite one, nothing.
        Idempotent; a lock that cannot be had is a warning (the times decide, as without)."""
        ...

    def run_marked(self, run: str) -> Optional[bool]:
        """True while ``run``'s mark (``mark_run``) is held: the run, or its host, has not gone
        (it may be paused); None when that cannot be told."""
        ...

    def release_lease(self, job_id: str, owner: str) -> bool: ...

    def release_leases(self, job_ids: Sequence[str], owner: str) -> int: ...

    def get(self, job_id: str) -> Optional[JobObject]: ...

    def pending(
        self, now: float, limit: Optional[int] = None, *, take_over_sweeps: bool = False
    ) -> List[JobObject]: ...

    def pending_ids(self, now: float, limit: Optional[int] = None, *, take_over_sweeps: bool = False) -> List[str]:
        """``pending``'s job ids alone, in its order (what the sweep reads of them)."""
        ...

    def count_not_clear(self) -> int: ...

    def look_at_saves(self, observer: str, look: Callable[[], Optional[str]]) -> Looks: ...

    def look_at_heartbeat(
        self, observer: str, look: Callable[[], Optional[Tuple[str, float]]]
    ) -> Tuple[Tuple[int, str, float], ...]: ...

    def marks(self, job_ids: Sequence[str]) -> Dict[str, Marks]: ...

    def anchors(
        self, job_ids: Sequence[str], *, quiet: bool = True
    ) -> Set[Tuple[Optional[int], Optional[str]]]: ...

    def anchor_quiet(self, job_ids: Sequence[str], look: Optional[str]) -> int: ...

    def mark_gone(self, job_ids: Sequence[str], look: Optional[str]) -> int: ...

    def forget_gone(self, job_ids: Sequence[str]) -> int: ...

    def op_marks(self, op_ids: Sequence[int]) -> Dict[int, Tuple[int, Optional[str]]]: ...

    def op_ends(self, op_ids: Sequence[int]) -> Dict[int, Tuple[int, Optional[str], Optional[str]]]: ...

    def seen_over(self, op_ids: Sequence[int], observer: str, at: float, *, keep: bool = True) -> Dict[int, float]: ...

    def anchor_operations(self, op_ids: Sequence[int], look: Optional[str]) -> int: ...

    def set_bit(self, job_id: str, bit: RequeueBit, why: str, now: float, *, owner: str) -> bool: ...

    def set_bits(self, changes: Sequence[Tuple[str, RequeueBit, str]], now: float, *, owner: str) -> List[str]: ...

    def watch(self, job_ids: Sequence[str], now: float, *, owner: str) -> List[str]: ...

    def lookup_failed(self, job_id: str, why: str, now: float) -> float: ...

    def lookups_failed(self, job_ids: Sequence[str], why: str, now: float) -> List[float]: ...

    def history(self, job_id: str) -> List[HistoryEntry]:
        """Every operation on the job, oldest first, with its settlement if it has one."""
        ...

    # -- settling (docs/contract.md §12) -----------------------------------------------------------

    def unsettled(
        self, now: float, *, since: float = 0.0, limit: Optional[int] = None, job_ids: Optional[Sequence[str]] = None
    ) -> List[Recorded]:
        """The operations to settle: rows with no settlement whose result is unknown, or without a
        result that no longer run (as ``unfinished``'s "lapsed": the job has a later row or no
        unexpired lease; also once ``now >= ends_by``); started at ``since`` or later; only
        those jobs if ``job_ids`` is given; newest first (started_at, id descending); at most
        ``limit``.  Each as the core's ``settle.Recorded`` (what settling reads).  Reads only."""
        ...

    def to_settle(self, now: float, *, since: float = 0.0, limit: Optional[int] = None) -> List[Pending]:
        """``unsettled``'s operations (no ``job_ids``) as the core's ``settle.Pending``: without
        their baselines (a sweep reads those again, ``recorded``, only where a verdict reads one)."""
        ...

    def acknowledged(self, from_id: int, since: float, limit: Optional[int] = None) -> List[Recorded]:
        """Rows of id ``from_id`` or more, started at ``since`` or later, without a settlement,
        whose result is ``ok``, ``bit_set`` or none yet; in id order, at most ``limit``.  Reads only."""
        ...

    def recorded(self, op_ids: Sequence[int]) -> Dict[int, Recorded]:
        """The history rows ``op_ids`` as the core's ``settle.Recorded``, by id; an id with no row
        is absent.  Reads only."""
        ...

    def add_settlements(
        self,
        verdicts: Sequence[Tuple[int, Verdict, float, Optional[JobInfo], str]],
        now: float,
        *,
        by: str,
        gone: Sequence[int] = (),
        gone_at: float = 0.0,
    ) -> int:
        """Append ``(op_id, verdict, looked_at, record, detail)`` each, and ``(op_id, GONE,
        gone_at, None, GONE_DETAIL)`` for each id of ``gone``, in ONE transaction; an operation
        that has a settlement keeps it (the new one is skipped); an ``op_id`` that is no history
        row, or a finished row whose result is not unknown, is LedgerError and nothing is written.
        Returns how many were written."""
        ...

    def count_unsettled(self, now: float, edges: Sequence[float] = (3600.0, 86400.0, 604800.0)) -> List[int]:
        """How many operations ``unsettled`` would give (no since, no limit), by age (now -
        started_at): ``len(edges) + 1`` counts, ``[0, e0), [e0, e1), ..., [e_last, inf)``."""
        ...

    def keyed(self, job_ids: Sequence[str], op: Op, key: str) -> Dict[str, List[HistoryEntry]]:
        """The operations ``op`` with that ``key``, per job (oldest first), with settlements; a
        job with none is absent.  Reads only."""
        ...

    def lost(self, limit: int = 1000) -> List[HistoryEntry]:
        """Acknowledged operations found lost and not redone since, oldest first.  Reads only."""
        ...

    def selection(self, key: str, op: Op) -> Optional[Tuple[str, List[str]]]:
        """What key ``key``'s ``op`` selected at its first run, or None.  Reads only."""
        ...

    def select_once(
        self, key: str, op: Op, selector: str, job_ids: Sequence[str], now: float, actor: Optional[str]
    ) -> Tuple[str, List[str]]:
        """The set key ``key``'s ``op`` acts on: its first run's ``(selector, job ids)``, else these, recorded."""
        ...

    def ask_comment(self, op_id: int, job_id: str, text: str, now: float) -> int:
        """An AdminComment copy's intent after operation ``op_id`` (the job's lease held); its id."""
        ...

    def comment_done(self, comment_id: int, result: str, detail: str, now: float) -> None:
        """An AdminComment copy's end: its result and what scontrol said."""
        ...

    def comments(self, op_ids: Sequence[int]) -> Dict[int, List[CommentRecord]]:
        """The AdminComment copies after each of ``op_ids``, oldest first."""
        ...

    def operations_by(
        self, job_ids: Sequence[str], op: Op, actor: str, since: float
    ) -> Dict[str, List[HistoryEntry]]:
        """The operations ``op`` on each job run by ``actor``, started at ``since`` or later, per
        job (oldest first), with settlements; a job with none is absent.  Reads only."""
        ...

    def operations(self, op_ids: Sequence[int]) -> Dict[int, HistoryEntry]:
        """The rows of the history ids given, with their settlements; an id with none is absent.
        Reads only."""
        ...

    def later_operations(self, op_ids: Sequence[int]) -> Dict[int, List[HistoryEntry]]:
        """For each history id, the rows of the same job with a larger id (oldest first; their
        stderr b""); an id with none is absent.  Reads only."""
        ...

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
