"""Waiting for slurmctld's save (docs/contract.md §13.5): ``--durable``, the API's ``durable=True``.

Strategy: a row whose change took effect (an ``ok``; a requeue's ``bit_set`` whose call 2 took
effect; an unknown one settled ``present``) is confirmed saved by ``core.durable`` Rules 2 and 3,
from this process's own looks at ``job_state`` (``run.looks``), the first taken once the calls are
over: every ``POLL`` seconds, until two saves are seen replaced after it; then one lookup of those
rows' jobs, made after, must still show each change, read as ``core.settle`` reads an acknowledged
operation (Rule 12: its baseline and the later operations of its job from the ledger).  A requeue's
row also needs its job at Requeue=0 when its calls cleared the flag.  The wait makes no call that
could change anything (docs/contract.md §13.8): an idle slurmctld saves only on its next change or
its periodic checkpoint (300 s), so the command waits for that, within its deadline.  While it
waits, the heartbeat slurmctld writes into its StateSaveLocation is looked at too: a restarted or
newly in charge controller writes one at once (and the one in charge every MIN(SlurmctldTimeout/4,
30) s), and each new one is answered with a lookup: a change the record no longer shows is
"acknowledged, then lost" at once, not at the deadline.  A row not confirmed by the deadline (the
saves not seen, the lookup could not ask, the change is no longer there) says so (``Outcome.saved``
False, and it exits as unknown).  Nothing is written: a lost change's verdict is for the next keyed
run or the sweep to record.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..core.durable import looks_needed
from ..core.jobinfo import JobInfo
from ..core.keys import took_effect
from ..core.model import LookupFailed, Op, Outcome, RequeueBit, Result, Verdict
from ..host import world
from ..host.binaries import find_scontrol, find_squeue
from ..host.files import FILE_TIMEOUT, NotRead, identity
from ..host.runs import boot_clock
from ..lookups import controller
from ..lookups.sight import trusted
from ..lookups.squeue import MAX_LISTED, SQUEUE_TIMEOUT, SqueueLookup
from . import looks, settling
from .tracked import Tracker

log = logging.getLogger("slurm_dsl")

POLL = looks.POLL  # seconds between two looks
LOOKUP_FLOOR = 1.0  # seconds the confirming lookup gets at least, even at the deadline
LOST = "the change is no longer there: acknowledged, then lost"


def changed(outcome: Outcome) -> bool:
    """Whether ``outcome``'s change took effect, so that there is a save to wait for."""
    if outcome.result is Result.UNKNOWN:
        return outcome.settled and outcome.effect is Verdict.PRESENT
    return took_effect(outcome.op, outcome.result, tuple(c.outcome for c in outcome.calls)) is True


def confirm_saved(
    tracker: Tracker, outcomes: Sequence[Outcome], deadline: float, key: Optional[str] = None
) -> List[Outcome]:
    """``outcomes`` (one per job, their calls over), each whose change took effect with ``saved``
    True or False, the others as they are (``saved`` None); everything within ``deadline`` (the
    tracker's clock; a lookup gets at least ``LOOKUP_FLOOR``).  ``key``: the command's, whose
    operations the rows are (an earlier run's, for a key done already); else this process's own."""
    todo = [o for o in outcomes if changed(o)]
    if not todo:
        return list(outcomes)
    verdicts = _wait(tracker, todo, deadline, key)
    confirmed = []
    for outcome in outcomes:
        if outcome not in todo:
            confirmed.append(outcome)
            continue
        lost = verdicts.get(outcome.job_id, "its job could not be looked up again")
        note = "saved by slurmctld" if lost is None else f"not known saved: {lost}"
        detail = f"{outcome.detail}; {note}" if outcome.detail else note
        confirmed.append(replace(outcome, saved=lost is None, detail=detail))
    return confirmed


def _wait(
    tracker: Tracker, outcomes: Sequence[Outcome], deadline: float, key: Optional[str]
) -> Dict[str, Optional[str]]:
    """Per job: None once its change is known saved, else why not, by the deadline (see the module)."""
    at = tracker.place()
    jobs = list(dict.fromkeys(o.job_id for o in outcomes))
    own = looks.look(at)  # the calls are over: the anchor (Rule 2)
    if own is None:
        seen = looks.seen(at)
        return {j: f"slurmctld's saves cannot be seen ({seen.path}: {seen.why})" for j in jobs}
    chain: List[Tuple[int, str]] = []
    beat = _heartbeat(at)
    out: Dict[str, Optional[str]] = {}
    while True:
        short = looks_needed(0, own, at.observer, chain)
        if short == 0:
            out.update(_look(tracker, outcomes, deadline, [j for j in jobs if j not in out], key)[0])
            return out
        if tracker.clock() + POLL > deadline:
            why = f"{short} more of slurmctld's saves not seen by the deadline (an idle slurmctld saves on its next" \
                  " change, or its checkpoint every 300 s)"
            return {j: out.get(j, why) for j in jobs}
        world.sleep(POLL)
        now = looks.look(at)
        if now is not None and now.seen != (chain[-1][1] if chain else own.seen):
            chain.append((len(chain) + 1, now.seen))
        if (now_beat := _heartbeat(at)) != beat:
            # A restart or a takeover writes a heartbeat at once: look whether the changes are still there.
            beat = now_beat
            found, lost = _look(tracker, outcomes, deadline, [j for j in jobs if j not in out], key)
            out.update((j, found[j]) for j in lost)
            if len(out) == len(jobs):
                return out


def _heartbeat(at: looks.Place) -> Optional[str]:
    """Which heartbeat file is in ``at``'s StateSaveLocation (its identity; None: none seen)."""
    if at.location is None:
        return None
    found = identity(os.path.join(at.location, "heartbeat"), FILE_TIMEOUT)
    return None if isinstance(found, NotRead) else str(found)


def _look(
    tracker: Tracker, outcomes: Sequence[Outcome], deadline: float, jobs: Sequence[str], key: Optional[str]
) -> Tuple[Dict[str, Optional[str]], Set[str]]:
    """Per job of ``jobs``: None when a lookup made now still shows its change, else why not; and
    those whose change the lookup shows lost."""
    if not jobs:
        return {}, set()
    ledger = tracker.ledger()
    squeue = find_squeue(tracker.squeue, tracker.scontrol)
    looked_at, booted = ledger.now(), boot_clock()
    timeout = min(SQUEUE_TIMEOUT, max(deadline - tracker.clock(), LOOKUP_FLOOR))
    try:
        answers, _ = trusted(SqueueLookup(squeue, timeout=timeout, many=MAX_LISTED).jobs(jobs),
                             find_scontrol(tracker.scontrol))
    except LookupFailed as exc:
        return {j: f"its job could not be looked up again ({exc.reason})" for j in jobs}, set()
    # Each job's own operation, the newest of this op under the key (a key done already: an earlier
    # run's, in another process), else by this process: its baseline and end.
    op = outcomes[0].op
    rows = ledger.keyed(jobs, op, key) if key is not None else ledger.operations_by(jobs, op, tracker.actor, 0.0)
    entries = [found[-1] for j in jobs if (found := rows.get(j))]
    out: Dict[str, Optional[str]] = {}
    lost: Set[str] = set()
    bits = {e.id: e.requeue_bit for e in entries}
    ctl = settling.in_charge(find_scontrol(tracker.scontrol), entries,  # after the lookup (core.settle Rule 16)
                             min(controller.TIMEOUT, max(deadline - tracker.clock(), 0.0)))
    for decided in settling.recheck(ledger, entries, answers, looked_at, booted=booted, controller=ctl):
        job = decided.entry.job_id
        settled = decided.settled
        if settled is not None and settled.verdict is Verdict.ABSENT:
            out[job] = LOST
            lost.add(job)
        elif settled is None or settled.verdict is not Verdict.PRESENT:
            out[job] = f"its job's record cannot say ({settled.detail if settled else 'looked at too soon'})"
        else:
            out[job] = _flag(decided.entry.op, bits.get(decided.entry.id), answers.get(job))
            if out[job] is not None:
                lost.add(job)
    return out, lost


def _flag(op: Op, bit: Optional[RequeueBit], record: Optional[JobInfo]) -> Optional[str]:
    """A requeue whose calls cleared the flag, or a restore: its job must show Requeue=0 too."""
    if record is None or not record.requeue:
        return None
    if op is Op.RESTORE or (op.requeues and bit is RequeueBit.CLEAR):
        return "its job shows Requeue=1 again: the clear was lost (a sweep restores it)"
    return None

