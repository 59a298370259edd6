"""The ledger and the sweeper against the real lab (docs/contract.md §9): crashes at random
moments, concurrent sweepers and operations, a down controller, a forged name."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

from slurm_dsl import Op, RequeueBit, Result
from slurm_dsl.core.model import Outcome
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups.squeue import SqueueLookup
from slurm_dsl.run.sweep import Done, sweep
from slurm_dsl.run.tracked import Tracker
from tests import lab
from tests.cli_run import cli_process
from tests.fakes import descendants
from tests.integration.test_bulk_live import calls, shim
from tests.integration.test_wording_live import slurm_release
from tests.ledger_ops import begin_operation, finish_operation

pytestmark = pytest.mark.integration

CRASHES = 50
REQUEUE_CHILD = f"""
import sys, time
from slurm_dsl.run.tracked import Tracker
with Tracker(sys.argv[1], scontrol="{lab.SCONTROL}", lease_slack=0.5) as t:
    print("go", flush=True)
    t.run("requeue", sys.argv[2], time.time() + 2)
"""


def crash(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process and everything it started, at once: a crash of the whole host side."""
    victims = [proc.pid, *descendants(proc.pid)]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def wait_until_pending(path: str, count: int, timeout: float = 30.0) -> None:
    """Poll until ``count`` objects are visible to a sweep (the crashed holders' leases lapsed)."""
    deadline = time.monotonic() + timeout
    with open_ledger(path) as ledger:
        while len(ledger.due_objects(time.time())) < count:
            assert time.monotonic() < deadline, f"only {len(ledger.due_objects(time.time()))} of {count} objects due"
            time.sleep(0.1)


def test_requeues_killed_at_random_moments_are_all_put_right(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    open_ledger(path).close()
    rng = random.Random(int(os.environ.get("SLURM_DSL_CRASH_SEED", "1234")))
    jobs = [lab.submit("--hold", *lab.SLEEP_JOB) for _ in range(CRASHES)]
    for job in jobs:
        lab.wait_for(job, lab.Expect("PENDING", "JobHeldUser"))
    for job in jobs:
        child = subprocess.Popen([sys.executable, "-c", REQUEUE_CHILD, path, job], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdout.readline() == b"go\n"
        # The crash point: anywhere from before the intent is committed, through each of the
        # three calls, to after the script but before the result is recorded (a whole
        # tracked requeue takes some 20-40 ms here).
        time.sleep(rng.uniform(0.0, 0.045))
        crash(child)
    flagged = [j for j in jobs if lab.job_state(j).requeue == 1]  # type: ignore[union-attr]
    with open_ledger(path) as ledger:
        marked = [j for j in jobs if (o := ledger.get(j)) is not None and o.bit is not RequeueBit.CLEAR]
        unfinished = sum(1 for j in jobs for h in ledger.history(j) if h.finished_at is None)
    assert set(flagged) <= set(marked), "every job left at Requeue=1 is tracked"
    print(f"\n{CRASHES} crashes: {len(flagged)} left Requeue=1, {len(marked)} objects not clear,"
          f" {unfinished} operations never recorded a result")
    assert unfinished > 0, "some crash must have hit between intent and result"

    wait_until_pending(path, len(marked))
    with Tracker(path, scontrol=lab.SCONTROL) as tracker:
        report = sweep(tracker, SqueueLookup())
        assert report.handled, report
        # What the sweep cleared or restored is watched until slurmctld is seen to save it (§13.3).
        with lab.saving():
            report = sweep(tracker, SqueueLookup())
    assert report.handled, report
    with open_ledger(path) as ledger:
        assert all(ledger.get(j) is None or ledger.get(j).bit is RequeueBit.CLEAR for j in jobs)  # type: ignore[union-attr]
    assert [j for j in jobs if lab.job_state(j).requeue == 1] == []  # type: ignore[union-attr]


def mark_unknown(path: str, job: str) -> None:
    with open_ledger(path) as ledger:
        op_id = begin_operation(ledger, job, Op.REQUEUE, "0" * 32, time.time())
        out = Outcome(Op.REQUEUE, job, Result.UNKNOWN, RequeueBit.MAY_BE_SET)
        finish_operation(ledger, op_id, out, b"", time.time())


SWEEP_CHILD = f"""
import sys
from slurm_dsl.lookups.squeue import SqueueLookup
from slurm_dsl.run.sweep import sweep
from slurm_dsl.run.tracked import Tracker
with Tracker(sys.argv[1], scontrol="{lab.SCONTROL}") as t:
    for _ in range(int(sys.argv[2])):
        report = sweep(t, SqueueLookup())
        print(" ".join(f"{{s.job_id}}:{{s.done.value}}" for s in report.swept), flush=True)
"""
OPS_CHILD = f"""
import sys, time
from slurm_dsl.run.tracked import Tracker
with Tracker(sys.argv[1], scontrol="{lab.SCONTROL}") as t:
    for job in sys.argv[2:]:
        print(job, t.run("requeue", job, time.time() + 10).result.value, flush=True)
"""


def test_two_sweepers_and_operations_at_once(tmp_path: Path) -> None:
    """Two sweepers (without the CLI's lock, to exercise the leases) and a stream of
    requeues on the same jobs: no job is restored twice by one round, no update is lost."""
    path = str(tmp_path / "ledger.sqlite3")
    jobs = [lab.submit("--hold", *lab.SLEEP_JOB) for _ in range(12)]
    for job in jobs:
        lab.wait_for(job, lab.Expect("PENDING", "JobHeldUser"))
        lab.check(["scontrol", "update", f"JobId={job}", "Requeue=1"])
        mark_unknown(path, job)
    sweepers = [subprocess.Popen([sys.executable, "-c", SWEEP_CHILD, path, "3"], stdout=subprocess.PIPE, text=True)
                for _ in range(2)]
    ops = subprocess.Popen([sys.executable, "-c", OPS_CHILD, path, *jobs[:6]], stdout=subprocess.PIPE, text=True)
    outs = [p.communicate(timeout=120)[0] for p in (*sweepers, ops)]
    assert all(p.returncode == 0 for p in (*sweepers, ops)), outs
    restored: Dict[str, int] = {}
    for out in outs[:2]:
        for line in out.splitlines():
            for item in line.split():
                job, done = item.split(":")
                if done == Done.RESTORED.value:
                    restored[job] = restored.get(job, 0) + 1
    assert all(count == 1 for count in restored.values()), restored
    # Settle what is left, then (after a save of slurmctld's, §13.3) the ledger and Slurm agree.
    with Tracker(path, scontrol=lab.SCONTROL) as tracker:
        assert sweep(tracker, SqueueLookup()).handled
        with lab.saving():
            assert sweep(tracker, SqueueLookup()).handled
    with open_ledger(path) as ledger:
        for job in jobs:
            obj = ledger.get(job)
            assert obj is not None and obj.bit is RequeueBit.CLEAR, (job, obj)
            assert lab.job_state(job).requeue == 0  # type: ignore[union-attr]
            restores = [h for h in ledger.history(job) if h.op is Op.RESTORE]
            assert len(restores) <= 1 + sum(1 for h in ledger.history(job) if h.op is Op.REQUEUE)


def test_a_sweep_with_slurmctld_down_changes_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    job = lab.make_job("running_rq0")
    lab.check(["scontrol", "update", f"JobId={job}", "Requeue=1"])
    mark_unknown(path, job)
    lab.stop_slurmctld()
    try:
        with Tracker(path, scontrol=lab.SCONTROL) as tracker:
            report = sweep(tracker, SqueueLookup(timeout=20))
        assert report.lookup_error is not None and "unreachable" in report.lookup_error
        assert [s.done for s in report.swept] == [Done.LOOKUP_FAILED]
        with open_ledger(path) as ledger:
            obj = ledger.get(job)
            assert obj is not None and obj.bit is RequeueBit.MAY_BE_SET and obj.lookup_failures == 1
            assert [h.op for h in ledger.history(job)] == [Op.REQUEUE], "no restore was attempted"
    finally:
        lab.start_slurmctld()
    assert lab.job_state(job).requeue == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(("name", "real_flag", "done"), [("x Requeue=1 Restarts=9", 0, Done.CLEARED),
                                                         ("x Requeue=0 Restarts=0", 1, Done.RESTORED)])
def test_a_forged_job_name_does_not_fool_the_sweep(tmp_path: Path, name: str, real_flag: int, done: Done) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    job = lab.submit("-J", name, "--hold", *lab.SLEEP_JOB)
    lab.wait_for(job, lab.Expect("PENDING"))
    lab.check(["scontrol", "update", f"JobId={job}", f"Requeue={real_flag}"])
    shown = lab.run_cmd(["scontrol", "show", "job", "-o", job]).stdout
    # 25.11 and 26.05 add SubmitLine=<the sbatch command line>, after the real flag, with the name
    # in it again: a third Requeue= (docs/slurm-24.11-26.05.md §0, D8; docs/slurm-25.11.md §3).
    submit_line = slurm_release() >= (25, 11)
    assert (" SubmitLine=" in shown) == submit_line, shown
    assert f"JobName={name}" in shown and shown.count(" Requeue=") == (3 if submit_line else 2), (
        "the name really forges a flag before the real one (and, on 26.05, one after it)"
    )
    mark_unknown(path, job)
    with Tracker(path, scontrol=lab.SCONTROL) as tracker:
        # The flag the forged name hides is 0: cleared once slurmctld is seen to save (§13.3).
        with lab.saving():
            report = sweep(tracker, SqueueLookup())
    assert [(s.job_id, s.done) for s in report.swept] == [(job, done)]
    assert lab.job_state(job).requeue == 0  # type: ignore[union-attr]


def test_cli_sweep_runs_one_at_a_time(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    from slurm_dsl.ledger.sqlite import SweepLock

    with SweepLock(path):
        done = cli_process(["sweep", "--ledger", path])
    assert done.returncode == 3 and "another sweep is running" in done.stderr
    done = cli_process(["sweep", "--ledger", path, "--json"])
    assert done.returncode == 0, done.stderr


# -- issue 16: a killed CLI's calls die with it, so no Requeue flag is set behind the ledger's back --

FAILOVER_CHILD = Path(__file__).resolve().parents[1] / "failover_child.py"
ORPHAN_DELAY = 10.0  # seconds the wrapper sleeps before the real call 1: past the killed CLI's lease


def _live(pids: List[int], cmdlines: Dict[int, bytes]) -> List[int]:
    """Of ``pids``, those still alive as the same process (not a zombie, not a reused pid)."""
    alive = []
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z" and cmd == cmdlines[pid]:
            alive.append(pid)
    return alive


def test_a_killed_cli_leaves_no_call_to_set_a_flag_the_ledger_has_cleared(tmp_path: Path) -> None:
    # The reproduction: an scontrol wrapper sleeps before the real `update Requeue=1`; the
    # CLI running `requeue J --timeout 3` is SIGKILLed (it alone) while the wrapper sleeps.  The
    # wrapper and everything under it are gone within 2 s (the lifeline); the killed CLI's lease
    # lapses (slack 0.5 s here, 30 s in production) and sweeps clear the object as the job shows
    # Requeue=0; and until well after the wrapper would have run the real call, the job never shows
    # Requeue=1 while the ledger has its object clear.
    path = str(tmp_path / "ledger.sqlite3")
    open_ledger(path).close()
    job = lab.submit("--hold", *lab.SLEEP_JOB)
    lab.wait_for(job, lab.Expect("PENDING", "JobHeldUser", requeue=0))
    started = tmp_path / "started"
    wrapper = shim(tmp_path / "w", f'case "$*" in "update JobId={job} Requeue=1") echo $$ > {started};'
                                   f' sleep {ORPHAN_DELAY:g} ;; esac\nexec {lab.SCONTROL} "$@"')
    begun = time.monotonic()
    cli = subprocess.Popen([sys.executable, str(FAILOVER_CHILD), "-", "0", "--lease-slack", "0.5", "cli",
                            "requeue", job, "--timeout", "3", "--scontrol", wrapper, "--ledger", path],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not (started.exists() and started.read_text().strip()):
        assert cli.poll() is None and time.monotonic() - begun < 30, "the wrapper never started"
        time.sleep(lab.POLL_INTERVAL)
    shell = int(started.read_text())
    pids = [shell, *descendants(shell)]
    cmdlines = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in pids}
    cli.kill()  # the CLI alone: no one kills its script and calls but the lifeline
    cli.wait()
    killed = time.monotonic()
    while _live(pids, cmdlines):
        assert time.monotonic() - killed < 2.0, f"the wrapper outlived the killed CLI: {_live(pids, cmdlines)}"
        time.sleep(lab.POLL_INTERVAL)
    with Tracker(path, scontrol=lab.SCONTROL) as tracker:
        ledger = tracker.ledger()
        while time.monotonic() - begun < ORPHAN_DELAY + 4.0:
            sweep(tracker, SqueueLookup())
            obj = ledger.get(job)
            if obj is not None and obj.bit is RequeueBit.CLEAR:
                assert lab.job_state(job).requeue == 0, "Requeue=1 while the ledger has the object clear"  # type: ignore[union-attr]
            time.sleep(0.2)  # the sweeps' interval
        with lab.saving():  # what the sweeps saw at Requeue=0 is cleared once seen saved (§13.3)
            sweep(tracker, SqueueLookup())
        obj = ledger.get(job)
    assert obj is not None and obj.bit is RequeueBit.CLEAR, "the sweeps cleared the lapsed intent"
    assert lab.job_state(job).requeue == 0  # type: ignore[union-attr]
    assert calls(wrapper).count(f"update JobId={job} Requeue=1") == 1
