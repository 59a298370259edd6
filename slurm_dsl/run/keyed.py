"""Operations that settle their own unknown results, retry what did not happen, and run once per
idempotency key: ``--settle``, ``--retry N``, ``--key KEY`` (docs/contract.md §12 "Keyed and settled runs").

Steps 1-4 here (look back, run, settle, retry) are that section's.  With settling, the calls get the
deadline less the settle delay and ``SETTLE_LOOKUPS``; a row (``driver.Ran``) comes once it is final.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from types import MappingProxyType
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from ..core.durable import Control
from ..core.jobid import JobIds, distinct_ids
from ..core.jobinfo import JobInfo
from ..core.keys import Decision, Earlier, Step, check_key, decide
from ..core.model import DSLError, InvalidInput, LedgerError, LookupFailed, Op, Outcome, Result, Verdict
from ..core.settle import DEFAULT_SETTLE_DELAY, check_settle_delay, delay_of
from ..host import world
from ..host.binaries import find_scontrol, find_squeue
from ..host.runs import boot_clock
from ..ledger.base import LedgerStore
from ..ledger.records import HistoryEntry
from ..lookups import controller
from ..lookups.saves import hand_back_possible
from ..lookups.sight import trusted
from ..lookups.squeue import MAX_LISTED, SQUEUE_TIMEOUT, SqueueLookup
from . import settling
from .calls import unstarted
from .deadlines import check_deadline, earlier
from .driver import Event, Events, Ran, Stopped, drive
from .looks import Watch
from .tracked import Begun, Link, Taken, Tracker
from .tracked import earlier as as_earlier

log = logging.getLogger("slurm_dsl")

POLL = 0.2  # seconds between looks at an earlier operation that may still be running
SETTLE_LOOKUPS = 2.0  # seconds kept for settling's two looks (at once, and after the settle delay)
MIN_CALLS = 1.0  # seconds the calls get at least, with settling
AGAIN = 1.0  # seconds at least between two lookups of one settling


def run_settled(
    tracker: Tracker,
    op: Union[Op, str],
    job_ids: Sequence[Union[str, int]],
    deadline: float,
    *,
    key: Optional[str] = None,
    settle: bool = False,
    retry: int = 0,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
    one_by_one: bool = False,
    parallel: int = 1,
) -> Events:
    """Steps 1-4 for ``op`` on each distinct id of ``job_ids``, as events.  ``InvalidInput`` (a deadline
    too close to leave settling its time included) is raised here, before anything runs."""
    op = Op(op)
    ids = distinct_ids(job_ids)
    key = None if key is None else check_key(key)
    if isinstance(retry, bool) or not isinstance(retry, int) or not 0 <= retry <= 100:
        raise InvalidInput(f"retry must be a whole number from 0 to 100, not {retry!r}")
    delay = check_settle_delay(settle_delay)
    deadline = check_deadline(deadline, tracker.clock)
    settling = settle or retry > 0
    calls_by = deadline
    if settling:
        # The deadline covers settling too: the calls end early enough for one look at once and
        # one after the settle delay, so that a call that hangs until its end is still settled.
        calls_by = earlier(deadline, delay + SETTLE_LOOKUPS, tracker.clock)
        if calls_by - tracker.clock() < MIN_CALLS:
            raise InvalidInput(
                f"--settle and --retry need a deadline at least {delay + SETTLE_LOOKUPS + MIN_CALLS:g} s away (the"
                f" settle delay, {delay:g} s, {SETTLE_LOOKUPS:g} s for two looks, {MIN_CALLS:g} s for the calls),"
                f" not {max(deadline - tracker.clock(), 0.0):.3g} s"
            )
    return _events(_Run(tracker, op, deadline, calls_by, key, delay, one_by_one, parallel), ids, settling, retry)


def _events(run: _Run, ids: JobIds, settling: bool, retry: int) -> Events:
    """Steps 1-4; a ``tracked.Taken`` job goes back to step 1, which reads what the other run did."""
    todo = ids
    while todo:
        act = todo
        if run.key is not None:
            acting: List[str] = []
            for found in run.look_back(todo):
                if isinstance(found, str):
                    acting.append(found)
                else:
                    yield found
            act = ids.pick(acting)
        again: List[str] = []
        for event in run.act(act, settle=settling, retry=retry):
            if isinstance(event, Taken):
                log.info("job %s: %s; looking at its key again", event.job_id, event.detail)
                again.append(event.job_id)
                continue
            yield event
            if isinstance(event, Stopped):
                return  # the ledger failed: nothing more is written (the jobs taken are not started)
        todo = ids.pick(again)


class _Run:
    def __init__(
        self, tracker: Tracker, op: Op, deadline: float, calls_by: float, key: Optional[str], delay: float,
        one_by_one: bool, parallel: int,
    ) -> None:
        self.tracker = tracker
        self.ledger: LedgerStore = tracker.ledger()
        self.op = op
        self.deadline = deadline  # the command's: every look keeps it
        self.calls_by = calls_by  # the calls': earlier, with settling, by the time settling needs
        self.key = key
        self.delay = delay
        self.hand_back = hand_back_possible()  # Rule 13: a backup may hold requests back longer
        self.watch = Watch(self.ledger)  # what is seen of slurmctld's saves (core.durable Rules 2 and 8)
        self.one_by_one = one_by_one
        self.parallel = parallel
        self.by = f"command, {tracker.actor}"

    # -- clocks: the ledger's (every time it stores) and the tracker's (the deadline) ----------

    def left(self) -> float:
        return self.deadline - self.tracker.clock()

    def sleep_until(self, ledger_time: float, by: Optional[float] = None) -> bool:
        """Sleep until ``ledger_time`` (ledger's clock) and say True, if it comes before ``by`` (tracker's
        clock; default: the deadline); else False at once."""
        wait = ledger_time - self.ledger.now()
        if wait >= (self.deadline if by is None else by) - self.tracker.clock():
            return False
        if wait > 0:
            world.sleep(wait)
        return True

    # -- lookups --------------------------------------------------------------------------------

    def look(
        self, job_ids: Sequence[str]
    ) -> Tuple[Optional[Dict[str, Optional[JobInfo]]], Tuple[float, float], Optional[Control]]:
        """One lookup within the deadline: its answers (None: it could not ask; ``settling.confirm_gone``),
        its start on the ledger's and the boot clock, and ``settling.controls`` read before it."""
        self.watch.look()  # before the lookup (core.durable Rules 3 and 8)
        control = settling.controls(self.ledger, self.watch.at)
        looked_at = self.ledger.now(), boot_clock()
        if self.left() <= 0:
            return None, looked_at, control
        answers = self.ask(job_ids)
        # A purge is saved late too: gone once the looks prove it (core.durable Rule 8), within the deadline.
        hidden = settling.confirm_gone(self.ledger, self.watch, job_ids, answers, self.ask,
                                       wait=min(settling.SAVE_WAIT, max(self.left() - 1.0, 0.0)))
        return settling.without(answers, hidden), looked_at, control

    def ask(self, job_ids: Sequence[str]) -> Optional[Dict[str, Optional[JobInfo]]]:
        """One squeue lookup of ``job_ids`` within the deadline (None: it could not ask; ``lookups.sight``)."""
        left = self.left()
        if left <= 0:
            return None
        squeue = find_squeue(self.tracker.squeue, self.tracker.scontrol)
        try:
            answers = SqueueLookup(squeue, timeout=min(SQUEUE_TIMEOUT, left), many=MAX_LISTED).jobs(job_ids)
        except LookupFailed as exc:
            log.warning("settling: could not look jobs up: %s; no verdict from this look", exc.reason)
            return None
        answers, blind = trusted(answers, find_scontrol(self.tracker.scontrol))
        if blind is not None:
            log.warning("settling: %s", blind.gone_note(len(job_ids) - len(answers)))
        return answers

    def settle(
        self, entries: Sequence[HistoryEntry], acknowledged: Sequence[HistoryEntry] = ()
    ) -> Dict[int, Optional[Verdict]]:
        """Settle ``entries`` in one lookup and record the verdicts; each one's verdict (None: not now).
        ``acknowledged``: read again in it (docs/contract.md §13.4); only their lost verdicts are recorded."""
        out: Dict[int, Optional[Verdict]] = {e.id: e.settlement.verdict for e in entries if e.settlement is not None}
        todo = [e for e in entries if e.settlement is None]
        if not todo and not acknowledged:
            return out
        answers, (looked_at, booted), control = self.look(list(dict.fromkeys(e.job_id for e in (*todo, *acknowledged))))
        ctl = None if answers is None else settling.in_control(  # after the lookup (core.settle Rule 16)
            find_scontrol(self.tracker.scontrol), [*todo, *acknowledged], min(controller.TIMEOUT, self.left()))
        try:
            decided = settling.decide(self.ledger, todo, answers, looked_at, self.delay, control, anchor=self.watch,
                                      booted=booted, controller=ctl)
            again = settling.recheck(self.ledger, acknowledged, answers, looked_at, self.delay, booted=booted,
                                     controller=ctl)
            for d in again:
                out[d.entry.id] = None if d.settled is None else d.settled.verdict
            decided += [d for d in again if d.settled is not None and d.settled.verdict in (Verdict.ABSENT,
                                                                                            Verdict.GONE)]
            written = settling.write(self.ledger, decided, self.ledger.now(), by=self.by)
        except LedgerError as exc:
            # No verdict is kept that the ledger did not take: these stay unsettled (the sweep
            # settles them later) and their rows say no effect.
            log.warning("settling: could not record verdicts in %s: %s", self.ledger.path, exc)
            return {e.id: out.get(e.id) for e in entries}
        for d in decided:
            out[d.entry.id] = None if d.settled is None else d.settled.verdict
        # Every verdict written is the ledger's, final: what was written is what a re-read would
        # find.  One not written means another settler was first (or the row was settled since
        # it was read): the ledger's verdict is the final one, read back.
        if written < sum(1 for d in decided if d.settled is not None):
            for job in dict.fromkeys(e.job_id for e in todo):
                for e in self.ledger.history(job):
                    if e.id in out and e.settlement is not None:
                        out[e.id] = e.settlement.verdict
        return out

    # -- step 1: keyed ---------------------------------------------------------------------------

    def look_back(self, ids: Sequence[str]) -> Iterator[Union[str, Event]]:
        """Each job to act on (its id), or its final row (a ``Ran``), by ``core.keys.decide``."""
        assert self.key is not None
        waiting = ids
        while waiting:
            earlier = self.ledger.keyed(waiting, self.op, self.key)
            seen = [j for j in waiting if j in earlier]
            unsettled = self.ledger.unsettled(self.ledger.now(), job_ids=seen) if seen else []
            running = settling.still_running(self.ledger, unsettled)  # a run known alive is not over
            unsettled = [e for e in unsettled if e.id not in running]
            # ``unsettled`` of the jobs that have earlier keyed rows: those of them no longer running.
            # It holds their rows of any op and key too; ``lapsed`` is only ever asked about the
            # keyed rows' own ids (here and in ``_earlier``), so the others in it are never read.
            lapsed = {e.id for e in unsettled}
            to_settle = [e for j in waiting for e in earlier.get(j, []) if e.id in lapsed and e.settlement is None]
            # Those slurmctld acknowledged are read again in the same lookup: a controller that died
            # before saving them, or a backup that took over, may have lost them (§13.4).
            acknowledged = [e for j in waiting for e in earlier.get(j, [])
                            if e.settlement is None and as_earlier(self.op, e).took_effect is True]
            verdicts = self.settle(to_settle, acknowledged) if to_settle or acknowledged else {}
            again: List[str] = []
            due: List[float] = []
            for job in waiting:
                rows = earlier.get(job, [])
                decision = decide(self.op, [self._earlier(e, lapsed, verdicts) for e in rows])
                if decision.step is Step.ACT:
                    yield job
                elif decision.step is Step.WAIT:
                    again.append(job)
                    due.append(self._due(next(e for e in rows if e.id == decision.because)))
                else:
                    yield Ran(self._earlier_row(job, rows, decision, verdicts))
            if not again:
                return
            if not self.sleep_until(min(due), by=self.calls_by):  # waiting longer, nothing could run
                for job in again:
                    yield Ran(replace(
                        unstarted(self.op, job),
                        detail=f"an earlier {self.op.value} with key {self.key} may still act or is not settled"
                        " yet: nothing ran (run it again later)",
                        settled=True,
                    ))
                return
            waiting = again

    def _earlier(self, e: HistoryEntry, lapsed: Set[int], verdicts: Dict[int, Optional[Verdict]]) -> Earlier:
        running = e.result is None and e.id not in lapsed and e.settlement is None
        return as_earlier(self.op, e, running=running, verdict=verdicts.get(e.id), settled=e.id in verdicts)

    def _due(self, e: HistoryEntry) -> float:
        """When looking again at ``e`` can decide it (ledger's clock): its settle delay
        (``core.settle.delay_of``) after its end, at least a short poll from now."""
        end = e.finished_at if e.finished_at is not None else (e.ends_by or e.started_at + settling.NO_ENDS_BY_BOUND)
        return max(end + delay_of(e.result, e.reason, self.delay, hand_back=self.hand_back), self.ledger.now() + POLL)

    def _earlier_row(
        self, job: str, rows: List[HistoryEntry], decision: Decision, verdicts: Dict[int, Optional[Verdict]]
    ) -> Outcome:
        e = next(r for r in rows if r.id == decision.because)
        verdict = verdicts.get(e.id) if e.id in verdicts else (e.settlement.verdict if e.settlement else None)
        result = e.result or Result.UNKNOWN
        detail = decision.detail
        if verdict in (Verdict.ABSENT, Verdict.GONE) and result is not Result.UNKNOWN:
            # Acknowledged, then lost (§13.4: its job gone with slurmctld's state, or the change
            # undone): its ok is not this run's answer; the row exits by the verdict.
            result, detail = Result.UNKNOWN, f"{detail}; it was acknowledged ({result.value}), then lost"
        return Outcome(
            self.op, job, result, e.requeue_bit, e.reason, (), e.exit_status, detail,
            effect=verdict if result is Result.UNKNOWN else None, settled=True,
        )

    # -- steps 2-4: run, settle, retry ----------------------------------------------------------

    def act(self, ids: JobIds, *, settle: bool, retry: int) -> Iterator[Union[Event, Taken]]:
        if not ids:
            return
        first: Dict[str, int] = {}  # job -> the history id of its first run here
        runs = 0
        todo = ids
        link = Link(self.key)  # the key checked once, by ``run_settled``: not again per run
        held: Dict[str, Outcome] = {}  # the last row of each job about to run again
        while todo:
            begun: Begun = {}  # each job's history id in this run, as its intent is committed
            unknown: List[Outcome] = []
            stopped: Optional[Stopped] = None
            try:
                for event in drive(self.tracker, self.op, todo, self.calls_by, one_by_one=self.one_by_one,
                                          parallel=self.parallel, link=link, begun=begun):
                    if isinstance(event, Stopped):
                        stopped = event
                        continue
                    if isinstance(event, Taken):
                        held.pop(event.job_id, None)  # its look-back again prints its row
                        yield event
                        continue
                    held.pop(event.outcome.job_id, None)
                    if settle and event.recorded and event.outcome.result is Result.UNKNOWN:
                        unknown.append(event.outcome)
                    elif settle:
                        yield replace(event, outcome=replace(event.outcome, settled=True))
                    else:
                        yield event
            except DSLError:
                # A retry that could not start (its lookup failed, the ledger refused its intents):
                # the jobs keep the rows of their last run, which did happen.
                yield from (Ran(row) for row in held.values())
                raise
            yield from (Ran(row) for row in held.values())  # a retry that ran nothing for them
            held = {}
            if stopped is not None:
                # The ledger failed: nothing more is written, every row that ran is printed.
                yield from (Ran(replace(o, settled=True)) for o in unknown)
                yield stopped
                return
            if not unknown:
                return
            mine = self._own(unknown, begun)
            for outcome in unknown:
                if outcome.job_id in mine:
                    first.setdefault(outcome.job_id, mine[outcome.job_id].id)
            verdicts = self._settle_own(mine)
            retry_now: List[str] = []
            for outcome in unknown:
                entry = mine.get(outcome.job_id)
                verdict = None if entry is None else verdicts.get(entry.id)
                row = replace(outcome, effect=verdict, settled=True)
                # Only absent runs again: never undecidable or gone (a requeue must never run twice).
                if (verdict is Verdict.ABSENT and runs < retry and self.calls_by > self.tracker.clock()
                        and outcome.job_id in first):
                    retry_now.append(outcome.job_id)
                    held[outcome.job_id] = row
                else:
                    yield Ran(row)
            todo = ids.pick(retry_now)
            link = Link(self.key, MappingProxyType({j: first[j] for j in retry_now}))
            runs += 1

    def _own(self, outcomes: Sequence[Outcome], begun: Begun) -> Dict[str, HistoryEntry]:
        """This run's own history row of each job, by the history ids in ``begun``, in one read."""
        found = self.ledger.operations([begun[o.job_id] for o in outcomes if o.job_id in begun])
        return {e.job_id: e for e in found.values()}

    def _settle_own(self, mine: Dict[str, HistoryEntry]) -> Dict[int, Optional[Verdict]]:
        """Look at once, then again once the settle delay has passed since the last of them ended."""
        entries = list(mine.values())
        verdicts = self.settle(entries)
        while True:
            waiting = [e for e in entries if verdicts.get(e.id) is None]
            if not waiting:
                return verdicts
            # A look that could not ask is not repeated at once: slurmctld may be down.
            due = max(max(self._due(e) for e in waiting), self.ledger.now() + AGAIN)
            if not self.sleep_until(due):
                return verdicts
            # Re-read, in one read: the rows as the ledger has them now (another settler may have
            # been first).
            now = self.ledger.operations([e.id for e in waiting])
            verdicts.update(self.settle(list(now.values())))
