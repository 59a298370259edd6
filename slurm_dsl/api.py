"""The public operations: hold, release, requeue, restore and open_job (SPEC §8).

Each takes a job id and a deadline (epoch seconds) or a timeout (seconds), runs
through the ledger (``tracked.Tracker``: lease, intent first, record), returns
the ok ``Outcome`` and raises the SPEC §8 exception for anything else.  The
ledger is ``ledger`` (a path or an open ``Tracker``), else ``$SLURM_DSL_LEDGER``,
else ``/var/lib/slurm-dsl/ledger.sqlite3``; a ledger that cannot be opened
raises ``LedgerError`` before anything runs; one that fails once the script
started raises ``tracked.NotRecorded`` (a ``LedgerError``) carrying the outcome.
A timeout over ``ops.MAX_TIMEOUT`` (one day), or a deadline further away, is a
``ValueError`` before anything is recorded.  ``restore`` is RestoreRequeueBit:
on ok it clears the job's object, otherwise it leaves it and records why.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

from .jobid import validate_job_id
from .model import Op, Outcome
from .ops import resolve_deadline
from .tracked import Tracker

JobId = Union[str, int]


def run_op(
    op: Union[Op, str],
    job_id: JobId,
    *,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    scontrol: Optional[str] = None,
    ledger: Union[str, Tracker, None] = None,
) -> Outcome:
    """Run ``op`` through the ledger and return its Outcome, whatever it is (never raises for it)."""
    job = validate_job_id(job_id)
    when = resolve_deadline(timeout, deadline)
    if isinstance(ledger, Tracker):
        return ledger.run(op, job, when)
    with Tracker(ledger, scontrol=scontrol) as tracker:
        return tracker.run(op, job, when)


def _operation(op: Op) -> Callable[..., Outcome]:
    def run(
        job_id: JobId,
        *,
        timeout: Optional[float] = None,
        deadline: Optional[float] = None,
        scontrol: Optional[str] = None,
        ledger: Union[str, Tracker, None] = None,
    ) -> Outcome:
        outcome = run_op(op, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger)
        outcome.raise_for_result()
        return outcome

    run.__name__ = run.__qualname__ = "open_job" if op is Op.OPEN else op.value
    run.__doc__ = (
        f"{op.value} one job before ``deadline`` (or within ``timeout``), recorded in the ledger."
        " Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown, RequeueBitSet"
        " or NotRun (SPEC §8)."
    )
    return run


hold = _operation(Op.HOLD)
release = _operation(Op.RELEASE)
requeue = _operation(Op.REQUEUE)
restore = _operation(Op.RESTORE)
open_job = _operation(Op.OPEN)
