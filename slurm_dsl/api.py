"""The public operations and ``configuration`` (docs/contract.md §8; keys and settling §12).

Every call reads its settings as the ``slurm-dsl`` command does (``run.config.configure``), its
arguments standing for the command's flags.  The five operations are written out, not generated,
so that type checkers and ``help()`` see their real signatures."""

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

    ``key``, ``settle``, ``retry``, ``settle_delay``, ``reason``, ``admin_comment``: as the command's
    flags of the same names (docs/contract.md §10.4, §12)."""
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
    """Run ``op`` on many jobs through the ledger (docs/contract.md §11): one Outcome per distinct id, in
    the order given, whatever each is.

    ``select`` is the command's selectors by name (docs/contract.md §10.3), AND-ed with ``job_ids``;
    no match returns ``[]``.  Raises before anything ran as ``run_op`` does; a ledger failure once a
    job ran is ``NotRecorded``, with the outcomes it could not record in ``outcomes``."""
    chosen = None if select is None else Selection.of(select)
    why = _reason(reason, admin_comment)
    configured = _configuration(ledger, scontrol)
    return _run_ops(op, job_ids, _deadline(timeout, deadline, configured), configured, ledger=ledger,
                    scontrol=scontrol, one_by_one=one_by_one, parallel=parallel, key=key, settle=settle, retry=retry,
                    settle_delay=settle_delay, durable=durable, reason=why, select=chosen, admin_comment=admin_comment)


def _reason(reason: Optional[str], admin_comment: bool) -> Optional[str]:
    """``reason`` checked; ``admin_comment`` without one is InvalidInput."""
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
    """``run_ops`` until ``when``, a deadline resolved once; ``reason`` and ``select`` checked already."""
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
    """The settings this host's slurm-dsl uses, read as every command reads them (docs/contract.md §10.2).

    ``ConfigFileError`` for a bad config file."""
    return configure(config=config)


def _configuration(ledger: Union[str, Tracker, None], scontrol: Optional[str]) -> Configuration:
    """An open Tracker's configuration, else read now with ``ledger`` and ``scontrol`` as flags.

    ``ConfigFileError`` for a bad config file, ``InvalidInput`` for an empty argument."""
    if isinstance(ledger, Tracker):
        return ledger.configuration
    return configure({"ledger": ledger, "scontrol": scontrol})


def _deadline(timeout: Optional[float], deadline: Optional[float], configured: Configuration) -> float:
    """The call's deadline: from ``timeout`` or ``deadline``, else the configured ``timeout``."""
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
    """Hold one job (``scontrol hold``), recorded in the ledger.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8)."""
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
    """Release one held job (``scontrol release``), recorded in the ledger.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8)."""
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
    """Requeue one job (``scontrol requeuehold`` with ``hold``), its Requeue flag cleared after.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown, RequeueBitSet or
    NotRun (docs/contract.md §8)."""
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
    """Clear one job's Requeue flag (``scontrol update Requeue=0``); on ok its ledger object is cleared.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8)."""
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
    """Release one job with a direct, unwrapped ``scontrol release`` (op ``open``), recorded in the ledger.

    Return the ok Outcome; else raise Rejected, NotFound, Expired, OutcomeUnknown or NotRun (docs/contract.md §8)."""
    outcome = run_op(Op.OPEN, job_id, timeout=timeout, deadline=deadline, scontrol=scontrol, ledger=ledger,
                     key=key, settle=settle, retry=retry, settle_delay=settle_delay, durable=durable, reason=reason)
    outcome.raise_for_result()
    return outcome
