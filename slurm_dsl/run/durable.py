"""Waiting for slurmctld's save (docs/contract.md §13.5): ``--durable``, the API's ``durable=True``.

Strategy: a row whose change took effect (an ``ok``; a requeue's ``bit_set`` whose call 2 took
effect; an unknown one settled ``present``) is confirmed saved by §13.2's rule.  Once the calls
are over (``ended``, this host's clock), the header of slurmctld's job_state is polled every
``POLL`` seconds until a save that began after ``ended`` (``core.durable.began_after``, its clock
margin included); then one lookup of those rows' jobs, made after reading it, must still show each
change, read as ``core.settle`` reads an acknowledged operation (Rule 12: its baseline and the
later operations of its job from the ledger).  With no such save yet, their last call is made
again (one list call of the same op on the same jobs, ``AGAIN``, which changes nothing): at once,
and after each save that still does not prove them, so that slurmctld saves in its next save
window.  A requeue's row also
needs its job at Requeue=0 when its calls cleared the flag.  So the command returns within
``POLL`` of the start of slurmctld's first save that proves its calls, plus one lookup; a row not
confirmed by the deadline (no such save began, the lookup could not ask, the change is no longer
there: "acknowledged, then lost") says so (``Outcome.saved`` False, and it exits as unknown).
Nothing is written: a lost change's verdict is for the next keyed run or the sweep to record.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Dict, List, Optional, Sequence

from ..core.durable import began_after
from ..core.jobinfo import JobInfo
from ..core.keys import took_effect
from ..core.model import LookupFailed, Op, Outcome, RequeueBit, Result, Verdict
from ..core.script import list_argv
from ..host import process
from ..host.binaries import find_scontrol, find_squeue
from ..lookups.saves import last_save
from ..lookups.sight import trusted
from ..lookups.squeue import MAX_LISTED, SQUEUE_TIMEOUT, SqueueLookup
from . import settling
from .tracked import Tracker

log = logging.getLogger("slurm_dsl")

POLL = 0.2  # seconds between two reads of job_state's header
LOOKUP_FLOOR = 1.0  # seconds the confirming lookup gets at least, even at the deadline
# Why the last call is made again at once when no save proves the calls yet: the save that
# followed them may have begun in their own second (an idle save thread writes at once, and a
# busy machine's may take all of a requeue's calls in that one save), or too close to them for the
# clocks' margin; an idle slurmctld then writes again only on its next change, or its checkpoint
# (300 s).  Made again, the call is saved in slurmctld's next save window: within ~5 s.
# The call made again, per op: the one that left the job as asked (docs/contract.md §13.5): what it
# sets is what the job holds already, so slurmctld answers it without change, and saves.
AGAIN = {Op.HOLD: (Op.HOLD, 1), Op.RELEASE: (Op.RELEASE, 1), Op.OPEN: (Op.RELEASE, 1),
         Op.REQUEUE: (Op.REQUEUE, 3), Op.RESTORE: (Op.RESTORE, 1)}


def changed(outcome: Outcome) -> bool:
    """Whether ``outcome``'s change took effect, so that there is a save to wait for."""
    if outcome.result is Result.UNKNOWN:
        return outcome.settled and outcome.effect is Verdict.PRESENT
    return took_effect(outcome.op, outcome.result, tuple(c.outcome for c in outcome.calls)) is True


def confirm_saved(tracker: Tracker, outcomes: Sequence[Outcome], ended: float, deadline: float) -> List[Outcome]:
    """``outcomes`` (one per job), each whose change took effect with ``saved`` True or False, the
    others as they are (``saved`` None); ``ended``: when the last of their calls ended, on this
    host's clock; everything within ``deadline`` (a lookup gets at least ``LOOKUP_FLOOR``)."""
    todo = [o for o in outcomes if changed(o)]
    if not todo:
        return list(outcomes)
    why = _wait_for_a_save(tracker, todo, ended, deadline)
    verdicts: Dict[str, Optional[str]] = {}
    if why is None:
        verdicts = _look(tracker, todo, deadline)
    confirmed = []
    for outcome in outcomes:
        if outcome not in todo:
            confirmed.append(outcome)
            continue
        lost = why if why is not None else verdicts.get(outcome.job_id, "its job could not be looked up again")
        note = "saved by slurmctld" if lost is None else f"not known saved: {lost}"
        detail = f"{outcome.detail}; {note}" if outcome.detail else note
        confirmed.append(replace(outcome, saved=lost is None, detail=detail))
    return confirmed


def _wait_for_a_save(tracker: Tracker, outcomes: Sequence[Outcome], ended: float, deadline: float) -> Optional[str]:
    """None once a save of job_state began after ``ended``; else why not, at the deadline.

    While none proves the calls, their last call is made again (one list call, ``AGAIN``) at
    once, and again after each save that still does not prove them: a call made after a save was
    written comes after that save cleared slurmctld's count of what to save (contract §13.1), so
    the save it brings begins at least a save window (5 s) after that one, after ``ended``; one made
    while a save is about to begin may be taken into that very save (a busy machine's save thread
    can take a whole requeue into the save its call 1 woke), hence the repeat.  At most one call a
    save window."""
    seen: Optional[int] = -1  # the save the last call made again followed (-1: none made yet)
    while True:
        save = last_save()
        if began_after(save.started, ended):
            return None
        if tracker.clock() + POLL > deadline:
            if save.started is None:
                return f"when slurmctld last saved cannot be read ({save.path}: {save.why})"
            return "no save of slurmctld's state began after its calls by the deadline"
        if save.started is not None and save.started != seen:
            seen = save.started
            op, number = AGAIN[outcomes[0].op]
            argv = (find_scontrol(tracker.scontrol), *list_argv(op, number, [o.job_id for o in outcomes]))
            done = process.run_argv(argv, timeout=max(min(deadline - tracker.clock(), 10.0), 0.1))
            log.info("no save proves the calls yet: %s again, so that slurmctld saves (exit %s)",
                     " ".join(argv[1:2]), done.returncode)
        time.sleep(POLL)


def _look(tracker: Tracker, outcomes: Sequence[Outcome], deadline: float) -> Dict[str, Optional[str]]:
    """Per job: None when the lookup (made now, after the save was read) still shows its change,
    else why not."""
    ledger = tracker.ledger()
    ids = list(dict.fromkeys(o.job_id for o in outcomes))
    squeue = find_squeue(tracker.squeue, tracker.scontrol)
    looked_at = ledger.now()
    timeout = min(SQUEUE_TIMEOUT, max(deadline - tracker.clock(), LOOKUP_FLOOR))
    try:
        answers, _ = trusted(SqueueLookup(squeue, timeout=timeout, many=MAX_LISTED).jobs(ids),
                             find_scontrol(tracker.scontrol))
    except LookupFailed as exc:
        return {j: f"its job could not be looked up again ({exc.reason})" for j in ids}
    # Each job's own operation, the newest of this op by this process: its baseline and end.
    rows = ledger.operations_by(ids, outcomes[0].op, tracker.actor, 0.0)
    entries = [found[-1] for j in ids if (found := rows.get(j))]
    out: Dict[str, Optional[str]] = {}
    bits = {e.id: e.requeue_bit for e in entries}
    for decided in settling.recheck(ledger, entries, answers, looked_at):
        job = decided.entry.job_id
        settled = decided.settled
        if settled is None or settled.verdict is not Verdict.PRESENT:
            out[job] = "the change is no longer there: acknowledged, then lost" if (
                settled is not None and settled.verdict is Verdict.ABSENT) else (
                f"its job's record cannot say ({settled.detail if settled else 'looked at too soon'})")
            continue
        out[job] = _flag(decided.entry.op, bits.get(decided.entry.id), answers.get(job))
    return out


def _flag(op: Op, bit: Optional[RequeueBit], record: Optional[JobInfo]) -> Optional[str]:
    """A requeue whose calls cleared the flag, or a restore: its job must show Requeue=0 too."""
    if record is None or not record.requeue:
        return None
    if op is Op.RESTORE or (op is Op.REQUEUE and bit is RequeueBit.CLEAR):
        return "its job shows Requeue=1 again: the clear was lost (a sweep restores it)"
    return None
