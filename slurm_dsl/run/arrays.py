"""The array check before an operation (docs/contract.md §9.4), and its answer, the baselines.

Contract: ``look_up`` asks squeue once for every id, bounded by the deadline, and raises
``WholeArray`` for an id that is an array's own JobId reaching other tasks (scontrol would act
on every task), ``LookupFailed`` when it could not ask: either way nothing ran.  Its answer is
what squeue said of each id and when the lookup STARTED, which ``run.tracked`` commits with each
job's intent as its baseline, and for a requeue which slurmctld was in charge just before it
(``lookups.controller``, docs/contract.md §12 Rule 16).  A restore, no ids, and a deadline already past ask nothing
(``NOT_LOOKED``).

Strategy: a module of its own, with no ledger and no bulk path behind it, so that the command
line can start an operation's check (in a thread: ``run.background``) before it loads them and
opens the ledger: the squeue runs while they load (docs/benchmarks.md §2).
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Union

from ..core.jobid import JobIds
from ..core.jobinfo import JobInfo
from ..core.model import LookupFailed, Op, WholeArray
from ..host.binaries import find_scontrol, find_squeue
from ..host.runs import ended
from ..lookups import controller
from ..lookups.squeue import MAX_LISTED, SQUEUE_TIMEOUT, SqueueLookup
from .deadlines import Clock


class LookupAnswer(NamedTuple):
    """What the lookup before an operation said of each id (``look_up``), and when it STARTED on
    the caller's clock (None: no lookup was made; then ``infos`` is empty) and, as
    ``host.runs.ended`` says it, on this host's boot clock (``at_boot``)."""

    infos: Dict[str, Optional[JobInfo]]
    started: Optional[float] = None
    at_boot: Optional[str] = None
    controller: Optional[str] = None  # a requeue's: the slurmctld in charge before the lookup (None: not read)


NOT_LOOKED = LookupAnswer({}, None)


def look_up(
    op: Union[Op, str], ids: JobIds, deadline: float, *, squeue: Optional[str], scontrol: Optional[str],
    clock: Clock, restore_too: bool = False, in_charge: bool = True,
) -> LookupAnswer:
    """The array check of ``ids`` (distinct, valid) before ``op``, by ``deadline`` on ``clock``,
    with squeue at ``squeue`` (None: beside ``scontrol``, else the default: ``find_squeue``);
    ``restore_too``: a restore's ids are looked up too (``--dry-run``); ``in_charge``: for a
    requeue, which slurmctld is in charge is read first (False: a dry run, which records nothing)."""
    started, at_boot = clock(), ended()
    left = deadline - started
    if (Op(op) is Op.RESTORE and not restore_too) or not ids or left <= 0:
        return NOT_LOOKED
    program = find_squeue(squeue, scontrol)
    ctl = None
    if in_charge and Op(op).requeues:  # before the lookup: its baseline's controller (contract §12 Rule 16)
        ctl = controller.in_charge(find_scontrol(scontrol), min(controller.TIMEOUT, left))
    left = deadline - clock()
    if left <= 0:
        return NOT_LOOKED
    try:
        infos = SqueueLookup(program, timeout=min(SQUEUE_TIMEOUT, left), many=MAX_LISTED).jobs(ids)
    except LookupFailed as exc:  # same type, saying what it means here
        raise LookupFailed(f"{exc.reason}; could not check the ids for whole arrays, so nothing ran") from exc
    whole = [info for info in infos.values() if info is not None and info.whole_array]
    if whole:
        raise WholeArray(whole)
    return LookupAnswer(infos, started, at_boot, ctl)
