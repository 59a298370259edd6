"""Running one operation on one job, untracked (docs/contract.md §1, §2, §4, §6, §11).

``execute`` validates the id before any process starts, runs the op's script under the runner
(the deadline's clock: TERM, then KILL ``KILL_GRACE`` later) and never raises for what scontrol did.
It records nothing: the public operations run it through the ledger.
"""

from __future__ import annotations

import os
import signal
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

from ..core.jobid import JobIds, validate_job_id
from ..core.model import Op, Outcome, Reason, RequeueBit, Result
from ..core.reader import read_outcome, unknown
from ..core.script import KILL_GRACE, list_argv, render, render_list
from ..core.statuses import COMMAND_NOT_EXECUTABLE, COMMAND_NOT_FOUND, EXPIRED, WRAPPER_FAILED
from ..host import process
from ..host.binaries import find_scontrol
from .deadlines import Clock, check_deadline, steady

if TYPE_CHECKING:
    from ..core.bulk_reader import ListCall

# ``core.bulk_reader`` is imported by the list calls that use it: a single job's op never does
# (docs/benchmarks.md §7).

# How long after the deadline plus KILL_GRACE (the runner's KILL) a process of a run may still be
# alive: until its backstop (``process.backstop``: BACKSTOP_MARGIN past the KILL, rounded up to
# whole seconds), even if the runner is frozen; a runner that keeps time is done well before (its
# drain windows, the reaping).  Not a wait of execute's (the runner keeps the deadline itself);
# leases add it, so that a lease never lapses while a call of it may still run.
GUARD_MARGIN = process.BACKSTOP_MARGIN + 1.0
# The guard of a script rendered expired: it starts nothing, so this only bounds a broken shell.
# Never 0: a TERM before the script's trap is set would kill it before it could say 75.
EXPIRED_GUARD = float(KILL_GRACE)
JobId = Union[str, int]
# The statuses that say a call was never started (docs/contract.md §4).
NOT_STARTED = frozenset({EXPIRED, COMMAND_NOT_EXECUTABLE, COMMAND_NOT_FOUND})
_OWN_STATUS = "scontrol was started and exited {} itself (a wrapper's own failure?): it may have acted"


def new_nonce() -> str:
    """128 bits from ``secrets``, lowercase hex (docs/contract.md §2)."""
    return os.urandom(16).hex()


def unstarted(op: Union[Op, str], job_id: str) -> Outcome:
    """``expired`` for a job whose turn came after the deadline: nothing started, nothing to record."""
    op = Op(op)
    return Outcome(op, job_id, Result.EXPIRED, RequeueBit.CLEAR if op.requeues else None, None, (), None,
                   "the deadline passed before its call could start: nothing was done")


def execute(
    op: Union[Op, str],
    job_id: JobId,
    deadline: float,
    *,
    scontrol: Optional[str] = None,
    nonce: Optional[str] = None,
    clock: Clock = steady,
) -> Outcome:
    """Run one op on one job until ``deadline`` and read what it came to.  ``scontrol`` None: the
    configured one (``config.configure``: ``ConfigFileError`` before anything runs)."""
    op = Op(op)
    job = validate_job_id(job_id)
    deadline = check_deadline(deadline, clock)
    if scontrol is None:
        from .config import configure

        scontrol = configure().scontrol
    path = find_scontrol(scontrol)
    left = deadline - clock()
    if not op.wrapped:
        if left <= 0:
            return read_outcome(op, job, b"", 75)
        done = process.run_argv((path, "release", job), timeout=left)
        if done.truncated:
            return unknown(op, job, Reason.OUTPUT_TOO_LARGE, exit_status=done.returncode)
        if done.pipes_held:
            return _not_closed(op, job, done)
        status = direct_status(done)
        outcome = read_outcome(op, job, done.stderr, status)
        if status != done.returncode:
            return replace(outcome, detail=_OWN_STATUS.format(done.returncode))
        return outcome
    nonce = nonce or new_nonce()
    done = run_wrapped(lambda expired: render(op, job, deadline, nonce, path, expired=expired), left)
    if done.truncated:
        return unknown(op, job, Reason.OUTPUT_TOO_LARGE, exit_status=done.returncode, detail="output over the cap")
    if done.pipes_held:
        return _not_closed(op, job, done)
    if done.timed_out and done.killed_by == signal.SIGKILL:
        # A call outlived the deadline's TERM by the grace: the runner's KILL cut the script
        # short, so its last status lines are missing (the reader would say so too).
        return unknown(op, job, Reason.TIMED_OUT, exit_status=done.returncode,
                       detail=f"a call outlived the deadline's TERM: the script was killed {KILL_GRACE} s later")
    return read_outcome(op, job, done.stderr, done.returncode, nonce)


def run_list_call(
    op: Union[Op, str],
    number: int,
    job_ids: Sequence[str],
    deadline: float,
    scontrol: str,
    *,
    nonce: Optional[str] = None,
    clock: Clock = steady,
) -> ListCall:
    """Call ``number`` of ``op`` on every id of ``job_ids`` in one framed scontrol script, read into one
    ``Call`` per id.  Never raises for what scontrol did."""
    from ..core.bulk_reader import read_list_output, unknown_list_call

    op = Op(op)
    ids = job_ids if type(job_ids) is JobIds else list(job_ids)  # JobIds: checked already
    path = find_scontrol(scontrol)
    nonce = nonce or new_nonce()
    done = run_wrapped(lambda expired: render_list(op, number, ids, deadline, nonce, path, expired=expired),
                       deadline - clock())
    if done.truncated:
        return unknown_list_call(number, ids, Reason.OUTPUT_TOO_LARGE)
    if done.pipes_held:
        return unknown_list_call(number, ids, Reason.TIMED_OUT if done.timed_out else Reason.OUTPUT_NOT_CLOSED,
                                 stderr=done.stderr)
    if done.timed_out and done.killed_by == signal.SIGKILL:
        return unknown_list_call(number, ids, Reason.TIMED_OUT, stderr=done.stderr)
    return read_list_output(op, number, ids, done.stderr, done.returncode, nonce)


def run_open_list(
    job_ids: Sequence[str], deadline: float, scontrol: str, *, clock: Clock = steady
) -> ListCall:
    """``open`` on every id of ``job_ids`` in one direct ``scontrol release <list>``, unwrapped, as
    open's single call runs.  Never raises for what scontrol did."""
    from ..core.bulk_reader import read_open_list, unknown_list_call

    ids = job_ids if type(job_ids) is JobIds else list(job_ids)  # JobIds: checked already
    args = list_argv(Op.RELEASE, 1, ids)  # open's argv is release's; the ids and their size checked
    path = find_scontrol(scontrol)
    left = deadline - clock()
    if left <= 0:
        return read_open_list(ids, b"", EXPIRED)
    done = process.run_argv((path, *args), timeout=left)
    if done.truncated:
        return unknown_list_call(1, ids, Reason.OUTPUT_TOO_LARGE)
    if done.pipes_held:
        return unknown_list_call(1, ids, Reason.TIMED_OUT if done.timed_out else Reason.OUTPUT_NOT_CLOSED,
                                 stderr=done.stderr)
    return read_open_list(ids, done.stderr, direct_status(done))


def direct_status(done: process.Completed) -> int:
    """The status of a direct (unwrapped) call (docs/contract.md §4): a started program's own 75,
    126 or 127 is 125, since only a spawn that failed certainly did not run."""
    if done.started and done.killed_by is None and done.returncode in NOT_STARTED:
        return WRAPPER_FAILED
    return done.returncode


def run_wrapped(render_script: Callable[[bool], str], left: float) -> process.Completed:
    """Run a wrapped script ``left`` seconds before its deadline; ``render_script(expired)`` renders it,
    expired (every call 75) when ``left <= 0``."""
    done = _run_rendered(render_script(left <= 0), left)
    if done.killed_by == signal.SIGTERM and not done.stderr:
        # The shell died of a TERM (the deadline's) with nothing said: its first line traps
        # TERM, so it came before the trap was set, and no call had started.  The expired
        # script says so: 75 for every call, nothing started.
        done = _run_rendered(render_script(True), 0.0)
    return done


def _run_rendered(script: str, left: float) -> process.Completed:
    return process.run_script(script, timeout=left if left > 0 else EXPIRED_GUARD, kill_grace=KILL_GRACE)


def _not_closed(op: Op, job: str, done: process.Completed) -> Outcome:
    """Unknown: a process that escaped the call held its output open, so what was read may not be all."""
    if done.timed_out:
        return unknown(op, job, Reason.TIMED_OUT, exit_status=done.returncode,
                       detail="stopped at the deadline, its output still held open by an escaped process")
    return unknown(op, job, Reason.OUTPUT_NOT_CLOSED, exit_status=done.returncode,
                   detail="output still held open after the call exited (a process that left its session?)")
