"""SqueueLookup against the real Slurm lab: flags, gone ids, a forged job name, slurmctld down.

The squeue quirks these rely on are docs/slurm-behaviour.md §4, §6 and §9 (22.05) and
docs/slurm-24.11-26.05.md §4-§5; each test checks the lookup against what the lab itself
reports through tests/lab.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Dict, List, Set

import pytest

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import LookupFailed
from slurm_dsl.lookups.choose import default_lookup
from slurm_dsl.lookups.squeue import SqueueLookup, parse_slurm_version, slurm_version
from tests import lab

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True, params=["jobinfo", "squeue"])
def asker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, jobinfo_helper: str) -> str:
    """Every test twice: single-job lookups through slurm-dsl-jobinfo, as an installed slurm-dsl
    makes them, and through squeue alone (no helper installed)."""
    monkeypatch.setenv("SLURM_DSL_JOBINFO", jobinfo_helper if request.param == "jobinfo" else "")
    return str(request.param)

MISSING = "999999"  # never reached by the lab's job ids; slurmctld does not know it
FORGED_NAME = "x Requeue=1 Restarts=9"


def expected(job_id: str) -> JobInfo:
    js = lab.job_state(job_id)
    assert js is not None
    return JobInfo(job_id, js.state, js.requeue == 1, js.restarts, js.priority, js.reason)


@pytest.mark.parametrize("many", [50, 0], ids=["job-list", "all-jobs"])
def test_running_pending_and_finished_jobs_read_true_flags(many: int) -> None:
    rq1 = lab.make_job("running_rq1")
    rq0 = lab.make_job("running_rq0")
    held = lab.make_job("held_user")
    done = lab.make_job("completed")
    answer = SqueueLookup(many=many).jobs([rq1, rq0, held, done])
    assert list(answer) == [rq1, rq0, held, done]
    assert answer[rq1] == JobInfo(rq1, "RUNNING", True, 0, expected(rq1).priority, "None")
    running, finished = answer[rq0], answer[done]
    assert running is not None and (running.state, running.requeue) == ("RUNNING", False)
    assert answer[held] == JobInfo(held, "PENDING", False, 0, 0, "JobHeldUser")
    assert finished is not None and finished.state == "COMPLETED" and finished.finished
    for job_id in (rq1, rq0, held, done):
        assert answer[job_id] == expected(job_id)


def test_a_requeued_job_shows_its_restart_and_keeps_the_flag() -> None:
    job_id = lab.make_job("running_rq1")
    subprocess.run(["scontrol", "requeue", job_id], check=True, timeout=30)
    lab.wait_for(job_id, lab.Expect("PENDING"))
    info = SqueueLookup().jobs([job_id])[job_id]
    assert info is not None
    # docs/slurm-behaviour.md §5: Requeue stays 1, Restarts counts the requeue.
    assert (info.state, info.requeue, info.restarts, info.finished) == ("PENDING", True, 1, False)


def test_a_job_name_cannot_forge_the_requeue_flag() -> None:
    job_id = lab.submit("-J", FORGED_NAME, "--hold", *lab.SLEEP_JOB)
    lab.wait_for(job_id, lab.Expect("PENDING", "JobHeldUser"))
    # The hazard is real here: `show job -o` prints the forged Requeue=1 first (docs/slurm-behaviour.md §9).
    shown = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert shown.index("Requeue=1") < shown.index("Requeue=0")
    for many in (50, 0):
        info = SqueueLookup(many=many).jobs([job_id])[job_id]
        assert info == JobInfo(job_id, "PENDING", False, 0, 0, "JobHeldUser")


def test_array_tasks_are_read_by_their_own_job_ids() -> None:
    master = lab.submit("--array=1-2", *lab.SLEEP_JOB)
    lab.wait_for(master, lab.Expect("RUNNING"))
    listed = subprocess.run(
        ["squeue", "-h", "-j", master, "-O", "JobID:|"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()
    tasks: List[str] = [t.rstrip("|") for t in listed]
    assert master in tasks and len(tasks) == 2
    answer = SqueueLookup().jobs(tasks)
    for task in tasks:
        info = answer[task]
        assert info is not None and info.job_id == task and info.state == "RUNNING"


def test_a_missing_id_among_known_ones_is_gone() -> None:
    known = lab.make_job("held_user")
    for many in (50, 0):
        answer = SqueueLookup(many=many).jobs([MISSING, known])
        info = answer[known]
        assert answer[MISSING] is None
        assert info is not None and info.reason == "JobHeldUser"


def test_ids_asked_one_by_one_read_as_a_listing_does() -> None:
    """Issue 20 item 1: among many jobs, each id is its own `squeue -j <id>` (forced here with a
    count that says so); gone and found as the listing says, array tasks by their own ids."""
    rq1 = lab.make_job("running_rq1")
    held = lab.make_job("held_user")
    done = lab.make_job("completed")
    ids = [rq1, MISSING, held, done]
    look = SqueueLookup()
    look.jobs_held = 10**6
    alone = look.jobs(ids)
    assert alone == SqueueLookup(many=0).jobs(ids)
    assert alone[MISSING] is None and alone[held] == expected(held) and alone[rq1] == expected(rq1)


def test_sdiag_tells_how_many_jobs_are_pending_or_running() -> None:
    held = lab.make_job("held_user")
    count = SqueueLookup().count_jobs()
    assert count is not None and count >= 1
    assert SqueueLookup().jobs([held, MISSING])[held] == expected(held)


def test_a_single_missing_id_is_gone() -> None:
    assert SqueueLookup().jobs([MISSING]) == {MISSING: None}


def test_the_running_slurm_version() -> None:
    out = subprocess.run(["squeue", "--version"], capture_output=True, check=True, timeout=30).stdout
    assert slurm_version() == parse_slurm_version(out)


def test_the_default_lookup_answers() -> None:
    job_id = lab.make_job("running_rq1")
    answer = default_lookup().jobs([job_id, MISSING])
    assert answer == {job_id: expected(job_id), MISSING: None}


@pytest.mark.slow
def test_slurmctld_down_is_lookup_failed_never_gone() -> None:
    """Stopped slurmctld: squeue exits 1 `Unable to contact slurm controller` after
    2*(MessageTimeout-1) s, 4 s in the lab (docs/slurm-24.11-26.05.md §4, D4); every path fails, none says gone."""
    known = lab.make_job("held_user")
    lab.stop_slurmctld()
    try:
        # -j <one id> (or the helper), then all jobs; then the helper's share of many ids.
        for ids, held in (([MISSING], None), ([known, MISSING], None), ([known, MISSING], 10**6)):
            start = time.monotonic()
            look = SqueueLookup(timeout=30.0, many=1 if held is None else 50)
            look.jobs_held = held
            with pytest.raises(LookupFailed, match="unreachable"):
                look.jobs(ids)
            assert time.monotonic() - start < 30.0
    finally:
        lab.start_slurmctld()
    assert SqueueLookup().jobs([known])[known] is not None


FIELDS = "JobID:|,ArrayJobID:|,ArrayTaskID:|,State:|,Requeue:|,RestartCnt:|,PriorityLong:|,Reason:|"


def squeue_lines(job_id: str, nonce: str) -> Set[bytes]:
    """What `squeue -j <one id>` prints for the lookup's fields (no lines: it does not know the id)."""
    done = subprocess.run(
        ["squeue", "-h", "-a", "-t", "all", "-r", "-j", job_id, "-O", FIELDS + nonce],
        capture_output=True, timeout=30, check=False,
    )
    if done.returncode == 1 and done.stderr == b"slurm_load_jobs error: Invalid job id specified\n":
        return set()
    assert done.returncode == 0, done.stderr
    return set(done.stdout.splitlines())


@pytest.mark.parametrize("asker", ["jobinfo"], indirect=True)
def test_the_helper_prints_what_squeue_prints_for_every_kind_of_job(jobinfo_helper: str, asker: str) -> None:
    """contrib/jobinfo: the same records as `squeue -j <id>`, byte for byte, for plain, held, running,
    requeued, finished, forged-name and array jobs (a pending array with a task split off by a
    release, and a finished one); nothing for an id slurmctld does not know; asked one id at a
    time and all in one call (each record once), the same bytes whatever the number of threads."""
    array = lab.submit("--hold", "--array=1-4", *lab.SLEEP_JOB)
    lab.wait_for(array, lab.Expect("PENDING", "JobHeldUser"))
    subprocess.run(["scontrol", "release", f"{array}_2"], check=True, timeout=30, capture_output=True)
    finished_array = lab.submit("--array=1-2", "--wrap", "true")
    jobs = [
        lab.make_job("running_rq1"), lab.make_job("running_rq0"), lab.make_job("held_user"),
        lab.make_job("held_admin"), lab.make_job("completed"),
        lab.submit("-J", FORGED_NAME, "--hold", *lab.SLEEP_JOB), array, finished_array,
    ]
    requeued = lab.make_job("running_rq1")
    subprocess.run(["scontrol", "requeue", requeued], check=True, timeout=30)
    lab.wait_for(requeued, lab.Expect("PENDING"))
    lab.wait_for(finished_array, lambda s: s.state == "COMPLETED")
    nonce = os.urandom(16).hex()
    tasks = {line.split(b"|")[0].decode() for job in (array, finished_array) for line in squeue_lines(job, nonce)}
    ids = [*jobs, requeued, *sorted(tasks - {array, finished_array}), MISSING]
    every: Dict[str, Set[bytes]] = {}
    for job in ids:
        alone = subprocess.run([jobinfo_helper, nonce, job], capture_output=True, timeout=30, check=False)
        assert (alone.returncode, alone.stderr) == (0, b""), job
        lines = alone.stdout.splitlines()
        assert len(lines) == len(set(lines)) and set(lines) == squeue_lines(job, nonce), job
        every[job] = set(lines)
    assert every[MISSING] == set() and len(every[array]) >= 4
    together = subprocess.run([jobinfo_helper, nonce, *ids, *ids], capture_output=True, timeout=30, check=False)
    assert (together.returncode, together.stderr) == (0, b"")
    lines = together.stdout.splitlines()
    assert len(lines) == len(set(lines)) and set(lines) == set().union(*every.values())
    for threads in ("1", "3", "16"):
        shared = subprocess.run([jobinfo_helper, "-t", threads, nonce, *ids, *ids], capture_output=True, timeout=30,
                                check=False)
        assert (shared.returncode, shared.stderr, shared.stdout) == (0, b"", together.stdout), threads


@pytest.mark.parametrize("asker", ["jobinfo"], indirect=True)
def test_the_helper_refuses_what_is_not_a_job_id(jobinfo_helper: str, asker: str) -> None:
    nonce = os.urandom(16).hex()
    for argv in ([nonce], [nonce, "0"], [nonce, "12a"], [nonce, "4294967295"], [nonce, "-1"], ["NONCE", "5"],
                 ["-t", "0", nonce, "5"], ["-t", "17", nonce, "5"], ["-t", "x", nonce, "5"], ["-t", nonce, "5"],
                 ["-t", "2", nonce]):
        done = subprocess.run([jobinfo_helper, *argv], capture_output=True, timeout=30, check=False)
        assert (done.returncode, done.stdout) == (2, b""), argv
        assert done.stderr.startswith(b"slurm-dsl-jobinfo: "), argv
