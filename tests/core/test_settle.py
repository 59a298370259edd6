"""settle: did an unknown operation take effect? The verdict from one lookup, no lookup made here
(docs/contract.md §12).

The expected answers come from the contract's words through ``expected`` below, a second, naive
implementation written apart from the module: it reads the records' fields itself and never calls
the module's helpers.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Dict, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import InvalidInput, Op, Outcome, RequeueBit, RequeueBitSet, Result, Verdict
from slurm_dsl.core.settle import (
    DEFAULT_SETTLE_DELAY,
    MIN_SETTLE_DELAY,
    Looked,
    NoJob,
    check_settle_delay,
    exits_as,
    looked_up,
    verdict,
)
from tests.examples import examples

GONE, COULD_NOT_ASK = NoJob.GONE, NoJob.COULD_NOT_ASK
LATE = 10.0  # a lookup at the default settle delay after the end
SOON = 0.1  # one right after it

# Records as squeue shows them on 22.05 (docs/slurm-behaviour.md §4, §5, §8; a normal priority
# 4294901657), one job id throughout.
PENDING = JobInfo("4211", "PENDING", False, 0, 4294901657, "Dependency")
HELD_ADMIN = JobInfo("4211", "PENDING", False, 0, 0, "JobHeldAdmin")  # after `scontrol hold`
HELD_USER = JobInfo("4211", "PENDING", False, 0, 0, "JobHeldUser")  # `sbatch --hold`
RUNNING = JobInfo("4211", "RUNNING", False, 0, 4294901657, "None")
RUNNING_HELD = JobInfo("4211", "RUNNING", False, 0, 0, "JobHeldAdmin")  # a hold keeps it running
RUNNING_RQ1 = JobInfo("4211", "RUNNING", True, 0, 4294901657, "None")  # call 1 landed, call 2 not
COMPLETING_REQUEUED = JobInfo("4211", "COMPLETING", True, 1, 4294901657, "None")  # +0.008 s
PENDING_REQUEUED = JobInfo("4211", "PENDING", True, 1, 4294901657, "BeginTime")  # +0.039 s, call 3 not yet
PENDING_REQUEUED_CLEARED = JobInfo("4211", "PENDING", False, 1, 4294901657, "BeginTime")
REQUEUED_HELD = JobInfo("4211", "PENDING", True, 1, 0, "job_requeued_in_held_state")
COMPLETED_RQ1 = JobInfo("4211", "COMPLETED", True, 0, 4294138661, "None")  # slurmctld will not clear it
CANCELLED_HELD = JobInfo("4211", "CANCELLED", False, 0, 0, "JobHeldUser")  # priority kept as it ended
ON_24_11 = JobInfo("4211", "PENDING", False, 0, 1, "None")  # 24.11: priority 1 (docs/slurm-24.11-26.05.md §0)

P, A, G, U = Verdict.PRESENT, Verdict.ABSENT, Verdict.GONE, Verdict.UNDECIDABLE

# (op, looked, baseline, seconds since the end, verdict)
CASES: List[Tuple[Op, Looked, Optional[JobInfo], Optional[float], Optional[Verdict]]] = [
    # hold: PriorityLong 0, whatever the reason or state
    (Op.HOLD, HELD_ADMIN, None, SOON, P),
    (Op.HOLD, HELD_USER, None, None, P),
    (Op.HOLD, RUNNING_HELD, None, -1.0, P),
    (Op.HOLD, REQUEUED_HELD, None, LATE, P),
    (Op.HOLD, CANCELLED_HELD, None, LATE, P),
    (Op.HOLD, PENDING, None, LATE, A),
    (Op.HOLD, PENDING, None, 9.999, None),  # not yet: it may still be applied
    (Op.HOLD, RUNNING, None, None, None),  # the end is not known: never absent
    (Op.HOLD, ON_24_11, PENDING, 600.0, A),  # a baseline is read only by a requeue
    # release and open: PriorityLong above 0
    (Op.RELEASE, PENDING, None, SOON, P),
    (Op.RELEASE, ON_24_11, None, SOON, P),
    (Op.RELEASE, HELD_ADMIN, None, LATE, A),
    (Op.RELEASE, HELD_USER, None, 3.0, None),
    (Op.OPEN, RUNNING, None, None, P),
    (Op.OPEN, HELD_USER, None, LATE, A),
    (Op.OPEN, CANCELLED_HELD, None, 1.0, None),
    # requeue: RestartCnt above the baseline's
    (Op.REQUEUE, COMPLETING_REQUEUED, RUNNING_RQ1, SOON, P),
    (Op.REQUEUE, PENDING_REQUEUED, RUNNING_RQ1, None, P),
    (Op.REQUEUE, PENDING_REQUEUED_CLEARED, RUNNING, LATE, P),
    (Op.REQUEUE, RUNNING_RQ1, RUNNING, LATE, A),
    (Op.REQUEUE, RUNNING_RQ1, RUNNING, SOON, None),
    (Op.REQUEUE, PENDING_REQUEUED, None, LATE, U),  # no baseline, no verdict for ever
    (Op.REQUEUE, RUNNING, None, SOON, U),
    (Op.REQUEUE, RUNNING, PENDING_REQUEUED, LATE, U),  # fewer restarts than before: not that record
    (Op.REQUEUE, PENDING_REQUEUED, PENDING_REQUEUED, LATE, A),  # requeued before, not since
    # requeue into hold: RestartCnt above the baseline's, and held (docs/contract.md §1)
    (Op.REQUEUE_HOLD, REQUEUED_HELD, RUNNING_RQ1, SOON, P),
    (Op.REQUEUE_HOLD, PENDING_REQUEUED, RUNNING_RQ1, LATE, U),  # requeued, not held: another's, or released
    (Op.REQUEUE_HOLD, RUNNING_RQ1, RUNNING, LATE, A),
    (Op.REQUEUE_HOLD, RUNNING_HELD, RUNNING, LATE, A),  # held, but never requeued: absent
    (Op.REQUEUE_HOLD, RUNNING_RQ1, RUNNING, SOON, None),
    (Op.REQUEUE_HOLD, REQUEUED_HELD, None, LATE, U),  # no baseline, no verdict for ever
    # restore: the Requeue flag 0
    (Op.RESTORE, RUNNING, None, SOON, P),
    (Op.RESTORE, PENDING_REQUEUED_CLEARED, None, None, P),
    (Op.RESTORE, RUNNING_RQ1, None, LATE, A),
    (Op.RESTORE, COMPLETED_RQ1, None, 3600.0, A),
    (Op.RESTORE, PENDING_REQUEUED, None, 1.999, None),
    # gone is gone; could not ask decides nothing
    *((op, GONE, None, None, G) for op in Op),
    (Op.REQUEUE, GONE, RUNNING, SOON, G),
    *((op, COULD_NOT_ASK, None, LATE, None) for op in Op),
    (Op.REQUEUE, COULD_NOT_ASK, RUNNING, 3600.0, None),
]


@pytest.mark.parametrize("op, looked, baseline, since_end, expected_verdict", CASES)
def test_the_verdicts_of_real_records(
    op: Op, looked: Looked, baseline: Optional[JobInfo], since_end: Optional[float],
    expected_verdict: Optional[Verdict],
) -> None:
    assert verdict(op, looked, baseline=baseline, since_end=since_end) is expected_verdict


def test_absent_needs_the_settle_delay_given() -> None:
    assert verdict(Op.HOLD, PENDING, baseline=None, since_end=2.0, settle_delay=2.0) is Verdict.ABSENT
    assert verdict(Op.HOLD, PENDING, baseline=None, since_end=1.99, settle_delay=2.0) is None
    assert verdict(Op.HOLD, PENDING, baseline=None, since_end=29.0, settle_delay=30) is None
    assert verdict(Op.HOLD, PENDING, baseline=None, since_end=30, settle_delay=30) is Verdict.ABSENT
    assert DEFAULT_SETTLE_DELAY == 10.0 and MIN_SETTLE_DELAY == 2.0  # docs/settle-delay.md §3


# -- the naive second implementation: docs/contract.md §12 in its own words -----------------------

# "effect present when the record shows", one line of the table per op.
EFFECT_SHOWN: Dict[str, Callable[[JobInfo, Optional[JobInfo]], bool]] = {
    "hold": lambda record, _: record.priority == 0,
    "release": lambda record, _: record.priority > 0,
    "open": lambda record, _: record.priority > 0,
    "requeue": lambda record, before: before is not None and record.restarts > before.restarts,
    "requeuehold": lambda record, before: (before is not None and record.restarts > before.restarts
                                           and record.priority == 0),
    "restore": lambda record, _: record.requeue is False,
}


def expected(
    op: str, looked: Looked, baseline: Optional[JobInfo], since_end: Optional[float], delay: float
) -> Optional[str]:
    """The contract's answer, by its sentences, in order; None for "no verdict (yet)"."""
    if looked == "could_not_ask":
        return None  # "A lookup that could not ask decides nothing."
    if looked == "gone":
        return "gone"  # "slurmctld no longer knows the job"
    assert isinstance(looked, JobInfo)
    if op in ("requeue", "requeuehold"):
        if baseline is None:
            return "undecidable"  # "No baseline, no verdict for a requeue"
        if looked.restarts < baseline.restarts:
            return "undecidable"  # "the record cannot say": a count never goes down for one job
        if looked.restarts > baseline.restarts + 1:
            return "undecidable"  # "RestartCnt above baseline + 1 is undecidable, never present"
        if op == "requeuehold" and looked.restarts == baseline.restarts + 1 and looked.priority != 0:
            return "undecidable"  # "one up but not held is undecidable, never absent"
    if EFFECT_SHOWN[op](looked, baseline):
        return "present"  # "present may be read from any lookup"
    looked_late_enough = since_end is not None and since_end - delay >= 0
    return "absent" if looked_late_enough else None


JOB = "4211"
STATES = ["PENDING", "RUNNING", "COMPLETING", "COMPLETED", "CANCELLED", "FAILED", "SPECIAL_EXIT"]
REASONS = ["None", "JobHeldAdmin", "JobHeldUser", "Dependency", "BeginTime", "job_requeued_in_held_state"]
records = st.builds(
    JobInfo,
    job_id=st.just(JOB),
    state=st.sampled_from(STATES),
    requeue=st.booleans(),
    restarts=st.integers(0, 0xFFFF),
    priority=st.one_of(st.just(0), st.just(1), st.integers(1, 0xFFFFFFFF)),
    reason=st.sampled_from(REASONS),
)
lookeds: st.SearchStrategy[Looked] = st.one_of(records, st.sampled_from([GONE, COULD_NOT_ASK]))
baselines = st.one_of(st.none(), records)
delays = st.one_of(st.sampled_from([MIN_SETTLE_DELAY, DEFAULT_SETTLE_DELAY, 120]), st.floats(2.0, 1e6))


@st.composite
def lookups(draw: st.DrawFn) -> Tuple[Op, Looked, Optional[JobInfo], Optional[float], float]:
    """A lookup: some records close to their baseline's count, some times right at the delay."""
    op = draw(st.sampled_from(list(Op)))
    looked = draw(lookeds)
    baseline = draw(baselines)
    if baseline is not None and isinstance(looked, JobInfo) and draw(st.booleans()):
        looked = replace(looked, restarts=max(0, baseline.restarts + draw(st.integers(-1, 3))))
    delay = draw(delays)
    since_end = draw(st.one_of(
        st.none(), st.floats(-60.0, 1e7), st.integers(-5, 10**6),
        st.sampled_from([delay, math.nextafter(delay, 0.0), math.nextafter(delay, math.inf)]),
    ))
    return op, looked, baseline, since_end, delay


@settings(max_examples=examples(1000))  # five ops by three answers by the timing: a wide space, and cheap
@given(lookups())
def test_the_verdict_is_the_contracts(case: Tuple[Op, Looked, Optional[JobInfo], Optional[float], float]) -> None:
    op, looked, baseline, since_end, delay = case
    got = verdict(op, looked, baseline=baseline, since_end=since_end, settle_delay=delay)
    want = expected(op.value, looked, baseline, since_end, delay)
    assert (None if got is None else got.value) == want


@given(lookups())
def test_never_absent_from_a_lookup_made_before_the_settle_delay(
    case: Tuple[Op, Looked, Optional[JobInfo], Optional[float], float],
) -> None:
    op, looked, baseline, since_end, delay = case
    got = verdict(op, looked, baseline=baseline, since_end=since_end, settle_delay=delay)
    if since_end is None or since_end < delay:
        assert got is not Verdict.ABSENT


@settings(max_examples=examples(1000))
@given(lookups())
def test_never_present_without_the_effect_on_the_record(
    case: Tuple[Op, Looked, Optional[JobInfo], Optional[float], float],
) -> None:
    op, looked, baseline, since_end, delay = case
    if verdict(op, looked, baseline=baseline, since_end=since_end, settle_delay=delay) is Verdict.PRESENT:
        assert isinstance(looked, JobInfo)
        assert EFFECT_SHOWN[op.value](looked, baseline)


@given(records, st.one_of(st.none(), st.floats(-60.0, 1e7)), delays)
def test_a_requeue_without_a_baseline_is_undecidable(
    record: JobInfo, since_end: Optional[float], delay: float
) -> None:
    assert verdict(Op.REQUEUE, record, baseline=None, since_end=since_end, settle_delay=delay) is Verdict.UNDECIDABLE


@given(lookups())
def test_a_lookup_that_could_not_ask_decides_nothing(
    case: Tuple[Op, Looked, Optional[JobInfo], Optional[float], float],
) -> None:
    op, _, baseline, since_end, delay = case
    assert verdict(op, COULD_NOT_ASK, baseline=baseline, since_end=since_end, settle_delay=delay) is None


@given(lookups())
def test_gone_is_gone_whatever_the_op(case: Tuple[Op, Looked, Optional[JobInfo], Optional[float], float]) -> None:
    op, _, baseline, since_end, delay = case
    assert verdict(op, GONE, baseline=baseline, since_end=since_end, settle_delay=delay) is Verdict.GONE


# -- bad input: a clear error, nothing decided ---------------------------------------------------


@pytest.mark.parametrize("delay", [1.999, 0, -10, math.nan, math.inf, True, "10", None, 10**400])
def test_a_bad_settle_delay_is_invalid_input(delay: object) -> None:
    with pytest.raises(InvalidInput, match="settle delay"):
        check_settle_delay(delay)
    with pytest.raises(InvalidInput, match="settle delay"):
        verdict(Op.HOLD, HELD_ADMIN, baseline=None, since_end=SOON, settle_delay=delay)  # type: ignore[arg-type]


def test_a_good_settle_delay_is_a_plain_float() -> None:
    class Seconds(float):
        def __ge__(self, other: object) -> bool:
            raise AssertionError("a caller's subclass must not decide")

    assert check_settle_delay(2) == 2.0 and type(check_settle_delay(2)) is float
    assert check_settle_delay(Seconds(10.0)) == 10.0


@pytest.mark.parametrize("since_end", [math.nan, math.inf, -math.inf, True, "12", b"1"])
def test_a_bad_time_since_the_end_is_invalid_input(since_end: object) -> None:
    with pytest.raises(InvalidInput, match="since the end"):
        verdict(Op.HOLD, HELD_ADMIN, baseline=None, since_end=since_end)  # type: ignore[arg-type]


@pytest.mark.parametrize("looked", [None, "gone", "could_not_ask", {}, ("4211", None)])
def test_no_record_must_say_gone_or_could_not_ask(looked: object) -> None:
    """None would mean both "gone" and "could not ask": it is refused, as is a bare string."""
    with pytest.raises(InvalidInput, match="looked must be"):
        verdict(Op.RESTORE, looked, baseline=None, since_end=LATE)  # type: ignore[arg-type]


def test_a_baseline_of_another_job_or_a_bad_record_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="not job 4211's"):
        verdict(Op.REQUEUE, PENDING_REQUEUED, baseline=replace(RUNNING, job_id="4212"), since_end=LATE)
    with pytest.raises(InvalidInput, match="baseline must be a JobInfo"):
        verdict(Op.REQUEUE, COULD_NOT_ASK, baseline=GONE, since_end=LATE)  # type: ignore[arg-type]
    flag_as_int = replace(RUNNING, requeue=1)  # type: ignore[arg-type]
    for bad in (replace(RUNNING, restarts=True), replace(RUNNING, priority=-1), flag_as_int):
        with pytest.raises(InvalidInput, match="bad JobId, Requeue flag"):
            verdict(Op.HOLD, bad, baseline=None, since_end=LATE)
    with pytest.raises(InvalidInput, match="unknown op"):
        verdict("suspend", RUNNING, baseline=None, since_end=LATE)  # type: ignore[arg-type]


def test_looked_up_keeps_gone_apart_from_not_answered() -> None:
    answers: Dict[str, Optional[JobInfo]] = {"4211": HELD_ADMIN, "4212": None}
    assert looked_up(answers, "4211") is HELD_ADMIN
    assert looked_up(answers, 4212) is NoJob.GONE
    assert looked_up(answers, "4213") is NoJob.COULD_NOT_ASK  # not answered for: never gone
    with pytest.raises(InvalidInput, match="not job 4212's"):
        looked_up({"4212": HELD_ADMIN}, "4212")
    with pytest.raises(InvalidInput):
        looked_up(answers, "42_1")


# -- the exit of a settled row ------------------------------------------------------------------

EFFECTS: List[Optional[Verdict]] = [None, *Verdict]
# docs/contract.md §12: "a row whose result is unknown exits by its effect"
EXIT_BY_EFFECT = {None: "unknown", "present": "ok", "gone": "not_found", "absent": "unknown", "undecidable": "unknown"}


@pytest.mark.parametrize("effect", EFFECTS)
def test_an_unknown_row_exits_by_its_effect(effect: Optional[Verdict]) -> None:
    assert exits_as(Result.UNKNOWN, effect).value == EXIT_BY_EFFECT[None if effect is None else effect.value]


@pytest.mark.parametrize("op", list(Op))
@pytest.mark.parametrize("bit", [None, *RequeueBit])
@pytest.mark.parametrize("effect", EFFECTS)
def test_a_requeue_present_with_its_bit_not_clear_exits_bit_set(
    op: Op, bit: Optional[RequeueBit], effect: Optional[Verdict]
) -> None:
    # §12 "The effect and the bit are two answers": "A requeue settled present whose requeue bit is
    # not clear (call 3 did not run or did not succeed) exits as bit_set (14) at best, never 0".
    want = EXIT_BY_EFFECT[None if effect is None else effect.value]
    if op in (Op.REQUEUE, Op.REQUEUE_HOLD) and effect is Verdict.PRESENT and bit is not RequeueBit.CLEAR:
        want = "bit_set"
    assert exits_as(Result.UNKNOWN, effect, op=op, requeue_bit=bit).value == want
    outcome = Outcome(op, JOB, Result.UNKNOWN, bit, effect=effect, settled=True)
    assert outcome.exits_as.value == want
    if want == "bit_set":
        with pytest.raises(RequeueBitSet):
            outcome.raise_for_result()


@pytest.mark.parametrize("result", [r for r in Result if r is not Result.UNKNOWN])
def test_a_row_not_unknown_has_no_effect_and_exits_as_its_result(result: Result) -> None:
    assert exits_as(result, None) is result
    for effect in Verdict:
        with pytest.raises(InvalidInput, match="has no effect"):
            exits_as(result, effect)


def test_exits_as_refuses_what_is_not_a_result_or_a_verdict() -> None:
    with pytest.raises(InvalidInput, match="result must be a Result"):
        exits_as("unknown", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="effect must be a Verdict"):
        exits_as(Result.UNKNOWN, "present")  # type: ignore[arg-type]
