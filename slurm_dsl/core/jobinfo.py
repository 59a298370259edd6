"""Job lookups, the interface (docs/contract.md §9.3), implemented by ``lookups.squeue`` and
``lookups.pyslurm``: each asked id gets a ``JobInfo`` or None (gone), or ``LookupFailed`` is raised
and nothing answered; never a partial answer, never "gone" for "could not ask".  An unknown state
word counts as not finished: at worst one refused restore.
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
    """One job record as slurmctld shows it.  ``array_tasks``: how many tasks an scontrol call on this
    JobId acts on (for an array's own JobId, every task slurmctld still holds; docs/slurm-behaviour.md §1.4)."""

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
        """Each asked id's JobInfo, or None if slurmctld does not know it; ``LookupFailed`` if it could not
        ask, ``ValueError`` for a bad job id."""
        ...
