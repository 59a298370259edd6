"""The array check before an operation (docs/contract.md §9.4), and its answer, the baselines.

A module of its own, with no ledger or bulk path behind it, so that the command line can start the
check (``run.background``) before it loads them: the squeue runs while they load (docs/benchmarks.md §2).
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
    """What ``look_up`` said of each id, and when it STARTED on the caller's clock (None: no lookup)
    and on this host's boot clock (``at_boot``, as ``host.runs.ended`` says it)."""

    infos: Dict[str, Optional[JobInfo]]
    started: Optional[float] = None
    at_boot: Optional[str] = None
    controller: Optional[str] = None  # a requeue's: the slurmctld in control before the lookup (None: not read)


NOT_LOOKED = LookupAnswer({}, None)


def look_up(
    op: Union[Op, str], ids: JobIds, deadline: float, *, squeue: Optional[str], scontrol: Optional[str],
    clock: Clock, restore_too: bool = False, in_control: bool = True,
) -> LookupAnswer:
    """The array check of ``ids`` (distinct, valid) before ``op``, by ``deadline`` on ``clock``: ``WholeArray``,
    ``LookupFailed``.  ``restore_too``: look a restore's ids up too; ``in_control``: read Rule 16's controller."""
    started, at_boot = clock(), ended()
    left = deadline - started
    if (Op(op) is Op.RESTORE and not restore_too) or not ids or left <= 0:
        return NOT_LOOKED
    program = find_squeue(squeue, scontrol)
    ctl = None
    if in_control and Op(op).requeues:  # before the lookup: its baseline's controller (contract §12 Rule 16)
        ctl = controller.in_control(find_scontrol(scontrol), min(controller.TIMEOUT, left))
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
