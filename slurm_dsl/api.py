"""The public operations: hold, release, requeue, restore and open_job (docs/contract.md §8).

Each takes a job id and a deadline (epoch seconds) or a timeout (seconds), runs
through the ledger (``tracked.Tracker``: lease, intent first, record), returns
the ok ``Outcome`` and raises the exception of docs/contract.md §8 for anything else.  The
ledger is ``ledger`` (a path or an open ``Tracker``), else ``$SLURM_DSL_LEDGER``,
else ``/var/lib/slurm-dsl/ledger.sqlite3``; a ledger that cannot be opened
raises ``LedgerError`` before anything runs; one that fails once the script
started raises ``NotRecorded`` (a ``LedgerError``) carrying the outcome.
A bad job id, a timeout over ``deadlines.MAX_TIMEOUT`` (one day), a deadline further
away, or not exactly one of them, is ``InvalidInput`` (a ``ValueError``) before anything
is recorded.  Except for ``restore``, the id is looked up first (one squeue): an array's
own JobId reaching other tasks is ``WholeArray``, a lookup that fails ``LookupFailed``;
either way nothing ran.  Every exception is a ``DSLError`` (see ``errors``).

With ``key=``, ``settle=`` or ``retry=`` (docs/contract.md §12), an unknown result is settled
first and the function returns or raises by its effect: ``present`` returns (the Outcome keeps its
own ``unknown`` result, ``effect`` ``present``), ``gone`` raises ``NotFound``, ``absent`` and
``undecidable`` raise ``OutcomeUnknown``.

The five are written out, not generated, so that type checkers and ``help()`` see their
real signatures: a misspelt keyword is a type error, not a runtime surprise.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Union

from .core.jobid import validate_job_id
from .core.model import Op, Outcome
from .core.settle import DEFAULT_SETTLE_DELAY
from .run.deadlines import resolve_deadline
from .run.tracked import Tracker

JobId = Union[str, int]


def run_op(
    op: Union[Op, str],
    job_id: JobId,
    *,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    scontrol: Optional[str] = None,
    ledger: Union[str, Tracker, None] = None,
    key: Optional[str] = None,
    settle: bool = False,
    retry: int = 0,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
) -> Outcome:
    """Run ``op`` through the ledger and return its Outcome, whatever it is (never raises for it).

    ``key``, ``settle``, ``retry``, ``settle_delay``: as ``--key``, ``--settle``, ``--retry`` and
    ``--settle-delay`` (docs/contract.md §12); with any of them the operation runs through
    ``run.keyed`` and the Outcome is ``settled`` (its ``effect``; ``exits_as``)."""
    job = validate_job_id(job_id)
    when = resolve_deadline(timeout, deadline)
    if key is None and not settle and not retry:
        if isinstance(ledger, Tracker):
            return ledger.run(op, job, when)
        with Tracker(ledger, scontrol=scontrol) as tracker:
            return tracker.run(op, job, when)
    (outcome,) = run_ops(op, [job], deadline=when, scontrol=scontrol, ledger=ledger, key=key, settle=settle,
                         retry=retry, settle_delay=settle_delay)
    return outcome


def run_ops(
    op: Union[Op, str],
    job_ids: Sequence[JobId],
    *,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    scontrol: Optional[str] = None,
    ledger: Union[str, Tracker, None] = None,
    one_by_one: bool = False,
    parallel: int = 1,
    key: Optional[str] = None,
    settle: bool = False,
    retry: int = 0,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
) -> List[Outcome]:
    """Run ``op`` on many jobs (docs/contract.md §11) through the ledger, with the CLI's driver:
    the bulk path, or one script per job (``one_by_one``, up to ``parallel`` at once).

    One Outcome per distinct id, in the order given, whatever each is (never raises for an
    outcome).  Exactly one of ``timeout`` and ``deadline``: the deadline of the whole call,
    computed once when it starts (docs/contract.md §10.0); a job whose call has not started by
    then is ``expired``.  Raises before anything ran as ``run_op`` does; a ledger failure once
    a job ran is ``NotRecorded`` with the outcomes it could not record in ``outcomes`` (those
    reported before it are recorded); one before is the ``LedgerError`` itself.

    ``key``, ``settle``, ``retry``, ``settle_delay``: as the command line's ``--key``,
    ``--settle``, ``--retry`` and ``--settle-delay`` (docs/contract.md §12): each Outcome is then
    ``settled`` (``effect``, ``exits_as``), still in the order given.
    """
    from .run.driver import Stopped, drive

    when = resolve_deadline(timeout, deadline)
    ids = list(dict.fromkeys(validate_job_id(j) for j in job_ids))

    def run(tracker: Tracker) -> List[Outcome]:
        if key is None and not settle and not retry:
            events = drive(tracker, op, ids, when, one_by_one=one_by_one, parallel=parallel)
        else:
            from .run.keyed import run_settled

            events = run_settled(tracker, op, ids, when, key=key, settle=settle, retry=retry,
                                 settle_delay=settle_delay, one_by_one=one_by_one, parallel=parallel)
        outcomes: Dict[str, Outcome] = {}
        for event in events:
            if isinstance(event, Stopped):
                raise event.error
            outcomes[event.outcome.job_id] = event.outcome
        return [outcomes[j] for j in ids if j in outcomes]

    if isinstance(ledger, Tracker):
        return run(ledger)
    with Tracker(ledger, scontrol=scontrol) as tracker:
        return run(tracker)


def hold(
    job_id: JobId,
    *,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    scontrol: Optional[str] = None,
    ledger: Union[str, Tracker, None] = None,
    key: Optional[str] = None,
    settle: bool = False,
    retry: int = 0,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
) -> Outcome:
    """Hold one job (``scontrol hold``) before ``deadline`` (or within ``timeout``), recorded in the ledger.

    A pending job stays pending; a running one keeps running, at priority 0.
    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8).
    """
    outcome = run_op(Op.HOLD, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger,
                     key=key, settle=settle, retry=retry, settle_delay=settle_delay)
    outcome.raise_for_result()
    return outcome


def release(
    job_id: JobId,
    *,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    scontrol: Optional[str] = None,
    ledger: Union[str, Tracker, None] = None,
    key: Optional[str] = None,
    settle: bool = False,
    retry: int = 0,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
) -> Outcome:
    """Release one held job (``scontrol release``) before ``deadline`` (or within ``timeout``), recorded.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8).
    """
    outcome = run_op(Op.RELEASE, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger,
                     key=key, settle=settle, retry=retry, settle_delay=settle_delay)
    outcome.raise_for_result()
    return outcome


def requeue(
    job_id: JobId,
    *,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    scontrol: Optional[str] = None,
    ledger: Union[str, Tracker, None] = None,
    key: Optional[str] = None,
    settle: bool = False,
    retry: int = 0,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
) -> Outcome:
    """Requeue one job before ``deadline`` (or within ``timeout``): set Requeue=1, ``scontrol requeue``,
    then clear Requeue=0 again, recorded in the ledger (a flag that may be left set is the sweeper's).

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown, RequeueBitSet or
    NotRun (docs/contract.md §8); ``requeue_bit_may_be_set`` says whether the job's Requeue flag may be left at 1.
    """
    outcome = run_op(Op.REQUEUE, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger,
                     key=key, settle=settle, retry=retry, settle_delay=settle_delay)
    outcome.raise_for_result()
    return outcome


def restore(
    job_id: JobId,
    *,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    scontrol: Optional[str] = None,
    ledger: Union[str, Tracker, None] = None,
    key: Optional[str] = None,
    settle: bool = False,
    retry: int = 0,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
) -> Outcome:
    """RestoreRequeueBit: clear one job's Requeue flag (``scontrol update Requeue=0``) before
    ``deadline`` (or within ``timeout``).  On ok the job's ledger object is cleared; otherwise it
    stays, with why.  No array lookup first: it only clears flags.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8).
    """
    outcome = run_op(Op.RESTORE, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger,
                     key=key, settle=settle, retry=retry, settle_delay=settle_delay)
    outcome.raise_for_result()
    return outcome


def open_job(
    job_id: JobId,
    *,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    scontrol: Optional[str] = None,
    ledger: Union[str, Tracker, None] = None,
    key: Optional[str] = None,
    settle: bool = False,
    retry: int = 0,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
) -> Outcome:
    """Release one job with a direct, unwrapped ``scontrol release`` under the same deadline guard
    (op ``open``), recorded in the ledger.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8).
    """
    outcome = run_op(Op.OPEN, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger,
                     key=key, settle=settle, retry=retry, settle_delay=settle_delay)
    outcome.raise_for_result()
    return outcome
