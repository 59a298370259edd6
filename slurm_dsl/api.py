"""The public operations: hold, release, requeue, restore and open_job (docs/contract.md §8).

Each takes a job id and a deadline (epoch seconds) or a timeout (seconds), runs
through the ledger (``tracked.Tracker``: lease, intent first, record), returns
the ok ``Outcome`` and raises the exception of docs/contract.md §8 for anything else.

One configuration (docs/contract.md §8): each call reads the settings as the ``slurm-dsl``
command does (``run.config.configure``: the config file, ``$SLURM_DSL_CONFIG`` naming another,
and the environment), its own arguments standing for the command's flags.  So the ledger is
``ledger`` (a path or an open ``Tracker``, whose reading is used), else ``$SLURM_DSL_LEDGER``,
else the config file's ``ledger``, else ``/var/lib/slurm-dsl/ledger.sqlite3``: the ledger the
host's sweeps read.  scontrol and squeue likewise; no ``timeout`` nor ``deadline`` is the config
file's ``timeout``, else the built-in default (``deadlines.DEFAULT_TIMEOUT``), as for the
command; no ``settle_delay`` its ``settle_delay``.  A bad config file is
``ConfigFileError``, before anything runs.  A ledger that cannot be opened
raises ``LedgerError`` before anything runs; one that fails once the script
started raises ``NotRecorded`` (a ``LedgerError``) carrying the outcome.
A bad job id, an empty ``ledger`` or ``scontrol``, a timeout over ``deadlines.MAX_TIMEOUT`` (one
day), a deadline further away, or both of them, is ``InvalidInput`` (a ``ValueError``) before
anything is recorded.
Except for ``restore``, the id is looked up first (one squeue): an array's
own JobId reaching other tasks is ``WholeArray``, a lookup that fails ``LookupFailed``;
either way nothing ran.  Every exception is a ``DSLError`` (see ``core.model``).

With ``key=``, ``settle=`` or ``retry=`` (docs/contract.md §12), an unknown result is settled
first and the function returns or raises by its effect: ``present`` returns (the Outcome keeps its
own ``unknown`` result, ``effect`` ``present``), ``gone`` raises ``NotFound``, ``absent`` and
``undecidable`` raise ``OutcomeUnknown``.

The five are written out, not generated, so that type checkers and ``help()`` see their
real signatures: a misspelt keyword is a type error, not a runtime surprise.
"""

from __future__ import annotations

import contextlib
import logging
from typing import ContextManager, Dict, List, Mapping, Optional, Sequence, Union

from .core.jobid import JobIds, distinct_ids, validate_job_id
from .core.keys import check_reason
from .core.model import InvalidInput, Op, Outcome
from .core.select import Selection
from .run.config import Configuration, configure
from .run.deadlines import resolve_deadline
from .run.tracked import Tracker

JobId = Union[str, int]
log = logging.getLogger("slurm_dsl")


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
    settle_delay: Optional[float] = None,
    durable: bool = False,
    reason: Optional[str] = None,
    admin_comment: bool = False,
) -> Outcome:
    """Run ``op`` through the ledger and return its Outcome, whatever it is (never raises for it).

    ``key``, ``settle``, ``retry``, ``settle_delay``: as ``--key``, ``--settle``, ``--retry`` and
    ``--settle-delay`` (docs/contract.md §12); with any of them the operation runs through
    ``run.keyed`` and the Outcome is ``settled`` (its ``effect``; ``exits_as``).  ``reason``,
    ``admin_comment``: as ``--reason`` and ``--admin-comment`` (docs/contract.md §10.4; the copy's
    result is the Outcome's ``comment``)."""
    job = validate_job_id(job_id)
    why = _reason(reason, admin_comment)
    configured = _configuration(ledger, scontrol)
    when = _deadline(timeout, deadline, configured)
    opened: ContextManager[object]
    if isinstance(ledger, Tracker):  # the caller's, which it closes
        tracker, opened = ledger, contextlib.nullcontext()
    else:
        tracker = Tracker(ledger, scontrol=scontrol, configuration=configured)
        opened = contextlib.closing(tracker)
    with opened:
        if key is None and not settle and not retry and not durable and why is None:
            return tracker.run(op, job, when)
        (outcome,) = _run_ops(op, [job], when, configured, ledger=tracker, scontrol=scontrol, key=key, settle=settle,
                              retry=retry, settle_delay=settle_delay, durable=durable, reason=why,
                              admin_comment=admin_comment)
        return outcome


def run_ops(
    op: Union[Op, str],
    job_ids: Sequence[JobId] = (),
    *,
    select: Optional[Mapping[str, str]] = None,
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    scontrol: Optional[str] = None,
    ledger: Union[str, Tracker, None] = None,
    one_by_one: bool = False,
    parallel: int = 1,
    key: Optional[str] = None,
    settle: bool = False,
    retry: int = 0,
    settle_delay: Optional[float] = None,
    durable: bool = False,
    reason: Optional[str] = None,
    admin_comment: bool = False,
) -> List[Outcome]:
    """Run ``op`` on many jobs (docs/contract.md §11) through the ledger, with the CLI's driver:
    the bulk path, or one script per job (``one_by_one``, up to ``parallel`` at once).

    One Outcome per distinct id, in the order given, whatever each is (never raises for an
    outcome).  At most one of ``timeout`` and ``deadline`` (neither: the configured ``timeout``):
    the deadline of the whole call, computed once when it starts
    (docs/contract.md §10.0); a job whose call has not started by then is ``expired``.  Raises
    before anything ran as ``run_op`` does; a ledger failure once a job ran is ``NotRecorded``
    with the outcomes it could not record in ``outcomes`` (those reported before it are
    recorded); one before is the ``LedgerError`` itself.

    ``key``, ``settle``, ``retry``, ``settle_delay``: as the command line's ``--key``,
    ``--settle``, ``--retry`` and ``--settle-delay`` (docs/contract.md §12): each Outcome is then
    ``settled`` (``effect``, ``exits_as``), still in the order given.  ``durable``: as
    ``--durable`` (docs/contract.md §13.5), return once slurmctld has saved the changes, each
    Outcome's ``saved`` saying whether it was by the deadline (one not saved exits as unknown).

    ``select``: the command line's selectors (docs/contract.md §10.3) by their names (``node``,
    ``partition``, ``user``, ``account``, ``state``, ``name``, ``reservation``, ``pending_reason``),
    AND-ed with ``job_ids`` if any are given: the jobs one squeue listing shows.  An array left out
    and an account that may not see every job are logged as warnings; a selection that matches
    nothing returns ``[]``.  ``reason``, ``admin_comment``: as ``--reason`` and ``--admin-comment``
    (docs/contract.md §10.4).  A bad selector or reason, or ``admin_comment`` without a reason, is
    ``InvalidInput`` before anything runs.
    """
    chosen = None if select is None else Selection.of(select)
    why = _reason(reason, admin_comment)
    configured = _configuration(ledger, scontrol)
    return _run_ops(op, job_ids, _deadline(timeout, deadline, configured), configured, ledger=ledger,
                    scontrol=scontrol, one_by_one=one_by_one, parallel=parallel, key=key, settle=settle, retry=retry,
                    settle_delay=settle_delay, durable=durable, reason=why, select=chosen, admin_comment=admin_comment)


def _reason(reason: Optional[str], admin_comment: bool) -> Optional[str]:
    """``reason`` checked (``check_reason``); ``admin_comment`` needs one (InvalidInput)."""
    if admin_comment and reason is None:
        raise InvalidInput("admin_comment writes the reason: give reason=")
    return None if reason is None else check_reason(reason)


def _run_ops(
    op: Union[Op, str],
    job_ids: Sequence[JobId],
    when: float,
    configured: Configuration,
    *,
    ledger: Union[str, Tracker, None],
    scontrol: Optional[str],
    one_by_one: bool = False,
    parallel: int = 1,
    key: Optional[str] = None,
    settle: bool = False,
    retry: int = 0,
    settle_delay: Optional[float] = None,
    durable: bool = False,
    reason: Optional[str] = None,
    select: Optional[Selection] = None,
    admin_comment: bool = False,
) -> List[Outcome]:
    """``run_ops`` until ``when``, a deadline resolved once (``_deadline``), on the steady clock;
    ``reason`` and ``select`` checked already."""
    from .run.driver import Stopped
    from .run.flow import Asked, Saved, operate

    op = Op(op)
    given = distinct_ids(job_ids) if job_ids or select is None else None
    asked = Asked(key=key, settle=settle, retry=retry, settle_delay=configured.settle_delay if settle_delay is None
                  else settle_delay, one_by_one=one_by_one, parallel=parallel, durable=durable, reason=reason,
                  admin_comment=admin_comment)

    def run(tracker: Tracker) -> List[Outcome]:
        ids = given if select is None else _selected(tracker, op, select, given, when, key)
        if not ids:
            return []
        outcomes: Dict[str, Outcome] = {}
        for event in operate(tracker, op, ids, when, asked):
            if isinstance(event, Stopped):
                raise event.error
            if isinstance(event, Saved) or not durable:
                outcomes[event.outcome.job_id] = event.outcome
        return [outcomes[j] for j in ids if j in outcomes]

    if isinstance(ledger, Tracker):
        return run(ledger)
    with Tracker(ledger, scontrol=scontrol, configuration=configured) as tracker:
        return run(tracker)


def _selected(tracker: Tracker, op: Op, select: Selection, given: Optional[JobIds], when: float,
              key: Optional[str]) -> JobIds:
    """The jobs ``select`` chooses (``run.select.resolve``), what it left out logged."""
    from .run.deadlines import steady
    from .run.select import resolve

    resolved = resolve(select, given, op, when, squeue=tracker.squeue, scontrol=tracker.scontrol,
                       clock=steady, ledger=tracker.ledger() if key is not None else None, key=key,
                       actor=tracker.actor)
    for note in resolved.notes():
        log.warning("%s", note)
    return resolved.job_ids


def configuration(*, config: Optional[str] = None) -> Configuration:
    """The settings this host's slurm-dsl uses, read as every command and every call above reads
    them (docs/contract.md §8, §10.2): the config file ``config``, else ``$SLURM_DSL_CONFIG``, else
    ``/etc/slurm-dsl/slurm-dsl.conf`` if there is one, and the environment.  ``.ledger``,
    ``.scontrol_path``, ``.squeue_path``, ``.timeout``, ``.settle_delay``...; ``.settings`` says
    where each came from, as ``slurm-dsl config`` prints it.  For a site plugin that runs Slurm's
    own commands too: the scontrol and squeue the operations run.  ``ConfigFileError`` for a bad
    config file."""
    return configure(config=config)


def _configuration(ledger: Union[str, Tracker, None], scontrol: Optional[str]) -> Configuration:
    """What a call uses (docs/contract.md §8, "One configuration"): an open Tracker's, else read
    now as the command line reads it, the caller's own ``ledger`` and ``scontrol`` as its flags.
    ``ConfigFileError`` for a bad config file, ``InvalidInput`` for an empty argument: nothing ran."""
    if isinstance(ledger, Tracker):
        return ledger.configuration
    return configure({"ledger": ledger, "scontrol": scontrol})


def _deadline(timeout: Optional[float], deadline: Optional[float], configured: Configuration) -> float:
    """The call's deadline: from ``timeout`` or ``deadline``, else the configured ``timeout`` (the
    config file's, else the built-in default), as for a command given no ``--timeout``."""
    if timeout is None and deadline is None:
        timeout = configured.timeout
    return resolve_deadline(timeout, deadline)


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
    settle_delay: Optional[float] = None,
    durable: bool = False,
    reason: Optional[str] = None,
) -> Outcome:
    """Hold one job (``scontrol hold``) before ``deadline`` (or within ``timeout``), recorded in the ledger.

    A pending job stays pending; a running one keeps running, at priority 0.
    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8).
    """
    outcome = run_op(Op.HOLD, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger,
                     key=key, settle=settle, retry=retry, settle_delay=settle_delay, durable=durable, reason=reason)
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
    settle_delay: Optional[float] = None,
    durable: bool = False,
    reason: Optional[str] = None,
) -> Outcome:
    """Release one held job (``scontrol release``) before ``deadline`` (or within ``timeout``), recorded.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8).
    """
    outcome = run_op(Op.RELEASE, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger,
                     key=key, settle=settle, retry=retry, settle_delay=settle_delay, durable=durable, reason=reason)
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
    settle_delay: Optional[float] = None,
    durable: bool = False,
    hold: bool = False,
    reason: Optional[str] = None,
) -> Outcome:
    """Requeue one job before ``deadline`` (or within ``timeout``): set Requeue=1, ``scontrol requeue``
    (``scontrol requeuehold`` with ``hold``: the job comes back held, docs/contract.md §1), then clear
    Requeue=0 again, recorded in the ledger (a flag that may be left set is the sweeper's).

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown, RequeueBitSet or
    NotRun (docs/contract.md §8); ``requeue_bit_may_be_set`` says whether the job's Requeue flag may be left at 1.
    """
    outcome = run_op(Op.REQUEUE_HOLD if hold else Op.REQUEUE, job_id, timeout=timeout, deadline=deadline,
                     scontrol=scontrol, ledger=ledger, key=key, settle=settle, retry=retry,
                     settle_delay=settle_delay, durable=durable, reason=reason)
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
    settle_delay: Optional[float] = None,
    durable: bool = False,
    reason: Optional[str] = None,
) -> Outcome:
    """RestoreRequeueBit: clear one job's Requeue flag (``scontrol update Requeue=0``) before
    ``deadline`` (or within ``timeout``).  On ok the job's ledger object is cleared; otherwise it
    stays, with why.  No array lookup first: it only clears flags.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8).
    """
    outcome = run_op(Op.RESTORE, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger,
                     key=key, settle=settle, retry=retry, settle_delay=settle_delay, durable=durable, reason=reason)
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
    settle_delay: Optional[float] = None,
    durable: bool = False,
    reason: Optional[str] = None,
) -> Outcome:
    """Release one job with a direct, unwrapped ``scontrol release`` under the same deadline guard
    (op ``open``), recorded in the ledger.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8).
    """
    outcome = run_op(Op.OPEN, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger,
                     key=key, settle=settle, retry=retry, settle_delay=settle_delay, durable=durable, reason=reason)
    outcome.raise_for_result()
    return outcome
