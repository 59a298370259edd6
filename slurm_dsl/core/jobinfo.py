"""Job lookups, the interface: state, Requeue flag, restart count, priority and reason, or gone.

The two implementations live in ``lookups.squeue`` (squeue, always there) and
``lookups.pyslurm`` (pyslurm, optional); ``lookups.choose`` picks one.

Contract (docs/contract.md §9.3):

- ``Lookup.jobs(ids)`` answers for exactly the ids asked (canonical strings,
  docs/contract.md §1): a ``JobInfo``, or ``None`` when slurmctld says it does not know the
  id (gone).  Whenever it could not ask (controller down, timeout, a missing
  binary, output it cannot read) it raises ``LookupFailed`` and answers nothing:
  never a partial answer that looks complete, never "gone" for "could not ask",
  so a sweeper cannot clear an object because slurmctld was unreachable.
  A bad job id raises ``ValueError`` before anything runs.
- The Requeue flag is read from a field no job name can forge.  Never from
  ``scontrol show job -o``: ``JobName=`` is printed raw before ``Requeue=``, so a
  job named ``x Requeue=1`` shows a spoofed flag (docs/slurm-behaviour.md §9, docs/slurm-24.11-26.05.md §5).
- "Gone" is what slurmctld shows the caller: with ``PrivateData=jobs`` a plain
  user is not shown other users' jobs, so lookups must run as root, SlurmUser or
  a Slurm operator/admin (as the sweeper does).  squeue and pyslurm alike.

Rule for "finished" (``JobInfo.finished``): the base states in which slurmctld
refuses ``update Requeue=0`` with ``Job has already finished`` (IS_JOB_FINISHED;
docs/slurm-behaviour.md §2), so the flag cannot be cleared, though the job can still be
requeued by root or its owner until it is purged (docs/contract.md §9.5: watched, not cleared).
Flag states (COMPLETING, REQUEUED, REQUEUE_HOLD, SPECIAL_EXIT, STAGE_OUT,
RESIZING, ...) are not finished: a requeue passes through COMPLETING
(docs/slurm-behaviour.md §5) and SPECIAL_EXIT is a requeued-held job (§5 there); treating an unknown
word as not finished costs at most one restore call, refused with
``Job has already finished``, after which the sweeper watches the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Protocol, Sequence

FINISHED_STATES = frozenset(
    {
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)

# How sweeps may look jobs up (``lookups.choose.make_lookup``, ``--lookup``).
LOOKUP_KINDS = ("auto", "squeue", "pyslurm")


@dataclass(frozen=True)
class JobInfo:
    """One job record as slurmctld shows it.

    ``array_job_id`` is the array the record belongs to (None for a plain job).
    ``array_tasks`` is how many tasks an scontrol call on this JobId acts on: 1 for
    a plain job or an array task addressed by its own JobId; for an array's own
    JobId (``array_job_id == job_id``), every task of the array slurmctld still
    holds, finished ones included (docs/slurm-behaviour.md §1.4).
    """

    job_id: str
    state: str
    requeue: bool
    restarts: int
    priority: int  # 0 = held (docs/slurm-behaviour.md §4)
    reason: str
    array_job_id: Optional[str] = None
    array_tasks: int = 1

    @property
    def whole_array(self) -> bool:
        """Whether scontrol, given this JobId, would act on other tasks too."""
        return self.array_tasks > 1

    @property
    def finished(self) -> bool:
        """Whether the job is over for good, so its Requeue flag no longer matters."""
        return self.state in FINISHED_STATES


class Lookup(Protocol):
    name: str  # what doctor and ``sweep --json`` report: "squeue" or "pyslurm"

    def jobs(self, job_ids: Sequence[str]) -> Dict[str, Optional[JobInfo]]:
        """Each asked id's JobInfo, or None if slurmctld does not know it.

        Raises ``LookupFailed`` if it could not ask, ``ValueError`` for a bad job id.
        """
        ...
