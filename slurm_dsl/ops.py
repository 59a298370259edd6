"""Running one operation on one job, untracked (SPEC §1, §2, §6).

Contract: ``execute`` validates the job id before any process starts, renders
the op's script with a fresh nonce, runs it through ``runner`` with an outer
guard a little past the deadline, and reads the output with ``read_outcome``;
it returns the ``Outcome`` and never raises for what scontrol did.  It records
nothing: the public operations (``api``) run it through the ledger.  ``open``
runs ``scontrol release`` directly, unwrapped, under the runner's guard at the
deadline itself.
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import time
from typing import Callable, Optional, Union

from . import runner
from .jobid import validate_job_id
from .model import Op, Outcome, Reason
from .plain import plain_float, plain_str
from .reader import read_outcome, unknown
from .script import KILL_GRACE, check_scontrol_path, render

DEFAULT_SCONTROL = "/usr/bin/scontrol"
DEFAULT_SQUEUE = "/usr/bin/squeue"
# How long past the script's deadline the runner's guard waits: the script's own
# TERM/KILL grace, plus time for the last status line to be printed.
GUARD_MARGIN = 1.5
# The longest timeout, and the furthest deadline from now, an operation takes: one day.  The
# runner waits with poll()/epoll, whose timeout is milliseconds in a C int: 2**31 ms is about
# 24.8 days, and a longer wait overflows (a traceback after the intent was recorded).  One day
# stays far below that with every margin added (guard, kill grace, lease slack), and is far
# beyond what one scontrol call, or waiting for another operation's lease on the job, needs.
MAX_TIMEOUT = 86400.0
# How much further than MAX_TIMEOUT ``check_deadline`` lets a deadline be, so that one from
# ``resolve_deadline`` is not refused a moment later if the wall clock stepped back meanwhile.
_CLOCK_STEP = 60.0
JobId = Union[str, int]
Clock = Callable[[], float]


def find_scontrol(explicit: Optional[str] = None) -> str:
    """The absolute scontrol path: explicit, else $SLURM_DSL_SCONTROL, else the
    first on the caller's PATH, else /usr/bin/scontrol.  Resolved once, then fixed."""
    if explicit is not None:
        explicit = plain_str(os.fspath(explicit), "scontrol path")  # a str subclass's methods never run
    path = explicit or os.environ.get("SLURM_DSL_SCONTROL") or shutil.which("scontrol") or DEFAULT_SCONTROL
    return check_scontrol_path(os.path.abspath(path))


def find_squeue(explicit: Optional[str] = None, scontrol: Optional[str] = None) -> str:
    """The absolute squeue path: explicit, else $SLURM_DSL_SQUEUE, else the squeue beside the
    scontrol in use (one Slurm install), else the first on the caller's PATH, else /usr/bin/squeue."""
    path = explicit or os.environ.get("SLURM_DSL_SQUEUE")
    if not path and scontrol:
        sibling = os.path.join(os.path.dirname(find_scontrol(scontrol)), "squeue")
        path = sibling if os.access(sibling, os.X_OK) else None
    path = path or shutil.which("squeue") or DEFAULT_SQUEUE
    return check_scontrol_path(os.path.abspath(path))


def resolve_deadline(timeout: Optional[float], deadline: Optional[float], clock: Clock = time.time) -> float:
    """An absolute wall-clock deadline from exactly one of ``timeout`` and ``deadline``.

    ``ValueError`` unless the timeout is in (0, ``MAX_TIMEOUT``] seconds, or the deadline passes
    ``check_deadline``.
    """
    if (timeout is None) == (deadline is None):
        raise ValueError("give exactly one of timeout (seconds) and deadline (epoch seconds)")
    if timeout is not None:
        seconds = plain_float(timeout, "timeout")
        if not 0 < seconds <= MAX_TIMEOUT:  # NaN fails both comparisons
            raise ValueError(
                f"timeout must be a positive number of seconds, at most {MAX_TIMEOUT:g} (one day), got {seconds!r}"
            )
        return clock() + seconds
    assert deadline is not None
    return check_deadline(deadline, clock)


def check_deadline(deadline: float, clock: Clock = time.time) -> float:
    """``deadline`` (epoch seconds) as a plain float, or ``ValueError``.

    It must be positive, finite and at most ``MAX_TIMEOUT`` seconds from now (give or take
    ``_CLOCK_STEP``); a deadline already past is fine (the operation then expires unrun).
    """
    when = plain_float(deadline, "deadline")
    if not math.isfinite(when) or when <= 0:
        raise ValueError(f"deadline must be a positive epoch time, got {when!r}")
    if when - clock() > MAX_TIMEOUT + _CLOCK_STEP:
        raise ValueError(
            f"deadline must be at most {MAX_TIMEOUT:g} seconds (one day) from now, got {when!r}"
        )
    return when


def new_nonce() -> str:
    """128 bits from ``secrets``, lowercase hex (SPEC §2)."""
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
