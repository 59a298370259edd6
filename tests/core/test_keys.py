"""Idempotency keys: what a keyed command does with a job, against a naive reading of the contract
(docs/contract.md §12).

The naive reading below is written from the contract's words ("if one is ok, or settles as
present, the job is not acted on again"; "an unfinished one whose lease has not lapsed makes the
job wait or be skipped as busy, never run twice"; "a requeue is re-run only on absent, never on
undecidable or gone"; bit_set: "s3 certainly did not run", so the requeue happened iff call 2
succeeded), from raw results and calls, never through the module's helpers.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_dsl.core.keys import Decision, Earlier, Step, check_key, check_reason, decide, took_effect
from slurm_dsl.core.model import CallOutcome, InvalidInput, Op, Result, Verdict
from tests.examples import examples

CERTAIN_NO = (Result.REJECTED, Result.NOT_FOUND, Result.EXPIRED, Result.NOT_RUN)
REQUEUES = (Op.REQUEUE, Op.REQUEUE_HOLD)  # "never requeued twice": into hold or not

# One earlier operation, raw: (result or None, its calls' outcomes, verdict, running)
Raw = Tuple[Optional[Result], Tuple[CallOutcome, ...], Optional[Verdict], bool]


def naive_happened(op: Op, result: Optional[Result], calls: Tuple[CallOutcome, ...]) -> Optional[bool]:
    if result is None or result == Result.UNKNOWN:
        return None
    if result == Result.OK:
        return True
    if result == Result.BIT_SET:
        return len(calls) >= 2 and calls[1] == CallOutcome.SUCCESS
    return False


def naive(op: Op, raws: List[Raw]) -> Tuple[Step, List[int]]:
    """The step, and the indexes of the earlier operations that may be the one that decided."""
    happened = [naive_happened(op, r, c) for r, c, _, _ in raws]
    done = [i for i, (r, c, v, _) in enumerate(raws) if happened[i] is True or v == Verdict.PRESENT]
    if done:
        return Step.DONE, done[:1]
    waiting = [i for i, (r, c, v, run) in enumerate(raws) if run or (happened[i] is None and v is None)]
    if waiting:
        return Step.WAIT, waiting
    if op in REQUEUES:
        maybe = (Verdict.UNDECIDABLE, Verdict.GONE)
        stop = [i for i, (_, _, v, _) in enumerate(raws) if happened[i] is None and v in maybe]
        if stop:
            return Step.STOP, stop[:1]
    return Step.ACT, []


@st.composite
def raw_ops(draw: st.DrawFn, op: Op) -> Raw:
    # Weighted towards what the rules tell apart: unknown and unfinished ones, rarely running (a
    # running one makes the job wait, whatever the rest).
    running = draw(st.integers(0, 5)) == 0
    if running:
        result = None
    else:
        choices = [r for r in Result if op in REQUEUES or r != Result.BIT_SET]
        result = draw(st.sampled_from([None, Result.UNKNOWN, Result.UNKNOWN, *choices]))
    calls = tuple(draw(st.lists(st.sampled_from(list(CallOutcome)), max_size=3)))
    unknown = result is None or result == Result.UNKNOWN
    verdict = draw(st.sampled_from([None, *Verdict, Verdict.GONE, Verdict.UNDECIDABLE])) if unknown else None
    return result, calls, verdict, running


CASES = st.sampled_from(list(Op)).flatmap(lambda op: st.tuples(st.just(op), st.lists(raw_ops(op), max_size=5)))


@settings(max_examples=examples(500))
@given(CASES)
def test_decide_follows_the_contract(case: Tuple[Op, List[Raw]]) -> None:
    op, raws = case
    earlier = [
        Earlier(100 + i, r, naive_happened(op, r, c), v, run) for i, (r, c, v, run) in enumerate(raws)
    ]
    got = decide(op, earlier)
    step, deciders = naive(op, raws)
    assert got.step is step
    if step is Step.ACT:
        assert got.because is None
    else:
        assert got.because in [100 + i for i in deciders]
        assert str(got.because) in got.detail


@settings(max_examples=examples(500))
@given(CASES)
def test_never_run_again_unless_every_earlier_one_certainly_did_nothing(case: Tuple[Op, List[Raw]]) -> None:
    op, raws = case
    earlier = [Earlier(i, r, naive_happened(op, r, c), v, run) for i, (r, c, v, run) in enumerate(raws)]
    if decide(op, earlier).step is Step.ACT:
        for r, c, v, run in raws:
            assert not run
            assert naive_happened(op, r, c) is False or v == Verdict.ABSENT or (op not in REQUEUES and v is not None)


@pytest.mark.parametrize(
    ("op", "result", "calls", "expected"),
    [
        (Op.HOLD, Result.OK, (CallOutcome.SUCCESS,), True),
        (Op.HOLD, Result.REJECTED, (CallOutcome.REJECTED,), False),
        (Op.HOLD, Result.UNKNOWN, (CallOutcome.UNKNOWN,), None),
        (Op.HOLD, None, (), None),
        (Op.REQUEUE, Result.BIT_SET, (CallOutcome.SUCCESS, CallOutcome.SUCCESS, CallOutcome.EXPIRED), True),
        (Op.REQUEUE, Result.BIT_SET, (CallOutcome.SUCCESS, CallOutcome.REJECTED, CallOutcome.EXPIRED), False),
        (Op.REQUEUE, Result.EXPIRED, (CallOutcome.EXPIRED,), False),
    ],
)
def test_took_effect(
    op: Op, result: Optional[Result], calls: Tuple[CallOutcome, ...], expected: Optional[bool]
) -> None:
    assert took_effect(op, result, calls) is expected


def test_bit_set_is_a_requeue_result_only() -> None:
    with pytest.raises(InvalidInput, match="requeue's result"):
        took_effect(Op.HOLD, Result.BIT_SET, ())


def test_the_first_that_took_effect_decides_even_beside_a_running_one() -> None:
    got = decide(Op.REQUEUE, [Earlier(1, None, None, None, True), Earlier(2, Result.OK, True, None, False)])
    assert got == Decision(Step.DONE, 2, "operation 2 with this key took effect: not run again")


def test_hold_runs_again_after_an_undecidable_one_and_requeue_stops() -> None:
    earlier = [Earlier(7, Result.UNKNOWN, None, Verdict.UNDECIDABLE, False)]
    assert decide(Op.HOLD, earlier).step is Step.ACT
    stop = decide(Op.REQUEUE, earlier)
    assert (stop.step, stop.because) == (Step.STOP, 7) and "never requeued twice" in stop.detail


@pytest.mark.parametrize(
    "bad",
    [
        Earlier(1, Result.OK, True, None, True),  # a result and still running
        Earlier(1, Result.UNKNOWN, True, None, False),  # unknown, yet its calls say it happened
        Earlier(1, "ok", True, None, False),  # type: ignore[arg-type]
        Earlier(1, Result.UNKNOWN, None, "present", False),  # type: ignore[arg-type]
        "operation 1",
    ],
)
def test_inconsistent_earlier_operations_are_refused(bad: object) -> None:
    with pytest.raises(InvalidInput):
        decide(Op.HOLD, [bad])  # type: ignore[list-item]


@pytest.mark.parametrize("key", ["nightly-42", "a", "x" * 128, "site:drain/node01@2026-12-01+1=ok_.x"])
def test_good_keys(key: str) -> None:
    assert check_key(key) == key and type(check_key(key)) is str


@pytest.mark.parametrize("key", ["", "x" * 129, "two words", "a;b", "ключ", "a\nb", "$(id)", 42, None, b"k"])
def test_bad_keys_are_refused_before_anything(key: object) -> None:
    with pytest.raises(InvalidInput, match="a key is 1-128 letters"):
        check_key(key)


@pytest.mark.parametrize("reason", ["drain for firmware, ticket OPS-1234", "é" * 1024, "x"])
def test_a_reason_is_kept_as_given(reason: str) -> None:
    assert check_reason(reason) == reason


@pytest.mark.parametrize("reason", ["", "   ", "a\nb", "a\tb", "\x1b[31mred", "a\x85b", "x" * 1025, None, 7])
def test_a_reason_a_log_or_a_terminal_would_misread_is_refused(reason: object) -> None:
    with pytest.raises(InvalidInput):
        check_reason(reason)
