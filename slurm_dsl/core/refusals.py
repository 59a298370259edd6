"""When a failed scontrol call's stderr is a refusal (docs/contract.md §5): the line rule, and each
call's allowed messages (``ALLOWED``), as scontrol words them on 22.05, 24.11 and 26.05.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, List, Optional, Tuple

from .model import Op

INVALID_JOB_ID = "Invalid job id specified"
ALREADY_FINISHED = "Job has already finished"
INVALID_USER_ID = "Invalid user id"
ACCESS_DENIED = "Access/permission denied"
DISABLED = "Requested operation is presently disabled"
PENDING_EXECUTION = "Job is pending execution"
ONLY_BATCH = "Only batch jobs are accepted or processed"
# 24.05+: dropped by slurmctld's rate limiter before any processing.
RATE_LIMITED = "Rate limit exceeded, please retry later"
# 22.05-24.05, update-type RPCs only: refused before the update is applied.
DB_INDEX = "Job update not available right now, the DB index is being set, try again in a bit"

# A call is named by (op, call number); open's direct call is call 1 of "open".
CallKey = Tuple[Op, int]

_UPDATE_TYPE = frozenset(
    {(Op.HOLD, 1), (Op.RELEASE, 1), (Op.OPEN, 1), (Op.RESTORE, 1),
     *((op, n) for op in (Op.REQUEUE, Op.REQUEUE_HOLD) for n in (1, 3))}
)
_SUSPEND_LINE = frozenset({Op.HOLD, Op.RELEASE, Op.OPEN})

_SET_OR_CLEAR = frozenset({INVALID_JOB_ID, ALREADY_FINISHED, INVALID_USER_ID})
_ALLOWED_BASE: Dict[CallKey, FrozenSet[str]] = {
    (Op.HOLD, 1): frozenset({INVALID_JOB_ID, ALREADY_FINISHED, INVALID_USER_ID}),
    (Op.RELEASE, 1): frozenset({INVALID_JOB_ID, ALREADY_FINISHED, INVALID_USER_ID, ACCESS_DENIED}),
    (Op.OPEN, 1): frozenset({INVALID_JOB_ID, ALREADY_FINISHED, INVALID_USER_ID, ACCESS_DENIED}),
    (Op.REQUEUE, 1): _SET_OR_CLEAR,
    (Op.REQUEUE, 2): frozenset({INVALID_JOB_ID, DISABLED, PENDING_EXECUTION, ONLY_BATCH, ACCESS_DENIED}),
    (Op.REQUEUE, 3): _SET_OR_CLEAR,
    (Op.RESTORE, 1): _SET_OR_CLEAR,
}
# requeuehold is requeue's RPC with a hold flag: the same refusals, byte for byte, on 22.05, 24.11
# and 26.05 (docs/slurm-behaviour.md §2, docs/slurm-24.11-26.05.md §1), call for call.
_ALLOWED_BASE.update(
    {(Op.REQUEUE_HOLD, n): texts for (op, n), texts in list(_ALLOWED_BASE.items()) if op is Op.REQUEUE}
)

ALLOWED: Dict[CallKey, FrozenSet[str]] = {
    key: base | {RATE_LIMITED} | ({DB_INDEX} if key in _UPDATE_TYPE else frozenset())
    for key, base in _ALLOWED_BASE.items()
}

# The same, as bytes: what a line's text is compared with.
_ALLOWED_BYTES: Dict[CallKey, FrozenSet[Optional[bytes]]] = {
    key: frozenset(message.encode("ascii") for message in messages) for key, messages in ALLOWED.items()
}

# ASCII whitespace, as bytes.strip() takes it: what a blank line may hold (the one definition;
# the list reader uses it too).
BLANK = b" \t\n\r\x0b\x0c"
_SUSPEND_PREFIX = b"slurm_suspend error:"
# A newline, then blank lines (only ASCII whitespace, BLANK), then a newline: those lines are blank.
_BLANK_RUN = re.compile(rb"\n[ \t\r\x0b\x0c\n]*\n")


def squeezed(stderr: bytes) -> bytes:
    """``stderr`` without its whole blank lines (only ``BLANK``) before its last newline, in C (one regex);
    the last piece, after that newline, is kept as it is."""
    return _BLANK_RUN.sub(b"\n", b"\n" + stderr)[1:]


def stderr_lines(stderr: bytes) -> Tuple[List[bytes], bytes]:
    """``stderr.split(b"\\n")`` as (its newline-ended lines, none blank; the last piece)."""
    pieces = squeezed(stderr).split(b"\n")
    tail = pieces.pop()
    return pieces, tail


def refusal_message(op: Op, number: int, job_id: str, stderr: bytes) -> Optional[str]:
    """The refusal message if ``stderr`` of a failed call qualifies (docs/contract.md §5), else None."""
    allowed = ALLOWED.get((op, number))
    if allowed is None:
        return None
    suffix = b" for job " + job_id.encode("ascii")
    # Every line must give the same allowed text, so the first non-blank line alone can refuse
    # the whole stderr: a stderr of junk (or of a million short lines) is never split at all.
    start = len(stderr) - len(stderr.lstrip(BLANK))
    if start == len(stderr):
        return None  # no non-blank line, so no ``for job`` line
    end = stderr.find(b"\n", start)
    first = stderr[stderr.rfind(b"\n", 0, start) + 1 : end if end >= 0 else len(stderr)]
    if _line_text(op, first, suffix) not in _ALLOWED_BYTES[(op, number)]:
        return None
    pieces, tail = stderr_lines(stderr)
    pieces.append(tail)  # a last line without its newline is read like any other line
    message: Optional[bytes] = None
    saw_for_job = False
    # The line rule holds of each line alone and every line must give the same text, so each distinct
    # line is read once (dict.fromkeys runs in C): a stderr of many copies of one line is cheap.
    for line in dict.fromkeys(pieces):
        if not line.strip(BLANK):
            continue
        text = _line_text(op, line, suffix)
        if text is None:
            return None
        saw_for_job = saw_for_job or line.endswith(suffix)
        if message is None:
            message = text
        elif text != message:
            return None
    if not saw_for_job or message is None:
        return None
    decoded = _decoded(message)
    return decoded if decoded in allowed else None


def _line_text(op: Op, line: bytes, suffix: bytes) -> Optional[bytes]:
    """The text of one non-blank line by §5's line rule (``suffix`` is `` for job <id>``), or None."""
    if line.endswith(suffix):
        return line[: -len(suffix)]
    if op in _SUSPEND_LINE and line.startswith(_SUSPEND_PREFIX):
        # "slurm_suspend error: <m>" (up to 24.11) or "slurm_suspend error:<m>" (25.05+).
        # No allowed message starts with a space, so dropping one is never ambiguous.
        text = line[len(_SUSPEND_PREFIX) :]
        return text[1:] if text.startswith(b" ") else text
    return None


def _decoded(raw: bytes) -> Optional[str]:
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        return None
