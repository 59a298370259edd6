"""Waiting for slurmctld's save (docs/contract.md §13.5): ``--durable``, the API's ``durable=True``.

A changed row is confirmed by this process's own looks at ``job_state`` (``core.durable`` Rules 2, 3),
then one lookup that still shows the change.  The wait makes no call that could change anything
(§13.8) and writes nothing; a row not confirmed by the deadline says so and exits as unknown.
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
    """``outcomes`` (one per job, their calls over), each changed one with ``saved`` True or False, within
    ``deadline`` (tracker's clock).  ``key``: the command's, whose operations the rows may be."""
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
    """Per job: None once its change is known saved, else why not, by the deadline."""
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
    """Per job: None when a lookup made now still shows its change, else why not; and those shown lost."""
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
    ctl = settling.in_control(find_scontrol(tracker.scontrol), entries,  # after the lookup (core.settle Rule 16)
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

