"""docs/contract.md §6 (framing) and §7 (results), table-driven, with the real texts."""

from __future__ import annotations

import itertools
from typing import Dict, List, Optional, Tuple

import pytest

from slurm_dsl import Op, Outcome, Reason, RequeueBit, Result
from slurm_dsl.core.reader import read_outcome
from tests.ground import (
    ACCESS_DENIED,
    ALREADY_FINISHED,
    DISABLED,
    INVALID_JOB_ID,
    INVALID_USER_ID,
    NONCE,
    OTHER_NONCE,
    PENDING_EXECUTION,
    RATE_LIMITED,
    UNEXPECTED,
    frame,
    plain,
    suspend,
)

J = "77"
Step = Tuple[bytes, int]  # a call's own stderr and status

OK: Step = (b"", 0)
EXP: Step = (b"", 75)
TMO: Step = (b"", 124)
WRAP: Step = (b"", 125)
NOEXEC: Step = (b"timeout: failed to run command '/usr/bin/scontrol': Permission denied\n", 126)
MISSING: Step = (b"timeout: failed to run command '/usr/bin/scontrol': No such file or directory\n", 127)
KILLED: Step = (b"", 137)
DOWN: Step = (plain(UNEXPECTED, J), 1)
FINISHED: Step = (plain(ALREADY_FINISHED, J), 1)
NOJOB: Step = (plain(INVALID_JOB_ID, J), 1)
DENIED_UPD: Step = (plain(INVALID_USER_ID, J), 1)
DISABLED_RQ: Step = (plain(DISABLED, J), 1)
PENDING_RQ: Step = (plain(PENDING_EXECUTION, J), 1)
DENIED_RQ: Step = (plain(ACCESS_DENIED, J), 1)
RATE: Step = (plain(RATE_LIMITED, J), 1)
GARBAGE: Step = (b"\x00\xff garbage\n", 1)


def requeue(s1: Step, s2: Optional[Step], s3: Optional[Step]) -> Outcome:
    calls = [(s1[0], 1, s1[1])]
    if s2 is not None:
        calls.append((s2[0], 2, s2[1]))
    if s3 is not None:
        calls.append((s3[0], 3, s3[1]))
    return read_outcome("requeue", J, frame(NONCE, calls), calls[-1][2], NONCE)


# docs/contract.md §7, requeue: (s1, s2, s3) -> (result, requeue_bit).  s2/s3 None = no line.
REQUEUE_TABLE: List[Tuple[str, Step, Optional[Step], Optional[Step], Result, RequeueBit]] = [
    # s3 succeeded or found the job gone: s2's own result, bit clear; found it finished: may be set.
    ("all ok", OK, OK, OK, Result.OK, RequeueBit.CLEAR),
    ("s2 disabled", OK, DISABLED_RQ, OK, Result.REJECTED, RequeueBit.CLEAR),
    ("s2 pending", OK, PENDING_RQ, OK, Result.REJECTED, RequeueBit.CLEAR),
    ("s2 denied", OK, DENIED_RQ, OK, Result.REJECTED, RequeueBit.CLEAR),
    ("s2 rate limited", OK, RATE, OK, Result.REJECTED, RequeueBit.CLEAR),
    ("s2 not found, s3 gone", OK, NOJOB, NOJOB, Result.NOT_FOUND, RequeueBit.CLEAR),
    ("s2 ok, s3 finished", OK, OK, FINISHED, Result.OK, RequeueBit.MAY_BE_SET),
    ("s2 disabled, s3 finished", OK, DISABLED_RQ, FINISHED, Result.REJECTED, RequeueBit.MAY_BE_SET),
    ("s2 timed out, s3 finished", OK, TMO, FINISHED, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s2 expired", OK, EXP, OK, Result.EXPIRED, RequeueBit.CLEAR),
    ("s2 not run", OK, MISSING, OK, Result.NOT_RUN, RequeueBit.CLEAR),
    ("s2 timed out", OK, TMO, OK, Result.UNKNOWN, RequeueBit.CLEAR),
    ("s2 controller down", OK, DOWN, OK, Result.UNKNOWN, RequeueBit.CLEAR),
    ("s2 garbage", OK, GARBAGE, OK, Result.UNKNOWN, RequeueBit.CLEAR),
    # s3 did not clear and certainly did not run: bit_set (unless s2 unknown), bit set.
    ("s3 expired", OK, OK, EXP, Result.BIT_SET, RequeueBit.SET),
    ("s2 refused, s3 expired", OK, DISABLED_RQ, EXP, Result.BIT_SET, RequeueBit.SET),
    ("s2 not found, s3 expired", OK, NOJOB, EXP, Result.BIT_SET, RequeueBit.SET),
    ("s3 missing", OK, OK, MISSING, Result.BIT_SET, RequeueBit.SET),
    ("s3 not executable", OK, OK, NOEXEC, Result.BIT_SET, RequeueBit.SET),
    ("s2 expired, s3 expired", OK, EXP, EXP, Result.BIT_SET, RequeueBit.SET),
    ("s2 timed out, s3 expired", OK, TMO, EXP, Result.UNKNOWN, RequeueBit.SET),
    ("s2 down, s3 missing", OK, DOWN, MISSING, Result.UNKNOWN, RequeueBit.SET),
    # s3 ran and did not clear: unknown, bit may be set; never rejected.
    ("s3 timed out", OK, OK, TMO, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s3 controller down", OK, OK, DOWN, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s3 killed", OK, OK, KILLED, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s3 wrapper failed", OK, OK, WRAP, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s2 refused, s3 denied", OK, DISABLED_RQ, DENIED_UPD, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s2 refused, s3 rate limited", OK, DISABLED_RQ, RATE, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s2 ok, s3 garbage", OK, OK, GARBAGE, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    # s1 did not succeed: s1's result; s2 did not run.
    ("s1 expired", EXP, None, None, Result.EXPIRED, RequeueBit.CLEAR),
    ("s1 finished", FINISHED, None, OK, Result.REJECTED, RequeueBit.CLEAR),
    ("s1 finished, s3 finished", FINISHED, None, FINISHED, Result.REJECTED, RequeueBit.MAY_BE_SET),
    ("s1 not found", NOJOB, None, NOJOB, Result.NOT_FOUND, RequeueBit.CLEAR),
    ("s1 finished, s3 expired", FINISHED, None, EXP, Result.REJECTED, RequeueBit.CLEAR),
    ("s1 missing", MISSING, None, MISSING, Result.NOT_RUN, RequeueBit.CLEAR),
    ("s1 not executable", NOEXEC, None, NOEXEC, Result.NOT_RUN, RequeueBit.CLEAR),
    (
        "s1 denied, s3 denied (s3 ran, did not clear)",
        DENIED_UPD,
        None,
        DENIED_UPD,
        Result.REJECTED,
        RequeueBit.MAY_BE_SET,
    ),
    ("s1 finished, s3 timed out", FINISHED, None, TMO, Result.REJECTED, RequeueBit.MAY_BE_SET),
    # s1 unknown: the setting may have landed unseen.
    ("s1 down, s3 ok", DOWN, None, OK, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s1 timed out, s3 expired", TMO, None, EXP, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s1 killed, s3 down", KILLED, None, DOWN, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s1 wrapper failed, s3 ok", WRAP, None, OK, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
    ("s1 garbage, s3 ok", GARBAGE, None, OK, Result.UNKNOWN, RequeueBit.MAY_BE_SET),
]


@pytest.mark.parametrize(
    ("s1", "s2", "s3", "result", "bit"), [r[1:] for r in REQUEUE_TABLE], ids=[r[0] for r in REQUEUE_TABLE]
)
def test_requeue_combination(
    s1: Step, s2: Optional[Step], s3: Optional[Step], result: Result, bit: RequeueBit
) -> None:
    out = requeue(s1, s2, s3)
    assert (out.result, out.requeue_bit) == (result, bit)
    assert [c.number for c in out.calls] == [n for n, s in ((1, s1), (2, s2), (3, s3)) if s is not None]
    assert [c.status for c in out.calls] == [s[1] for s in (s1, s2, s3) if s is not None]
    if result is Result.UNKNOWN:
        assert out.reason is not None


def test_requeue_bit_set_is_never_a_refusal() -> None:
    for s2 in (DISABLED_RQ, PENDING_RQ, NOJOB, DENIED_RQ):
        for s3 in (EXP, MISSING, NOEXEC, TMO, DOWN, DENIED_UPD):
            assert requeue(OK, s2, s3).result in (Result.BIT_SET, Result.UNKNOWN)


# A second, deliberately naive reading of docs/contract.md §7 to compare with over every combination.
S1_STEPS = [OK, EXP, TMO, WRAP, NOEXEC, MISSING, KILLED, DOWN, FINISHED, NOJOB, DENIED_UPD, RATE, GARBAGE]
S2_STEPS = [
    OK,
    EXP,
    TMO,
    WRAP,
    NOEXEC,
    MISSING,
    KILLED,
    DOWN,
    DISABLED_RQ,
    PENDING_RQ,
    DENIED_RQ,
    NOJOB,
    RATE,
    GARBAGE,
]
S3_STEPS = [OK, EXP, TMO, WRAP, NOEXEC, MISSING, KILLED, DOWN, FINISHED, NOJOB, DENIED_UPD, RATE, GARBAGE]


def _kind(step: Step) -> str:
    status = step[1]
    if status == 0:
        return "ok"
    if status == 75:
        return "expired"
    if status in (126, 127):
        return "not_run"
    if status == 1 and step in (NOJOB,):
        return "not_found"
    if status == 1 and step in (FINISHED, DENIED_UPD, DISABLED_RQ, PENDING_RQ, DENIED_RQ, RATE):
        return "rejected"
    return "unknown"


def _oracle(s1: Step, s2: Optional[Step], s3: Optional[Step]) -> Tuple[str, str]:
    k1 = _kind(s1)
    s3_ran = s3 is not None and s3[1] not in (75, 126, 127)
    s3_cleared = s3 is not None and (s3[1] == 0 or s3 == NOJOB)
    if k1 != "ok":
        if k1 == "unknown":
            bit = "may_be_set"
        elif s3_ran and not s3_cleared:
            bit = "may_be_set"
        else:
            bit = "clear"
        return k1, bit
    assert s2 is not None
    k2 = _kind(s2)
    if s3_cleared:
        return k2, "clear"
    if s3 == FINISHED:
        return k2, "may_be_set"
    if s3_ran:
        return "unknown", "may_be_set"
    return ("unknown" if k2 == "unknown" else "bit_set"), "set"


def test_requeue_matches_a_naive_reading_of_section_7_everywhere() -> None:
    seen: Dict[Tuple[str, str], int] = {}
    for s1 in S1_STEPS:
        combos: List[Tuple[Optional[Step], Optional[Step]]]
        if s1[1] == 75:
            combos = [(None, None)]
        elif s1[1] == 0:
            combos = list(itertools.product(S2_STEPS, S3_STEPS))
        else:
            combos = [(None, s3) for s3 in S3_STEPS]
        for s2, s3 in combos:
            out = requeue(s1, s2, s3)
            want = _oracle(s1, s2, s3)
            assert (out.result.value, out.requeue_bit.value if out.requeue_bit else None) == want, (
                s1,
                s2,
                s3,
            )
            seen[want] = seen.get(want, 0) + 1
    assert len(seen) >= 10  # the table really spans the results and bits


# docs/contract.md §7, single-call ops: (op, step) -> result.
SINGLE_TABLE: List[Tuple[str, str, Step, Result]] = [
    ("hold ok", "hold", OK, Result.OK),
    ("hold finished", "hold", (suspend(ALREADY_FINISHED, J), 1), Result.REJECTED),
    ("hold finished 26.05", "hold", (suspend(ALREADY_FINISHED, J, space=False), 1), Result.REJECTED),
    ("hold not found", "hold", (suspend(INVALID_JOB_ID, J), 1), Result.NOT_FOUND),
    ("hold non-owner", "hold", (suspend(INVALID_USER_ID, J), 1), Result.REJECTED),
    ("hold access denied is not allowed", "hold", (suspend(ACCESS_DENIED, J), 1), Result.UNKNOWN),
    ("hold controller down", "hold", (suspend(UNEXPECTED, J), 1), Result.UNKNOWN),
    ("hold expired", "hold", EXP, Result.EXPIRED),
    ("hold timed out", "hold", TMO, Result.UNKNOWN),
    ("hold wrapper failed", "hold", WRAP, Result.UNKNOWN),
    ("hold not executable", "hold", NOEXEC, Result.NOT_RUN),
    ("hold missing", "hold", MISSING, Result.NOT_RUN),
    ("hold killed", "hold", KILLED, Result.UNKNOWN),
    ("hold empty failure", "hold", (b"", 1), Result.UNKNOWN),
    ("hold status 2 refusal", "hold", (suspend(ALREADY_FINISHED, J), 2), Result.REJECTED),
    ("hold status 123 refusal", "hold", (suspend(ALREADY_FINISHED, J), 123), Result.REJECTED),
    ("release ok", "release", OK, Result.OK),
    ("release admin hold by user", "release", (suspend(ACCESS_DENIED, J), 1), Result.REJECTED),
    ("release finished", "release", (suspend(ALREADY_FINISHED, J), 1), Result.REJECTED),
    ("release not found", "release", (suspend(INVALID_JOB_ID, J), 1), Result.NOT_FOUND),
    ("restore ok", "restore", OK, Result.OK),
    ("restore finished is rejected", "restore", FINISHED, Result.REJECTED),
    ("restore not found is ok", "restore", NOJOB, Result.OK),
    ("restore non-owner", "restore", DENIED_UPD, Result.REJECTED),
    ("restore rate limited", "restore", RATE, Result.REJECTED),
    ("restore suspend line not allowed", "restore", (suspend(ALREADY_FINISHED, J), 1), Result.UNKNOWN),
    ("restore down", "restore", DOWN, Result.UNKNOWN),
    ("restore expired", "restore", EXP, Result.EXPIRED),
    ("restore missing", "restore", MISSING, Result.NOT_RUN),
]


@pytest.mark.parametrize(
    ("op", "step", "result"), [r[1:] for r in SINGLE_TABLE], ids=[r[0] for r in SINGLE_TABLE]
)
def test_single_call_ops(op: str, step: Step, result: Result) -> None:
    out = read_outcome(op, J, frame(NONCE, [(step[0], 1, step[1])]), step[1], NONCE)
    assert out.result is result
    assert out.requeue_bit is None
    assert out.calls[0].status == step[1] and out.calls[0].stderr == step[0]


OPEN_TABLE: List[Tuple[str, bytes, object, Result]] = [
    ("ok", b"", 0, Result.OK),
    ("ok as text", b"", "0", Result.OK),
    ("finished", suspend(ALREADY_FINISHED, J), 1, Result.REJECTED),
    ("not found", suspend(INVALID_JOB_ID, J), 1, Result.NOT_FOUND),
    ("user on admin hold", suspend(ACCESS_DENIED, J), 1, Result.REJECTED),
    ("26.05", suspend(INVALID_USER_ID, J, space=False), 1, Result.REJECTED),
    ("down", suspend(UNEXPECTED, J), 1, Result.UNKNOWN),
    ("expired", b"", 75, Result.EXPIRED),
    ("missing", b"", 127, Result.NOT_RUN),
    ("killed by the guard", b"", 143, Result.UNKNOWN),
    ("unreadable exit", b"", "01", Result.UNKNOWN),
    ("no exit", b"", None, Result.UNKNOWN),
    ("a status line means nothing to open", frame(NONCE, [(b"", 1, 0)]), 0, Result.OK),
    ("a status line is no refusal", frame(NONCE, [(b"", 1, 1)]), 1, Result.UNKNOWN),
]


@pytest.mark.parametrize(
    ("stderr", "exit_status", "result"), [r[1:] for r in OPEN_TABLE], ids=[r[0] for r in OPEN_TABLE]
)
def test_open_reads_scontrol_directly(stderr: bytes, exit_status: object, result: Result) -> None:
    out = read_outcome("open", J, stderr, exit_status)
    assert out.result is result
    assert out.requeue_bit is None


def _hold(stderr: bytes, exit_status: object = 0, nonce: object = NONCE) -> Outcome:
    return read_outcome("hold", J, stderr, exit_status, nonce)


GOOD = frame(NONCE, [(b"", 1, 0)])
FRAMING_TABLE: List[Tuple[str, object, object, object, Reason]] = [
    ("another nonce", frame(OTHER_NONCE, [(b"", 1, 0)]), 0, NONCE, Reason.FOREIGN_NONCE),
    ("a forged line before ours", frame(OTHER_NONCE, [(b"", 1, 0)]) + GOOD, 0, NONCE, Reason.FOREIGN_NONCE),
    ("a repeated call", GOOD + GOOD, 0, NONCE, Reason.CALL_ORDER),
    ("a call number going down", frame(NONCE, [(b"", 2, 0), (b"", 1, 0)]), 0, NONCE, Reason.CALL_ORDER),
    ("status with a leading zero", frame(NONCE, [(b"", 1, "00")]), 0, NONCE, Reason.UNREADABLE_STATUS),
    ("status over 255", frame(NONCE, [(b"", 1, 256)]), 256, NONCE, Reason.UNREADABLE_STATUS),
    ("negative status", frame(NONCE, [(b"", 1, -1)]), -1, NONCE, Reason.UNREADABLE_STATUS),
    ("status as words", frame(NONCE, [(b"", 1, "ok")]), 0, NONCE, Reason.UNREADABLE_STATUS),
    ("empty status", frame(NONCE, [(b"", 1, "")]), 0, NONCE, Reason.UNREADABLE_STATUS),
    ("text after the last line", GOOD + b"x", 0, NONCE, Reason.TEXT_AFTER_LAST_LINE),
    ("a newline after the last line", GOOD + b"\n", 0, NONCE, Reason.TEXT_AFTER_LAST_LINE),
    ("no status line", b"", 0, NONCE, Reason.NO_STATUS_LINE),
    ("only scontrol's stderr", suspend(ALREADY_FINISHED, J), 1, NONCE, Reason.NO_STATUS_LINE),
    ("exit status not the last line's", GOOD, 1, NONCE, Reason.EXIT_STATUS_MISMATCH),
    ("exit status unreadable", GOOD, "00", NONCE, Reason.UNREADABLE_EXIT_STATUS),
    ("exit status None", GOOD, None, NONCE, Reason.UNREADABLE_EXIT_STATUS),
    ("exit status bool", GOOD, False, NONCE, Reason.UNREADABLE_EXIT_STATUS),
    ("exit status bytes", GOOD, b"0", NONCE, Reason.UNREADABLE_EXIT_STATUS),
    ("exit status float", GOOD, 0.0, NONCE, Reason.UNREADABLE_EXIT_STATUS),
    ("exit status negative", GOOD, -1, NONCE, Reason.UNREADABLE_EXIT_STATUS),
    ("exit status over 255", GOOD, 256, NONCE, Reason.UNREADABLE_EXIT_STATUS),
    ("a stray RS", b"\x1e" + GOOD, 0, NONCE, Reason.MALFORMED_STATUS_LINE),
    ("RS in the call's stderr", b"x\x1ey\n" + GOOD, 0, NONCE, Reason.MALFORMED_STATUS_LINE),
    ("no final newline", GOOD[:-1], 0, NONCE, Reason.MALFORMED_STATUS_LINE),
    ("CRLF status line", GOOD[:-1] + b"\r\n", 0, NONCE, Reason.UNREADABLE_STATUS),
    ("two spaces", GOOD.replace(b"call ", b"call  "), 0, NONCE, Reason.MALFORMED_STATUS_LINE),
    ("lowercase dsl", GOOD.replace(b"DSL", b"dsl"), 0, NONCE, Reason.MALFORMED_STATUS_LINE),
    ("call 0", frame(NONCE, [(b"", 0, 0)]), 0, NONCE, Reason.MALFORMED_STATUS_LINE),
    ("call 01", frame(NONCE, [(b"", "01", 0)]), 0, NONCE, Reason.MALFORMED_STATUS_LINE),
    ("hold reports call 2", frame(NONCE, [(b"", 2, 0)]), 0, NONCE, Reason.WRONG_CALLS),
    ("hold reports calls 1 and 2", frame(NONCE, [(b"", 1, 0), (b"", 2, 0)]), 0, NONCE, Reason.WRONG_CALLS),
    ("stderr as str", GOOD.decode(), 0, NONCE, Reason.STDERR_NOT_BYTES),
    ("stderr None", None, 0, NONCE, Reason.STDERR_NOT_BYTES),
    ("nonce missing", GOOD, 0, None, Reason.NONCE_INVALID),
    ("nonce not a string", GOOD, 0, 12345, Reason.NONCE_INVALID),
    ("nonce bytes", GOOD, 0, NONCE.encode(), Reason.NONCE_INVALID),
    ("nonce empty", GOOD, 0, "", Reason.NONCE_INVALID),
]


@pytest.mark.parametrize(
    ("stderr", "exit_status", "nonce", "reason"),
    [r[1:] for r in FRAMING_TABLE],
    ids=[r[0] for r in FRAMING_TABLE],
)
@pytest.mark.parametrize("op", ["hold", "release", "restore", "requeue"])
def test_framing_faults_are_unknown(
    op: str, stderr: object, exit_status: object, nonce: object, reason: Reason
) -> None:
    out = read_outcome(op, J, stderr, exit_status, nonce)
    assert out.result is Result.UNKNOWN
    assert out.requeue_bit is (RequeueBit.MAY_BE_SET if op in ("requeue", "requeuehold") else None)
    if op not in ("requeue", "requeuehold") or reason is not Reason.WRONG_CALLS:
        assert out.reason is reason


REQUEUE_SHAPES: List[Tuple[str, List[Tuple[bytes, int, object]]]] = [
    ("s1 ok but no call 2", [(b"", 1, 0), (b"", 3, 0)]),
    ("s1 ok but no call 3", [(b"", 1, 0), (b"", 2, 0)]),
    ("s1 ok alone", [(b"", 1, 0)]),
    ("s1 refused but call 2 ran", [(FINISHED[0], 1, 1), (b"", 2, 0), (b"", 3, 0)]),
    ("s1 refused alone", [(FINISHED[0], 1, 1)]),
    ("s1 expired then call 3", [(b"", 1, 75), (b"", 3, 0)]),
    ("call 2 alone", [(b"", 2, 0)]),
    ("calls 2 and 3", [(b"", 2, 0), (b"", 3, 0)]),
    ("call 4", [(b"", 1, 0), (b"", 2, 0), (b"", 3, 0), (b"", 4, 0)]),
]


@pytest.mark.parametrize("calls", [r[1] for r in REQUEUE_SHAPES], ids=[r[0] for r in REQUEUE_SHAPES])
def test_requeue_calls_must_fit_the_op(calls: List[Tuple[bytes, int, object]]) -> None:
    out = read_outcome("requeue", J, frame(NONCE, calls), calls[-1][2], NONCE)
    assert (out.result, out.requeue_bit, out.reason) == (
        Result.UNKNOWN,
        RequeueBit.MAY_BE_SET,
        Reason.WRONG_CALLS,
    )


def test_an_unknown_outcome_keeps_every_call() -> None:
    out = requeue(OK, OK, DOWN)
    assert out.reason is Reason.CLEAR_FAILED
    assert [(c.number, c.status) for c in out.calls] == [(1, 0), (2, 0), (3, 1)]
    assert out.calls[2].stderr == DOWN[0]


def test_bytes_like_stderr_is_read() -> None:
    for data in (bytearray(GOOD), memoryview(GOOD)):
        assert read_outcome("hold", J, data, 0, NONCE).result is Result.OK


def test_int_job_id_is_read_as_its_string() -> None:
    out = read_outcome("hold", 77, frame(NONCE, [(suspend(ALREADY_FINISHED, "77"), 1, 1)]), 1, NONCE)
    assert out.job_id == "77" and out.result is Result.REJECTED


@pytest.mark.parametrize("op", ["HOLD", "uhold", "requeue_hold", "", None, 1, Op])
def test_bad_op_raises(op: object) -> None:
    with pytest.raises(ValueError):
        read_outcome(op, J, GOOD, 0, NONCE)  # type: ignore[arg-type]


@pytest.mark.parametrize("job_id", ["12_3", "1;id", "042", "", None, True])
def test_bad_job_id_raises(job_id: object) -> None:
    with pytest.raises(ValueError):
        read_outcome("hold", job_id, GOOD, 0, NONCE)  # type: ignore[arg-type]


def test_op_enum_is_accepted() -> None:
    assert read_outcome(Op.HOLD, J, GOOD, 0, NONCE).result is Result.OK


def test_the_rs_byte_may_follow_stderr_without_a_newline() -> None:
    stderr = suspend(ALREADY_FINISHED, J)[:-1] + frame(NONCE, [(b"", 1, 1)])
    assert read_outcome("hold", J, stderr, 1, NONCE).result is Result.REJECTED


@pytest.mark.parametrize("nonce", ["abc", "DEADBEEF", "not-hex-but-exact", "ünïcode"])
def test_any_nonempty_string_nonce_is_compared_as_given(nonce: str) -> None:
    assert read_outcome("hold", J, frame(nonce, [(b"", 1, 0)]), 0, nonce).result is Result.OK
    assert read_outcome("hold", J, frame(nonce + "0", [(b"", 1, 0)]), 0, nonce).reason is Reason.FOREIGN_NONCE


def test_a_nonce_with_a_space_can_never_frame() -> None:
    out = read_outcome("requeue", J, frame("a b", [(b"", 1, 75)]), 75, "a b")
    assert (out.result, out.requeue_bit) == (Result.UNKNOWN, RequeueBit.MAY_BE_SET)


def test_an_unencodable_nonce_is_unknown() -> None:
    assert read_outcome("hold", J, GOOD, 0, "\udcff").reason is Reason.NONCE_INVALID
