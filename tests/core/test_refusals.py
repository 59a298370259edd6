"""Every row of docs/contract.md §5, with the real texts (docs/slurm-behaviour.md §1-§3, §6;
docs/slurm-24.11-26.05.md §1-§4)."""

from __future__ import annotations

from typing import List, Tuple

import pytest

from slurm_dsl.core.model import Op
from slurm_dsl.core.refusals import refusal_message
from tests.ground import (
    ACCESS_DENIED,
    ALREADY_FINISHED,
    DB_INDEX,
    DISABLED,
    INVALID_JOB_ID,
    INVALID_USER_ID,
    ONLY_BATCH,
    PENDING_EXECUTION,
    RATE_LIMITED,
    UNEXPECTED,
    plain,
    suspend,
)

J = "4242"
ALL = [
    INVALID_JOB_ID,
    ALREADY_FINISHED,
    INVALID_USER_ID,
    ACCESS_DENIED,
    DISABLED,
    PENDING_EXECUTION,
    ONLY_BATCH,
    RATE_LIMITED,
    DB_INDEX,
]
ALLOWED = {
    (Op.HOLD, 1): {INVALID_JOB_ID, ALREADY_FINISHED, INVALID_USER_ID, RATE_LIMITED, DB_INDEX},
    (Op.RELEASE, 1): {
        INVALID_JOB_ID,
        ALREADY_FINISHED,
        INVALID_USER_ID,
        ACCESS_DENIED,
        RATE_LIMITED,
        DB_INDEX,
    },
    (Op.OPEN, 1): {INVALID_JOB_ID, ALREADY_FINISHED, INVALID_USER_ID, ACCESS_DENIED, RATE_LIMITED, DB_INDEX},
    (Op.REQUEUE, 1): {INVALID_JOB_ID, ALREADY_FINISHED, INVALID_USER_ID, RATE_LIMITED, DB_INDEX},
    (Op.REQUEUE, 2): {INVALID_JOB_ID, DISABLED, PENDING_EXECUTION, ONLY_BATCH, ACCESS_DENIED, RATE_LIMITED},
    (Op.REQUEUE, 3): {INVALID_JOB_ID, ALREADY_FINISHED, INVALID_USER_ID, RATE_LIMITED, DB_INDEX},
    (Op.RESTORE, 1): {INVALID_JOB_ID, ALREADY_FINISHED, INVALID_USER_ID, RATE_LIMITED, DB_INDEX},
}
SUSPENDING = {Op.HOLD, Op.RELEASE, Op.OPEN}

CASES: List[Tuple[Op, int, str, bool]] = [
    (op, n, message, message in allowed) for (op, n), allowed in ALLOWED.items() for message in ALL
]


@pytest.mark.parametrize(("op", "number", "message", "allowed"), CASES)
def test_allow_lists_one_line(op: Op, number: int, message: str, allowed: bool) -> None:
    got = refusal_message(op, number, J, plain(message, J))
    assert got == (message if allowed else None)


@pytest.mark.parametrize(("op", "number", "message", "allowed"), CASES)
@pytest.mark.parametrize("space", [True, False], ids=["22.05-24.11", "26.05"])
def test_slurm_suspend_line_only_for_hold_release_open(
    op: Op, number: int, message: str, allowed: bool, space: bool
) -> None:
    got = refusal_message(op, number, J, suspend(message, J, space))
    assert got == (message if allowed and op in SUSPENDING else None)


@pytest.mark.parametrize(
    "stderr",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\n \n", id="blank only"),
        pytest.param(plain(UNEXPECTED, J), id="controller down (update, requeue)"),
        pytest.param(suspend(UNEXPECTED, J), id="controller down (hold)"),
        pytest.param(plain(INVALID_JOB_ID, "999999"), id="another job's id"),
        pytest.param(plain(INVALID_JOB_ID, J + "0"), id="a longer id"),
        pytest.param(plain(INVALID_JOB_ID, "0" + J), id="the id with a leading zero"),
        pytest.param(plain(ALREADY_FINISHED, J) + plain(INVALID_JOB_ID, J), id="two messages"),
        pytest.param(f"{J}_1-3: {ALREADY_FINISHED}\n".encode(), id="array format 22.05"),
        pytest.param(f"{J}_[1-3]: {ALREADY_FINISHED}\n".encode(), id="array format 26.05"),
        pytest.param(b"scontrol: error: Invalid Requeue value: yes\n", id="scontrol error"),
        pytest.param(plain(ALREADY_FINISHED, J).replace(b"\n", b"\r\n"), id="CRLF"),
        pytest.param(plain(ALREADY_FINISHED, J) + b"extra\n", id="an extra line"),
        pytest.param(b"slurm_suspend error: " + ALREADY_FINISHED.encode() + b"\n", id="suspend line alone"),
        pytest.param(plain(ALREADY_FINISHED, J)[:-1] + b" \n", id="trailing space"),
        pytest.param(b"  " + plain(ALREADY_FINISHED, J), id="leading space"),
        pytest.param(plain(ALREADY_FINISHED.lower(), J), id="other case"),
        pytest.param(b"too few arguments for keyword:hold\n", id="usage error"),
    ],
)
def test_not_refusals(stderr: bytes) -> None:
    for op, number in ALLOWED:
        assert refusal_message(op, number, J, stderr) is None


def test_blank_lines_are_ignored() -> None:
    stderr = b"\n" + plain(ALREADY_FINISHED, J) + b"  \t\n\n"
    assert refusal_message(Op.REQUEUE, 1, J, stderr) == ALREADY_FINISHED


def test_suspend_line_must_repeat_the_same_message() -> None:
    mixed = plain(ALREADY_FINISHED, J) + b"slurm_suspend error: " + INVALID_JOB_ID.encode() + b"\n"
    assert refusal_message(Op.HOLD, 1, J, mixed) is None


def test_suspend_line_with_two_spaces_is_not_a_refusal() -> None:
    stderr = plain(ALREADY_FINISHED, J) + b"slurm_suspend error:  " + ALREADY_FINISHED.encode() + b"\n"
    assert refusal_message(Op.HOLD, 1, J, stderr) is None


def test_repeated_for_job_lines_with_one_message_are_a_refusal() -> None:
    assert refusal_message(Op.REQUEUE, 2, J, plain(DISABLED, J) * 2) == DISABLED
