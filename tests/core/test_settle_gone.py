"""``OneLookup.gone_at_once``: the operations whose verdict is known without their baseline (a
sweep settles 10,000 of them without reading one: docs/benchmarks.md §9).

The reference is the plain rule: for every operation it says True of, ``settle_operation`` gives
``one.gone`` (gone, no record, the lookup's time, read from no later operation) whatever
baseline the operation has, the one generated, none, or another record of the job; and the naive
reading below (docs/contract.md §12: "gone is gone", read from the lookup only when no later
operation of the job can speak for it) says True of exactly the same ones.  Values that ``settle_operation``
refuses are never True."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import InvalidInput, Op, Result, Verdict
from slurm_dsl.core.settle import GONE_DETAIL, NoJob, OneLookup, Recorded, Settled, Unsettled, settle_operation
from tests.core.test_settle_operation import BOUND, RUNNING, T0, cases
from tests.examples import examples

ANSWERS = st.sampled_from(["gone", "found", "not asked"])
ODD_TIMES = st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -1e308, 5])  # 5: an int, not a float
ODD_IDS = st.sampled_from(["07", "0", "4294967295", "12_3", " 12", "١٢"])


def naive(op: Recorded, answer: str, has_later: bool, looked_at: float) -> bool:
    """By the sentences: the job is gone, nothing later on the job, the operation still to settle,
    its job id a plain decimal id and the times the rule reads (its start, its end: finished_at,
    else ends_by, else the start plus the bound) and the time from its end finite floats (an int
    time is read whole, by the plain rule: a False decides nothing)."""
    if answer != "gone" or has_later or op.result not in (None, Result.UNKNOWN):
        return False
    job = op.job_id
    if not (job.isascii() and job.isdigit() and job[0] != "0" and int(job) <= 4294967294):
        return False
    end = op.finished_at if op.finished_at is not None else op.ends_by  # the end the delay counts from
    if any(t is not None and (type(t) is not float or t != t or t in (math.inf, -math.inf))
           for t in (op.started_at, end)):
        return False
    end = op.started_at + BOUND if end is None else end
    return abs(looked_at - end) != math.inf


@st.composite
def batches(draw: st.DrawFn) -> Tuple[List[Recorded], Dict[str, Optional[JobInfo]], Set[int], float]:
    """Operations of several jobs (some with odd values), a lookup's answers, the ids that have a
    later operation, the lookup's time."""
    ops: List[Recorded] = []
    answers: Dict[str, Optional[JobInfo]] = {}
    later: Set[int] = set()
    for n, (operation, _, _, _, _, _) in enumerate(draw(st.lists(cases(), min_size=1, max_size=8))):
        job = draw(ODD_IDS) if draw(st.integers(0, 9)) == 0 else str(5100 + n)
        operation = replace(operation, id=n + 1, job_id=job,
                            baseline=None if operation.baseline is None else replace(operation.baseline, job_id=job))
        if draw(st.integers(0, 5)) == 0:
            odd: Dict[str, Any] = {draw(st.sampled_from(["started_at", "finished_at", "ends_by"])): draw(ODD_TIMES)}
            operation = replace(operation, **odd)
        if draw(st.integers(0, 5)) == 0:
            operation = replace(operation, result=draw(st.sampled_from(list(Result))))
        ops.append(operation)
        answer = draw(ANSWERS)
        if answer != "not asked":
            answers[job] = None if answer == "gone" else replace(RUNNING, job_id=job)
        if draw(st.booleans()):
            later.add(operation.id)
    return ops, answers, later, T0 + draw(st.floats(-100.0, 2 * BOUND))


def answer_of(answers: Dict[str, Optional[JobInfo]], job: str) -> str:
    if job not in answers:
        return "not asked"
    return "gone" if answers[job] is None else "found"


@settings(max_examples=examples(500))
@given(batches())
def test_gone_at_once_is_the_plain_rule_s_gone_whatever_the_baseline(
    batch: Tuple[List[Recorded], Dict[str, Optional[JobInfo]], Set[int], float],
) -> None:
    ops, answers, later, looked_at = batch
    one = OneLookup(looked_at, no_ends_by_bound=BOUND)
    pending = [Unsettled(o.id, o.job_id, o.op, o.result, o.started_at, o.finished_at, o.ends_by) for o in ops]
    got = one.gone_at_once(pending, answers, later)
    assert got == one.gone_at_once(ops, answers, later)  # a Recorded reads the same
    assert one.gone == Settled(Verdict.GONE, GONE_DETAIL, looked_at, None, None)
    for operation, quick in zip(ops, got):
        assert quick == naive(operation, answer_of(answers, operation.job_id), operation.id in later, looked_at)
        if not quick:
            continue
        for baseline in (operation.baseline, None, replace(RUNNING, job_id=operation.job_id, restarts=3)):
            # no later operation: the plain rule with none given
            assert settle_operation(replace(operation, baseline=baseline), [], NoJob.GONE, looked_at,
                                    no_ends_by_bound=BOUND) == one.gone


@settings(max_examples=examples(300))
@given(batches())
def test_a_value_the_plain_rule_refuses_is_never_gone_at_once(
    batch: Tuple[List[Recorded], Dict[str, Optional[JobInfo]], Set[int], float],
) -> None:
    ops, answers, later, looked_at = batch
    one = OneLookup(looked_at, no_ends_by_bound=BOUND)
    for operation, quick in zip(ops, one.gone_at_once(ops, answers, later)):
        try:
            settle_operation(operation, [], NoJob.GONE, looked_at, no_ends_by_bound=BOUND)
        except InvalidInput:
            assert not quick


def test_gone_at_once_by_example() -> None:
    one = OneLookup(T0 + 60.0, no_ends_by_bound=BOUND)
    base = Unsettled(1, "41", Op.REQUEUE, Result.UNKNOWN, T0, T0 + 1.0, None)
    cases: List[Tuple[Unsettled, Mapping[str, Optional[JobInfo]], Set[int], bool]] = [
        (base, {"41": None}, set(), True),
        (base._replace(result=None, finished_at=None, ends_by=T0 + 30.0), {"41": None}, set(), True),
        (base, {"41": None}, {1}, False),  # a later operation: it may speak for this one (Rule 10)
        (base, {"41": RUNNING}, set(), False),  # the job is there: its record is read
        (base, {}, set(), False),  # not answered for: could not ask, never gone
        (base._replace(result=Result.OK), {"41": None}, set(), False),  # nothing to settle
        (base._replace(job_id="041"), {"041": None}, set(), False),  # no job id
        (base._replace(started_at=math.inf), {"41": None}, set(), False),
        (base._replace(finished_at=math.nan), {"41": None}, set(), False),
    ]
    for pending, answers, later, want in cases:
        assert one.gone_at_once([pending], answers, later) == [want], pending
