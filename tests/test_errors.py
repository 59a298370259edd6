"""SPEC §8: the exceptions, decided in one place from the outcome."""

from __future__ import annotations

from typing import Type

import pytest

from slurm_dsl import (
    DSLError,
    Expired,
    NotFound,
    NotRun,
    OutcomeUnknown,
    Rejected,
    RequeueBitSet,
    read_outcome,
)
from tests.ground import ALREADY_FINISHED, INVALID_JOB_ID, NONCE, UNEXPECTED, frame, plain, suspend

J = "31"


@pytest.mark.parametrize(
    ("op", "calls", "exc", "may_be_set"),
    [
        ("hold", [(suspend(ALREADY_FINISHED, J), 1, 1)], Rejected, False),
        ("hold", [(suspend(INVALID_JOB_ID, J), 1, 1)], NotFound, False),
        ("hold", [(b"", 1, 75)], Expired, False),
        ("hold", [(b"", 1, 124)], OutcomeUnknown, False),
        ("hold", [(b"", 1, 127)], NotRun, False),
        ("requeue", [(b"", 1, 0), (b"", 2, 0), (b"", 3, 75)], RequeueBitSet, True),
        ("requeue", [(plain(UNEXPECTED, J), 1, 1), (b"", 3, 0)], OutcomeUnknown, True),
        ("requeue", [(b"", 1, 75)], Expired, False),
    ],
)
def test_raise_for_result(op: str, calls: list, exc: Type[DSLError], may_be_set: bool) -> None:  # type: ignore[type-arg]
    out = read_outcome(op, J, frame(NONCE, calls), calls[-1][2], NONCE)
    with pytest.raises(exc) as info:
        out.raise_for_result()
    err = info.value
    assert type(err) is exc
    assert (err.job_id, err.op, err.outcome) == (J, op, out)
    assert err.requeue_bit_may_be_set is may_be_set
    assert J in str(err)


def test_ok_raises_nothing() -> None:
    read_outcome("hold", J, frame(NONCE, [(b"", 1, 0)]), 0, NONCE).raise_for_result()


def test_sentinel_hierarchy() -> None:
    assert issubclass(NotFound, Rejected)
    for cls in (Rejected, Expired, OutcomeUnknown, RequeueBitSet, NotRun):
        assert issubclass(cls, DSLError)
    for carrier in (RequeueBitSet, NotRun):
        for sentinel in (Rejected, Expired, OutcomeUnknown):
            assert not issubclass(carrier, sentinel)
    for a in (Rejected, Expired, OutcomeUnknown):
        for b in (Rejected, Expired, OutcomeUnknown):
            assert issubclass(a, b) == (a is b)
