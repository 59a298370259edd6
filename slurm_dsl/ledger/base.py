"""The ledger's interface (docs/contract.md §9.1, §9.2): ``LedgerStore``, what every backend provides.

``ledger.choose.open_ledger`` opens one; its reads return ``ledger.records``; every storage failure is ``LedgerError``.
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
    from ..core.settle import Recorded, Unsettled
    from .records import CommentRecord, HistoryEntry, ImportResult, JobObject, PruneResult, SweepRecord, Unfinished

DEFAULT_PATH = "/var/lib/slurm-dsl/ledger.sqlite3"
BUSY_TIMEOUT = 5.0  # seconds a writer waits for another one before LedgerError
STDERR_CAP = 64 * 1024  # bytes of a script's stderr kept in the history (the head)
BACKOFF_BASE = 60.0  # seconds before the sweep looks a job up again after one failed lookup
BACKOFF_CAP = 3600.0  # the back-off doubles per failed lookup up to this


# Whether a lease's holder is known alive (True), known dead (False) or cannot be told (None).
Alive = Callable[[str], Optional[bool]]


class Looks(NamedTuple):
    """What ``LedgerStore.look_at_saves`` returns: where the looks at slurmctld's saves stand (``place``), the
    observer's kept looks, oldest first (``core.durable.Chain``), and what this look saw (None: nothing)."""

    place: int
    chain: Tuple[Tuple[int, str], ...]
    seen: Optional[str]


class Marks(NamedTuple):
    """An object's marks (core.durable Rules 2, 8): where the looks stood once slurm-dsl's last call on its job was
    over, and when a lookup first said the job is gone, each with the look taken then (None: not yet, or no look)."""

    quiet: Optional[int]
    quiet_look: Optional[str]
    gone: Optional[int]
    gone_look: Optional[str]
    # When (the ledger's clock) a call of slurm-dsl's last could change the job's flag, or its
    # object last changed where that was not written (core.durable Rule 6).
    quiet_at: Optional[float] = None


class LedgerStore(Protocol):
    """What the tracker and the sweep need of a ledger (one connection, one thread at a time)."""

    path: str

    def close(self) -> None: ...

    def __enter__(self) -> LedgerStore: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def schema_version(self) -> int: ...

    def now(self) -> float:
        """The ledger's clock (epoch seconds), which every ``now`` given to it comes from."""
        ...

    def sweep_lock(self) -> ContextManager[object]:
        """Held for a whole sweep; entering raises ``SweepBusy`` at once if another sweep holds it."""
        ...

    def batch(self) -> ContextManager[None]:
        """The writes inside are one transaction, committed when the block returns; batches do not nest,
        and a ledger error inside must leave the block."""
        ...

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
        """The history rows (and a requeue's intent) in one committed transaction; their ids.  ``baselines``,
        ``retry_of`` by job id (missing: None); times on the ledger's clock but ``baseline_boot``
        (``host/boot/seconds``, kept only with a baseline)."""
        ...

    def finish_operations(
        self, finishes: Sequence[Tuple[int, Outcome, bytes]], now: float, *, look: Optional[str] = None,
        ended: Optional[str] = None, controller: Optional[str] = None,
    ) -> List[RequeueBit]:
        """Operations filled in, in one transaction; ``look``: this process's look at job_state after the
        calls (core.durable Rule 2); ``ended``: ``host/boot/seconds`` then; ``controller``: the slurmctld in control."""
        ...

    def acquire_leases(
        self, job_ids: Sequence[str], owner: str, now: float, ttl: float, *, reclaim_sweeps: bool = False,
        alive: Optional[Alive] = None,
    ) -> List[str]:
        """The leases ``owner`` could take; a lapsed one whose holder ``alive`` says is known alive is not
        taken (docs/contract.md §13.7)."""
        ...

    def lease_holders(self, job_ids: Sequence[str], *, lapsed_at: Optional[float] = None) -> Dict[str, str]:
        """Who holds each job's lease (``lapsed_at``: only those lapsed by then), jobs with none absent; reads only."""
        ...

    def lock_run(self, run: str) -> None:
        """Let the hosts sharing this ledger tell ``run`` alive (``run_locked``) while it is open; idempotent.
        A SQLite ledger does nothing; a lock that cannot be had is a warning."""
        ...

    def run_locked(self, run: str) -> Optional[bool]:
        """True while ``run``'s run lock (``lock_run``) is held; None when that cannot be told."""
        ...

    def release_lease(self, job_id: str, owner: str) -> bool: ...

    def release_leases(self, job_ids: Sequence[str], owner: str) -> int: ...

    def get(self, job_id: str) -> Optional[JobObject]: ...

    def due_objects(
        self, now: float, limit: Optional[int] = None, *, reclaim_sweeps: bool = False
    ) -> List[JobObject]: ...

    def due_ids(self, now: float, limit: Optional[int] = None, *, reclaim_sweeps: bool = False) -> List[str]:
        """``due_objects``' job ids alone, in its order."""
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
        """The operations to settle (docs/contract.md §9.1), newest first, as ``settle.Recorded``; reads only."""
        ...

    def to_settle(self, now: float, *, since: float = 0.0, limit: Optional[int] = None) -> List[Unsettled]:
        """``unsettled``'s operations as ``settle.Unsettled``, without their baselines (``recorded`` reads them)."""
        ...

    def acknowledged(self, from_id: int, since: float, limit: Optional[int] = None) -> List[Recorded]:
        """Unsettled rows of id ``from_id`` or more, started at ``since`` or later, whose result is ``ok``,
        ``bit_set`` or none yet; in id order, at most ``limit``.  Reads only."""
        ...

    def recorded(self, op_ids: Sequence[int]) -> Dict[int, Recorded]:
        """The history rows ``op_ids`` as ``settle.Recorded``, by id; an id with no row is absent.  Reads only."""
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
        """Append ``(op_id, verdict, looked_at, record, detail)`` each, and a ``GONE`` one at ``gone_at`` for each
        id of ``gone``, in one transaction; how many were written.  One already settled is skipped; an id of no row,
        or of a finished row whose result is not unknown, is LedgerError and nothing is written."""
        ...

    def count_unsettled(self, now: float, edges: Sequence[float] = (3600.0, 86400.0, 604800.0)) -> List[int]:
        """How many ``unsettled`` gives, by age (now - started_at): ``len(edges) + 1`` counts,
        ``[0, e0), [e0, e1), ..., [e_last, inf)``."""
        ...

    def keyed(self, job_ids: Sequence[str], op: Op, key: str) -> Dict[str, List[HistoryEntry]]:
        """The operations ``op`` with that ``key`` per job, oldest first, with settlements; reads only."""
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
        """The operations ``op`` by ``actor`` started since ``since``, per job, oldest first; reads only."""
        ...

    def operations(self, op_ids: Sequence[int]) -> Dict[int, HistoryEntry]:
        """The rows of these history ids, with settlements; an id with none is absent.  Reads only."""
        ...

    def later_operations(self, op_ids: Sequence[int]) -> Dict[int, List[HistoryEntry]]:
        """For each history id, the later rows of its job, oldest first, stderr b""; reads only."""
        ...

    # -- the admin's view (``slurm-dsl history``, ``ledger status``, ``ledger prune``) --------------

    def count_by_bit(self) -> Dict[RequeueBit, int]: ...

    def objects_not_clear(self) -> List[JobObject]: ...

    def count_history(self) -> int: ...

    def unfinished(self, now: float) -> Unfinished:
        """The operations without a result at ``now`` (``ledger.records.Unfinished``)."""
        ...

    def record_sweep(self, started: float, finished: float, summary: Mapping[str, Any]) -> None: ...

    def last_sweep(self) -> Optional[SweepRecord]: ...

    def prune(self, before: float, now: float, *, dry_run: bool = False) -> PruneResult: ...

    # -- ``ledger migrate``: one ledger copied into another (docs/contract.md §9.1.2) ---------------

    def identity(self) -> str:
        """The storage itself (a file's device and inode, or the server and database): one ledger, one identity."""
        ...

    def export_objects(self, *, not_clear: bool, after: str = "", limit: int = 500) -> List[JobObject]:
        """A page of the objects whose bit is (``not_clear``) or is not clear, by job id after ``after``."""
        ...

    def export_history(self, after_id: int, limit: int) -> List[HistoryEntry]:
        """Up to ``limit`` history rows with ids above ``after_id``, in id order, as stored.  Reads only."""
        ...

    def import_records(
        self, objects: Sequence[JobObject], history: Sequence[HistoryEntry], *, merge: bool
    ) -> ImportResult:
        """Store another ledger's objects, then its history rows, in one transaction (docs/contract.md §9.1.2).
        Without ``merge`` an object already here is LedgerError and nothing is written."""
        ...
