"""The sweep (docs/contract.md §9.5): restore or clear every object that is not clear.

One lookup serves the objects, the unknown operations to settle (§12) and the acknowledged ones
read again (§13.4); their verdicts are written before any restore begins.  ``decide`` is the pure
rule, ``sweep`` the edge around it; the caller holds the ledger's sweep lock.
"""

from __future__ import annotations

import enum
import functools
import gc
import logging
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, ParamSpec, Sequence, Set, Tuple, TypeVar

from ..core.combine import found_finished
from ..core.durable import Control, may_be_held
from ..core.jobid import distinct_ids
from ..core.jobinfo import JobInfo, Lookup
from ..core.ledger_rules import SWEEP_TAG
from ..core.model import DSLError, InvalidInput, LedgerError, LookupFailed, Op, Outcome, RequeueBit, Result, Verdict
from ..core.settle import DEFAULT_SETTLE_DELAY, Recorded, Unsettled, check_settle_delay
from ..host import world
from ..host.binaries import find_scontrol
from ..host.runs import boot_clock, this_run
from ..ledger.base import LedgerStore, Marks
from ..ledger.records import HistoryEntry
from ..lookups.saves import LastSave, last_save
from ..lookups.sight import trusted
from ..lookups.squeue import SqueueLookup
from . import looks, settling
from .deadlines import steady
from .driver import Ran, Stopped
from .tracked import Tracker, lease_owner

log = logging.getLogger("slurm_dsl")

RESTORE_TIMEOUT = 15.0
# Seconds a sweep waits at most for saves that would prove its objects' marks (core.durable Rule 2):
# two of slurmctld's save windows (5 s each) and one second more.
SAVE_WAIT = 11.0
# Seconds an object may stay kept (``unsaved``) since it became quiet before the sweep says so and
# exits 15: slurmctld saves at least every 300 s (PERIODIC_CHECKPOINT), so two saves and the sweeps
# that see them come well within it, unless nothing can (a StateSaveLocation that is not the one
# slurmctld writes, a controller that no longer saves).  The ledger's clock, which only raises it.
KEEP_BOUND = 3600.0
# Seconds from taking the sweep lock until the leases of the sweep that held it before are taken
# over.  The lock is free only once its holder is dead (an flock, or GET_LOCK on a connection the
# server saw close) or done; every process a run starts dies within about a second of its runner
# (the lifeline, docs/contract.md §2), so by then none of that sweep's restores still runs.
RECLAIM_GRACE = 2.0


class Action(str, enum.Enum):
    CLEAR = "clear"  # the job is gone or already at Requeue=0: clear the object
    RESTORE = "restore"  # the job shows Requeue=1: a restore
    WATCH = "watch"  # a finished job shows Requeue=1: keep the object, look again next sweep

    def __str__(self) -> str:
        return self.value


class Done(str, enum.Enum):
    """What the sweep did with one object."""

    CLEARED = "cleared"
    RESTORED = "restored"
    RESTORE_FAILED = "restore_failed"
    LOOKUP_FAILED = "lookup_failed"
    BUSY = "busy"  # an operation held the job's lease
    WATCHING = "watching"  # a finished job at Requeue=1: kept, looked at again next sweep
    WOULD_CLEAR = "would_clear"  # --dry-run
    WOULD_RESTORE = "would_restore"  # --dry-run
    UNSAVED = "unsaved"  # the job shows Requeue=0 or is gone, but that is not yet known saved: kept, watched


    def __str__(self) -> str:
        return self.value


# Outcomes a sweep is content with: a busy job is an operation's for now, and the next sweep's;
# a watched one is all that can be done until slurmctld purges the job or it comes back.
# An unsaved one waits for slurmctld's next save of its job state (docs/contract.md §13), as long as
# that save can be read at all (``SweepReport.save_error``).
HANDLED = frozenset({Done.CLEARED, Done.RESTORED, Done.WOULD_CLEAR, Done.WOULD_RESTORE, Done.BUSY, Done.WATCHING,
                     Done.UNSAVED})


def decide(info: Optional[JobInfo]) -> Tuple[Action, str]:
    """What to do with an object whose bit is not clear, given its job's lookup."""
    if info is None:
        return Action.CLEAR, "gone: slurmctld no longer knows the job"
    if not info.requeue:
        return Action.CLEAR, "the job already shows Requeue=0"
    if info.finished:
        return Action.WATCH, (
            f"finished ({info.state}) at Requeue=1: slurmctld will not clear the flag and the job can"
            " still be requeued; watched until it is purged or comes back"
        )
    return Action.RESTORE, f"the job shows Requeue=1 ({info.state})"


@dataclass(frozen=True, slots=True)  # slots: a sweep's report holds one per object, 100,000 of them
class Swept:
    job_id: str
    done: Done
    why: str
    outcome: Optional[Outcome] = None

    def to_json(self) -> Dict[str, object]:
        return {
            "kind": "job",
            "job_id": self.job_id,
            "done": self.done.value,
            "why": self.why,
            "restore": self.outcome.to_json() if self.outcome is not None else None,
        }


@dataclass
class SweepReport:
    swept: List[Swept] = field(default_factory=list)
    lookup_error: Optional[str] = None
    orphans: List[JobInfo] = field(default_factory=list)
    fixed_orphans: List[Outcome] = field(default_factory=list)
    started: float = 0.0  # the ledger's clock: kept with the sweep, shown; never subtracted
    finished: float = 0.0
    took: float = 0.0  # seconds it ran, on the steady clock (a step of the wall clock moves it not)
    dry_run: bool = False
    # The unknown operations this sweep looked at, and the verdict each got (None: not yet).
    verdicts: List[settling.Decided] = field(default_factory=list)
    verdicts_written: int = 0
    # "Gone" answers not trusted (lookups.sight): why, and whom to run as; None: none.
    unseen: Optional[str] = None
    # slurmctld's last save of its job state, read before the lookup: shown only (docs/contract.md §13).
    save: Optional[LastSave] = None
    # Why this sweep's looks at slurmctld's saves saw nothing (None: they saw; core.durable Rule 2),
    # and how many acknowledged operations it read again are still to be proven saved.
    looks_why: Optional[str] = None
    unproven: int = 0
    # Objects kept for a cause that cannot end by itself: the controllers unreadable where a backup
    # may hand back, or kept past ``KEEP_BOUND`` (docs/contract.md §13.3); None: none.
    keep_error: Optional[str] = None
    # The acknowledged operations read again (docs/contract.md §13.4), and the history id the next
    # sweep reads them from (None: a dry run, or none were read: the last sweep's stays).
    acknowledged: List[settling.Decided] = field(default_factory=list)
    lost_written: int = 0
    acknowledged_from: Optional[int] = None

    @property
    def save_error(self) -> Optional[str]:
        """Why objects or acknowledged operations were kept for want of a look at the saves (None: none)."""
        if self.looks_why is None or not (self.unproven or any(s.done is Done.UNSAVED for s in self.swept)):
            return None
        return f"cannot see slurmctld's saves of its job state ({self.looks_why})"

    def counts(self) -> Dict[str, int]:
        counts = {d.value: 0 for d in Done}
        for s in self.swept:
            counts[s.done.value] += 1
        return counts

    def summary(self) -> Dict[str, object]:
        """What the ledger keeps of this sweep (``record_sweep``; ``ledger status`` shows it)."""
        return {
            "counts": {k: v for k, v in self.counts().items() if v},
            "settled": self.handled,  # the JSON key stays
            "lookup_error": self.lookup_error,
            "orphans": len(self.orphans),
            **({"unseen": self.unseen} if self.unseen else {}),
            **({"save_error": self.save_error} if self.save_error else {}),
            **({"keep_error": self.keep_error} if self.keep_error else {}),
            "fixed_orphans": [o.result.value for o in self.fixed_orphans],
            # Only when there were some: a ledger's summary of a sweep with none stays as it was.
            **({"verdicts": {k: v for k, v in settling.counts(self.verdicts).items() if v}} if self.verdicts else {}),
            **({"lost": len(self.lost)} if self.lost else {}),
            # Only once past the first id: a ledger's summary of a sweep that read none stays as it was.
            **({"acknowledged_from": self.acknowledged_from} if (self.acknowledged_from or 1) > 1 else {}),
        }

    @property
    def lost(self) -> List[settling.Decided]:
        """The acknowledged operations this sweep found lost (absent, or gone)."""
        return [d for d in self.acknowledged
                if d.settled is not None and d.settled.verdict in settling.LOST_VERDICTS]

    @property
    def handled(self) -> bool:
        """Every object looked at was handled (and every orphan fixed, if asked)."""
        fixed = all(o.result is Result.OK for o in self.fixed_orphans)
        return (self.lookup_error is None and self.unseen is None and self.save_error is None and fixed
                and self.keep_error is None and all(s.done in HANDLED for s in self.swept))


_P = ParamSpec("_P")
_R = TypeVar("_R")


def collector_paused(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` with Python's cyclic garbage collector paused while it runs, process-wide (and enabled again
    after, if it was before): a sweep makes no cycles worth collecting (docs/benchmarks.md §9.2)."""

    @functools.wraps(fn)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return call


@collector_paused
def sweep(
    tracker: Tracker,
    lookup: Lookup,
    *,
    limit: Optional[int] = None,
    dry_run: bool = False,
    restore_timeout: float = RESTORE_TIMEOUT,
    orphans: bool = False,
    fix: bool = False,
    orphan_lookup: Optional[SqueueLookup] = None,
    reclaim_at: Optional[float] = None,
    settle_limit: int = settling.DEFAULT_LIMIT,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
    save_wait: float = SAVE_WAIT,
) -> SweepReport:
    """One pass over the objects whose bit is not clear and the operations to settle; the caller holds
    the ``SweepLock``.  ``reclaim_at``: a ``deadlines.steady()`` instant from which other sweeps'
    leases are taken over (None: never); ``save_wait``: seconds at most waited for saves."""
    delay = check_settle_delay(settle_delay)
    if isinstance(settle_limit, bool) or not isinstance(settle_limit, int) or settle_limit < 1:
        raise InvalidInput(f"settle_limit must be a whole number, at least 1, not {settle_limit!r}")
    ledger = tracker.ledger()
    began = steady()
    report = SweepReport(started=ledger.now(), dry_run=dry_run)
    owner = lease_owner(SWEEP_TAG)
    # The objects' ids alone: all the sweep needs of them, and 100,000 of them fit in a few MB.
    ids = ledger.due_ids(ledger.now(), limit, reclaim_sweeps=reclaim_at is not None)
    if reclaim_at is not None and not dry_run and steady() < reclaim_at:
        # Too early to take a dead sweep's leases: wait for the grace only if there are any.
        if set(ids).difference(ledger.due_ids(ledger.now(), limit)):
            world.sleep(max(reclaim_at - steady(), 0.0))
            ids = ledger.due_ids(ledger.now(), limit, reclaim_sweeps=True)
    reclaim = reclaim_at is not None and steady() >= reclaim_at
    # What was seen of slurmctld's saves (core.durable Rule 2), before anything is decided; objects
    # that a save or two more would prove get that long (``SAVE_WAIT``), before their leases.
    watch = looks.Watch(ledger, keep=not dry_run)
    watch.look()
    if ids and not dry_run:
        # The distinct marks there (a bulk operation's objects share one); not-yet-anchored ones are
        # anchored under the lease below, and wait for a later sweep.
        anchors = {a for a in ledger.anchors(ids) if a[0] is not None}
        watch.wait(lambda: watch.why is not None or all(watch.needed(*a) == 0 for a in anchors), save_wait)
    if dry_run:
        leased = ids
    else:
        # Leases first, lookup after: no operation can start on a leased job, so what
        # the lookup says stays true until the job is settled or its lease released.
        ttl = getattr(lookup, "timeout", 60.0) + restore_timeout * 2 + 60.0
        ledger.lock_run(str(this_run()))
        leased = ledger.acquire_leases(ids, owner, ledger.now(), ttl, reclaim_sweeps=reclaim,
                                       alive=settling.alive_before(ledger, ids))
        report.swept += [Swept(j, Done.BUSY, "an operation holds the job") for j in _not_held(ids, leased)]
    unsettled: List[Unsettled] = []
    answers: Optional[Dict[str, Optional[JobInfo]]] = None
    looked_at = 0.0
    try:
        if leased and not dry_run and ledger.anchor_quiet(leased, watch.own()):
            # A leased object without a quiet mark: the operation that left it so is over (its lease
            # lapsed), so a look now is after its last call (Rule 2's anchor); and saves after it,
            # within the same wait, prove it.
            anchors = {a for a in ledger.anchors(leased) if a[0] is not None}
            watch.wait(lambda: watch.why is not None or all(watch.needed(*a) == 0 for a in anchors), save_wait)
        now = ledger.now()
        unsettled = ledger.to_settle(now, since=now - settling.SINCE_DAYS * settling.DAY, limit=settle_limit)
        running = settling.still_running(ledger, unsettled)
        unsettled = [e for e in unsettled if e.id not in running]
        mark = settling.acknowledged_from(ledger)
        again = ledger.acknowledged(mark, now - settling.SINCE_DAYS * settling.DAY, settle_limit)
        # One lookup for the objects and the operations alike: the leased jobs first, then the rest.
        asked = list(dict.fromkeys([*leased, *(e.job_id for e in unsettled),
                                    *(e.job_id for e in again if e.result is not None)]))
        report.save = last_save(watch.at.location)  # shown only
        # The looks before the lookup: an object is cleared only from a lookup made after the
        # looks that prove its quiet moment saved (core.durable Rules 2 and 3).
        watch.look()
        report.looks_why = watch.why
        # And the controllers: where a backup may hand back, no absent is read and no object
        # cleared while one may still hold a request back (core.settle Rule 14, core.durable Rule 6).
        control = settling.controls(ledger, watch.at, keep=not dry_run)
        # When the lookup starts: the settle delay counts to here, on this host's boot clock where
        # the operation ended on it (core.settle Rule 15), else on the ledger's.
        looked_at, booted = ledger.now(), boot_clock()
        if asked:
            try:
                answers, blind = trusted(lookup.jobs(asked), find_scontrol(tracker.scontrol))
            except LookupFailed as exc:
                report.lookup_error = exc.reason
            else:
                if blind is not None:
                    report.unseen = blind.gone_note(len(asked) - len(answers))
                    log.warning("sweep: %s", report.unseen)
        # A purge is saved late too (core.durable Rule 8): what the lookup says is gone counts only
        # once looks prove a save after the lookup that first said so and a lookup after them still
        # says so: the jobs first seen gone now are looked up once more, after up to SAVE_WAIT of
        # looks (or by a later sweep).
        hidden = settling.confirm_gone(ledger, watch, asked, answers, lambda jobs: _ask(tracker, lookup, jobs),
                                       wait=save_wait, write=not dry_run)
        settled_answers = settling.without(answers, hidden)
        # Which slurmctld is in control now, after the lookup (core.settle Rule 16).
        ctl = None if answers is None else settling.in_control(find_scontrol(tracker.scontrol), [*unsettled, *again])
        # The verdicts before the restores: a restore this sweep runs begins after its lookup, so it
        # cannot have changed what the lookup read, but read as a later operation on the flag it
        # would make an earlier unknown restore of the job undecidable for ever.
        _verdicts(tracker, ledger, unsettled, settled_answers, looked_at, delay, control, report, dry_run, watch,
                  booted=booted, controller=ctl)
        _reread(tracker, ledger, again, settled_answers, looked_at, delay, report, dry_run, mark=mark, now=now,
                watch=watch, booted=booted, controller=ctl)
        _restore(tracker, ledger, answers, leased, owner, report, dry_run, restore_timeout, control, watch, hidden)
    finally:
        if not dry_run:
            ledger.release_leases(leased, owner)
    if orphans:
        _orphans(tracker, ledger, orphan_lookup or SqueueLookup(), report, fix and not dry_run, restore_timeout)
    report.finished = ledger.now()
    report.took = steady() - began
    if not dry_run:
        try:
            ledger.record_sweep(report.started, report.finished, report.summary())
        except LedgerError as exc:
            # The restores ran and are in the report: it must still reach the caller.  A missing
            # "last sweep" in ``ledger status`` and this line in the journal say the rest.
            log.warning("could not record the sweep in %s: %s", ledger.path, exc)
    return report


def _ask(tracker: Tracker, lookup: Lookup, jobs: Sequence[str]) -> Optional[Dict[str, Optional[JobInfo]]]:
    """A second lookup of ``jobs`` (``settling.confirm_gone``'s), its "gone" trusted as the first one's."""
    try:
        answers, _ = trusted(lookup.jobs(list(jobs)), find_scontrol(tracker.scontrol))
    except LookupFailed as exc:
        log.warning("sweep: could not look jobs up again: %s", exc.reason)
        return None
    return answers


def _not_held(ids: List[str], leased: List[str]) -> List[str]:
    """The ids whose lease the sweep did not get, in their order."""
    if len(leased) == len(ids):
        return []
    held = set(leased)
    return [j for j in ids if j not in held]


def _verdicts(
    tracker: Tracker,
    ledger: LedgerStore,
    unsettled: List[Unsettled],
    answers: Optional[Dict[str, Optional[JobInfo]]],
    looked_at: float,
    delay: float,
    control: Optional[Control],
    report: SweepReport,
    dry_run: bool,
    watch: looks.Watch,
    *,
    booted: Optional[float] = None,
    controller: Optional[str] = None,
) -> None:
    """The unknown operations' verdicts from the lookup's answers (as ``settling.decide``), written
    unless a dry run."""
    report.verdicts = settling.decide(ledger, unsettled, answers, looked_at, delay, control,
                                      anchor=None if dry_run else watch, booted=booted, controller=controller)
    if not dry_run:
        # Not written: the objects are still settled below; the next sweep finds these again.
        report.verdicts_written = _written(tracker, ledger, report.verdicts, "the verdicts") or 0


def _written(tracker: Tracker, ledger: LedgerStore, decided: List[settling.Decided], what: str) -> Optional[int]:
    """How many of the verdicts ``decided`` the sweep wrote; None (and a warning) if the ledger failed."""
    try:
        return settling.write(ledger, decided, ledger.now(), by=f"sweep, {tracker.actor}")
    except LedgerError as exc:
        log.warning("could not record %s in %s: %s", what, ledger.path, exc)
        return None


def _reread(
    tracker: Tracker,
    ledger: LedgerStore,
    rows: List[Recorded],
    answers: Optional[Dict[str, Optional[JobInfo]]],
    looked_at: float,
    delay: float,
    report: SweepReport,
    dry_run: bool,
    *,
    mark: int,
    now: float,
    watch: looks.Watch,
    booted: Optional[float] = None,
    controller: Optional[str] = None,
) -> None:
    """The acknowledged operations read again, their lost ones written unless a dry run."""
    found = settling.reread(ledger, rows, answers, looked_at, delay, watch, mark=mark, now=now, write=not dry_run,
                            booted=booted, controller=controller)
    report.acknowledged = found.decided
    report.unproven = sum(1 for d in found.decided if d.settled is not None and d.entry.id not in found.done)
    written = None if dry_run else _written(tracker, ledger, found.lost, "the acknowledged operations found lost")
    if written is not None:
        report.lost_written, report.acknowledged_from = written, found.mark


def _restore(
    tracker: Tracker,
    ledger: LedgerStore,
    infos: Optional[Dict[str, Optional[JobInfo]]],
    leased: List[str],
    owner: str,
    report: SweepReport,
    dry_run: bool,
    restore_timeout: float,
    control: Optional[Control],
    watch: looks.Watch,
    hidden: Set[str],
) -> None:
    """Settle the leased objects from the lookup's answers (None: it could not ask); ``hidden``: the
    jobs gone whose purge is not yet known saved."""
    if not leased:
        return
    if infos is None:
        reason = report.lookup_error or "the lookup could not ask"
        if not dry_run:
            ledger.lookups_failed(leased, reason, ledger.now())
        report.swept += [Swept(job, Done.LOOKUP_FAILED, reason) for job in leased]
        return
    unseen = [job for job in leased if job not in infos]  # "gone" to an account that may not see it
    if unseen:
        why = "read as gone by an account that may not see every job: not trusted"
        if not dry_run:
            ledger.lookups_failed(unseen, why, ledger.now())
        report.swept += [Swept(job, Done.LOOKUP_FAILED, why) for job in unseen]
        leased = [job for job in leased if job in infos]
    # Each job's decision is taken again where it is used (``decide`` is pure and cheap), not kept in
    # a list beside the clears and the report: a sweep of 100,000 objects then holds at its peak the
    # clears being written, not also 100,000 decisions (docs/benchmarks.md §4).
    unsaved = _unsaved(ledger, watch, hidden, [job for job in leased if decide(infos.get(job))[0] is Action.CLEAR],
                       control)
    report.keep_error = None if dry_run else _keep_error(ledger, unsaved, control)  # a dry run keeps no looks
    if dry_run:
        would = {Action.CLEAR: Done.WOULD_CLEAR, Action.RESTORE: Done.WOULD_RESTORE, Action.WATCH: Done.WATCHING}
        report.swept += [Swept(job, Done.UNSAVED, unsaved[job]) if job in unsaved else Swept(job, would[action], why)
                         for job in leased for action, why in [decide(infos.get(job))]]
        return
    stored: Dict[str, str] = {}  # the clears share a few whys: one string each, not one per object
    clears = [
        (job, RequeueBit.CLEAR, stored.get(why) or stored.setdefault(why, f"sweep: {why}"))
        for job in leased
        for action, why in [decide(infos.get(job))]
        if action is Action.CLEAR and job not in unsaved
    ]
    written = set(ledger.set_bits(clears, ledger.now(), owner=owner))
    del clears
    watches = [job for job in leased if decide(infos.get(job))[0] is Action.WATCH or job in unsaved]
    watched = set(ledger.watch(watches, ledger.now(), owner=owner))
    for job in leased:
        action, why = decide(infos.get(job))
        if action is not Action.RESTORE:
            if job in unsaved:
                done, why = (Done.UNSAVED, unsaved[job]) if job in watched else (Done.BUSY, LAPSED)
            elif job in (written if action is Action.CLEAR else watched):
                done = Done.CLEARED if action is Action.CLEAR else Done.WATCHING
            else:
                done, why = Done.BUSY, LAPSED
            report.swept.append(Swept(job, done, why))
            continue
        deadline = tracker.clock() + restore_timeout
        outcome = tracker.run(Op.RESTORE, job, deadline, owner=owner, actor=f"{tracker.actor}, sweep")
        if outcome.result is Result.OK:
            report.swept.append(Swept(job, Done.RESTORED, why, outcome))
        elif outcome.calls and found_finished(outcome.calls[-1]):
            # It finished between the lookup and the restore: watched, like any finished job at Requeue=1.
            ledger.watch([job], ledger.now(), owner=owner)
            report.swept.append(Swept(job, Done.WATCHING, "restore: the job has finished meanwhile", outcome))
        else:
            ledger.lookup_failed(job, f"restore: {outcome.result.value}", ledger.now())
            report.swept.append(Swept(job, Done.RESTORE_FAILED, f"restore: {outcome.result.value}", outcome))


LAPSED = "the sweep's lease lapsed; left for the next sweep"
NO_MARKS = Marks(None, None, None, None)


def _keep_error(ledger: LedgerStore, unsaved: Dict[str, str], control: Optional[Control]) -> Optional[str]:
    """Why objects kept ``unsaved`` cannot leave by themselves (None: they will; docs/contract.md §13.3)."""
    if not unsaved:
        return None
    if control is not None and control.writer is None and any(why == HELD for why in unsaved.values()):
        return ("slurm.conf may name a backup controller, but the heartbeat in StateSaveLocation or the"
                " controllers cannot be read: no object whose clear may be held back is ever cleared (run the"
                " sweep as root or the SlurmUser; slurm-dsl doctor says which file)")
    now = ledger.now()
    marks = ledger.marks(list(unsaved))
    overdue = sorted((j for j, m in marks.items() if m.quiet_at is not None and now - m.quiet_at > KEEP_BOUND),
                     key=int)
    if overdue:
        return (f"{len(overdue)} object(s) kept more than {KEEP_BOUND / 3600:g} h since slurm-dsl's last call on"
                f" their jobs (first: {overdue[0]}): slurmctld's saves of them are not seen; is StateSaveLocation"
                " the directory slurmctld writes?")
    return None


HELD = ("its job shows Requeue=0 or is gone, but a controller may still hold back a call slurm-dsl made on it"
        " (a hand-back in progress, or the controllers could not be read): kept until none can")


def _unsaved(
    ledger: LedgerStore, watch: looks.Watch, hidden: Set[str], clears: List[str], control: Optional[Control] = None,
) -> Dict[str, str]:
    """Of the jobs the lookup says to clear, those not yet known saved, with why (``core.durable``
    Rules 2, 3, 6 and 8): their objects stay, watched without back-off."""
    if not clears:
        return {}
    if watch.why is not None:
        why = f"its job shows Requeue=0 or is gone, but slurmctld's saves cannot be seen ({watch.why}): kept"
        return {job: why for job in clears}
    marks = ledger.marks(clears)
    out = {}
    for job in clears:
        found = marks.get(job, NO_MARKS)
        short = watch.needed(found.quiet, found.quiet_look)
        if short:
            out[job] = (f"its job shows Requeue=0 or is gone, but slurm-dsl's last call on it is not yet known saved"
                        f" ({short} more of slurmctld's saves to see): kept until it is")
        elif job in hidden:
            purge = watch.needed(found.gone, found.gone_look)
            out[job] = (f"its job is gone, but its purge is not yet known saved ({purge} more of slurmctld's saves to"
                        " see): kept until it is")
        elif control is not None and may_be_held(control, found.quiet):
            out[job] = HELD
    return out


def _orphans(
    tracker: Tracker,
    ledger: LedgerStore,
    lookup: SqueueLookup,
    report: SweepReport,
    fix: bool,
    restore_timeout: float,
) -> None:
    """Jobs showing Requeue=1 that the ledger does not track as possibly set, each task on its own
    (docs/contract.md §9.5); ``fix`` restores a live one and makes a finished one an object."""
    try:
        everything = lookup.all_jobs()
    except LookupFailed as exc:
        report.lookup_error = report.lookup_error or exc.reason
        return
    for job_id, info in sorted(everything.items(), key=lambda kv: int(kv[0])):
        if not info.requeue:
            continue
        obj = ledger.get(job_id)
        if obj is not None and obj.bit is not RequeueBit.CLEAR:
            continue
        report.orphans.append(info)
        if fix and info.finished:
            owner = lease_owner(SWEEP_TAG)
            if ledger.acquire_leases([job_id], owner, ledger.now(), 60.0):
                why = f"sweep --orphans: finished ({info.state}) at Requeue=1, not tracked; watched"
                ledger.set_bits([(job_id, RequeueBit.MAY_BE_SET, why)], ledger.now(), owner=owner)
                ledger.release_leases([job_id], owner)
        elif fix:
            actor = f"{tracker.actor}, sweep --orphans --fix"
            report.fixed_orphans.append(tracker.run(Op.RESTORE, job_id, tracker.clock() + restore_timeout, actor=actor))


@dataclass(frozen=True)
class Redone:
    """A keyed operation found lost and its key's run again (``sweep --redo-lost``); ``outcome`` None:
    it did not run (``why``)."""

    lost: HistoryEntry
    outcome: Optional[Outcome]
    why: str = ""

    def to_json(self) -> Dict[str, object]:
        """``sweep --json``'s line for it (``kind`` ``redo``)."""
        return {"kind": "redo", "of": self.lost.id, "job_id": self.lost.job_id, "op": self.lost.op.value,
                "key": self.lost.key, "row": None if self.outcome is None else self.outcome.to_json(),
                **({"why": self.why} if self.why else {})}

    @property
    def redone(self) -> bool:
        """Its row exits ok or bit_set (§12)."""
        return self.outcome is not None and self.outcome.exits_as in (Result.OK, Result.BIT_SET)


def redo_lost(tracker: Tracker, lost: Sequence[settling.Decided], timeout: float, settle_delay: float) -> List[Redone]:
    """Each keyed operation of ``lost`` found ``absent``, its key run again with ``--settle``
    (``run.flow.operate``; docs/contract.md §13.4), one run per op and key of ``timeout`` seconds."""
    absent = {d.entry.id for d in lost if d.settled is not None and d.settled.verdict is Verdict.ABSENT}
    runs: Dict[Tuple[Op, str], Dict[str, HistoryEntry]] = {}
    for job in dict.fromkeys(d.entry.job_id for d in lost if d.entry.id in absent):
        for e in tracker.ledger().history(job):  # the key is not among what settling reads
            if e.id in absent and e.key is not None:
                runs.setdefault((e.op, e.key), {}).setdefault(e.job_id, e)
    return [r for (op, key), entries in runs.items() for r in _redo(tracker, op, key, entries, timeout, settle_delay)]


def _redo(tracker: Tracker, op: Op, key: str, entries: Dict[str, HistoryEntry], timeout: float,
          settle_delay: float) -> List[Redone]:
    from .flow import Asked, operate

    asked = Asked(key=key, settle=True, settle_delay=settle_delay,
                  reason="sweep --redo-lost: operation(s) " + ", ".join(str(e.id) for e in entries.values())
                  + " acknowledged, then lost")
    try:
        rows = list(operate(tracker, op, distinct_ids(entries), tracker.clock() + timeout, asked))
    except DSLError as exc:  # a key or deadline refused: nothing ran
        return [Redone(e, None, str(exc)) for e in entries.values()]
    ran = {ev.outcome.job_id: ev.outcome for ev in rows if isinstance(ev, Ran)}
    stopped = next((str(ev.error) for ev in rows if isinstance(ev, Stopped)), "")
    return [Redone(e, ran.get(job), "" if job in ran else stopped or "no row") for job, e in entries.items()]


def metrics_text(report: SweepReport, not_clear: int, unknown_unsettled: int, lost_not_redone: int = 0,
                 redone: int = 0) -> str:
    """A Prometheus textfile for one sweep (docs/contract.md §9.5, §13.4)."""
    verdicts = settling.counts(report.verdicts)
    lines = [
        "# HELP slurm_dsl_sweep_objects Objects the last sweep handled, by what it did.",
        "# TYPE slurm_dsl_sweep_objects gauge",
    ]
    lines += [f'slurm_dsl_sweep_objects{{done="{k}"}} {v}' for k, v in sorted(report.counts().items())]
    lines += [
        "# HELP slurm_dsl_objects_not_clear Ledger objects whose requeue bit is not clear after the sweep.",
        "# TYPE slurm_dsl_objects_not_clear gauge",
        f"slurm_dsl_objects_not_clear {not_clear}",
        "# HELP slurm_dsl_unknown_unsettled Unknown or unfinished operations without a verdict after the sweep.",
        "# TYPE slurm_dsl_unknown_unsettled gauge",
        f"slurm_dsl_unknown_unsettled {unknown_unsettled}",
        "# HELP slurm_dsl_sweep_lost Acknowledged operations the last sweep found lost in a crash or takeover.",
        "# TYPE slurm_dsl_sweep_lost gauge",
        f"slurm_dsl_sweep_lost {len(report.lost)}",
        "# HELP slurm_dsl_lost_not_redone Acknowledged operations found lost that nothing has redone since"
        " (slurm-dsl history --lost).",
        "# TYPE slurm_dsl_lost_not_redone gauge",
        f"slurm_dsl_lost_not_redone {lost_not_redone}",
        "# HELP slurm_dsl_sweep_redone Lost keyed operations the last sweep ran again under their keys (--redo-lost).",
        "# TYPE slurm_dsl_sweep_redone gauge",
        f"slurm_dsl_sweep_redone {redone}",
        "# HELP slurm_dsl_sweep_verdicts Verdicts the last sweep gave unknown operations (none: not yet).",
        "# TYPE slurm_dsl_sweep_verdicts gauge",
        *(f'slurm_dsl_sweep_verdicts{{verdict="{k}"}} {v}' for k, v in sorted(verdicts.items())),
        "# HELP slurm_dsl_sweep_lookup_failed 1 if the last sweep could not look jobs up.",
        "# TYPE slurm_dsl_sweep_lookup_failed gauge",
        f"slurm_dsl_sweep_lookup_failed {int(report.lookup_error is not None)}",
        "# HELP slurm_dsl_sweep_orphans Jobs showing Requeue=1 that the ledger does not track.",
        "# TYPE slurm_dsl_sweep_orphans gauge",
        f"slurm_dsl_sweep_orphans {len(report.orphans)}",
        "# HELP slurm_dsl_sweep_duration_seconds How long the last sweep took.",
        "# TYPE slurm_dsl_sweep_duration_seconds gauge",
        f"slurm_dsl_sweep_duration_seconds {report.took:.6f}",
        "# HELP slurm_dsl_sweep_last_run_timestamp_seconds When the last sweep finished.",
        "# TYPE slurm_dsl_sweep_last_run_timestamp_seconds gauge",
        f"slurm_dsl_sweep_last_run_timestamp_seconds {report.finished:.3f}",
    ]
    return "\n".join(lines) + "\n"
