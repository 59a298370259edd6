"""Every operation against every job state of docs/slurm-behaviour.md §2, on the real lab.

Each test takes a fresh job, runs one operation through the package (the real
runner, the real scontrol, the real slurmctld), and asserts both the outcome
and the job's real state afterwards.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple

import pytest

from slurm_dsl import Op, Reason, RequeueBit, Result
from slurm_dsl.run.calls import execute
from tests import lab

pytestmark = pytest.mark.integration

TIMEOUT = 15.0  # well past the lab's MessageTimeout=3
MISSING = "999999"  # as in docs/slurm-behaviour.md; the lab never gets that far
FINISHED = ("completed", "failed", "cancelled")
PENDING = ("held_user", "held_admin", "pending")
RUNNING = ("running_rq0", "running_rq1")
KINDS = PENDING + RUNNING + FINISHED + ("missing",)

# (op, kind) -> (result, requeue_bit, refusal message); docs/slurm-behaviour.md §2 and §8.
EXPECTED: Dict[Tuple[Op, str], Tuple[Result, Optional[str], Optional[str]]] = {}
for k in PENDING + RUNNING:
    EXPECTED[(Op.HOLD, k)] = (Result.OK, None, None)
    EXPECTED[(Op.RELEASE, k)] = (Result.OK, None, None)
    EXPECTED[(Op.OPEN, k)] = (Result.OK, None, None)
    EXPECTED[(Op.RESTORE, k)] = (Result.OK, None, None)
for k in PENDING:
    EXPECTED[(Op.REQUEUE, k)] = (Result.REJECTED, "clear", "Job is pending execution")
for k in RUNNING:
    EXPECTED[(Op.REQUEUE, k)] = (Result.OK, "clear", None)
for k in FINISHED:
    for op in (Op.HOLD, Op.RELEASE, Op.OPEN):
        EXPECTED[(op, k)] = (Result.REJECTED, None, "Job has already finished")
    # update Requeue=1 on a finished job is refused (docs/slurm-behaviour.md §2): the requeue never starts.  Its call 3
    # is refused the same way, so the flag was never seen cleared: may_be_set (docs/contract.md §7).
    EXPECTED[(Op.REQUEUE, k)] = (Result.REJECTED, "may_be_set", "Job has already finished")
    # slurmctld will not change a finished job's flag, which its owner can still requeue.
    EXPECTED[(Op.RESTORE, k)] = (Result.REJECTED, None, "Job has already finished")
for op in (Op.HOLD, Op.RELEASE, Op.OPEN):
    EXPECTED[(op, "missing")] = (Result.NOT_FOUND, None, "Invalid job id specified")
EXPECTED[(Op.REQUEUE, "missing")] = (Result.NOT_FOUND, "clear", "Invalid job id specified")
EXPECTED[(Op.RESTORE, "missing")] = (Result.OK, None, "Invalid job id specified")
# requeuehold: requeue's calls, refusals and bits (docs/contract.md §1), its call 2 scontrol's requeuehold.
EXPECTED.update({(Op.REQUEUE_HOLD, k): EXPECTED[(Op.REQUEUE, k)] for k in KINDS})


def fresh(kind: str) -> Tuple[str, Optional[lab.JobState]]:
    if kind == "missing":
        assert lab.job_state(MISSING) is None
        return MISSING, None
    job_id = lab.make_job(kind)
    return job_id, lab.job_state(job_id)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", list(Op), ids=str)
def test_operation_on_state(op: Op, kind: str) -> None:
    job_id, before = fresh(kind)
    out = execute(op, job_id, time.time() + TIMEOUT, scontrol=lab.SCONTROL)
    result, bit, message = EXPECTED[(op, kind)]
    assert (out.result, out.requeue_bit.value if out.requeue_bit else None) == (result, bit), out
    messages = {c.message for c in out.calls if c.message}
    assert messages == ({message} if message else set()), out
    if before is None:
        assert lab.job_state(job_id) is None
        return
    after = lab.job_state(job_id)
    assert after is not None
    check_state_after(op, kind, before, after, job_id)


def check_state_after(op: Op, kind: str, before: lab.JobState, after: lab.JobState, job_id: str) -> None:
    if kind in FINISHED:
        assert (after.state, after.requeue, after.restarts) == (before.state, before.requeue, before.restarts)
        return
    if op is Op.HOLD:
        assert after.priority == 0 and after.reason == "JobHeldAdmin"
        assert after.state == before.state  # a held running job keeps running
    elif op in (Op.RELEASE, Op.OPEN):
        assert after.priority > 0
        assert after.reason not in ("JobHeldUser", "JobHeldAdmin")
    elif op in (Op.REQUEUE, Op.REQUEUE_HOLD):
        assert after.requeue == 0, "call 3 clears the bit"
        if kind in RUNNING:
            js = lab.wait_for(job_id, lab.Expect("PENDING"))
            assert js.restarts == before.restarts + 1
            if op is Op.REQUEUE_HOLD:  # back PENDING and held (docs/slurm-behaviour.md §2; squeue's spelling)
                assert (js.priority, js.reason.replace("_", " ")) == (0, "job requeued in held state"), js
        else:
            assert after.restarts == before.restarts and after.state == "PENDING"
    elif op is Op.RESTORE:
        assert after.requeue == 0
        assert after.state == before.state


def test_restore_after_a_manual_requeue_1() -> None:
    job_id = lab.make_job("running_rq0")
    lab.check(["scontrol", "update", f"JobId={job_id}", "Requeue=1"])
    assert lab.wait_for(job_id, lab.Expect("RUNNING", requeue=1)).requeue == 1
    out = execute(Op.RESTORE, job_id, time.time() + TIMEOUT)
    assert out.result is Result.OK
    after = lab.job_state(job_id)
    assert after is not None and (after.state, after.requeue, after.restarts) == ("RUNNING", 0, 0)


@pytest.fixture
def as_test_user(tmp_path: Path) -> str:
    """An scontrol that runs the real one as the lab's plain test user."""
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root")
    shim = tmp_path / "scontrol"
    shim.write_text(f"#!/bin/sh\nexec runuser -u {lab.TEST_USER} -- {lab.SCONTROL} \"$@\"\n")
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    return str(shim)


@pytest.mark.parametrize(
    ("op", "bit"),
    [(Op.HOLD, None), (Op.RELEASE, None), (Op.OPEN, None), (Op.RESTORE, None), (Op.REQUEUE, "may_be_set"),
     (Op.REQUEUE_HOLD, "may_be_set")],
)
def test_a_non_owner_is_rejected(as_test_user: str, op: Op, bit: Optional[str]) -> None:
    job_id = lab.make_job("running_rq0")
    before = lab.job_state(job_id)
    out = execute(op, job_id, time.time() + TIMEOUT, scontrol=as_test_user)
    # requeue: call 1 and call 3 were both refused; call 3 ran and did not clear (docs/contract.md §7).
    assert (out.result, out.requeue_bit.value if out.requeue_bit else None) == (Result.REJECTED, bit)
    assert {c.message for c in out.calls} == {"Invalid user id"}
    assert lab.job_state(job_id) == before


@pytest.mark.parametrize("op", [Op.RELEASE, Op.OPEN])
def test_a_user_cannot_release_an_admin_hold(as_test_user: str, op: Op) -> None:
    job_id = lab.make_job("held_admin", user=lab.TEST_USER)
    out = execute(op, job_id, time.time() + TIMEOUT, scontrol=as_test_user)
    assert out.result is Result.REJECTED
    assert out.calls[0].message == "Access/permission denied"
    js = lab.job_state(job_id)
    assert js is not None and js.reason == "JobHeldAdmin" and js.priority == 0


@pytest.fixture
def controller_down() -> Iterator[str]:
    job_id = lab.make_job("running_rq0")
    lab.stop_slurmctld()
    try:
        yield job_id
    finally:
        lab.start_slurmctld()


def test_controller_down(controller_down: str) -> None:
    job_id = controller_down
    for op in Op:
        out = execute(op, job_id, time.time() + TIMEOUT)
        assert out.result is Result.UNKNOWN, out
        assert out.calls[0].stderr.startswith(f"Unexpected message received for job {job_id}\n".encode())
        if op in (Op.REQUEUE, Op.REQUEUE_HOLD):
            assert out.requeue_bit is RequeueBit.MAY_BE_SET
    # A deadline shorter than MessageTimeout: the call is killed at the deadline.
    out = execute(Op.HOLD, job_id, time.time() + 1.0)
    assert (out.result, out.reason, out.calls[0].status) == (Result.UNKNOWN, Reason.TIMED_OUT, 124)


def test_jobs_survive_the_controller_restart(controller_down: str) -> None:
    lab.start_slurmctld()
    js = lab.job_state(controller_down)
    assert js is not None and js.state == "RUNNING" and js.requeue == 0


def delaying_shim(directory: Path, call: str, seconds: float) -> str:
    """An scontrol first on PATH that sleeps before delegating ``call`` to the real one."""
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / "scontrol"
    shim.write_text(
        "#!/bin/sh\n"
        f'case "$1 $3" in {call}) sleep {seconds} ;; esac\n'
        f'exec {lab.SCONTROL} "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    return str(shim)


def test_requeue_whose_call_2_runs_out_of_time_leaves_the_bit_set(tmp_path: Path) -> None:
    job_id = lab.make_job("running_rq0")
    shim = delaying_shim(tmp_path, '"requeue "*', 30)
    out = execute(Op.REQUEUE, job_id, time.time() + 2.0, scontrol=shim)
    assert [c.status for c in out.calls] == [0, 124, 75]
    assert (out.result, out.requeue_bit) == (Result.UNKNOWN, RequeueBit.SET)
    js = lab.job_state(job_id)
    assert js is not None and js.requeue == 1 and js.state == "RUNNING", "set means the flag really is 1"
    assert execute(Op.RESTORE, job_id, time.time() + TIMEOUT).result is Result.OK
    assert lab.job_state(job_id).requeue == 0  # type: ignore[union-attr]


def test_requeue_whose_call_3_runs_out_of_time_may_leave_the_bit_set(tmp_path: Path) -> None:
    job_id = lab.make_job("running_rq0")
    shim = delaying_shim(tmp_path, '"update Requeue=0"', 30)
    out = execute(Op.REQUEUE, job_id, time.time() + 2.0, scontrol=shim)
    assert [c.status for c in out.calls] == [0, 0, 124]
    assert (out.result, out.requeue_bit) == (Result.UNKNOWN, RequeueBit.MAY_BE_SET)
    js = lab.wait_for(job_id, lab.Expect("PENDING"))
    assert js.requeue == 1 and js.restarts == 1, "the requeue happened and the flag was never cleared"


@pytest.mark.parametrize("op", [Op.HOLD, Op.OPEN], ids=str)
@pytest.mark.parametrize("own", [75, 127])
def test_a_wrapper_that_acted_then_exited_75_or_127_is_unknown(tmp_path: Path, op: Op, own: int) -> None:
    # docs/contract.md §4: a site wrapper that runs the real scontrol, then fails on its own
    # (a missing logger: 127; its own timeout: 75).  The call acted, so "did not run" would be a lie.
    # Released, the held job stays pending (its start is an hour off); the pending one waits on its blocker.
    job_id = lab.make_job("held_user", "--begin=now+3600") if op is Op.OPEN else lab.make_job("pending")
    wrapper = tmp_path / "scontrol"
    wrapper.write_text(f'#!/bin/sh\n{lab.SCONTROL} "$@"\nexit {own}\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    out = execute(op, job_id, time.time() + TIMEOUT, scontrol=str(wrapper))
    assert (out.result, out.reason, out.calls[0].status) == (Result.UNKNOWN, Reason.WRAPPER_FAILED, 125)
    state = lab.job_state(job_id)
    assert state is not None and (state.priority == 0) is (op is Op.HOLD), "the call did act"
