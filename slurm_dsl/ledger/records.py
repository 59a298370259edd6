"""The records a ledger's reads return (docs/contract.md §9.1): objects, history, settlements, the last sweep,
what a prune or an import did.  Kept out of ``ledger.base``: an operation never builds them (docs/benchmarks.md §7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from ..core.jobinfo import JobInfo
from ..core.model import Op, Reason, RequeueBit, Result, Verdict


@dataclass(frozen=True)
class JobObject:
    """A job's object: what slurm-dsl may have left in its Requeue flag, and why.  ``updated_at``: when ``bit`` or
    ``why`` last changed; ``lookup_failures``, ``next_lookup_at`` and ``lookup_error``: the sweep's back-off."""

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


def job_info_json(info: Optional[JobInfo]) -> Optional[Dict[str, Any]]:
    """A baseline's or a settlement's record in a report: every field, or None."""
    if info is None:
        return None
    return {
        "job_id": info.job_id,
        "state": info.state,
        "requeue": info.requeue,
        "restarts": info.restarts,
        "priority": info.priority,
        "reason": info.reason,
        "array_job_id": info.array_job_id,
        "array_tasks": info.array_tasks,
    }


def _times(name: str, epoch: Optional[float]) -> Dict[str, Any]:
    """``name`` as ISO-8601 UTC and ``name_epoch`` as epoch seconds (both None for None)."""
    return {name: None if epoch is None else iso_utc(epoch), f"{name}_epoch": epoch}


@dataclass(frozen=True)
class Settlement:
    """The verdict on one operation (docs/contract.md §12), final.  ``looked_at``: when the lookup it was read from
    STARTED; ``record``: the fields it was read from (None: the job was gone, or none was read)."""

    id: int
    op_id: int
    job_id: str
    verdict: Verdict
    looked_at: float
    record: Optional[JobInfo]
    settled_at: float
    by: str
    detail: str

    def to_json(self) -> Dict[str, Any]:
        """The settlement as ``history --json`` shows it (``kind`` ``verdict``)."""
        return {
            "kind": "verdict",
            "id": self.id,
            "op_id": self.op_id,
            "job_id": self.job_id,
            "verdict": self.verdict.value,
            **_times("looked_at", self.looked_at),
            "record": job_info_json(self.record),
            **_times("settled_at", self.settled_at),
            "by": self.by,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class HistoryEntry:
    """One operation (its columns: docs/contract.md §9.1).  ``finished_at`` to ``stderr_len`` are None (or empty)
    until it finished, and what a later schema added is None in older rows.  ``stderr``: its first ``STDERR_CAP``
    bytes (``stderr_len``: all); ``baseline_at``: when the baseline's lookup STARTED; ``ends_by``: when every process
    of it is dead whatever happens; ``baseline_boot``: ``host/boot/seconds``."""

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
    baseline: Optional[JobInfo] = None
    baseline_at: Optional[float] = None
    key: Optional[str] = None
    retry_of: Optional[int] = None
    ends_by: Optional[float] = None
    settlement: Optional[Settlement] = None
    baseline_boot: Optional[str] = None
    admin_reason: Optional[str] = None
    baseline_ctl: Optional[str] = None  # which slurmctld was in control before the baseline's lookup
    calls_ctl: Optional[str] = None  # and once the calls were over (docs/contract.md §12 Rule 16)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def to_json(self) -> Dict[str, Any]:
        """The ``history --json`` object of one operation (``kind`` ``operation``): times as ISO-8601 UTC and epoch."""
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
            "baseline": job_info_json(self.baseline),
            **_times("baseline_at", self.baseline_at),
            "key": self.key,
            "retry_of": self.retry_of,
            **_times("ends_by", self.ends_by),
            "baseline_boot": self.baseline_boot,
            "admin_reason": self.admin_reason,
            "baseline_ctl": self.baseline_ctl,
            "calls_ctl": self.calls_ctl,
            "effect": None if self.settlement is None else self.settlement.verdict.value,
            "settlement": None if self.settlement is None else self.settlement.to_json(),
        }


@dataclass(frozen=True)
class SweepRecord:
    """When the last sweep (not a dry run) started and finished, and its summary (JSON values)."""

    started_at: float
    finished_at: float
    summary: Mapping[str, Any]


@dataclass(frozen=True)
class PruneResult:
    """What ``prune`` removed (or would): history rows, of how many jobs, and whether the WAL checkpoint after a
    real prune completed (None: not attempted)."""

    removed: int
    jobs: int
    checkpointed: Optional[bool]


@dataclass(frozen=True)
class Unfinished:
    """The operations without a result, as ``ledger status`` shows them: ``count``, all of them; ``lapsed``, those
    no longer running (their job has a later row, or no lease, or a lapsed one), and of them the requeues
    (``lapsed_requeues``) and the oldest (``oldest_lapsed``: id, job_id, op, started_at)."""

    count: int = 0
    lapsed: int = 0
    lapsed_requeues: int = 0
    oldest_lapsed: Optional[Tuple[int, str, Op, float]] = None


@dataclass(frozen=True)
class ImportResult:
    """What ``import_records`` did: objects new (``copied``), replaced by a less clear one (``merged``) or kept;
    history rows added or already there (``skipped``); settlements added."""

    objects_copied: int = 0
    objects_merged: int = 0
    objects_kept: int = 0
    history_copied: int = 0
    history_skipped: int = 0
    settlements_copied: int = 0


def iso_utc(epoch: float) -> str:
    """``2024-05-01T12:00:03Z``: an epoch time as ISO-8601 UTC, to the second."""
    from datetime import UTC, datetime  # only reports need it: not on every command's start

    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class CommentRecord:
    """The reason copied to a job's AdminComment after operation ``op_id`` (``--admin-comment``,
    docs/contract.md §10.4): ``result`` None while its end is not recorded (the call may have run)."""

    id: int
    op_id: int
    job_id: str
    text: str
    asked_at: float
    result: Optional[str]
    detail: Optional[str]
    finished_at: Optional[float]

    def to_json(self) -> Dict[str, Any]:
        return {"result": self.result or "not_recorded", "text": self.text,
                "detail": self.detail if self.result is not None else "the command ended before the call's end was"
                " recorded: AdminComment may or may not have been written"}
