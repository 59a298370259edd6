"""settle_operation: the verdict on one recorded operation, given the later operations of its job
and one lookup (docs/contract.md §12, "Settling one recorded operation").

The expected answers come from the contract's words through ``expected`` below, a second, naive
implementation: it works out the end, the later operation that counts and the verdict itself from
the records' fields, and never calls the module's helpers (``verdict`` included).
"""

from __future__ import annotations

from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import InvalidInput, Op, Result, Verdict
from slurm_dsl.core.settle import Looked, NoJob, Recorded, Settled, operation_end, settle_operation
from tests.examples import examples

JOB = "4211"
BOUND = 86400.0 + 1.0 + 5.0  # what run/settling passes: MAX_TIMEOUT + KILL_GRACE + GUARD_MARGIN (its test pins it)
T0 = 1_700_000_000.0

RUNNING = JobInfo(JOB, "RUNNING", False, 0, 4294901657, "None")
HELD = JobInfo(JOB, "RUNNING", False, 0, 0, "JobHeldAdmin")
REQUEUED = JobInfo(JOB, "PENDING", False, 1, 4294901657, "BeginTime")
RQ1 = JobInfo(JOB, "RUNNING", True, 0, 4294901657, "None")


def op(op_id: int, kind: Op, result: Optional[Result] = Result.UNKNOWN, started: float = T0,
       finished: Optional[float] = T0 + 1.0, ends_by: Optional[float] = None,
       baseline: Optional[JobInfo] = None, baseline_at: Optional[float] = None) -> Recorded:
    return Recorded(op_id, JOB, kind, result, started, finished, ends_by, baseline, baseline_at)


def test_a_hold_settles_from_the_lookup() -> None:
    got = settle_operation(op(1, Op.HOLD), [], HELD, T0 + 2.0, no_ends_by_bound=BOUND)
    assert got == Settled(Verdict.PRESENT, "PriorityLong 0 (held)", T0 + 2.0, HELD)
    assert settle_operation(op(1, Op.HOLD), [], RUNNING, T0 + 2.0, no_ends_by_bound=BOUND) is None  # too soon
    got = settle_operation(op(1, Op.HOLD), [], RUNNING, T0 + 11.0, no_ends_by_bound=BOUND)
    assert got is not None and got.verdict is Verdict.ABSENT
    assert got.detail == "PriorityLong 4294901657 (not held), 10.0 s after the end"


def test_a_requeue_reads_restartcnt_against_its_baseline() -> None:
    got = settle_operation(op(1, Op.REQUEUE, baseline=RQ1, baseline_at=T0 - 0.1), [], REQUEUED, T0 + 1.5,
                           no_ends_by_bound=BOUND)
    assert got is not None and (got.verdict, got.detail) == (Verdict.PRESENT, "RestartCnt 1 > baseline 0")
    got = settle_operation(op(1, Op.REQUEUE), [], REQUEUED, T0 + 100.0, no_ends_by_bound=BOUND)
    assert got is not None and got.verdict is Verdict.UNDECIDABLE and "no baseline" in got.detail


def test_gone_and_could_not_ask() -> None:
    got = settle_operation(op(1, Op.RESTORE), [], NoJob.GONE, T0, no_ends_by_bound=BOUND)
    assert got == Settled(Verdict.GONE, "gone: slurmctld no longer knows the job", T0, None)
    assert settle_operation(op(1, Op.RESTORE), [], NoJob.COULD_NOT_ASK, T0 + 1e5, no_ends_by_bound=BOUND) is None


def test_the_end_of_an_unfinished_operation() -> None:
    late = op(1, Op.HOLD, result=None, finished=None, ends_by=T0 + 40.0)
    assert operation_end(late, BOUND) == T0 + 40.0
    assert settle_operation(late, [], RUNNING, T0 + 45.0, no_ends_by_bound=BOUND) is None  # its backstop + 5 s
    got = settle_operation(late, [], RUNNING, T0 + 50.0, no_ends_by_bound=BOUND)
    assert got is not None and got.verdict is Verdict.ABSENT
    old = op(1, Op.HOLD, result=None, finished=None)  # a row from before ends_by was recorded
    assert operation_end(old, BOUND) == T0 + BOUND
    assert settle_operation(old, [], RUNNING, T0 + 3600.0, no_ends_by_bound=BOUND) is None
    assert settle_operation(old, [], HELD, T0 + 3600.0, no_ends_by_bound=BOUND) is not None  # present: any time


def test_a_later_operation_on_the_same_field_is_read_from_its_baseline() -> None:
    # hold 1 unknown; release 2 (the priority again) looked the job up 30 s after hold 1 ended: held.
    later = [op(2, Op.RELEASE, result=Result.OK, started=T0 + 32.0, finished=T0 + 33.0, baseline=HELD,
                baseline_at=T0 + 31.0)]
    got = settle_operation(op(1, Op.HOLD), later, RUNNING, T0 + 99.0, no_ends_by_bound=BOUND)
    assert got == Settled(Verdict.PRESENT, "a later release on the job (operation 2); from the record read before it:"
                          " PriorityLong 0 (held)", T0 + 31.0, HELD, 2)
    # Without a baseline: undecidable, for ever.
    bare = [replace(later[0], baseline=None, baseline_at=None)]
    got = settle_operation(op(1, Op.HOLD), bare, HELD, T0 + 99.0, no_ends_by_bound=BOUND)
    assert got is not None and got.verdict is Verdict.UNDECIDABLE
    assert got.detail == "a later release on the job (operation 2), no record from before it"
    # A later requeue acts on RestartCnt and the flag, not the priority: today's record counts.
    other = [op(2, Op.REQUEUE, started=T0 + 32.0, baseline=None)]
    got = settle_operation(op(1, Op.HOLD), other, HELD, T0 + 99.0, no_ends_by_bound=BOUND)
    assert got is not None and (got.verdict, got.from_operation) == (Verdict.PRESENT, None)
    # ...but a requeue does act on the flag a restore is read from.
    got = settle_operation(op(1, Op.RESTORE), other, RUNNING, T0 + 99.0, no_ends_by_bound=BOUND)
    assert got is not None and (got.verdict, got.from_operation) == (Verdict.UNDECIDABLE, 2)


def test_a_later_baseline_read_too_soon_or_before_the_start_is_undecidable() -> None:
    soon = [op(2, Op.HOLD, started=T0 + 3.0, baseline=RUNNING, baseline_at=T0 + 2.0)]
    got = settle_operation(op(1, Op.HOLD), soon, HELD, T0 + 99.0, no_ends_by_bound=BOUND)
    assert got is not None and got.verdict is Verdict.UNDECIDABLE and "too soon" in got.detail
    before = [op(2, Op.HOLD, started=T0 + 3.0, baseline=HELD, baseline_at=T0 - 1.0)]
    got = settle_operation(op(1, Op.HOLD), before, HELD, T0 + 99.0, no_ends_by_bound=BOUND)
    assert got is not None and got.verdict is Verdict.UNDECIDABLE and "before this one started" in got.detail


@pytest.mark.parametrize("result", [r for r in Result if r not in (Result.UNKNOWN, Result.OK, Result.BIT_SET)])
def test_only_unknown_unfinished_or_acknowledged_operations_are_settled(result: Result) -> None:
    with pytest.raises(InvalidInput, match="only an unknown, unfinished or acknowledged"):
        settle_operation(op(1, Op.HOLD, result=result), [], HELD, T0, no_ends_by_bound=BOUND)


@pytest.mark.parametrize(("record", "want"), [(HELD, Verdict.PRESENT), (RUNNING, Verdict.ABSENT)])
def test_an_acknowledged_hold_read_again_says_whether_it_was_lost(record: JobInfo, want: Verdict) -> None:
    # docs/contract.md §13.4: an ok hold whose job is no longer held (a controller that died before
    # saving it came back without it) is absent: "acknowledged, then lost".
    got = settle_operation(op(1, Op.HOLD, result=Result.OK), [], record, T0 + 99.0, no_ends_by_bound=BOUND)
    assert got is not None and got.verdict is want
    assert got.detail.startswith("acknowledged, then lost") is (want is Verdict.ABSENT), got.detail


def test_bad_input_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="not job 4211's"):
        settle_operation(op(1, Op.HOLD), [], replace(HELD, job_id="4212"), T0, no_ends_by_bound=BOUND)
    with pytest.raises(InvalidInput, match="later operation must be"):
        settle_operation(op(1, Op.HOLD), [replace(op(2, Op.HOLD), job_id="4212")], HELD, T0, no_ends_by_bound=BOUND)
    with pytest.raises(InvalidInput, match="not later than"):
        settle_operation(op(5, Op.HOLD), [op(2, Op.HOLD)], HELD, T0, no_ends_by_bound=BOUND)
    with pytest.raises(InvalidInput, match="looked_at"):
        settle_operation(op(1, Op.HOLD), [], HELD, float("nan"), no_ends_by_bound=BOUND)
    with pytest.raises(InvalidInput, match="settle delay"):
        settle_operation(op(1, Op.HOLD), [], HELD, T0, no_ends_by_bound=BOUND, settle_delay=1.0)
    with pytest.raises(InvalidInput, match="must be a Recorded"):
        settle_operation("1", [], HELD, T0, no_ends_by_bound=BOUND)  # type: ignore[arg-type]


# -- the naive second implementation: the contract's words, apart from the module --------------

# "hold/release/open: the priority; requeue: RestartCnt; restore and requeue: the Requeue flag"
# A requeue into hold acts as a requeue does and holds the job too.
ACTS_ON = {"hold": {"priority"}, "release": {"priority"}, "open": {"priority"},
           "requeue": {"restarts", "requeue"}, "restore": {"requeue"},
           "requeuehold": {"restarts", "requeue", "priority"}}
# The table of §12: the fields each op's effect is read from, and when it shows; a requeue into
# hold's: "RestartCnt above the baseline and held".
READS = {"hold": {"priority"}, "release": {"priority"}, "open": {"priority"}, "requeue": {"restarts"},
         "restore": {"requeue"}, "requeuehold": {"restarts", "priority"}}


def shows_effect(kind: str, record: JobInfo, before: Optional[JobInfo]) -> Optional[bool]:
    """True/False, or None when it cannot say (a requeue with no baseline, fewer restarts, or more
    than one restart above the baseline: more than one requeue could explain it)."""
    if kind == "hold":
        return record.priority == 0
    if kind in ("release", "open"):
        return record.priority > 0
    if kind == "restore":
        return not record.requeue
    if before is None or record.restarts < before.restarts or record.restarts - before.restarts > 1:
        return None
    if kind == "requeuehold" and record.restarts > before.restarts and record.priority != 0:
        return None  # requeued, but not held: another's requeue, or released since
    return record.restarts > before.restarts


def baseline_stands(operation: Recorded, record_ctl: Optional[str]) -> Optional[bool]:
    """§12 Rule 16: a requeue's baseline stands if the controller read before it is the one read
    once its acknowledged calls were over, or the one read after the record's lookup; not read
    after the lookup: not told yet."""
    if operation.baseline_ctl is None:
        return False
    if operation.result in (Result.OK, Result.BIT_SET) and operation.calls_ctl == operation.baseline_ctl:
        return True
    return None if record_ctl is None else record_ctl == operation.baseline_ctl


def naive_verdict(kind: str, record: Optional[JobInfo], before: Optional[JobInfo], seconds_after_end: float,
                  delay: float, stands: Optional[bool] = True) -> Optional[str]:
    if record is None:
        return "gone"
    effect = shows_effect(kind, record, before)
    if effect is None:
        return "undecidable"
    if effect:
        return "present"
    if not seconds_after_end >= delay:
        return None  # too soon to say absent: nor undecidable, which only stands in for an absent
    if kind in ("requeue", "requeuehold") and stands is not True:
        return None if stands is None else "undecidable"
    return "absent"


def expected(operation: Recorded, later: Sequence[Recorded], looked: Looked, looked_at: float,
             delay: float, controller: Optional[str] = None) -> Tuple[Optional[str], Optional[int], Optional[float]]:
    """(verdict, the later operation it was read from, the lookup time), by the task's sentences."""
    if looked == "could_not_ask":
        return None, None, None
    if operation.finished_at is not None:
        end = operation.finished_at
    elif operation.ends_by is not None:
        end = operation.ends_by
    else:
        end = operation.started_at + BOUND
    kind = operation.op.value
    same_field = sorted((o for o in later if READS[kind] & ACTS_ON[o.op.value]), key=lambda o: o.id)
    if not same_field:
        record = looked if isinstance(looked, JobInfo) else None
        stands = baseline_stands(operation, controller)
        return naive_verdict(kind, record, operation.baseline, looked_at - end, delay, stands), None, looked_at
    first = same_field[0]
    if first.baseline is None or first.baseline_at is None:
        return "undecidable", first.id, looked_at
    if first.baseline_at < operation.started_at:
        return "undecidable", first.id, first.baseline_at
    got = naive_verdict(kind, first.baseline, operation.baseline, first.baseline_at - end, delay,
                        baseline_stands(operation, first.calls_ctl))
    return got or "undecidable", first.id, first.baseline_at


records = st.builds(
    JobInfo, job_id=st.just(JOB), state=st.sampled_from(["PENDING", "RUNNING", "COMPLETED"]),
    requeue=st.booleans(), restarts=st.integers(0, 3), priority=st.sampled_from([0, 1, 4294901657]),
    reason=st.sampled_from(["None", "JobHeldAdmin"]),
)
times = st.floats(-100.0, 100.0)
controllers = st.sampled_from([None, "2026-12-07T13:00:00", "2026-12-07T13:00:01#1"])  # lookups.controller's texts


@st.composite
def cases(draw: st.DrawFn) -> Tuple[Recorded, List[Recorded], Looked, float, float, Optional[str]]:
    kind = draw(st.sampled_from(list(Op)))
    unfinished = draw(st.booleans())
    started = T0 + draw(times)
    finished = None if unfinished else started + draw(st.floats(0.0, 30.0))
    ends_by = draw(st.one_of(st.none(), st.just(started + 20.0))) if unfinished else None
    baseline = draw(st.one_of(st.none(), records))
    result = None if unfinished else draw(st.sampled_from([Result.UNKNOWN, Result.OK, Result.BIT_SET]))
    operation = Recorded(10, JOB, kind, result, started, finished, ends_by,
                         baseline, None if baseline is None else started - 0.5,
                         baseline_ctl=draw(controllers), calls_ctl=draw(controllers))
    later: List[Recorded] = []
    for n in range(draw(st.integers(0, 3))):
        before = draw(st.one_of(st.none(), records))
        at = None if before is None or draw(st.integers(0, 5)) == 0 else T0 + draw(st.floats(-150.0, 200.0))
        later.append(Recorded(11 + n * draw(st.integers(1, 3)), JOB, draw(st.sampled_from(list(Op))),
                              draw(st.sampled_from([None, *Result])), T0 + draw(times), None, None, before, at,
                              baseline_ctl=draw(controllers), calls_ctl=draw(controllers)))
    later = list({o.id: o for o in later}.values())
    looked: Looked = draw(st.one_of(records, st.sampled_from(list(NoJob))))
    looked_at = T0 + draw(st.one_of(times, st.floats(100.0, 2 * BOUND)))
    delay = draw(st.sampled_from([2.0, 10.0, 30.0]))
    return operation, draw(st.permutations(later)), looked, looked_at, delay, draw(controllers)


@settings(max_examples=examples(1500))
@given(cases())
def test_the_settlement_is_the_contracts(
    case: Tuple[Recorded, List[Recorded], Looked, float, float, Optional[str]],
) -> None:
    operation, later, looked, looked_at, delay, controller = case
    got = settle_operation(operation, later, looked, looked_at, no_ends_by_bound=BOUND, settle_delay=delay,
                           controller=controller)
    want, from_op, at = expected(operation, later, looked, looked_at, delay, controller)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert (got.verdict.value, got.from_operation, got.looked_at) == (want, from_op, at)
    if got.verdict is Verdict.PRESENT:
        assert got.record is not None  # present is always read from a record that shows it
        assert shows_effect(operation.op.value, got.record, operation.baseline) is True
