"""``OneLookup``: the operations one lookup settles, its values checked once (docs/contract.md §12,
"Settling one recorded operation"; a sweep settles 10,000 with it, docs/benchmarks.md §9).

The reference is the plain rule: ``settle.verdict``, every check made, and the naive second
implementation of tests/core/test_settle_operation.py (``expected``).  For every generated batch
(operations of several jobs, later operations, one lookup's time and delay) each operation's
answer from one ``OneLookup`` is the one ``expected`` gives, ``settle_operation``'s, and, where no
later operation acts on its field, ``verdict``'s on the same values."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import InvalidInput, Op, Result, Verdict
from slurm_dsl.core.settle import (
    EFFECT_FIELDS,
    FIELDS,
    Looked,
    NoJob,
    OneLookup,
    Recorded,
    operation_end,
    settle_operation,
    verdict,
)
from tests.core.test_settle_operation import (
    BOUND,
    HELD,
    JOB,
    RUNNING,
    T0,
    baseline_stands,
    cases,
    controllers,
    expected,
    naive_verdict,
    op,
)
from tests.examples import examples

Case = Tuple[Recorded, List[Recorded], Looked, float, float, Optional[str]]


def as_job(case: Case, job: str) -> Tuple[Recorded, List[Recorded], Looked]:
    """``case`` moved to job ``job`` (its records too), so that one batch holds many jobs."""
    operation, later, looked, _, _, _ = case

    def moved(r: Recorded) -> Recorded:
        return replace(r, job_id=job, baseline=None if r.baseline is None else replace(r.baseline, job_id=job))

    looked_here = replace(looked, job_id=job) if isinstance(looked, JobInfo) else looked
    return moved(operation), [moved(o) for o in later], looked_here


@settings(max_examples=examples(400))
@given(st.lists(cases(), min_size=1, max_size=6), st.sampled_from([2.0, 10.0, 30.0]),
       st.floats(-100.0, 2 * BOUND), controllers)
def test_one_lookup_gives_the_plain_rule_s_answer_for_every_operation(
    batch: List[Case], delay: float, at: float, controller: Optional[str]
) -> None:
    looked_at = T0 + at
    one = OneLookup(looked_at, no_ends_by_bound=BOUND, settle_delay=delay, controller=controller)
    for n, case in enumerate(batch):
        operation, later, looked = as_job(case, str(4300 + n))
        got = one.settle(operation, later, looked)
        assert got == settle_operation(operation, later, looked, looked_at, no_ends_by_bound=BOUND,
                                       settle_delay=delay, controller=controller)
        want, from_op, read_at = expected(operation, later, looked, looked_at, delay, controller)
        assert (None if got is None else (got.verdict.value, got.from_operation, got.looked_at)) == (
            None if want is None else (want, from_op, read_at))
        on_field = [o for o in later if EFFECT_FIELDS[operation.op] & FIELDS[o.op]]
        if not on_field and not (operation.op.requeues and baseline_stands(operation, controller) is not True):
            plain = verdict(operation.op, looked, baseline=operation.baseline,
                            since_end=looked_at - operation_end(operation, BOUND), settle_delay=delay)
            assert (None if got is None else got.verdict) == plain


def test_one_lookup_checks_its_values_once_and_each_operation_as_before() -> None:
    for bad in ({"looked_at": float("nan")}, {"settle_delay": 1.0}, {"no_ends_by_bound": float("inf")},
                {"hand_back": 1}):
        args: Dict[str, Any] = {"looked_at": T0, "no_ends_by_bound": BOUND, "settle_delay": 10.0, **bad}
        with pytest.raises(InvalidInput):
            OneLookup(args.pop("looked_at"), **args)
    one = OneLookup(T0 + 60, no_ends_by_bound=BOUND)
    with pytest.raises(InvalidInput, match="not job 4211's"):
        one.settle(op(1, Op.HOLD), [], replace(HELD, job_id="4212"))
    with pytest.raises(InvalidInput, match="looked must be"):
        one.settle(op(1, Op.HOLD), [], None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="must be a Recorded"):
        one.settle("1", [], HELD)  # type: ignore[arg-type]
    assert one.settle(op(1, Op.HOLD), [], NoJob.COULD_NOT_ASK) is None
    settled = one.settle(op(1, Op.HOLD), [], HELD)
    assert settled is not None and settled.record == HELD and JOB == "4211"


@settings(max_examples=examples(400))
@given(cases(), st.floats(0.0, 100.0))
def test_the_seconds_on_one_clock_replace_the_ledger_times(case: Case, elapsed: float) -> None:
    """Rule 15: given the seconds from the end on a clock that never steps, the delay is read from
    them, whatever the ledger's times say (a step may have moved them either way)."""
    operation, later, looked, looked_at, delay, controller = case
    got = OneLookup(looked_at, no_ends_by_bound=BOUND, settle_delay=delay, controller=controller).settle(
        operation, later, looked, elapsed=elapsed)
    if any(EFFECT_FIELDS[operation.op] & FIELDS[o.op] for o in later):
        return  # read from a later operation's record: elapsed is not this lookup's
    if looked is NoJob.COULD_NOT_ASK:
        assert got is None
        return
    want = naive_verdict(operation.op.value, looked if isinstance(looked, JobInfo) else None, operation.baseline,
                         elapsed, delay, baseline_stands(operation, controller))
    assert (None if got is None else got.verdict.value) == want


@settings(max_examples=examples(400))
@given(cases(), st.floats(0.0, 100.0))
def test_seconds_no_more_than_the_time_since_the_end_never_make_it_longer(case: Case, seen: float) -> None:
    """Rule 15: given seconds that are no more than the time since the end (since this host found
    the operation over), the delay is read from the fewer of those and the ledger times' difference."""
    operation, later, looked, looked_at, delay, controller = case
    got = OneLookup(looked_at, no_ends_by_bound=BOUND, settle_delay=delay, controller=controller).settle(
        operation, later, looked, seen=seen)
    if any(EFFECT_FIELDS[operation.op] & FIELDS[o.op] for o in later):
        return  # read from a later operation's record: seen is not this lookup's
    if looked is NoJob.COULD_NOT_ASK:
        assert got is None
        return
    if operation.finished_at is not None:
        end = operation.finished_at
    else:
        end = operation.ends_by if operation.ends_by is not None else operation.started_at + BOUND
    want = naive_verdict(operation.op.value, looked if isinstance(looked, JobInfo) else None, operation.baseline,
                         min(looked_at - end, seen), delay, baseline_stands(operation, controller))
    assert (None if got is None else got.verdict.value) == want


def test_a_later_record_is_read_on_the_boot_clock_where_it_can_be_and_never_as_absent_where_not() -> None:
    """Rule 15 for a later operation's record: the ledger's times say it was read 99 s after the
    end; the boot clock (``before``) says 3 s: too soon, so undecidable there; 50 s: absent; not
    known on one clock (another host): undecidable, never absent.  A record that shows the effect
    is ``present`` whatever the clocks say."""
    one = OneLookup(T0 + 200, no_ends_by_bound=BOUND, settle_delay=10.0)
    later = [op(2, Op.RELEASE, result=Result.OK, started=T0 + 100.0, finished=T0 + 101.0, baseline=RUNNING,
                baseline_at=T0 + 100.0)]
    plain = one.settle(op(1, Op.HOLD), later, RUNNING)
    assert plain is not None and plain.verdict is Verdict.ABSENT
    by_boot = one.settle(op(1, Op.HOLD), later, RUNNING, before={2: 50.0})
    assert by_boot == replace(plain, detail=plain.detail.replace("99.0 s", "50.0 s"))
    soon = one.settle(op(1, Op.HOLD), later, RUNNING, before={2: 3.0})
    assert soon is not None and soon.verdict is Verdict.UNDECIDABLE and "read 3.0 s after the end" in soon.detail
    blind = one.settle(op(1, Op.HOLD), later, RUNNING, before={})
    assert blind is not None and blind.verdict is Verdict.UNDECIDABLE and "cannot be told" in blind.detail
    held = [replace(later[0], baseline=HELD)]
    found = one.settle(op(1, Op.HOLD), held, RUNNING, before={})
    assert found is not None and found.verdict is Verdict.PRESENT


def test_a_forward_step_reads_no_absent_before_the_delay_on_the_boot_clock() -> None:
    """The instance: the ledger's times say an hour since the end, the boot clock three seconds."""
    one = OneLookup(T0 + 3600, no_ends_by_bound=BOUND, settle_delay=10.0)
    assert one.settle(op(1, Op.HOLD), [], RUNNING) is not None  # the ledger's times alone: absent
    assert one.settle(op(1, Op.HOLD), [], RUNNING, elapsed=3.0) is None
    settled = one.settle(op(1, Op.HOLD), [], RUNNING, elapsed=10.0)
    assert settled is not None and settled.verdict.value == "absent"
    assert one.settle(op(1, Op.HOLD), [], RUNNING, seen=3.0) is None  # found over 3 s ago: too soon
    assert OneLookup(T0 + 5, no_ends_by_bound=BOUND, settle_delay=10.0).settle(op(1, Op.HOLD), [], RUNNING,
                                                                               seen=60.0) is None
