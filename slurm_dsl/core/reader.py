"""Reading a script's output into an ``Outcome`` (docs/contract.md §6, with §4, §5, §7): the framing is
exact or the whole output is unknown (and a requeue's bit ``may_be_set``).  Pure; never raises for any
stderr or exit status, only for a bad op or job id (``ValueError``).
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple, Union

from . import combine
from .jobid import validate_job_id
from .model import Call, CallOutcome, InvalidInput, Op, Outcome, Reason, RequeueBit, Result
from .plain import described, plain_bytes
from .refusals import INVALID_JOB_ID, refusal_message
from .statuses import FIXED_OUTCOME, StatusClass, classify, parse_status

_RS = b"\x1e"
_CALL_NUMBER = re.compile(rb"[1-9][0-9]*\Z")

JobId = Union[str, int]


def read_outcome(
    op: Union[Op, str],
    job_id: JobId,
    stderr: object = b"",
    exit_status: object = None,
    nonce: object = None,
) -> Outcome:
    """Read one script's (or, for ``open``, one scontrol's) stderr and exit status."""
    op = read_op(op)
    job = validate_job_id(job_id)
    # Plain copies first (``plain``): a hostile subclass reads as unknown, never raises.
    data = plain_bytes(stderr)
    if data is None:
        return unknown(op, job, Reason.STDERR_NOT_BYTES, detail=f"stderr is {described(stderr)}")
    status = parse_status(exit_status)
    if op is Op.OPEN:
        if status is None:
            return unknown(op, job, Reason.UNREADABLE_EXIT_STATUS, detail=f"exit status {described(exit_status)}")
        return combine.single(op, job, classify_call(op, job, 1, status, str(status), data), status)
    wanted = nonce_bytes(nonce)
    if wanted is None:
        return unknown(op, job, Reason.NONCE_INVALID, detail="the nonce is missing, empty or not a string")
    calls, reason, detail = _frame(op, job, data, wanted)
    if reason is None:
        reason, detail = _check(op, calls, exit_status, status)
    if reason is not None:
        return unknown(op, job, reason, calls=calls, exit_status=status, detail=detail)
    if op.requeues:
        return combine.requeue(job, calls, status, op)
    return combine.single(op, job, calls[0], status)


def unknown(
    op: Op,
    job_id: str,
    reason: Reason,
    *,
    calls: Tuple[Call, ...] = (),
    exit_status: Optional[int] = None,
    detail: str = "",
) -> Outcome:
    """An unreadable outcome: unknown, and for a requeue the bit may be set."""
    bit = RequeueBit.MAY_BE_SET if op.requeues else None
    return Outcome(op, job_id, Result.UNKNOWN, bit, reason, calls, exit_status, detail)


def classify_call(op: Op, job_id: str, number: int, status: int, status_text: str, stderr: bytes) -> Call:
    """One call's outcome from its readable status and its own stderr (docs/contract.md §4, §5)."""
    cls = classify(status)
    if cls is StatusClass.FAILED:
        message = refusal_message(op, number, job_id, stderr)
        if message is None:
            outcome, reason = CallOutcome.UNKNOWN, Reason.UNRECOGNISED_STDERR
        elif message == INVALID_JOB_ID:
            outcome, reason = CallOutcome.NOT_FOUND, None
        else:
            outcome, reason = CallOutcome.REJECTED, None
        return Call(number, status, status_text, stderr, outcome, message, reason)
    outcome, reason = FIXED_OUTCOME[cls]
    return Call(number, status, status_text, stderr, outcome, None, reason)


def nonce_bytes(nonce: object) -> Optional[bytes]:
    """The nonce to compare byte for byte (any non-empty string, as given), or None."""
    if not isinstance(nonce, str) or not issubclass(type(nonce), str):
        return None
    text = str.__str__(nonce)  # a plain copy: a str subclass's own encode() or __len__ never runs
    if not text:
        return None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def read_op(op: object) -> Op:
    """``op`` as an ``Op``, or ``InvalidInput``; a str subclass's own ``__eq__`` or ``__hash__`` never runs."""
    if type(op) is Op:
        return op
    if isinstance(op, str) and issubclass(type(op), str):
        text = str.__str__(op)
        for member in Op:
            if member.value == text:
                return member
    raise InvalidInput(f"unknown op {described(op)}: expected one of {', '.join(o.value for o in Op)}")


def split_status_lines(data: bytes, nonce: bytes) -> Tuple[List[Tuple[int, bytes, bytes]], Optional[Reason], str]:
    """``data`` split at its status lines, up to the first framing fault: each ``(call number, status
    field, own stderr)``, and the fault's reason and detail (None, "": exact)."""
    lines: List[Tuple[int, bytes, bytes]] = []
    pos = 0
    while True:
        rs = data.find(_RS, pos)
        if rs < 0:
            break
        end = data.find(b"\n", rs)
        if end < 0:
            return lines, Reason.MALFORMED_STATUS_LINE, "a status line without its newline"
        fields = data[rs + 1 : end].split(b" ")
        if len(fields) != 5 or fields[0] != b"DSL" or fields[2] != b"call" or _RS in data[rs + 1 : end]:
            return lines, Reason.MALFORMED_STATUS_LINE, f"an RS byte at offset {rs} starts no status line"
        if fields[1] != nonce:
            return lines, Reason.FOREIGN_NONCE, "a status line with another nonce"
        if not _CALL_NUMBER.match(fields[3]):
            return lines, Reason.MALFORMED_STATUS_LINE, "a status line with a bad call number"
        number = int(fields[3])
        if lines and number <= lines[-1][0]:
            return lines, Reason.CALL_ORDER, f"call {number} after call {lines[-1][0]}"
        lines.append((number, fields[4], data[pos:rs]))
        pos = end + 1
    if not lines:
        return lines, Reason.NO_STATUS_LINE, "no status line"
    if pos != len(data):
        return lines, Reason.TEXT_AFTER_LAST_LINE, f"{len(data) - pos} bytes after the last status line"
    return lines, None, ""


def _frame(op: Op, job_id: str, data: bytes, nonce: bytes) -> Tuple[Tuple[Call, ...], Optional[Reason], str]:
    """Split ``data`` into calls at its status lines; stop at the first framing fault."""
    lines, reason, detail = split_status_lines(data, nonce)
    calls = [
        read_call(op, job_id, number, parse_status(field.decode("latin-1")),
                  field.decode("ascii", "backslashreplace"), own)
        for number, field, own in lines
    ]
    return tuple(calls), reason, detail


def read_call(op: Op, job_id: str, number: int, status: Optional[int], status_text: str, stderr: bytes) -> Call:
    """One framed call of one job (``status`` None: unreadable), read by docs/contract.md §4, §5: the
    single reader's only per-call rule, shared with ``bulk_reader``."""
    if status is None:
        return Call(number, None, status_text, stderr, CallOutcome.UNKNOWN, None, Reason.UNREADABLE_STATUS)
    return classify_call(op, job_id, number, status, status_text, stderr)


def _check(
    op: Op, calls: Tuple[Call, ...], raw_exit: object, exit_status: Optional[int]
) -> Tuple[Optional[Reason], str]:
    """The whole-output rules once the lines are framed: statuses, exit status, shape."""
    bad = [c for c in calls if c.status is None]
    if bad:
        return Reason.UNREADABLE_STATUS, f"call {bad[0].number} has status {bad[0].status_text!r}"
    if exit_status is None:
        return Reason.UNREADABLE_EXIT_STATUS, f"exit status {described(raw_exit)}"
    if exit_status != calls[-1].status:
        return Reason.EXIT_STATUS_MISMATCH, f"exit status {exit_status} but the last call says {calls[-1].status}"
    numbers = [c.number for c in calls]
    if numbers != expected_calls(op, calls[0].status):
        return Reason.WRONG_CALLS, f"calls {numbers} do not fit {op.value}"
    return None, ""


def expected_calls(op: Op, first_status: Optional[int]) -> List[int]:
    """The call numbers a script of ``op`` prints, given call 1's status (docs/contract.md §6)."""
    if not op.requeues:
        return [1]
    if first_status == 75:
        return [1]
    if first_status == 0:
        return [1, 2, 3]
    return [1, 3]
