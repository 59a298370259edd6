"""Slurm's wording on the running major, live: what the reader's allow-lists rest on.

The reader's allow-lists (slurm_dsl/core/refusals.py) are exact strings, and Slurm's wording moves
between majors. CI runs this file on 22.05 (Debian 12), 24.11 (Debian 13) and 26.05 (Debian sid;
contrib/lab/chroot), so that a wording change turns a run red instead of turning a site's
refusals into ``unknown``:

* every refusal message the reader allows for a call (``refusals.ALLOWED``) is provoked with that
  very call (the argv of ``slurm_dsl.core.script.CALLS``; open is a bare ``release``), must come back
  byte for byte in the form this major prints, and must be read as that refusal; or it is in
  ``NOT_OBSERVED``, with why the lab cannot provoke it;
* where the form differs between majors, the exact bytes per major: the ``slurm_suspend error``
  line, array lines, and update's ``No error`` lines (docs/slurm-24.11-26.05.md §0-§3,
  docs/slurm-bulk.md §2 and §7).
"""

from __future__ import annotations

import re
import subprocess
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from slurm_dsl.core.model import Op
from slurm_dsl.core.refusals import (
    ACCESS_DENIED,
    ALLOWED,
    ALREADY_FINISHED,
    DB_INDEX,
    DISABLED,
    INVALID_JOB_ID,
    INVALID_USER_ID,
    ONLY_BATCH,
    PENDING_EXECUTION,
    RATE_LIMITED,
    CallKey,
    refusal_message,
)
from slurm_dsl.core.script import CALLS
from tests import lab

pytestmark = pytest.mark.integration

MISSING = "999999"  # as in docs/slurm-behaviour.md; the lab never gets that far
SUSPENDING = frozenset({Op.HOLD, Op.RELEASE, Op.OPEN})
ARGV: Dict[CallKey, Tuple[str, ...]] = {(op, n): args for op, calls in CALLS.items() for n, args in calls}
ARGV[(Op.OPEN, 1)] = ("release", "{j}")  # open is not wrapped: a direct scontrol release


def slurm_release() -> Tuple[int, int]:
    """(major, minor) of the running Slurm, e.g. (22, 5), from ``scontrol -V``."""
    out = lab.run_cmd(["scontrol", "-V"]).stdout  # "slurm-wlm 22.05.8" on Debian 12
    found = re.search(r"(\d+)\.(\d+)", out)
    assert found, out
    return int(found.group(1)), int(found.group(2))


def suspend_line(text: Optional[str]) -> str:
    """hold/release's second line: ``slurm_suspend error: <text>`` up to 24.11; from 25.05 on without
    the space, and bare when errno is 0 (docs/slurm-bulk.md §7, 215c7bc33b; the no-space form seen
    on 26.05.5: docs/slurm-24.11-26.05.md §0, D1), where older ones print ``No error``."""
    if slurm_release() < (25, 5):
        return f"slurm_suspend error: {text or 'No error'}\n"
    return f"slurm_suspend error:{text}\n" if text else "slurm_suspend error\n"


def tasks(array: str, ranges: str) -> str:
    """An array line's id: ``A_1-3`` up to 24.11, ``A_[1-3]`` on 26.05 (docs/slurm-24.11-26.05.md
    §0, D2; 25.x was not run)."""
    return f"{array}_[{ranges}]" if slurm_release() >= (26, 5) else f"{array}_{ranges}"


def scontrol(*args: str, user: Optional[str] = None) -> subprocess.CompletedProcess[bytes]:
    argv = [lab.SCONTROL, *args]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)


# --- every allowed refusal, provoked --------------------------------------------------

# The jobs a refusal is provoked on, made once per module (a refused call changes nothing) and
# cancelled at its end; each gives (job id, user the call runs as).
Situation = Callable[[], Tuple[str, Optional[str]]]


def _missing() -> Tuple[str, Optional[str]]:
    assert lab.job_state(MISSING) is None
    return MISSING, None


def _finished() -> Tuple[str, Optional[str]]:
    return lab.make_job("completed"), None


def _foreign() -> Tuple[str, Optional[str]]:
    """root's running job, acted on by the plain user."""
    return lab.make_job("running_rq0"), lab.TEST_USER


def _own_admin_held() -> Tuple[str, Optional[str]]:
    """The plain user's own job, held by root: she may not release it."""
    return lab.make_job("held_admin", user=lab.TEST_USER), lab.TEST_USER


def _running_rq0() -> Tuple[str, Optional[str]]:
    return lab.make_job("running_rq0"), None


def _pending_rq1() -> Tuple[str, Optional[str]]:
    """A pending job at Requeue=1, as the requeue's call 1 leaves it."""
    job = lab.make_job("held_user")
    lab.check(["scontrol", "update", f"JobId={job}", "Requeue=1"])
    return job, None


def _allocation_rq1() -> Tuple[str, Optional[str]]:
    """An allocation without a batch script (salloc --no-shell), at Requeue=1."""
    proc = lab.run_cmd(["salloc", "--no-shell", "--time=5", "-J", "slurm-dsl-wording"])
    found = re.search(r"Granted job allocation (\d+)", proc.stderr)
    assert proc.returncode == 0 and found, proc.stderr
    job = found.group(1)
    lab._submitted.append(job)
    lab.wait_for(job, lab.Expect("RUNNING"))
    lab.check(["scontrol", "update", f"JobId={job}", "Requeue=1"])
    return job, None


SITUATIONS: Dict[str, Situation] = {
    "missing": _missing,
    "finished": _finished,
    "foreign": _foreign,
    "own_admin_held": _own_admin_held,
    "running_rq0": _running_rq0,
    "pending_rq1": _pending_rq1,
    "allocation_rq1": _allocation_rq1,
}

_UPDATE = {INVALID_JOB_ID: "missing", ALREADY_FINISHED: "finished", INVALID_USER_ID: "foreign"}
# (call, message) -> the situation that provokes it on every major.
OBSERVED: Dict[Tuple[CallKey, str], str] = {
    **{((Op.HOLD, 1), m): s for m, s in _UPDATE.items()},
    **{((op, 1), m): s for op in (Op.RELEASE, Op.OPEN) for m, s in _UPDATE.items()},
    ((Op.RELEASE, 1), ACCESS_DENIED): "own_admin_held",
    ((Op.OPEN, 1), ACCESS_DENIED): "own_admin_held",
    **{(key, m): s for key in ((Op.REQUEUE, 1), (Op.REQUEUE, 3), (Op.RESTORE, 1)) for m, s in _UPDATE.items()},
    ((Op.REQUEUE, 2), INVALID_JOB_ID): "missing",
    ((Op.REQUEUE, 2), DISABLED): "running_rq0",
    ((Op.REQUEUE, 2), PENDING_EXECUTION): "pending_rq1",
    ((Op.REQUEUE, 2), ONLY_BATCH): "allocation_rq1",
    ((Op.REQUEUE, 2), ACCESS_DENIED): "foreign",  # a foreign job: requeue says this, not Invalid user id
}
# requeuehold (docs/contract.md §1): every refusal of requeue's, provoked the same way, its call 2
# scontrol's requeuehold: so each major's own wording of it is checked here.
OBSERVED.update({((Op.REQUEUE_HOLD, n), m): s for ((op, n), m), s in list(OBSERVED.items()) if op is Op.REQUEUE})

_WHY_RATE_LIMITED = (
    "slurmctld's RPC rate limiter (24.05+, SlurmctldParameters=rl_enable) is off in the lab, and 22.05 has none: "
    "the text is slurm_strerror(ESLURMD_RATE_LIMITED) in every major that has it"
)
_WHY_DB_INDEX = (
    "needs accounting storage (slurmdbd) while a new job's database index is being set; the lab has "
    "AccountingStorageType=accounting_storage/none, so no job ever waits for one"
)
# (call, message) -> why the lab cannot provoke it.
NOT_OBSERVED: Dict[Tuple[CallKey, str], str] = {
    **{(key, RATE_LIMITED): _WHY_RATE_LIMITED for key in ALLOWED},
    **{(key, DB_INDEX): _WHY_DB_INDEX for key, allowed in ALLOWED.items() if DB_INDEX in allowed},
}


def test_every_allowed_refusal_is_provoked_or_says_why_not() -> None:
    allowed = {(key, m) for key, messages in ALLOWED.items() for m in messages}
    assert set(OBSERVED) | set(NOT_OBSERVED) == allowed
    assert not set(OBSERVED) & set(NOT_OBSERVED)
    assert set(OBSERVED.values()) <= set(SITUATIONS)


@pytest.fixture(scope="module")
def situations() -> Iterator[Dict[str, Tuple[str, Optional[str]]]]:
    """Each situation's job, made on first use and kept for the module (the per-test cleanup of
    tests/integration/conftest.py would cancel it), cancelled at the end."""
    ours: List[str] = []

    class Lazy(Dict[str, Tuple[str, Optional[str]]]):
        def __missing__(self, name: str) -> Tuple[str, Optional[str]]:
            before = len(lab._submitted)
            made_now = SITUATIONS[name]()
            ours.extend(lab._submitted[before:])
            del lab._submitted[before:]
            self[name] = made_now
            return made_now

    lazy = Lazy()
    try:
        yield lazy
    finally:
        lab.cancel(*ours)


def _order(case: Tuple[CallKey, str]) -> Tuple[str, int, str]:
    (op, number), message = case
    return str(op), number, message


CASES = [pytest.param(key, m, id=f"{key[0]}-{key[1]}-{m}") for key, m in sorted(OBSERVED.keys(), key=_order)]


@pytest.mark.parametrize(("key", "message"), CASES)
def test_each_allowed_refusal_occurs_in_this_majors_form(
    situations: Dict[str, Tuple[str, Optional[str]]], key: CallKey, message: str
) -> None:
    op, number = key
    job, user = situations[OBSERVED[(key, message)]]
    done = scontrol(*(a.format(j=job) for a in ARGV[key]), user=user)
    expected = f"{message} for job {job}\n" + (suspend_line(message) if op in SUSPENDING else "")
    assert (done.returncode, done.stdout, done.stderr) == (1, b"", expected.encode()), slurm_release()
    assert refusal_message(op, number, job, done.stderr) == message


# --- where the form differs between majors -----------------------------------------------


def test_the_suspend_line_of_a_list_follows_the_last_rpc() -> None:
    """``hold 999999,<pending>``: the line's text is errno after the last RPC, which succeeded:
    ``No error`` up to 24.11, nothing at all from 25.05 on. Neither is a refusal of either id."""
    job = lab.make_job("held_user")
    done = scontrol("hold", f"{MISSING},{job}")
    expected = f"{INVALID_JOB_ID} for job {MISSING}\n" + suspend_line(None)
    assert (done.returncode, done.stdout, done.stderr) == (1, b"", expected.encode()), slurm_release()
    for job_id in (MISSING, job):
        assert refusal_message(Op.HOLD, 1, job_id, done.stderr) is None


@pytest.fixture
def held_array() -> str:
    """A pending, held array of 3 tasks at Requeue=0, never split."""
    array = lab.submit("--array=1-3", "--hold", *lab.SLEEP_JOB)
    lab.wait_for(array, lab.Expect("PENDING", "JobHeldUser"))
    return array


def test_array_lines(held_array: str) -> None:
    """A task that does not exist, and the array's own id refused as a whole: one line per group
    (``A_7:``, ``A_1-3:``; bracketed on 26.05), no ``for job``, no suspend line."""
    a = held_array
    cases = [
        (("hold", f"{a}_7"), Op.HOLD, 1, f"{tasks(a, '7')}: {INVALID_JOB_ID}\n"),
        (("release", f"{a}_7"), Op.RELEASE, 1, f"{tasks(a, '7')}: {INVALID_JOB_ID}\n"),
        (("update", f"JobId={a}_7", "Requeue=0"), Op.RESTORE, 1, f"{tasks(a, '7')}: {INVALID_JOB_ID}\n"),
        (("requeue", a), Op.REQUEUE, 2, f"{tasks(a, '1-3')}: {DISABLED}\n"),
    ]
    for args, op, number, expected in cases:
        done = scontrol(*args)
        assert (done.returncode, done.stdout, done.stderr) == (1, b"", expected.encode()), (args, slurm_release())
        assert refusal_message(op, number, a, done.stderr) is None, args


def test_no_error_lines_of_a_group_that_succeeded(held_array: str) -> None:
    """Tasks 1-2 exist, 7 does not. hold and requeue print a line for every group, ``No error``
    for one that succeeded; update has not printed those since 23.02 (docs/slurm-bulk.md §7,
    e811c3f2e5). Each ``No error`` line still makes the exit status 1."""
    a = held_array
    missing = f"{tasks(a, '7')}: {INVALID_JOB_ID}\n"
    update = scontrol("update", f"JobId={a}_[1-2,7]", "Requeue=1")
    no_error = f"{tasks(a, '1-2')}: No error\n" if slurm_release() < (23, 2) else ""
    assert (update.returncode, update.stdout, update.stderr) == (1, b"", (no_error + missing).encode())
    hold = scontrol("hold", f"{a}_[1,7]")
    assert (hold.returncode, hold.stdout, hold.stderr) == (1, b"", f"{tasks(a, '1')}: No error\n{missing}".encode())
    for op, number, done in ((Op.REQUEUE, 1, update), (Op.HOLD, 1, hold)):
        assert refusal_message(op, number, a, done.stderr) is None
