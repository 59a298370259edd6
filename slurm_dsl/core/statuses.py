"""The status table (docs/contract.md §4): what a call's exit status says about the call."""

from __future__ import annotations

import enum
import re
from typing import Optional

from .model import CallOutcome, Reason

EXPIRED = 75  # the deadline had passed: the call was not started
TIMED_OUT = 124  # stopped at the deadline (the runner's TERM cut the call short): it may have run
WRAPPER_FAILED = 125  # the wrapper failed; also a started call that exited 75, 126 or 127 itself
# 75, 126 and 127 are given only for a call never started (docs/contract.md §4).
COMMAND_NOT_EXECUTABLE = 126  # the shell's status: scontrol found but not executable
COMMAND_NOT_FOUND = 127  # the shell's status: no scontrol (not Result.NOT_FOUND: no job)

_PLAIN_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)\Z", re.ASCII)


class StatusClass(str, enum.Enum):
    SUCCESS = "success"
    FAILED = "failed"  # scontrol failed by itself: a refusal if its stderr qualifies
    EXPIRED = "expired"
    TIMED_OUT = "timed_out"
    WRAPPER_FAILED = "wrapper_failed"
    NOT_RUN = "not_run"
    SIGNALLED = "signalled"


def parse_status(raw: object) -> Optional[int]:
    """The status as a plain int if it is readable (docs/contract.md §4: 0-255, an int or decimal str), else None."""
    if isinstance(raw, bool):
        return None
    # A plain copy through the base type first: a subclass's own comparisons, __len__ or
    # __index__ never run (they may raise or lie), and what comes out is an exact int.
    # type(), not only isinstance(): an object can claim to be an int through __class__.
    if isinstance(raw, int) and issubclass(type(raw), int):
        value = int.__int__(raw)
        return value if 0 <= value <= 255 else None
    if isinstance(raw, str) and issubclass(type(raw), str):
        text = str.__str__(raw)
        if len(text) <= 3 and _PLAIN_DECIMAL.match(text):
            value = int(text)
            return value if value <= 255 else None
    return None


def classify(status: int) -> StatusClass:
    """The class of a readable status (0..255)."""
    if status == 0:
        return StatusClass.SUCCESS
    if status == EXPIRED:
        return StatusClass.EXPIRED
    if status == TIMED_OUT:
        return StatusClass.TIMED_OUT
    if status == WRAPPER_FAILED:
        return StatusClass.WRAPPER_FAILED
    if status in (COMMAND_NOT_EXECUTABLE, COMMAND_NOT_FOUND):
        return StatusClass.NOT_RUN
    if status >= 128:
        return StatusClass.SIGNALLED
    return StatusClass.FAILED


# The outcome and reason of every class but FAILED, which needs the stderr.
FIXED_OUTCOME = {
    StatusClass.SUCCESS: (CallOutcome.SUCCESS, None),
    StatusClass.EXPIRED: (CallOutcome.EXPIRED, None),
    StatusClass.NOT_RUN: (CallOutcome.NOT_RUN, None),
    StatusClass.TIMED_OUT: (CallOutcome.UNKNOWN, Reason.TIMED_OUT),
    StatusClass.WRAPPER_FAILED: (CallOutcome.UNKNOWN, Reason.WRAPPER_FAILED),
    StatusClass.SIGNALLED: (CallOutcome.UNKNOWN, Reason.KILLED_BY_SIGNAL),
}
