"""The promises at the edges, against the real lab (docs/contract.md §7, §9): a finished job that
still shows Requeue=1 stays watched until it is purged or comes back, array tasks
never read as gone whatever squeue groups, and an op on an array's own JobId that
would reach other tasks is refused before anything runs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import List, Tuple

import pytest

from slurm_dsl import Op, RequeueBit, Result
from slurm_dsl.core.model import WholeArray
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups.squeue import SqueueLookup
from slurm_dsl.run.sweep import Done, sweep
from slurm_dsl.run.tracked import Tracker
from tests import lab
from tests.cli_run import cli_process
from tests.integration.test_sweeper_live import mark_unknown
from tests.ledger_backends import bit

pytestmark = pytest.mark.integration

ARRAY = ("--array=1-3", "--hold", *lab.SLEEP_JOB)


def split_task(array: str, task: int) -> str:
    """Split a pending task off its array (``scontrol hold A_T``) and return its own JobId."""
    lab.check(["scontrol", "hold", f"{array}_{task}"])
    deadline = time.monotonic() + 30
    while True:
        out = lab.run_cmd(["squeue", "-h", "-r", "-j", array, "-O", "JobID:|,ArrayTaskID:|"]).stdout
        for line in out.splitlines():
            job_id, task_id, _ = line.split("|")
            if task_id == str(task) and job_id != array:
                lab._submitted.append(job_id)
                return job_id
        assert time.monotonic() < deadline, f"task {task} of {array} was not split off: {out!r}"
        time.sleep(lab.POLL_INTERVAL)


def array_with_a_task_at_requeue_1(task: int) -> Tuple[str, str]:
    """A pending held array of 3 with ``task`` split off and at Requeue=1: (array, task's JobId)."""
    array = lab.submit(*ARRAY)
    lab.wait_for(array, lab.Expect("PENDING"))
    task_id = split_task(array, task)
    lab.check(["scontrol", "update", f"JobId={task_id}", "Requeue=1"])
    return array, task_id


# --- finished jobs at Requeue=1 ---------------------------------------------------


def test_a_cancelled_job_at_requeue_1_stays_watched_until_its_owner_requeues_it(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    job = lab.submit("--hold", *lab.SLEEP_JOB, user=lab.TEST_USER)
    lab.wait_for(job, lab.Expect("PENDING", "JobHeldUser"))
    lab.check(["scontrol", "update", f"JobId={job}", "Requeue=1"])  # root: the companion lets it through
    lab.check(["scancel", job])
    lab.wait_for(job, lab.Expect("CANCELLED", requeue=1))
    mark_unknown(path, job)

    with Tracker(path, scontrol=lab.SCONTROL) as tracker:
        # slurmctld will not clear a finished job's flag: the restore is refused, the bit stays.
        restore = tracker.run(Op.RESTORE, job, time.time() + 10)
        assert (restore.result, restore.calls[0].message) == (Result.REJECTED, "Job has already finished")
        assert bit(path, job) is RequeueBit.MAY_BE_SET
        for _ in range(2):  # watched on every sweep, without a back-off or a restore attempt
            report = sweep(tracker, SqueueLookup())
            assert [(s.job_id, s.done) for s in report.swept] == [(job, Done.WATCHING)]
            assert report.handled
        with open_ledger(path) as ledger:
            obj = ledger.get(job)
            assert obj is not None and obj.bit is RequeueBit.MAY_BE_SET and obj.lookup_failures == 0
            assert [h.op for h in ledger.history(job)] == [Op.REQUEUE, Op.RESTORE]

        # Its owner may requeue it: it comes back PENDING, still at Requeue=1 ...
        done = lab.run_cmd(["runuser", "-u", lab.TEST_USER, "--", "scontrol", "requeue", job])
        assert (done.returncode, done.stderr) == (0, "")
        lab.wait_for(job, lambda js: js.state == "PENDING" and js.requeue == 1)
        # ... and the next sweep restores it, ...
        report = sweep(tracker, SqueueLookup())
        assert [(s.job_id, s.done) for s in report.swept] == [(job, Done.RESTORED)]
        assert lab.job_state(job).requeue == 0  # type: ignore[union-attr]
        assert bit(path, job) is RequeueBit.MAY_BE_SET
        # ... and the one after slurmctld saved that clears the object (docs/contract.md §13.3).
        with lab.saving():
            report = sweep(tracker, SqueueLookup())
    assert [(s.job_id, s.done) for s in report.swept] == [(job, Done.CLEARED)]
    assert bit(path, job) is RequeueBit.CLEAR


# --- arrays ------------------------------------------------------------------------


@pytest.mark.parametrize("many", [50, 0], ids=["job list", "listing"])
def test_a_split_pending_task_never_reads_as_gone_beside_its_array(tmp_path: Path, many: int) -> None:
    """squeue without -r folds the split task into its array's remainder line."""
    path = str(tmp_path / "ledger.sqlite3")
    array, task = array_with_a_task_at_requeue_1(2)
    for job in (array, task):
        mark_unknown(path, job)
    answer = SqueueLookup(many=many).jobs([array, task])
    info = answer[task]
    assert info is not None and info.requeue and info.array_job_id == array
    assert answer[array] is not None and answer[array].array_tasks == 3  # type: ignore[union-attr]
    with lab.saving(), Tracker(path, scontrol=lab.SCONTROL) as tracker:  # Requeue=0 seen saved (§13.3)
        report = sweep(tracker, SqueueLookup(many=many))
    assert {s.job_id: s.done for s in report.swept} == {array: Done.CLEARED, task: Done.RESTORED}
    assert lab.job_state(task).requeue == 0  # type: ignore[union-attr]


def test_sixty_objects_and_a_split_task_take_the_listing_path(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    array, task = array_with_a_task_at_requeue_1(3)
    gone = [str(n) for n in range(4000001, 4000061)]  # ids this lab never reaches
    for job in [array, *gone, task]:
        mark_unknown(path, job)
    # Saves seen after the marks and after the lookup that says gone: the gone ones clear (§13.2, §13.3).
    with lab.saving(), Tracker(path, scontrol=lab.SCONTROL) as tracker:
        report = sweep(tracker, SqueueLookup())  # 62 ids > 50: one listing of every job
    done = {s.job_id: s.done for s in report.swept}
    assert done[task] is Done.RESTORED
    assert {done[j] for j in gone} == {Done.CLEARED}
    assert lab.job_state(task).requeue == 0  # type: ignore[union-attr]


def test_orphans_see_a_split_task(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    array, task = array_with_a_task_at_requeue_1(1)
    done = cli_process(["sweep", "--ledger", path, "--orphans", "--json", "--lookup", "squeue"], timeout=120)
    orphans = [json.loads(line)["job_id"] for line in done.stdout.splitlines() if '"orphan": true' in line]
    assert task in orphans and array not in orphans, done.stdout


@pytest.mark.parametrize("op", ["hold", "release", "requeue", "open"])
def test_an_op_on_a_pending_arrays_own_id_is_refused_before_anything_runs(tmp_path: Path, op: str) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    array = lab.submit(*ARRAY)
    lab.wait_for(array, lab.Expect("PENDING", "JobHeldUser"))
    plain = lab.make_job("held_user")
    done = cli_process([op, plain, array, "--timeout", "10", "--ledger", path], timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert f"job {array} is the own JobId of array {array}, whose 3 tasks" in done.stderr
    assert "Nothing ran" in done.stderr
    with open_ledger(path) as ledger:
        assert ledger.history(plain) == [] and ledger.history(array) == []
    assert lab.job_state(plain).reason == "JobHeldUser"  # type: ignore[union-attr]
    states = lab.run_cmd(["squeue", "-h", "-r", "-j", array, "-O", "JobID:|,Reason:|,Requeue:|"]).stdout.split()
    assert states == [f"{array}|JobHeldUser|0|"] * 3


def test_a_split_tasks_own_id_is_a_single_job_and_the_array_id_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    array = lab.submit(*ARRAY)
    lab.wait_for(array, lab.Expect("PENDING"))
    task = split_task(array, 2)
    done = cli_process(["release", task, "--timeout", "10", "--ledger", path, "--json"], timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "ok"
    with Tracker(path, scontrol=lab.SCONTROL) as tracker:
        with pytest.raises(WholeArray):
            tracker.run(Op.REQUEUE, array, time.time() + 10)
        # A restore only ever clears flags: on the array's own id it reaches every task.
        assert tracker.run(Op.RESTORE, array, time.time() + 10).result is Result.OK


def test_running_tasks_are_single_jobs_and_the_last_task_id_reaches_the_others(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    array = lab.submit("--array=1-2", "--requeue", *lab.SLEEP_JOB)
    deadline = time.monotonic() + 30
    records: List[str] = []
    while time.monotonic() < deadline:
        out = lab.run_cmd(["squeue", "-h", "-r", "-j", array, "-O", "JobID:|,State:|"]).stdout.split()
        records = [r.split("|")[0] for r in out if r.split("|")[1] == "RUNNING"]
        if len(records) == 2:
            break
        time.sleep(lab.POLL_INTERVAL)
    assert len(records) == 2 and array in records, records
    other = next(r for r in records if r != array)
    lab._submitted.append(other)
    done = cli_process(["requeue", other, "--timeout", "10", "--ledger", path, "--json"], timeout=120)
    out = json.loads(done.stdout)
    assert (done.returncode, out["result"], out["requeue_bit"]) == (0, "ok", "clear"), done.stderr
    refused = cli_process(["hold", array, "--timeout", "10", "--ledger", path], timeout=120)
    assert refused.returncode == 2 and "whose 2 tasks" in refused.stderr
