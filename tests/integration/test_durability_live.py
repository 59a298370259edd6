"""slurmctld SIGKILLed right after acknowledging a requeue's call 3 (docs/contract.md §13,
docs/durability.md §1): no job is ever left at Requeue=1 untracked.

Each trial requeues a running job through ``slurm-dsl requeue`` (ok, its calls cleared the flag),
waits ``d`` seconds from the command's end, SIGKILLs slurmctld and starts it again, then reads the
job: whatever came back (the requeue whole, undone with the flag left at 1, or undone with the flag
at 0), the job's ledger object is not clear while the job shows Requeue=1, and sweeps restore the
flag and clear the object only once slurmctld has saved it.  The save thread is idle (**cold**:
nothing saved for 6 s, so call 1 is saved at once and calls 2-3 wait) or **busy** (**warm**: another
job's update saved just before, so all three wait).  Between the sweeps the test changes another job
(a comment), so that slurmctld has something to save and the wait for a save is seconds, not the
300 s of its periodic checkpoint on an idle lab.

This restarts the SHARED lab's slurmctld; the ledger is SQLite (the backend changes nothing here).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Dict, Optional

import pytest

from slurm_dsl.core.model import RequeueBit
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups.saves import last_save
from tests import lab
from tests.cli_run import COMMAND, cli_process

pytestmark = pytest.mark.integration

COLD = 6.5  # seconds without a save: the save thread is idle
# Seconds for the sweeps to restore and clear after the restart.  Usually a few; but a job can come
# back COMPLETING (its processes were ended before the crash) and stay so until slurmd registers
# with the restarted controller again, bounded by SlurmdTimeout (300 s by default).  The sweeps watch
# it meanwhile, its object kept may_be_set (seen once in CI after the chaos run: COMPLETING for
# more than 90 s, 73 sweeps watching).
SETTLED_WITHIN = 330.0


def saved_at() -> Optional[int]:
    return last_save().started


def make_warm(other: str, stamp: str) -> None:
    """Another job's update acknowledged and saved just now: the next save is ~5 s away."""
    before = saved_at()
    lab.check(["scontrol", "update", f"JobId={other}", f"Comment=warm-{stamp}"])
    deadline = time.monotonic() + 15
    while saved_at() == before:
        assert time.monotonic() < deadline, "slurmctld did not save within 15 s"
        time.sleep(0.02)


def make_cold() -> None:
    deadline = time.monotonic() + 60
    while True:
        started = saved_at()
        assert started is not None, last_save()
        if time.time() - started >= COLD:
            return
        assert time.monotonic() < deadline, "slurmctld kept saving for a minute"
        time.sleep(0.1)


def object_bit(ledger: str, job: str) -> Optional[RequeueBit]:
    with open_ledger(ledger) as opened:
        found = opened.get(job)
        return None if found is None else found.bit


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("d", [0.0, 0.5, 2.0, 4.5])
def test_no_flag_is_lost_when_slurmctld_dies_after_the_clear(tmp_path: Path, d: float, warm: bool) -> None:
    if d != 0.5 and os.environ.get("SLURM_DSL_TEST_MAJOR", "host") != "host":
        # The whole matrix on the host's major; every major runs d=0.5, idle and busy (the
        # suite's time budget, docs/testing.md).  slurmctld's saving is the same code on each.
        pytest.skip("the full matrix of kill times runs on the host's major")
    if last_save().started is None:
        pytest.fail(f"the lab's job_state cannot be read: {last_save()}")
    ledger = str(tmp_path / "ledger.sqlite3")
    job, other = lab.make_job("running_rq0"), lab.make_job("running_rq0")
    try:
        if warm:
            make_warm(other, "before")
        else:
            make_cold()
        done = cli_process(["requeue", job, "--json", "--timeout", "20", "--ledger", ledger])
        ended = time.monotonic()
        (row,) = [json.loads(line) for line in done.stdout.splitlines()]
        assert (row["result"], row["requeue_bit"]) == ("ok", "clear"), done.stdout + done.stderr
        time.sleep(max(0.0, d - (time.monotonic() - ended)))
        lab.kill_slurmctld()
        lab.start_slurmctld()

        came_back = lab.job_state(job)
        assert came_back is not None
        # Whatever came back, the object is not clear: its clear was never known saved.
        assert object_bit(ledger, job) is RequeueBit.MAY_BE_SET, came_back
        print(f"d={d} {'warm' if warm else 'cold'}: came back {came_back.state} Requeue={came_back.requeue}"
              f" RestartCnt={came_back.restarts}")

        deadline = time.monotonic() + SETTLED_WITHIN
        sweeps: Dict[str, int] = {}
        stamp = 0
        purged = False
        while object_bit(ledger, job) is not RequeueBit.CLEAR:
            assert time.monotonic() < deadline, f"not settled within {SETTLED_WITHIN:g} s: {sweeps}"
            swept = cli_process(["sweep", "--ledger", ledger, "--json"])
            lab.sweep_exited(swept)  # 0, or 16 when it records the crash's loss
            for line in swept.stdout.splitlines():
                found = json.loads(line)
                if found.get("kind") == "job":
                    sweeps[found["done"]] = sweeps.get(found["done"], 0) + 1
            state = lab.job_state(job)
            if state is None:
                # Purged: a job that came back finishing (COMPLETING until slurmd registers again)
                # ends with its end time more than MinJobAge ago and goes at once.  Nothing is left
                # to restore; the next sweep finds it gone and clears the object.
                purged = True
            elif object_bit(ledger, job) is RequeueBit.CLEAR:
                assert state.requeue == 0, "cleared while the job shows Requeue=1"
                break
            stamp += 1
            lab.check(["scontrol", "update", f"JobId={other}", f"Comment=save-{stamp}"])  # something to save
            time.sleep(1.0)
        final = lab.job_state(job)
        assert final is None or final.requeue == 0, final  # None: purged since, nothing left to set
        if came_back.requeue and not purged:
            assert sweeps.get("restored", 0) >= 1, sweeps  # the lost clear was put back by a restore
    finally:
        lab.cancel(job, other)


LOGGED = f"""#!/bin/sh
printf '%s\\n' "$*" >> {{log}}
exec {lab.SCONTROL} "$@"
"""


@pytest.mark.parametrize("op", ["hold", "requeue"])
def test_a_keyed_run_redoes_an_acknowledged_change_a_crash_lost_once(tmp_path: Path, op: str) -> None:
    """docs/contract.md §13.4: the change acknowledged in a busy save window, slurmctld SIGKILLed
    0.5 s later; it comes back without it (docs/durability.md §1: warm, lost 5/5).  The same
    command with its key reads the job again, records "acknowledged, then lost", and does it again,
    once; run a third time, it finds the second one there."""
    ledger = str(tmp_path / "ledger.sqlite3")
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(LOGGED.format(log=f"'{tmp_path / 'calls.log'}'"))
    scontrol.chmod(0o755)
    job, other = lab.make_job("running_rq0"), lab.make_job("running_rq0")
    argv = [op, job, "--key", "lost-32", "--json", "--timeout", "60", "--settle-delay", "2", "--ledger", ledger,
            "--scontrol", str(scontrol)]
    verb = "hold" if op == "hold" else "requeue"

    def shows_it() -> bool:
        state = lab.job_state(job)
        assert state is not None
        return state.priority == 0 if op == "hold" else state.restarts >= 1

    try:
        make_warm(other, op)
        first = cli_process(argv)
        (row,) = [json.loads(line) for line in first.stdout.splitlines()]
        assert row["result"] == "ok", first.stdout + first.stderr
        time.sleep(0.5)
        lab.kill_slurmctld()
        lab.start_slurmctld()
        if shows_it():
            pytest.skip("slurmctld saved the change before the kill: nothing lost this time")

        again = cli_process(argv)
        (row,) = [json.loads(line) for line in again.stdout.splitlines()]
        assert row["result"] == "ok" and row["calls"], again.stdout + again.stderr
        lab.wait_for(job, lambda s: shows_it())
        with open_ledger(ledger) as opened:
            lost, redone = opened.history(job)
        assert lost.settlement is not None and lost.settlement.verdict.value == "absent", lost
        assert lost.settlement.detail.startswith("acknowledged, then lost"), lost.settlement.detail
        assert redone.result is not None and redone.result.value == "ok" and redone.settlement is None

        third = cli_process(argv)
        (row,) = [json.loads(line) for line in third.stdout.splitlines()]
        assert row["calls"] == [] and "took effect" in row["detail"], third.stdout
        made = [line for line in (tmp_path / "calls.log").read_text().splitlines() if line.split()[0] == verb]
        assert made == [f"{verb} {job}", f"{verb} {job}"], made  # once lost, once again, never a third time
        final = lab.job_state(job)
        assert final is not None and (final.restarts == 1 if op == "requeue" else final.priority == 0)
    finally:
        lab.cancel(job, other)


def test_a_durable_requeue_returns_once_slurmctld_saved_it(tmp_path: Path) -> None:
    # docs/contract.md §13.5: on a cluster where slurmctld goes on saving (here another job's
    # comment changed every second), the command returns once two saves were seen after its calls,
    # its row saved.  (On an idle one it waits for the 300 s checkpoint: the contract says so.)
    ledger = str(tmp_path / "ledger.sqlite3")
    job = lab.make_job("running_rq0")
    try:
        with lab.saving():
            done = cli_process(["requeue", job, "--durable", "--json", "--timeout", "30", "--ledger", ledger])
        (row,) = [json.loads(line) for line in done.stdout.splitlines()]
        assert (done.returncode, row["result"], row["saved"]) == (0, "ok", True), done.stdout + done.stderr
        state = lab.job_state(job)
        assert state is not None and state.restarts == 1 and state.requeue == 0
    finally:
        lab.cancel(job)


def test_a_keyed_requeue_whose_baseline_a_crash_undid_is_not_done_again(tmp_path: Path) -> None:
    """docs/contract.md §12 Rule 16, the simulator's finding on the real slurmctld: another admin's
    requeue is acknowledged and not yet saved; the keyed requeue reads its baseline (RestartCnt 1)
    and sets the flag; slurmctld is SIGKILLed and started again from the last save (RestartCnt 0);
    the keyed requeue's call 2, sent after that, is applied (RestartCnt 1 again, the baseline's).
    The key's next run must not requeue a third time: another controller answered, so the
    baseline may have been undone, and its requeue is not read as lost."""
    ledger = str(tmp_path / "ledger.sqlite3")
    scontrol = tmp_path / "scontrol"
    go, at = tmp_path / "go", tmp_path / "at"
    scontrol.write_text(lab.PAUSED.format(log=f"'{tmp_path / 'calls.log'}'", go=f"'{go}'", at=f"'{at}'"))
    scontrol.chmod(0o755)
    job, other = lab.make_job("running_rq0"), lab.make_job("running_rq0")
    argv = ["requeue", job, "--key", "undone-16", "--json", "--timeout", "90", "--settle-delay", "2",
            "--ledger", ledger, "--scontrol", str(scontrol)]
    try:
        lab.check(["scontrol", "update", f"JobId={job}", "Requeue=1"])  # the other admin's, saved below
        make_warm(other, "before")  # a save just now: the next one is ~5 s away
        saved = saved_at()
        lab.check(["scontrol", "requeue", job])  # the other admin's requeue: acknowledged, not saved
        first = subprocess.Popen([*COMMAND, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not at.exists():
            assert first.poll() is None and time.monotonic() < deadline, "the keyed requeue never reached call 2"
            time.sleep(0.02)
        unsaved = saved_at() == saved
        lab.kill_slurmctld()
        lab.start_slurmctld()
        if not unsaved:
            go.touch()
            first.communicate(timeout=120)
            pytest.skip("slurmctld saved the other admin's requeue before the kill: nothing undone this time")
        came = lab.job_state(job)
        assert came is not None and came.restarts == 0, came  # the other admin's requeue is lost
        go.touch()
        out, err = first.communicate(timeout=120)
        (row,) = [json.loads(line) for line in out.splitlines()]
        assert row["result"] == "ok", out + err  # call 2 applied by the restarted slurmctld
        assert lab.job_state(job).restarts == 1  # type: ignore[union-attr]  # the baseline's count again

        again = cli_process(argv)
        (row,) = [json.loads(line) for line in again.stdout.splitlines()]
        assert row["calls"] == [], again.stdout + again.stderr  # not requeued again
        made = [line for line in (tmp_path / "calls.log").read_text().splitlines() if line.split()[0] == "requeue"]
        assert made == [f"requeue {job}"], made
        final = lab.job_state(job)
        assert final is not None and final.restarts == 1, final
        with open_ledger(ledger) as opened:
            (mine,) = opened.history(job)
        assert mine.settlement is None or mine.settlement.verdict.value != "absent", mine.settlement
    finally:
        go.touch()
        lab.cancel(job, other)
