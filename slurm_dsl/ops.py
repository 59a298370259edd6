"""Running one operation on one job, untracked (docs/contract.md §1, §2, §6).

Contract: ``execute`` validates the job id before any process starts, renders
the op's script with a fresh nonce, runs it through ``runner`` with an outer
guard a little past the deadline, and reads the output with ``read_outcome``;
it returns the ``Outcome`` and never raises for what scontrol did.  It records
nothing: the public operations (``api``) run it through the ledger.  ``open``
runs ``scontrol release`` directly, unwrapped, under the runner's guard at the
deadline itself.
"""

from __future__ import annotations

import secrets
import time
from typing import Optional, Union

from . import runner
from .binaries import find_scontrol
from .deadlines import Clock, check_deadline
from .jobid import validate_job_id
from .model import Op, Outcome, Reason
from .reader import read_outcome, unknown
from .script import KILL_GRACE, render

# How long past the script's deadline the runner's guard waits: the script's own
# TERM/KILL grace, plus time for the last status line to be printed.
GUARD_MARGIN = 1.5
JobId = Union[str, int]


def new_nonce() -> str:
    """128 bits from ``secrets``, lowercase hex (docs/contract.md §2)."""
    return secrets.token_hex(16)


def execute(
    op: Union[Op, str],
    job_id: JobId,
    deadline: float,
    *,
    scontrol: Optional[str] = None,
    nonce: Optional[str] = None,
    clock: Clock = time.time,
) -> Outcome:
    """Run one op on one job until ``deadline`` and read what it came to."""
    op = Op(op)
    job = validate_job_id(job_id)
    deadline = check_deadline(deadline, clock)
    path = find_scontrol(scontrol)
    left = deadline - clock()
    if not op.wrapped:
        if left <= 0:
            return read_outcome(op, job, b"", 75)
        done = runner.run_argv((path, "release", job), timeout=left)
        if done.truncated:
            return unknown(op, job, Reason.OUTPUT_TOO_LARGE, exit_status=done.returncode)
        if done.pipes_held:
            return _not_closed(op, job, done)
        return read_outcome(op, job, done.stderr, done.returncode)
    nonce = nonce or new_nonce()
    script = render(op, job, deadline, nonce, path)
    done = runner.run_script(script, timeout=max(left, 0.0) + KILL_GRACE + GUARD_MARGIN)
    if done.truncated:
        return unknown(op, job, Reason.OUTPUT_TOO_LARGE, exit_status=done.returncode, detail="output over the cap")
    if done.pipes_held:
        return _not_closed(op, job, done)
    return read_outcome(op, job, done.stderr, done.returncode, nonce)


def _not_closed(op: Op, job: str, done: runner.Completed) -> Outcome:
    """Unknown: a process that escaped the call held its output open, so what was read
    may not be all of it, however well it frames (the runner stopped reading, ``DRAIN``)."""
    if done.timed_out:
        return unknown(op, job, Reason.TIMED_OUT, exit_status=done.returncode,
                       detail="stopped by the outer guard, its output still held open by an escaped process")
    return unknown(op, job, Reason.OUTPUT_NOT_CLOSED, exit_status=done.returncode,
                   detail="output still held open after the call exited (a process that left its session?)")
