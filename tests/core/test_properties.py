"""Invariants of the reader (hypothesis): any bytes give a value, never an exception,
and never ``ok`` unless the framing is exact."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_dsl import Op, Result
from slurm_dsl.core.reader import read_outcome
from tests.examples import examples
from tests.ground import NONCE, frame

OPS = st.sampled_from([o.value for o in Op])
EXIT = st.one_of(
    st.integers(min_value=-300, max_value=600),
    st.text(max_size=5),
    st.sampled_from(["0", "1", "75", "124", "255", "256", "00", "-0"]),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
    st.binary(max_size=4),
)
FRAGMENTS = st.sampled_from(
    [
        b"\x1e",
        b"DSL ",
        NONCE.encode(),
        b" call ",
        b"1",
        b"2",
        b"3",
        b" ",
        b"0",
        b"75",
        b"\n",
        b"\r",
        b"Job has already finished for job 7\n",
        b"slurm_suspend error: Job has already finished\n",
        b"Invalid job id specified for job 7\n",
        b"Requested operation is presently disabled for job 7\n",
    ]
)
NEARLY_FRAMED = st.lists(FRAGMENTS, max_size=30).map(b"".join)
STDERR = st.one_of(st.binary(max_size=300), NEARLY_FRAMED)


def _exact(op: str, data: bytes, exit_status: object) -> bool:
    """An independent check of the framing of docs/contract.md §6, for an output read as ok."""
    line = re.compile(rb"\x1eDSL " + NONCE.encode() + rb" call ([1-9][0-9]*) (0|[1-9][0-9]*)\n")
    pos = 0
    calls = []
    while True:
        rs = data.find(b"\x1e", pos)
        if rs < 0:
            break
        m = line.match(data, rs)
        if not m:
            return False
        calls.append((int(m.group(1)), int(m.group(2))))
        pos = m.end()
    if pos != len(data) or not calls or exit_status not in (calls[-1][1], str(calls[-1][1])):
        return False
    if op in ("requeue", "requeuehold"):
        return [n for n, _ in calls] == [1, 2, 3] and calls[0][1] == 0 and calls[1][1] == 0
    # A restore is also ok when slurmctld says the job is gone (a refusal, status 1-123).
    return [n for n, _ in calls] == [1] and (calls[0][1] == 0 or (op == "restore" and calls[0][1] < 124))


@settings(max_examples=examples(3000), suppress_health_check=[HealthCheck.too_slow])
@given(
    op=OPS, stderr=STDERR, exit_status=EXIT, nonce=st.one_of(st.just(NONCE), st.text(max_size=40), st.none())
)
def test_read_outcome_never_raises(op: str, stderr: bytes, exit_status: object, nonce: object) -> None:
    out = read_outcome(op, "7", stderr, exit_status, nonce)
    assert out.result in set(Result)
    if op in ("requeue", "requeuehold"):
        assert out.requeue_bit is not None
    else:
        assert out.requeue_bit is None


@settings(max_examples=examples(3000), suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(["hold", "release", "restore", "requeue"]), stderr=STDERR, exit_status=EXIT)
def test_never_ok_unless_framing_is_exact(op: str, stderr: bytes, exit_status: object) -> None:
    out = read_outcome(op, "7", stderr, exit_status, NONCE)
    if out.result is Result.OK:
        assert _exact(op, stderr, exit_status)


@given(
    op=st.sampled_from(["hold", "release", "restore", "requeue"]),
    junk=st.binary(min_size=1, max_size=20),
    where=st.integers(min_value=0, max_value=500),
)
def test_any_insertion_into_a_good_output_is_never_ok(op: str, junk: bytes, where: int) -> None:
    good = frame(NONCE, [(b"", i + 1, 0) for i in range(3 if op in ("requeue", "requeuehold") else 1)])
    assert read_outcome(op, "7", good, 0, NONCE).result is Result.OK
    at = where % (len(good) + 1)
    out = read_outcome(op, "7", good[:at] + junk + good[at:], 0, NONCE)
    # The only harmless insertion is text without RS just before a status line: it is then
    # that (successful) call's own stderr.  Anywhere else the output is no longer exact.
    harmless = b"\x1e" not in junk and good[at : at + 1] == b"\x1e"
    assert (out.result is Result.OK) == harmless


@given(stderr=st.binary(max_size=200), exit_status=st.integers(min_value=0, max_value=255))
def test_open_never_raises_and_is_ok_only_on_zero(stderr: bytes, exit_status: int) -> None:
    out = read_outcome("open", "7", stderr, exit_status)
    assert (out.result is Result.OK) == (exit_status == 0)
