"""Settling an unknown outcome: did the operation take effect? The rules, no lookup (docs/contract.md §12).

``None`` is "not now: look again"; ``Verdict.UNDECIDABLE`` is for ever; every ``Verdict`` is final.
"Rule N" here is ``core.life.RULES["SN"]``: one line each there, in full in docs/contract.md §12
(Rules 1-11, 16), §13.4 (12), §13.6 (13, 14) and §13.7 (15).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import AbstractSet, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Union

from . import life
from .durable import UNREAD, Control, may_be_held
from .jobid import validate_job_id
from .jobinfo import JobInfo
from .model import InvalidInput, Op, Reason, RequeueBit, Result, Verdict, exit_of_effect
from .plain import described

DEFAULT_SETTLE_DELAY = 10.0  # seconds: slurmctld's default MessageTimeout (docs/settle-delay.md §3)
MIN_SETTLE_DELAY = 2.0  # never below (docs/settle-delay.md §3)
# Rule 13: how long a request may wait on a restarted primary's socket while the backup hands
# control back: slurmctld's CONTROL_TIMEOUT (src/slurmctld/slurmctld.h; the backup relinquishes
# within CONTROL_TIMEOUT - 1 = 29 s, src/slurmctld/proc_req.c 24.11: 3199-3254, 22.05: 3434-3498).
CONTROL_TIMEOUT = 30.0
# Rule 13: the reasons of an unknown result whose calls may have waited so: a message that is no
# refusal (the controller did not answer, or answered what this slurm-dsl does not know); and a
# requeue's unknown call 2 followed by a call 3 that failed or did not run, whose reason is the
# bit's (clear_failed, clear_not_run), so that call 2's own is not told apart.  On the pair's
# hand-back both its calls 2 and 3 printed ``Unexpected message received`` and it read
# clear_failed (docs/durability.md §4).
UNANSWERED = frozenset({Reason.UNRECOGNISED_STDERR, Reason.CLEAR_FAILED, Reason.CLEAR_NOT_RUN})


GONE_DETAIL = "gone: slurmctld no longer knows the job"  # the detail of every gone verdict read from a lookup


class NoJob(str, enum.Enum):
    """A lookup's answer for a job that is not a record: the job is gone, or the lookup failed."""

    GONE = "gone"  # slurmctld says it does not know the job id
    COULD_NOT_ASK = "could_not_ask"  # controller down, timeout, garbage: says nothing of the job

    def __str__(self) -> str:
        return self.value


# What ``verdict`` is given for the job: its record, or why there is none.
Looked = Union[JobInfo, NoJob]


def looked_up(answers: Mapping[str, Optional[JobInfo]], job_id: Union[str, int]) -> Looked:
    """One job's ``Looked`` from a ``Lookup.jobs`` answer: an id it does not hold is ``COULD_NOT_ASK``, never
    gone; a record of another id is ``InvalidInput``.  After ``LookupFailed``, pass ``NoJob.COULD_NOT_ASK``."""
    job = validate_job_id(job_id)
    if job not in answers:
        return NoJob.COULD_NOT_ASK
    info = answers[job]
    if info is None:
        return NoJob.GONE
    return _record(info, "the lookup's record", job)


def check_settle_delay(settle_delay: object) -> float:
    """The settle delay as a plain float, or ``InvalidInput``: finite and at least 2 s (Rule 7)."""
    delay = _seconds(settle_delay, "the settle delay")
    if delay is None or not delay >= MIN_SETTLE_DELAY:
        raise InvalidInput(
            f"the settle delay must be at least {MIN_SETTLE_DELAY:g} seconds, not {described(settle_delay)}"
        )
    return delay


def delay_of(
    result: Optional[Result], reason: Optional[Reason], settle_delay: float, *, hand_back: bool = False
) -> float:
    """Rule 13: the settle delay of an operation with this result (None: unfinished) and reason.
    ``hand_back``: a hand-back can happen (``core.durable.may_hand_back``)."""
    if result is Result.UNKNOWN and reason in UNANSWERED:
        return settle_delay + CONTROL_TIMEOUT
    if hand_back and (result is None or result is Result.UNKNOWN):
        return settle_delay + CONTROL_TIMEOUT
    return settle_delay


def verdict(
    op: Op,
    looked: Looked,
    *,
    baseline: Optional[JobInfo],
    since_end: Optional[float],
    settle_delay: float = DEFAULT_SETTLE_DELAY,
) -> Optional[Verdict]:
    """The verdict on an unknown ``op`` from one lookup of its job (Rules 1-7), or None: not yet.
    ``baseline``: the record committed with the intent (None: none); ``since_end``: seconds from the
    end of its last script process to the lookup (None: not known).  ``InvalidInput`` for a bad value."""
    op = _op(op)
    delay = check_settle_delay(settle_delay)
    end = _seconds(since_end, "the time since the end")
    if not isinstance(looked, (JobInfo, NoJob)):
        raise InvalidInput(
            f"looked must be a JobInfo, NoJob.GONE or NoJob.COULD_NOT_ASK, not {described(looked)}"
        )
    record = _record(looked, "the lookup's record") if isinstance(looked, JobInfo) else None
    base = None if baseline is None else _record(baseline, "the baseline", None if record is None else record.job_id)
    return _checked_verdict(op, looked, record, base, end, delay)


def _checked_verdict(
    op: Op, looked: Looked, record: Optional[JobInfo], base: Optional[JobInfo], end: Optional[float], delay: float,
) -> Optional[Verdict]:
    """``verdict``'s Rules 1-6, its values checked: ``record`` is ``looked`` if that is a record."""
    if looked is NoJob.COULD_NOT_ASK:
        return None  # Rule 1
    if record is None:
        return Verdict.GONE  # Rule 2
    if op is Op.HOLD:
        present = record.priority == 0
    elif op in (Op.RELEASE, Op.OPEN):
        present = record.priority > 0
    elif op is Op.RESTORE:
        present = not record.requeue
    else:
        if base is None or not base.restarts <= record.restarts <= base.restarts + 1:
            return Verdict.UNDECIDABLE  # Rule 4
        present = record.restarts > base.restarts
        if present and op is Op.REQUEUE_HOLD and record.priority != 0:
            return Verdict.UNDECIDABLE  # Rule 4: requeued but not held (by another, or released since)
    if present:
        return Verdict.PRESENT  # Rule 5
    if end is not None and end >= delay:
        return Verdict.ABSENT  # Rule 6
    return None  # too soon, or the end is not known: look again later


def exits_as(
    result: Result, effect: Optional[Verdict], *, op: Optional[Op] = None, requeue_bit: Optional[RequeueBit] = None
) -> Result:
    """The result a row exits as, once settled (Rule 8); an effect on a row not unknown is ``InvalidInput``.
    ``requeue_bit`` None: unfinished (``model.exit_of_effect``); without ``op`` the row is read as not a requeue's."""
    if not isinstance(result, Result):
        raise InvalidInput(f"result must be a Result, not {described(result)}")
    if effect is not None and not isinstance(effect, Verdict):
        raise InvalidInput(f"effect must be a Verdict or None, not {described(effect)}")
    if requeue_bit is not None and not isinstance(requeue_bit, RequeueBit):
        raise InvalidInput(f"requeue_bit must be a RequeueBit or None, not {described(requeue_bit)}")
    if result is not Result.UNKNOWN:
        if effect is not None:
            raise InvalidInput(f"a {result.value} row has no effect (only an unknown one is settled): {effect.value}")
        return result
    if effect is None:
        return Result.UNKNOWN
    return exit_of_effect(Op.HOLD if op is None else _op(op), effect.value, requeue_bit)


def _seconds(value: object, what: str) -> Optional[float]:
    """Finite seconds as a plain float (None stays None), else ``InvalidInput``; a subclass's methods never run."""
    if value is None:
        return None
    if type(value) is float and value - value == 0.0:
        return value  # the common case, an exact finite float: as below, only faster
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{what} must be a number of seconds, not {described(value)}")
    try:
        seconds = float(int.__int__(value)) if isinstance(value, int) else float.__float__(value)
    except OverflowError:  # an int too large for a float: no finite number of seconds
        seconds = math.inf
    if not math.isfinite(seconds):
        raise InvalidInput(f"{what} must be a finite number of seconds, not {seconds!r}")
    return seconds


def _op(op: object) -> Op:
    """``Op(op)``; an exact ``Op`` as it is (the common case, faster)."""
    return op if type(op) is Op else Op(op)


def _record(info: object, what: str, job_id: Optional[str] = None) -> JobInfo:
    """``info`` if it is a well-typed JobInfo (of job ``job_id``, if given); else ``InvalidInput``."""
    if not isinstance(info, JobInfo):
        raise InvalidInput(f"{what} must be a JobInfo, not {described(info)}")
    # Exact types, as the lookups build them: a subclass's comparisons never run.
    if type(info.job_id) is not str or type(info.requeue) is not bool or not (
        type(info.restarts) is int and info.restarts >= 0 and type(info.priority) is int and info.priority >= 0
    ):
        raise InvalidInput(f"{what} has a bad JobId, Requeue flag, RestartCnt or PriorityLong")
    if job_id is not None and info.job_id != job_id:
        raise InvalidInput(f"{what} is job {described(info.job_id)}'s, not job {job_id}'s")
    return info


# Rule 10: the fields of a job's record each op acts on, and those its effect is read from.
FIELDS: Dict[Op, FrozenSet[str]] = {
    Op.HOLD: frozenset({"priority"}),
    Op.RELEASE: frozenset({"priority"}),
    Op.OPEN: frozenset({"priority"}),
    Op.REQUEUE: frozenset({"restarts", "requeue"}),
    Op.REQUEUE_HOLD: frozenset({"restarts", "requeue", "priority"}),
    Op.RESTORE: frozenset({"requeue"}),
}
EFFECT_FIELDS: Dict[Op, FrozenSet[str]] = {
    Op.HOLD: frozenset({"priority"}),
    Op.RELEASE: frozenset({"priority"}),
    Op.OPEN: frozenset({"priority"}),
    Op.REQUEUE: frozenset({"restarts"}),
    Op.REQUEUE_HOLD: frozenset({"restarts", "priority"}),
    Op.RESTORE: frozenset({"requeue"}),
}


@dataclass(frozen=True)
class Recorded:
    """What the ledger recorded of one operation, as plain values.  ``result`` None: unfinished;
    ``ends_by`` None: an old row; ``baseline_at``: when the baseline's lookup started (ledger clock)."""

    id: int
    job_id: str
    op: Op
    result: Optional[Result]
    started_at: float
    finished_at: Optional[float] = None
    ends_by: Optional[float] = None
    baseline: Optional[JobInfo] = None
    baseline_at: Optional[float] = None
    requeue_bit: Optional[RequeueBit] = None  # what its calls say of the flag (None: unfinished, or not a requeue)
    reason: Optional[Reason] = None  # which rule made it unknown (Rule 13)
    # Rule 16: the controller in control (``lookups.controller``) read before the baseline's lookup,
    # and read once its calls were over (None: not read)
    baseline_ctl: Optional[str] = None
    calls_ctl: Optional[str] = None


class Unsettled(NamedTuple):
    """``Recorded`` without the baseline, as a sweep first reads it (``LedgerStore.to_settle``).
    A tuple: a sweep reads 10,000 of them (docs/benchmarks.md §9)."""

    id: int
    job_id: str
    op: Op
    result: Optional[Result]
    started_at: float
    finished_at: Optional[float] = None
    ends_by: Optional[float] = None


@dataclass(frozen=True)
class Settled:
    """The verdict to record on one operation, and what it was read from (Rule 11)."""

    verdict: Verdict
    detail: str
    looked_at: float  # ledger clock: when the lookup the record came from started
    record: Optional[JobInfo]  # None: the job was gone, or no record was read
    from_operation: Optional[int] = None  # the later operation whose baseline was read, if one was


def operation_end(operation: Recorded, no_ends_by_bound: float) -> float:
    """The end the settle delay counts from (Rule 9)."""
    if operation.finished_at is not None:
        return _finite(operation.finished_at, "finished_at")
    if operation.ends_by is not None:
        return _finite(operation.ends_by, "ends_by")
    return _finite(operation.started_at, "started_at") + _finite(no_ends_by_bound, "the bound of an old row")


def settle_operation(
    operation: Recorded,
    later: Sequence[Recorded],
    looked: Looked,
    looked_at: float,
    *,
    no_ends_by_bound: float,
    settle_delay: float = DEFAULT_SETTLE_DELAY,
    hand_back: bool = False,
    control: Control = UNREAD,
    mark: Optional[int] = None,
    controller: Optional[str] = None,
) -> Optional[Settled]:
    """The verdict to record on ``operation`` from one lookup of its job, by the module's rules, or None: not now.
    ``later``: the job's later operations, any order; ``looked_at``: the lookup's start (ledger clock);
    ``controller``: read after the lookup (None: not read).  ``InvalidInput`` before anything is decided."""
    return OneLookup(looked_at, no_ends_by_bound=no_ends_by_bound, settle_delay=settle_delay,
                     hand_back=hand_back, control=control, controller=controller).settle(operation, later, looked, mark)


class OneLookup:
    """``settle_operation`` for many operations of one lookup: the values they share checked once, here
    (``InvalidInput``), and ``settle`` run per operation (docs/benchmarks.md §9)."""

    __slots__ = ("control", "controller", "gone", "hand_back", "looked_at", "no_ends_by_bound", "settle_delay")

    def __init__(
        self, looked_at: float, *, no_ends_by_bound: float, settle_delay: float = DEFAULT_SETTLE_DELAY,
        hand_back: bool = False, control: Control = UNREAD, controller: Optional[str] = None,
    ) -> None:
        self.settle_delay = check_settle_delay(settle_delay)
        if not isinstance(hand_back, bool):
            raise InvalidInput(f"hand_back must be True or False, not {described(hand_back)}")
        if not isinstance(control, Control):
            raise InvalidInput(f"control must be a Control, not {described(control)}")
        self.hand_back = hand_back
        self.control = control
        if controller is not None and type(controller) is not str:
            raise InvalidInput(f"controller must be a string or None, not {described(controller)}")
        self.controller = controller  # Rule 16: the controller in control, read after the lookup
        self.looked_at = _finite(looked_at, "looked_at")
        self.no_ends_by_bound = _finite(no_ends_by_bound, "the bound of an old row")
        # What ``settle`` gives every operation of a gone job with no later operation: one value,
        # shared (it is immutable), so a sweep that settles 10,000 makes none per operation.
        self.gone = Settled(Verdict.GONE, GONE_DETAIL, self.looked_at, None)

    def gone_at_once(
        self,
        operations: Sequence[Union[Unsettled, Recorded]],
        answers: Mapping[str, Optional[JobInfo]],
        later: AbstractSet[int],
    ) -> List[bool]:
        """For each operation, whether ``settle`` gives it ``self.gone`` whatever its baseline.
        ``later``: the ids of the operations that have a later one.  False decides nothing: ``settle`` it."""
        at, bound, unknown, missing = self.looked_at, self.no_ends_by_bound, Result.UNKNOWN, _MISSING
        isfinite = math.isfinite
        out = []
        for o in operations:
            job = o.job_id
            ok = (
                type(job) is str and answers.get(job, missing) is None and o.id not in later
                and (o.result is None or o.result is unknown) and type(o.op) is Op
            )
            if ok:
                try:
                    validate_job_id(job)
                except InvalidInput:
                    ok = False
            if ok:
                started, end = o.started_at, o.finished_at if o.finished_at is not None else o.ends_by
                ok = (
                    type(started) is float and isfinite(started)
                    and (end is None or (type(end) is float and isfinite(end)))
                )
                if ok:
                    ok = isfinite(at - (started + bound if end is None else end))
            out.append(ok)
        return out

    def settle(
        self, operation: Recorded, later: Sequence[Recorded], looked: Looked, mark: Optional[int] = None,
        elapsed: Optional[float] = None, seen: Optional[float] = None, before: Optional[Mapping[int, float]] = None,
    ) -> Optional[Settled]:
        """``settle_operation`` with this lookup's values.  ``mark``: where the looks stood once the operation
        was over (None: not known); ``elapsed``, ``seen`` (at most it) and ``before`` (by later operation):
        seconds from its end to a lookup on one clock that never steps (Rule 15; None: not known)."""
        if not isinstance(operation, Recorded):
            raise InvalidInput(f"operation must be a Recorded, not {described(operation)}")
        op = _op(operation.op)
        job = validate_job_id(operation.job_id)
        delay = delay_of(operation.result, operation.reason, self.settle_delay, hand_back=self.hand_back)
        at = self.looked_at
        if operation.result not in SETTLED_RESULTS:
            raise InvalidInput(
                "only an unknown, unfinished or acknowledged (ok, bit_set) operation is settled, not a"
                f" {described(operation.result)} one"
            )
        end = operation_end(operation, self.no_ends_by_bound)
        started = _finite(operation.started_at, "started_at")
        if isinstance(looked, JobInfo):
            _record(looked, "the lookup's record", job)
        others = []
        for other in later:
            if not isinstance(other, Recorded) or validate_job_id(other.job_id) != job:
                raise InvalidInput(f"a later operation must be a Recorded of job {job}, not {described(other)}")
            if other.id <= operation.id:
                raise InvalidInput(f"operation {other.id} is not later than operation {operation.id}")
            others.append(other)
        if looked is NoJob.COULD_NOT_ASK:
            return None  # Rule 1: nothing is read from a lookup that failed, not even via a later operation
        fields = EFFECT_FIELDS[op]
        first = None if not others else min(
            (o for o in others if fields & FIELDS[_op(o.op)]), key=lambda o: o.id, default=None
        )
        if first is None:
            # ``verdict``'s checks, but for those made above
            since_end = _finite(_since_end(at - end, elapsed, seen), "the time since the end")
            if not isinstance(looked, (JobInfo, NoJob)):
                raise InvalidInput(
                    f"looked must be a JobInfo, NoJob.GONE or NoJob.COULD_NOT_ASK, not {described(looked)}"
                )
            record = looked if isinstance(looked, JobInfo) else None
            base = operation.baseline
            if base is not None:
                base = _record(base, "the baseline", None if record is None else record.job_id)
            found = _checked_verdict(op, looked, record, base, since_end, delay)
            if found is None:
                return None
            if found is Verdict.ABSENT and self.hand_back and may_be_held(self.control, mark):
                return None  # Rule 14: a controller may still hold its request back
            if found is Verdict.ABSENT and op.requeues:
                # Rule 16, only where absent would be read: a record read too soon (Rules 6, 7, 14) is
                # no verdict yet, since a request applied late may still show the requeue.
                standing = stands(operation, self.controller)
                if standing is None:
                    return None
                if not standing:
                    return Settled(Verdict.UNDECIDABLE, _detail(op, Verdict.UNDECIDABLE, record, operation.baseline,
                                                                since_end), at, record)
            return Settled(found, _lost(operation, found, _detail(op, found, record, operation.baseline, since_end)),
                           at, record)
        what = f"a later {_op(first.op).value} on the job (operation {first.id})"
        if first.baseline is None or first.baseline_at is None:
            return Settled(Verdict.UNDECIDABLE, f"{what}, no record from before it", at, None, first.id)
        before_at = _finite(first.baseline_at, "the later operation's baseline_at")
        if before_at < started:
            return Settled(Verdict.UNDECIDABLE, f"{what}; its record was read before this one started", before_at,
                           first.baseline, first.id)
        read_after = before_at - end
        if before is not None and first.id in before:
            read_after = min(read_after, _finite(before[first.id], "the seconds before the later record"))
        found = verdict(op, first.baseline, baseline=operation.baseline, since_end=read_after, settle_delay=delay)
        if found is Verdict.ABSENT and op.requeues and not stands(operation, first.calls_ctl):
            return Settled(
                Verdict.UNDECIDABLE,
                f"{what}; the record from before it shows RestartCnt at this one's baseline, but a restart or"
                " takeover of slurmctld may have come between them (Rule 16)",
                before_at, first.baseline, first.id,
            )
        if found is Verdict.ABSENT and before is not None and first.id not in before:
            return Settled(
                Verdict.UNDECIDABLE,
                f"{what}; the record from before it does not show the effect, but how long after the end it was"
                " read cannot be told on one clock (another host or boot)",
                before_at, first.baseline, first.id,
            )
        if found is Verdict.ABSENT and self.hand_back:
            return Settled(
                Verdict.UNDECIDABLE,
                f"{what}; the record from before it does not show the effect, but a controller may have held"
                " the request back past that read (a hand-back)",
                before_at, first.baseline, first.id,
            )
        if found is None:
            return Settled(
                Verdict.UNDECIDABLE,
                f"{what}; the record from before it, read {read_after:.1f} s after the end, does not show the"
                " effect and was read too soon to say absent",
                before_at, first.baseline, first.id,
            )
        detail = _detail(op, found, first.baseline, operation.baseline, read_after)
        return Settled(found, _lost(operation, found, f"{what}; from the record read before it: {detail}"),
                       before_at, first.baseline, first.id)


def stands(operation: Recorded, record_ctl: Optional[str]) -> Optional[bool]:
    """Rule 16: whether a requeue's baseline is known to stand at a record whose RestartCnt equals it.
    ``record_ctl``: the controller read after the record's lookup.  None: not read, look again; False: never."""
    base = operation.baseline_ctl
    if base is None:
        return False
    if operation.result in life.ACKNOWLEDGED_RESULTS and operation.calls_ctl == base:
        return True
    if record_ctl is None:
        return None
    return record_ctl == base


def _since_end(by_ledger: float, elapsed: Optional[float], seen: Optional[float]) -> float:
    """Rule 15: the time since an operation's end, from the ledger's, ``elapsed`` and ``seen``."""
    if elapsed is not None:
        return elapsed
    return by_ledger if seen is None else min(by_ledger, seen)


_MISSING = object()  # ``gone_at_once``'s default: an id the answers do not hold

# Rule 12: what may be settled: an unknown or unfinished operation, and one slurmctld acknowledged
# (``ok``, or ``bit_set``), read again after a controller may have lost it (docs/contract.md §13.4).
SETTLED_RESULTS = life.SETTLEABLE
LOST = "acknowledged, then lost (the controller came back, or another took over, without it; or it was undone)"


def _lost(operation: Recorded, found: Verdict, detail: str) -> str:
    """Rule 12's words on an acknowledged operation whose effect is absent."""
    if found is Verdict.ABSENT and operation.result in life.ACKNOWLEDGED_RESULTS:
        return f"{LOST}: {detail}"
    return detail


def _detail(op: Op, found: Verdict, record: Optional[JobInfo], baseline: Optional[JobInfo], since_end: float) -> str:
    """The verdict in words, naming the field it was read from."""
    if found is Verdict.GONE or record is None:
        return GONE_DETAIL
    if op.requeues:
        if baseline is None:
            return "no baseline: nothing says what its RestartCnt was before"
        if found is Verdict.UNDECIDABLE and record.restarts == baseline.restarts:
            return (f"RestartCnt {record.restarts} = baseline {baseline.restarts}, but slurmctld may have restarted"
                    " or been taken over since the baseline was read, undoing a requeue it held, and this one"
                    " applied after that would show the same (Rule 16)")
        if found is Verdict.UNDECIDABLE and record.restarts < baseline.restarts:
            return (f"RestartCnt {record.restarts} < baseline {baseline.restarts}: not the record the baseline was"
                    " read from")
        if found is Verdict.UNDECIDABLE and record.restarts == baseline.restarts + 1:
            return (f"RestartCnt {record.restarts} > baseline {baseline.restarts}, but PriorityLong {record.priority}"
                    " (not held): requeued by another, or released since, so the record cannot say whether this"
                    " requeue into hold happened")
        if found is Verdict.UNDECIDABLE:
            return (f"RestartCnt {record.restarts} > baseline {baseline.restarts} + 1: more requeues than this one,"
                    " so the record cannot say whether this one happened")
        shows = f"RestartCnt {record.restarts} {'>' if found is Verdict.PRESENT else '='} baseline {baseline.restarts}"
        if op is Op.REQUEUE_HOLD and found is Verdict.PRESENT:
            shows += ", PriorityLong 0 (held)"
    elif op is Op.RESTORE:
        shows = f"Requeue={int(record.requeue)}"
    else:  # hold, release, open: the priority
        shows = f"PriorityLong {record.priority} ({'held' if record.priority == 0 else 'not held'})"
    if found is Verdict.ABSENT:
        return f"{shows}, {since_end:.1f} s after the end"
    return shows


def _finite(value: object, what: str) -> float:
    seconds = _seconds(value, what)
    if seconds is None:
        raise InvalidInput(f"{what} must be a number of seconds, not None")
    return seconds
