"""ledger_rules: what an operation does to its job's object, without any storage (docs/contract.md §9.2)."""

from __future__ import annotations

from typing import Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.core import ledger_rules as rules
from slurm_dsl.core.combine import next_bit
from slurm_dsl.core.model import Op, Outcome, Reason, RequeueBit, Result

NONCE = "9f3c2a7b1e4d5f60718293a4b5c6d7e8"
BITS = list(RequeueBit)


@pytest.mark.parametrize("op", list(Op))
def test_only_a_requeue_has_an_intent_and_it_is_may_be_set(op: Op) -> None:
    intent = rules.intent(op, NONCE)
    if op in (Op.REQUEUE, Op.REQUEUE_HOLD):
        assert intent == rules.Intent(RequeueBit.MAY_BE_SET, f"{op.value} {NONCE} started")
    else:
        assert intent is None


@given(st.sampled_from(list(Op)), st.sampled_from(list(Result)), st.sampled_from(BITS),
       st.sampled_from(BITS), st.sampled_from([None, *BITS]))
def test_after_is_next_bit_of_the_right_prior(
    op: Op, result: Result, at_begin: RequeueBit, current: RequeueBit, bit: Optional[RequeueBit]
) -> None:
    requeues = op in (Op.REQUEUE, Op.REQUEUE_HOLD)
    outcome = Outcome(op, "7", result, bit if requeues else None, Reason.TIMED_OUT)
    change = rules.after(op, NONCE, at_begin, current, outcome)
    expected = next_bit(at_begin if requeues else current, outcome)
    # docs/contract.md §13.3: a restore that is ok cleared the flag by its call; the object stays
    # may_be_set, watched, until a save proves it.  (These outcomes have no calls: a requeue's
    # clear needs its call 3 to have cleared.)
    watched = expected is RequeueBit.CLEAR and op is Op.RESTORE and result is Result.OK
    assert change.bit is (RequeueBit.MAY_BE_SET if watched else expected)
    if requeues or op is Op.RESTORE:
        note = "; cleared, not yet known saved by slurmctld: watched until it is" if watched else ""
        assert change.why == f"{op.value} {NONCE}: {result.value} (timed_out){note}"
    else:
        assert change.why is None, "hold, release and open leave the object as it is"


def test_backoff_doubles_up_to_the_cap_and_never_overflows() -> None:
    assert [rules.backoff(n, 60.0, 3600.0) for n in range(1, 9)] == [60, 120, 240, 480, 960, 1920, 3600, 3600]
    assert rules.backoff(5000, 60.0, 3600.0) == 3600.0
    assert rules.backoff(0, 60.0, 3600.0) == 60.0


CLEARNESS_ORDER = [RequeueBit.CLEAR, RequeueBit.MAY_BE_SET, RequeueBit.SET]  # from clear to set, as §9 reads them


@given(st.sampled_from([Op.REQUEUE, Op.REQUEUE_HOLD, Op.RESTORE]), st.sampled_from(list(Result)), st.sampled_from(BITS),
       st.sampled_from(BITS), st.sampled_from([None, *BITS]))
def test_a_late_finish_never_makes_the_bit_clearer(
    op: Op, result: Result, at_begin: RequeueBit, current: RequeueBit, bit: Optional[RequeueBit]
) -> None:
    """Rule 7: once another operation began on the job, this one's finish may only keep the bit
    or make it less clear; with nothing begun since, it is the ordinary ``after``.  Whether it
    would make it clearer is read from what its calls did (``next_bit``), before Rule 8 keeps a
    clear watched: a late clear leaves the object as the newer operation left it."""
    requeues = op is not Op.RESTORE
    outcome = Outcome(op, "7", result, bit if requeues else None, Reason.TIMED_OUT)
    ordinary = rules.after(op, NONCE, at_begin, current, outcome)
    late = rules.after(op, NONCE, at_begin, current, outcome, later_began=True)
    plain = next_bit(at_begin if requeues else current, outcome)
    assert CLEARNESS_ORDER.index(late.bit) >= CLEARNESS_ORDER.index(current)
    if CLEARNESS_ORDER.index(plain) >= CLEARNESS_ORDER.index(current):
        assert late == ordinary
    else:
        assert late.bit is current and late.why is None, "the object is left as the newer operation left it"
