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
from .reader import read_outcome, unknown
from .script import KILL_GRACE, check_scontrol_path, render

DEFAULT_SCONTROL = "/usr/bin/scontrol"
# How long past the script's deadline the runner's guard waits: the script's own
# TERM/KILL grace, plus time for the last status line to be printed.
GUARD_MARGIN = 1.5
JobId = Union[str, int]
Clock = Callable[[], float]


def find_scontrol(explicit: Optional[str] = None) -> str:
    """The absolute scontrol path: explicit, else $SLURM_DSL_SCONTROL, else the
    first on the caller's PATH, else /usr/bin/scontrol.  Resolved once, then fixed."""
    path = explicit or os.environ.get("SLURM_DSL_SCONTROL") or shutil.which("scontrol") or DEFAULT_SCONTROL
    return check_scontrol_path(os.path.abspath(path))


def resolve_deadline(timeout: Optional[float], deadline: Optional[float], clock: Clock = time.time) -> float:
    """An absolute wall-clock deadline from exactly one of ``timeout`` and ``deadline``."""
    if (timeout is None) == (deadline is None):
        raise ValueError("give exactly one of timeout (seconds) and deadline (epoch seconds)")
    if timeout is not None:
        if isinstance(timeout, bool) or not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        return clock() + float(timeout)
    assert deadline is not None
    if isinstance(deadline, bool) or not math.isfinite(deadline) or deadline <= 0:
        raise ValueError(f"deadline must be a positive epoch time, got {deadline!r}")
    return float(deadline)


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
    path = find_scontrol(scontrol)
    left = deadline - clock()
    if not op.wrapped:
        if left <= 0:
            return read_outcome(op, job, b"", 75)
        done = runner.run_argv((path, "release", job), timeout=left)
        if done.truncated:
            return unknown(op, job, Reason.OUTPUT_TOO_LARGE, exit_status=done.returncode)
        return read_outcome(op, job, done.stderr, done.returncode)
    nonce = nonce or new_nonce()
    script = render(op, job, deadline, nonce, path)
    done = runner.run_script(script, timeout=max(left, 0.0) + KILL_GRACE + GUARD_MARGIN)
    if done.truncated:
        return unknown(op, job, Reason.OUTPUT_TOO_LARGE, exit_status=done.returncode, detail="output over the cap")
    return read_outcome(op, job, done.stderr, done.returncode, nonce)
