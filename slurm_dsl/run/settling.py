"""Settling the ledger's unknown operations by ``core.settle``'s rules, for every sweep and ``slurm-dsl settle``
(docs/contract.md §12 "Where it runs", §13.4).

The order keeps a verdict honest: the operations, then ONE lookup (``looked_at``: its start), and
only then their later operations.  A lookup that could not ask settles nothing; a dry run writes nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

from ..core import life
from ..core.durable import UNREAD, Beat, Control, next_acknowledged_from
from ..core.jobinfo import JobInfo, Lookup
from ..core.ledger_rules import sweep_owned
from ..core.model import InvalidInput, LookupFailed, Op, Result, Verdict
from ..core.script import KILL_GRACE
from ..core.settle import (
    DEFAULT_SETTLE_DELAY,
    GONE_DETAIL,
    OneLookup,
    Recorded,
    Settled,
    Unsettled,
    exits_as,
    looked_up,
)
from ..host.runs import between, boot_clock, observer, owner_alive, owner_run
from ..host.runs import since as since_ended
from ..ledger.base import Alive, LedgerStore, Marks
from ..ledger.records import HistoryEntry, iso_utc, job_info_json
from ..lookups import controller as controllers
from ..lookups.saves import hand_back_possible, read_controllers, slurm_conf, state_save_location
from ..lookups.sight import trusted
from .calls import GUARD_MARGIN
from .deadlines import MAX_TIMEOUT
from .looks import Place, Watch, place

log = logging.getLogger("slurm_dsl")

DAY = 86400.0
SINCE_DAYS = 7  # a sweep, and ``settle`` without job ids, settle the operations of the last 7 days
DEFAULT_LIMIT = 10_000  # at most so many operations per sweep (newest first; the rest the next sweep)
# How long after its start an unfinished row without ``ends_by`` (written before it was recorded)
# may still have had a process running: the longest deadline, the kill grace, the backstop's margin
# (core.settle Rule 9).
NO_ENDS_BY_BOUND = MAX_TIMEOUT + KILL_GRACE + GUARD_MARGIN


# An operation to settle: as ``LedgerStore.to_settle`` or ``unsettled`` gives it, or a whole history row.
Operation = Union[Unsettled, Recorded, HistoryEntry]


def recorded(entry: Union[Recorded, HistoryEntry]) -> Recorded:
    """The plain values the core's rules read of one history row."""
    if isinstance(entry, Recorded):
        return entry
    return Recorded(
        id=entry.id, job_id=entry.job_id, op=entry.op, result=entry.result, started_at=entry.started_at,
        finished_at=entry.finished_at, ends_by=entry.ends_by, baseline=entry.baseline,
        baseline_at=entry.baseline_at, requeue_bit=entry.requeue_bit, reason=entry.reason,
        baseline_ctl=entry.baseline_ctl, calls_ctl=entry.calls_ctl,
    )


class Decided(NamedTuple):
    """One operation and the verdict this settling gives it (None: not now)."""

    entry: Operation
    settled: Optional[Settled]

    def to_json(self) -> Dict[str, Any]:
        """``sweep --json``'s line for it (``kind`` ``verdict``)."""
        s = self.settled
        return {
            "kind": "verdict",
            "job_id": self.entry.job_id,
            "id": self.entry.id,
            "op": self.entry.op.value,
            "verdict": None if s is None else s.verdict.value,
            "detail": "no verdict yet: look again later" if s is None else s.detail,
        }


def controls(ledger: LedgerStore, at: Optional[Place] = None, *, keep: bool = True) -> Optional[Control]:
    """The controllers as read now, before a lookup or a clear (``core.settle`` Rule 14); None where
    slurm.conf names one controller.  The heartbeat's look is kept in the ledger unless not ``keep``."""
    conf = slurm_conf()
    if not hand_back_possible(conf=conf):
        return None
    where = at or place(state_save_location(conf=conf))
    read = read_controllers(location=where.location, conf=conf) if where.location is not None else None
    if read is None or read.beat is None or read.writer is None:
        return UNREAD
    now = boot_clock()
    beat = read.beat
    kept = ledger.look_at_heartbeat(f"{where.observer}/heartbeat", lambda: (beat, now) if keep else None)
    beats = tuple(Beat(place_, seen, _writer(seen), when) for place_, seen, when in kept)
    return Control(read.writer, read.listening, beats, read.held_for, now)


def in_control(
    scontrol: str, operations: Sequence[Union[Unsettled, Recorded, HistoryEntry]], timeout: float = controllers.TIMEOUT,
) -> Optional[str]:
    """Which slurmctld is in control, read after a lookup that settles a requeue (Rule 16); None: none
    of ``operations`` is a requeue, or it cannot be told."""
    if not any(Op(o.op).requeues for o in operations):
        return None
    return controllers.in_control(scontrol, timeout)


def _writer(seen: str) -> int:
    """The writer's index kept with a heartbeat's look (``identity#writer``; -1: none)."""
    writer = seen.rpartition("#")[2]
    return int(writer) if writer.isdigit() else -1


def known_alive(ledger: LedgerStore) -> Alive:
    """Whether a lease's holder is known alive: by its processes, else by its run lock on the ledger (§13.7)."""

    def alive(owner: str) -> Optional[bool]:
        found = owner_alive(owner)
        run = owner_run(owner)
        if found is None and run is not None:
            return ledger.run_locked(run)
        return found

    return alive


def alive_before(ledger: LedgerStore, job_ids: Sequence[str]) -> Alive:
    """``known_alive``, asked now for the holders of ``job_ids``' lapsed leases, so that the write lock is
    not held while it looks; a kept answer stays right or errs towards waiting."""
    told = known_alive(ledger)
    lapsed = ledger.lease_holders(job_ids, lapsed_at=ledger.now())  # a lease not lapsed holds anyway
    asked = {holder: told(holder) for holder in set(lapsed.values())}
    return lambda holder: asked[holder] if holder in asked else told(holder)


def still_running(ledger: LedgerStore, entries: Sequence[Operation]) -> Set[int]:
    """The unfinished operations of ``entries`` whose job's lease, expired or not, is held by a run
    known alive (docs/contract.md §13.7)."""
    unfinished = [e for e in entries if e.result is None]
    if not unfinished:
        return set()
    # A sweep's lease is no operation's: a sweep takes a job only from a run not known alive.
    holders = {job: holder for job, holder in ledger.lease_holders([e.job_id for e in unfinished]).items()
               if not sweep_owned(holder)}
    told = known_alive(ledger)
    alive = {holder: told(holder) for holder in set(holders.values())}
    return {e.id for e in unfinished if e.job_id in holders and alive[holders[e.job_id]] is True}


def decide(
    ledger: LedgerStore,
    entries: Sequence[Operation],
    answers: Optional[Mapping[str, Optional[JobInfo]]],
    looked_at: float,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
    control: Optional[Control] = UNREAD,
    *,
    anchor: Optional[Watch] = None,
    booted: Optional[float] = None,
    controller: Optional[str] = None,
) -> List[Decided]:
    """Each operation's verdict from one lookup's ``answers`` (None: it could not ask), made at ``looked_at``
    (``booted``: the boot clock then); ``control``: ``controls`` before it, ``controller``: ``in_control``
    after it.  Writes only marks of ends, with ``anchor``'s look (none without ``anchor``)."""
    if not entries:
        return []
    if answers is None:
        return [Decided(e, None) for e in entries]  # a lookup that could not ask settles nothing
    later = ledger.later_operations([e.id for e in entries])
    try:
        one = OneLookup(looked_at, no_ends_by_bound=NO_ENDS_BY_BOUND, settle_delay=settle_delay,
                        hand_back=hand_back_possible(), control=control or UNREAD, controller=controller)
    except InvalidInput as exc:
        # As each operation would be refused: none is settled, the journal says why.
        log.warning("cannot settle %d operations: %s", len(entries), exc)
        return [Decided(e, None) for e in entries]
    plain = [recorded(e) if isinstance(e, HistoryEntry) else e for e in entries]
    at_once = one.gone_at_once(plain, answers, later.keys())
    again = [e.id for e, quick in zip(entries, at_once) if not quick and isinstance(e, Unsettled)]
    whole = ledger.recorded(again) if again else {}
    slow = [e.id for e, quick in zip(entries, at_once) if not quick]
    marks = _marks(ledger, slow, anchor) if one.hand_back else {}
    ends = ends_of(ledger, slow)
    spans = elapsed(ledger, slow, booted, ends, keep=anchor is not None)
    before = read_after(ends, later)
    decided, gone = [], one.gone
    for entry, quick in zip(entries, at_once):
        if quick:
            decided.append(Decided(entry, gone))
            continue
        operation = whole.get(entry.id) if isinstance(entry, Unsettled) else recorded(entry)
        if operation is None or operation.result not in (None, Result.UNKNOWN):
            decided.append(Decided(entry, None))  # gone from the ledger, or finished meanwhile
            continue
        try:
            looked = looked_up(answers, entry.job_id)
            exact, seen = _spans(spans.get(entry.id))
            settled = one.settle(operation, [recorded(o) for o in later.get(entry.id, ())], looked,
                                 marks.get(entry.id), exact, seen, before.get(entry.id, {}))
        except InvalidInput as exc:
            # A row the rules refuse (a baseline of another job, a time that is no number) is a
            # ledger's fault, not this sweep's: it stays unsettled, and the journal says why.
            log.warning("cannot settle operation %s (job %s): %s", entry.id, entry.job_id, exc)
            settled = None
        decided.append(Decided(entry, settled))
    return decided


def _marks(ledger: LedgerStore, op_ids: Sequence[int], anchor: Optional[Watch]) -> Dict[int, int]:
    """Where the looks stood once each operation was over; one without gets one now, with ``anchor``'s."""
    if not op_ids:
        return {}
    found = ledger.op_marks(op_ids)
    missing = [i for i in op_ids if i not in found]
    if missing and anchor is not None:
        ledger.anchor_operations(missing, anchor.own())
        found.update(ledger.op_marks(missing))
    return {i: mark for i, (mark, _) in found.items()}


class Since(NamedTuple):
    """Seconds since an operation's end on this host's boot clock: ``exact``, or no more than that."""

    seconds: float
    exact: bool


def _spans(span: Optional[Since]) -> Tuple[Optional[float], Optional[float]]:
    """``span`` as ``core.settle.OneLookup.settle`` takes it: ``elapsed`` and ``seen``."""
    if span is None:
        return None, None
    return (span.seconds, None) if span.exact else (None, span.seconds)


def elapsed(
    ledger: LedgerStore, op_ids: Sequence[int], booted: Optional[float], ends: Mapping[int, Optional[str]], *,
    keep: bool = True,
) -> Dict[int, Since]:
    """The seconds since each operation's end at ``booted`` on this host's boot clock (Rule 15): exact
    where it ended here in this boot, else since this host first found it over (kept unless not ``keep``).
    Empty where the boot cannot be told.  ``ends``: ``ends_of`` the same operations."""
    here = observer()
    if booted is None or not op_ids or here is None:
        return {}
    found = {}
    for op_id, ended in ends.items():
        seconds = since_ended(ended, booted)
        if seconds is not None:
            found[op_id] = Since(seconds, True)
    rest = [i for i in op_ids if i not in found]
    if rest:
        found.update((op_id, Since(booted - first, False))
                     for op_id, first in ledger.seen_over(rest, here, booted, keep=keep).items())
    return found


def ends_of(ledger: LedgerStore, op_ids: Sequence[int]) -> Dict[int, Optional[str]]:
    """Where and when each operation ended on a boot clock (``LedgerStore.op_ends``; None: not kept)."""
    return {op_id: ended for op_id, (_, _, ended) in ledger.op_ends(op_ids).items()} if op_ids else {}


def read_after(
    ends: Mapping[int, Optional[str]], later: Mapping[int, Sequence[HistoryEntry]]
) -> Dict[int, Dict[int, float]]:
    """For each operation, the seconds from its end to each later one's record lookup, where one boot
    clock measured both (Rule 15); the others are left out."""
    out: Dict[int, Dict[int, float]] = {}
    for op_id, others in later.items():
        found = {}
        for other in others:
            seconds = between(ends.get(op_id), other.baseline_boot)
            if seconds is not None:
                found[other.id] = seconds
        out[op_id] = found
    return out


def acknowledged_from(ledger: LedgerStore) -> int:
    """The history id the last sweep got to in reading acknowledged operations again (1: none)."""
    last = ledger.last_sweep()
    found = None if last is None else last.summary.get("acknowledged_from")
    return found if type(found) is int and found > 0 else 1


def recheck(
    ledger: LedgerStore,
    entries: Sequence[Union[Recorded, HistoryEntry]],
    answers: Optional[Mapping[str, Optional[JobInfo]]],
    looked_at: float,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
    *,
    booted: Optional[float] = None,
    keep: bool = True,
    controller: Optional[str] = None,
) -> List[Decided]:
    """Acknowledged operations read again from one lookup, as ``decide`` (docs/contract.md §13.4):
    ``absent`` is "acknowledged, then lost".  Writes only ``elapsed``'s first sightings, with ``keep``."""
    if not entries or answers is None:
        return [Decided(e, None) for e in entries]
    later = ledger.later_operations([e.id for e in entries])
    one = OneLookup(looked_at, no_ends_by_bound=NO_ENDS_BY_BOUND, settle_delay=settle_delay, controller=controller)
    ends = ends_of(ledger, [e.id for e in entries])
    spans = elapsed(ledger, [e.id for e in entries], booted, ends, keep=keep)
    before = read_after(ends, later)
    decided = []
    for entry in entries:
        try:
            exact, seen = _spans(spans.get(entry.id))
            settled = one.settle(recorded(entry), [recorded(o) for o in later.get(entry.id, ())],
                                 looked_up(answers, entry.job_id), elapsed=exact, seen=seen,
                                 before=before.get(entry.id, {}))
        except InvalidInput as exc:
            log.warning("cannot read operation %s (job %s) again: %s", entry.id, entry.job_id, exc)
            settled = None
        decided.append(Decided(entry, settled))
    return decided


LOST_VERDICTS = life.LOST_VERDICTS  # the verdicts the ledger takes on an acknowledged one (S12)
ACKNOWLEDGED = (Result.OK, Result.BIT_SET)  # the results read again after a crash (core.settle Rule 12)


class Reread(NamedTuple):
    """The acknowledged operations read again (docs/contract.md §13.4): verdicts, those ``done`` with,
    and the lowest history id to read again next time (``mark``)."""

    decided: List[Decided]
    done: Set[int]
    mark: int

    @property
    def lost(self) -> List[Decided]:
        """Those found lost (or gone): the verdicts to write."""
        return [d for d in self.decided if d.settled is not None and d.settled.verdict in LOST_VERDICTS]


def reread(
    ledger: LedgerStore,
    rows: Sequence[Recorded],
    answers: Optional[Mapping[str, Optional[JobInfo]]],
    looked_at: float,
    settle_delay: float,
    watch: Watch,
    *,
    mark: int,
    now: float,
    write: bool = True,
    booted: Optional[float] = None,
    controller: Optional[str] = None,
) -> Reread:
    """``recheck`` of ``rows`` (``LedgerStore.acknowledged`` from ``mark``, read at ``now``), after
    ``watch``'s looks; a ``present`` is done once they prove its end saved.  Unless ``write``, no marks."""
    finished = [r for r in rows if r.result is not None]
    decided = recheck(ledger, finished, answers, looked_at, settle_delay, booted=booted, keep=write,
                      controller=controller)
    present = [d.entry.id for d in decided if d.settled is not None and d.settled.verdict is Verdict.PRESENT]
    marks = ledger.op_marks(present) if present else {}
    if write and len(marks) < len(present):
        ledger.anchor_operations([i for i in present if i not in marks], watch.own())
    done: Set[int] = set()
    for d in decided:
        s = d.settled
        if s is None:
            continue
        found = marks.get(d.entry.id)
        if s.verdict is not Verdict.PRESENT or s.from_operation is not None or (
            found is not None and watch.saved(*found)
        ):
            done.add(d.entry.id)
    after = next_acknowledged_from(mark, [(r.id, r.started_at, r.id in done) for r in rows], now)
    return Reread(decided, done, after)


# Seconds a settling waits at most for the saves that prove a purge (core.durable Rule 8): two of
# slurmctld's save windows (5 s each) and one second more.
SAVE_WAIT = 11.0

Answers = Dict[str, Optional[JobInfo]]


def confirm_gone(
    ledger: LedgerStore, watch: Watch, asked: Sequence[str], answers: Optional[Answers],
    ask: Callable[[Sequence[str]], Optional[Answers]], *, wait: float = SAVE_WAIT, write: bool = True,
) -> Set[str]:
    """The jobs ``answers`` says are gone whose purge is not yet known saved (``core.durable`` Rule 8),
    after up to ``wait`` seconds of looks and one more lookup (``ask``, its records put in ``answers``).
    Unless ``write``, nothing is written or waited for."""
    if answers is None or not asked:
        return set()
    gone = [j for j in asked if j in answers and answers[j] is None]
    if write:
        _mark(ledger, watch, asked, answers)
    short = _unproven(ledger, watch, gone)
    if not short or not write or wait <= 0:
        return set(short)
    anchors = ledger.anchors(short, quiet=False)
    watch.wait(lambda: all(watch.needed(*a) == 0 for a in anchors), wait)
    again = ask(short) if all(watch.needed(*a) == 0 for a in anchors) else None
    if again is None:
        return set(short)
    answers.update((j, again[j]) for j in short if j in again)
    _mark(ledger, watch, short, again)
    return set()  # still gone after the looks that prove the purge, or shown again


def _unproven(ledger: LedgerStore, watch: Watch, gone: Sequence[str]) -> List[str]:
    """The jobs of ``gone`` whose gone mark ``watch``'s looks do not prove (Rule 8)."""
    if not gone:
        return []
    anchors = ledger.anchors(gone, quiet=False)
    open_ = {a for a in anchors if watch.needed(*a) > 0}
    if not open_:
        return []
    if open_ == anchors:
        return list(gone)
    marks = ledger.marks(gone)
    return [j for j in gone if not _proven(watch, marks.get(j))]


def _mark(ledger: LedgerStore, watch: Watch, asked: Sequence[str], answers: Mapping[str, Optional[JobInfo]]) -> None:
    """Gone marks for the jobs ``answers`` say are gone (where they have none), none for those it shows."""
    gone = [j for j in asked if j in answers and answers[j] is None]
    shown = [j for j in asked if answers.get(j) is not None]
    if gone:
        ledger.mark_gone(gone, watch.own())
    if shown:
        ledger.forget_gone(shown)


def _proven(watch: Watch, marks: Optional[Marks]) -> bool:
    """Whether ``watch``'s looks prove a job's gone mark (Rule 8)."""
    return marks is not None and marks.gone is not None and watch.saved(marks.gone, marks.gone_look)


def without(answers: Optional[Answers], hidden: Set[str]) -> Optional[Answers]:
    """``answers`` without the jobs of ``hidden``, as if not answered for: no verdict is read from them."""
    if answers is None or not hidden:
        return answers
    return {j: v for j, v in answers.items() if j not in hidden}


def write(ledger: LedgerStore, decided: Sequence[Decided], now: float, *, by: str) -> int:
    """Append the verdicts given, in one transaction; how many were written (a verdict there stays)."""
    verdicts: List[Tuple[int, Verdict, float, Optional[JobInfo], str]] = []
    gone: Dict[float, List[int]] = {}
    shared: Optional[Settled] = None  # the last gone one seen: a sweep's are all one object
    for d in decided:
        s = d.settled
        if s is None:
            continue
        if s is shared or (
            s.verdict is Verdict.GONE and s.record is None and s.from_operation is None and s.detail == GONE_DETAIL
        ):
            shared = s
            gone.setdefault(s.looked_at, []).append(d.entry.id)
        else:
            verdicts.append((d.entry.id, s.verdict, s.looked_at, s.record, s.detail))
    if not verdicts and not gone:
        return 0
    gone_at, gone_ids = next(iter(gone.items()), (0.0, []))
    for at, ids in list(gone.items())[1:]:  # another lookup's (never in a sweep): as tuples
        verdicts += [(op_id, Verdict.GONE, at, None, GONE_DETAIL) for op_id in ids]
    return ledger.add_settlements(verdicts, now, by=by, gone=gone_ids, gone_at=gone_at)


def counts(decided: Sequence[Decided]) -> Dict[str, int]:
    """How many operations got each verdict, and how many none yet (``none``)."""
    found = Counter(None if d.settled is None else d.settled.verdict for d in decided)
    out = {v.value: found[v] for v in Verdict}
    out["none"] = found[None]
    return out


# -- slurm-dsl settle: one row per operation ------------------------------------------------------

NOW, EARLIER, NOT_YET, RUNNING = "now", "earlier", "not_yet", "running"


@dataclass(frozen=True)
class Row:
    """One operation as ``slurm-dsl settle`` shows it; ``when``: ``NOW``, ``EARLIER``, ``NOT_YET`` or ``RUNNING``."""

    entry: Operation
    when: str
    verdict: Optional[Verdict] = None
    detail: str = ""
    looked_at: Optional[float] = None
    record: Optional[JobInfo] = None
    settled_at: Optional[float] = None
    by: Optional[str] = None

    @property
    def result(self) -> Result:
        """What the row exits as (docs/contract.md §12); an unfinished operation counts as unknown."""
        e = self.entry
        bit = None if isinstance(e, Unsettled) else e.requeue_bit
        result = e.result or Result.UNKNOWN
        if result in ACKNOWLEDGED:
            # Acknowledged, then lost (docs/contract.md §13.4): the effect is not there, as an
            # unknown row's whose effect is absent (or gone); read again and not lost, as it was.
            if self.verdict not in LOST_VERDICTS:
                return result
            result = Result.UNKNOWN
        return exits_as(result, self.verdict, op=e.op, requeue_bit=bit)

    def to_json(self) -> Dict[str, Any]:
        e = self.entry
        return {
            "kind": "settle",
            "job_id": e.job_id,
            "id": e.id,
            "op": e.op.value,
            "started_at": iso_utc(e.started_at),
            "started_at_epoch": e.started_at,
            "result": None if e.result is None else e.result.value,
            "effect": None if self.verdict is None else self.verdict.value,
            "detail": self.detail or None,
            "settled": self.when,
            "settled_at": None if self.settled_at is None else iso_utc(self.settled_at),
            "settled_at_epoch": self.settled_at,
            "looked_at": None if self.looked_at is None else iso_utc(self.looked_at),
            "looked_at_epoch": self.looked_at,
            "record": job_info_json(self.record),
            "by": self.by,
        }


def _asked_again(lookup: Lookup, ids: Sequence[str], scontrol: str) -> Optional[Answers]:
    """A second lookup of ``ids`` (``confirm_gone``'s), its "gone" trusted as the first one's."""
    try:
        answers, _ = trusted(lookup.jobs(list(ids)), scontrol)
    except LookupFailed as exc:
        log.warning("could not look jobs up again: %s", exc.reason)
        return None
    return answers


def stored_row(entry: HistoryEntry) -> Row:
    """An operation as the ledger has it: settled earlier, or not (yet)."""
    s = entry.settlement
    if s is None:
        return Row(entry, NOT_YET)
    return Row(entry, EARLIER, s.verdict, s.detail, s.looked_at, s.record, s.settled_at, s.by)


@dataclass
class SettleReport:
    """What ``settle_rows`` found; ``lookup_error`` None: the lookup could ask, or none was needed."""

    rows: List[Row] = field(default_factory=list)
    no_record: List[str] = field(default_factory=list)
    lookup_error: Optional[str] = None
    asked: int = 0
    unseen: Optional[str] = None  # "gone" answers not trusted (lookups.sight), and whom to run as


def settle_rows(
    ledger: LedgerStore,
    lookup: Lookup,
    *,
    job_ids: Optional[Sequence[str]],
    since: float,
    settle_delay: float,
    by: str,
    scontrol: str,
) -> SettleReport:
    """``slurm-dsl settle`` (docs/contract.md §10, §12, §13.4): the operations of ``job_ids`` (any age),
    or the ledger's unsettled ones since ``since``, settled in one ``lookup`` call and written ``by``.
    Rows oldest first, per job in the order given."""
    now = ledger.now()
    todo = ledger.unsettled(now, job_ids=job_ids) if job_ids is not None else ledger.unsettled(now, since=since)
    running = still_running(ledger, todo)
    todo = [e for e in todo if e.id not in running]
    todo_ids = {e.id for e in todo}
    report = SettleReport()
    acknowledged: List[Union[Recorded, HistoryEntry]] = []
    if job_ids is not None:
        entries: List[Operation] = []
        for job in job_ids:
            history = ledger.history(job)
            if not history:
                report.no_record.append(job)
            # An acknowledged one too once it is found lost (its row is kept below, in its place).
            entries += [e for e in history if e.result in (None, Result.UNKNOWN) or e.result in ACKNOWLEDGED]
            acknowledged += [e for e in history if e.result in ACKNOWLEDGED and e.settlement is None]
    else:
        entries = sorted(todo, key=lambda e: e.id)
        acknowledged += [e for e in ledger.acknowledged(acknowledged_from(ledger), since, DEFAULT_LIMIT)
                         if e.result is not None]
    asked = list(dict.fromkeys([*(e.job_id for e in todo), *(e.job_id for e in acknowledged)]))
    answers: Optional[Mapping[str, Optional[JobInfo]]] = {}
    watch = Watch(ledger)
    watch.look()  # before the lookup: a gone job's purge is proven saved by looks before it (core.durable Rule 8)
    control = controls(ledger, watch.at) if todo else None  # before the lookup (core.settle Rule 14)
    looked_at, booted = ledger.now(), boot_clock()
    if asked:
        try:
            answers, blind = trusted(lookup.jobs(asked), scontrol)
        except LookupFailed as exc:
            report.lookup_error = exc.reason
            answers = None
        else:
            if blind is not None:
                report.unseen = blind.gone_note(len(asked) - len(answers))
    found = None if answers is None else dict(answers)
    answers = without(found, confirm_gone(ledger, watch, asked, found, lambda ids: _asked_again(lookup, ids, scontrol)))
    ctl = None if answers is None else in_control(scontrol, [*todo, *acknowledged])  # after the lookup (Rule 16)
    decided = {d.entry.id: d for d in decide(ledger, todo, answers, looked_at, settle_delay, control, anchor=watch,
                                                   booted=booted, controller=ctl)}
    lost = [d for d in recheck(ledger, acknowledged, answers, looked_at, settle_delay, booted=booted, controller=ctl)
            if d.settled is not None and d.settled.verdict in LOST_VERDICTS]
    decided.update((d.entry.id, d) for d in lost)
    if job_ids is None:
        entries = sorted([*entries, *(d.entry for d in lost)], key=lambda e: e.id)
    else:  # an acknowledged one has a row only if it is found lost, now or before
        entries = [e for e in entries if e.result not in ACKNOWLEDGED or e.id in decided or (
            isinstance(e, HistoryEntry) and e.settlement is not None)]
    written_at = ledger.now()
    written = write(ledger, list(decided.values()), written_at, by=by)
    if written < sum(1 for d in decided.values() if d.settled is not None):
        # Another settler was first for some: show what the ledger keeps, which is final.
        stored = {e.id: e for job in dict.fromkeys(e.job_id for e in (*todo, *acknowledged))
                  for e in ledger.history(job)}
    else:
        stored = {}
    for entry in entries:
        if entry.id in stored and stored[entry.id].settlement is not None:
            report.rows.append(stored_row(stored[entry.id]))
        elif entry.id in decided:
            s = decided[entry.id].settled
            report.rows.append(Row(entry, NOT_YET) if s is None else
                               Row(entry, NOW, s.verdict, s.detail, s.looked_at, s.record, written_at, by))
        elif isinstance(entry, HistoryEntry) and entry.settlement is not None:
            report.rows.append(stored_row(entry))
        else:
            report.rows.append(Row(entry, RUNNING if entry.id not in todo_ids else NOT_YET))
    report.asked = len(asked)
    return report
