"""Self-tests of tests/lab.py against the real Slurm lab."""

from __future__ import annotations

import os
import time

import pytest

from tests import lab

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("kind", sorted(lab.JOB_KINDS))
def test_each_job_kind_reaches_its_state(kind: str) -> None:
    job_id = lab.make_job(kind)
    js = lab.job_state(job_id)
    assert js is not None
    assert lab.JOB_KINDS[kind][1](js), js
    assert js.job_id == job_id
    assert js.restarts == 0
    if kind.startswith("held"):
        assert js.priority == 0  # a held job has priority 0 in every version
    if kind in ("running_rq0", "running_rq1"):
        assert js.requeue == int(kind[-1])
        assert js.priority > 0


def test_jobs_default_to_requeue_0() -> None:
    # JobRequeue=0 in the lab's slurm.conf, as at sites running slurm-dsl.
    js = lab.wait_for(lab.submit(*lab.SLEEP_JOB), lab.Expect("RUNNING"))
    assert js.requeue == 0


def test_submit_as_test_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("submitting as another user needs root")
    job_id = lab.make_job("held_user", user=lab.TEST_USER)
    owner = lab.run_cmd(["squeue", "-h", "-j", job_id, "-o", "%u"]).stdout.strip()
    assert owner == lab.TEST_USER


def test_unknown_job_is_none() -> None:
    assert lab.job_state("999999") is None


def test_wait_for_times_out_with_the_last_state() -> None:
    job_id = lab.make_job("held_user")
    start = time.monotonic()
    with pytest.raises(AssertionError, match="JobHeldUser"):
        lab.wait_for(job_id, lab.Expect("RUNNING"), timeout=0.3)
    assert time.monotonic() - start < 5


def test_slurmctld_restart_keeps_running_jobs() -> None:
    if os.geteuid() != 0:
        pytest.skip("stopping slurmctld needs root")
    running = lab.make_job("running_rq1")
    held = lab.make_job("held_user")
    before = lab.slurmctld_pid()
    lab.stop_slurmctld()
    try:
        assert lab.lab_available() is not None  # ping says DOWN
        with pytest.raises(lab.LabError):
            lab.slurmctld_pid()
    finally:
        lab.start_slurmctld()
    assert lab.slurmctld_pid() != before
    assert lab.lab_available() is None
    after = lab.job_state(running)
    assert after is not None
    assert (after.state, after.requeue, after.restarts) == ("RUNNING", 1, 0)
    assert lab.Expect("PENDING", "JobHeldUser")(lab.job_state(held) or after)
