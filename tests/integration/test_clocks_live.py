"""Durable without trusting a clock, on the lab (docs/contract.md §13.2, §13.8): the host's clock
stepped back under slurmctld and slurm-dsl alike, and forward under slurm-dsl, through a real tool
(Debian's libfaketime: every process started on one control file reads the offset it holds,
changed while they run; the monotonic and boot clocks left alone, as a real step leaves them), and a
StateSaveLocation whose file server stops answering (bindfs, frozen: ``tests.conftest.Hung``).

Each test is a finding that lost a flag or hung a sweep before the rule it checks."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator, Optional

import pytest

from slurm_dsl.core.model import RequeueBit
from slurm_dsl.ledger.choose import open_ledger
from tests import faketime, lab
from tests.cli_run import COMMAND as CLI
from tests.cli_run import cli_process
from tests.conftest import Hung

pytestmark = pytest.mark.integration

COLD = 6.5  # seconds without a save: slurmctld's save thread is idle (docs/durability.md §1)
STEP = 90  # seconds the clock is stepped back, as the finding's


@pytest.fixture(scope="module")
def preload(tmp_path_factory: pytest.TempPathFactory) -> str:
    return faketime.preload(tmp_path_factory.mktemp("faketime"))


def stepped(preloaded: str, seconds: str) -> Dict[str, str]:
    """This environment, its wall clock ``seconds`` off the real one."""
    return dict(os.environ, **faketime.offset(preloaded, seconds))


@contextlib.contextmanager
def faked_clock(tmp_path: Path, preload: str) -> Iterator[Dict[str, str]]:
    """The environment that puts a process on one faked clock (its control file holds the offset,
    read at every clock read), slurmctld restarted on it; slurmctld restarted on the real clock
    after."""
    control = tmp_path / "offset"
    control.write_text("+0\n")
    env = faketime.on_file(preload, control)
    lab.kill_slurmctld()
    lab.start_slurmctld(environ=env)
    try:
        yield env
    finally:
        control.write_text("+0\n")
        lab.kill_slurmctld()
        lab.start_slurmctld()


def object_bit(ledger: str, job: str) -> Optional[RequeueBit]:
    with open_ledger(ledger) as opened:
        found = opened.get(job)
        return None if found is None else found.bit


def sweep(ledger: str, env: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """One sweep on ``ledger`` (on the faked clock if ``env``); each job's ``done``."""
    done = cli_process(["sweep", "--ledger", ledger, "--json", "--settle-delay", "2"],
                       env=dict(os.environ, **(env or {})), timeout=120)
    lab.sweep_exited(done, (0, 15))
    return {found["job_id"]: found["done"] for line in done.stdout.splitlines()
            if (found := json.loads(line)).get("kind") == "job"}


def cold() -> None:
    """Wait until slurmctld has saved nothing for COLD seconds: its next change is saved at once."""
    state = Path("/var/spool/slurmctld/job_state")
    deadline = time.monotonic() + 60
    while time.time() - state.stat().st_mtime < COLD:
        assert time.monotonic() < deadline, "slurmctld kept saving for a minute"
        time.sleep(0.2)


STEPPING = f"""#!/bin/sh
# scontrol, but the clock steps back {{step}} s just before the requeue's call 3 (Requeue=0).
case " $* " in *" Requeue=0 "*) echo "-{{step}}" > '{{control}}' ;; esac
exec {lab.SCONTROL} "$@"
"""


def test_a_backward_step_before_call_3_never_clears_an_unsaved_clear(tmp_path: Path, preload: str) -> None:
    """Issue finding 1: a 90 s step back between the last save and the clear made a save that began
    before the clear read as one after it; the sweep cleared the object; slurmctld, whose clock had
    gone back too, saved nothing more, died, and came back with the job at Requeue=1, untracked.
    Now no object is cleared until two saves are seen after the clear, whatever the clocks say: it
    stays watched through the crash, and the sweeps restore the flag."""
    ledger = str(tmp_path / "ledger.sqlite3")
    with faked_clock(tmp_path, preload) as env:
        control = env["FAKETIME_TIMESTAMP_FILE"]
        scontrol = tmp_path / "scontrol"
        scontrol.write_text(STEPPING.format(step=STEP, control=control))
        scontrol.chmod(0o755)
        job = lab.make_job("running_rq0")
        try:
            cold()
            done = cli_process(["requeue", job, "--json", "--timeout", "30", "--ledger", ledger, "--scontrol",
                                str(scontrol)], env=dict(os.environ, **env))
            (row,) = [json.loads(line) for line in done.stdout.splitlines()]
            assert (row["result"], row["requeue_bit"]) == ("ok", "clear"), done.stdout + done.stderr
            assert Path(control).read_text().strip() == f"-{STEP}"  # the step happened before call 3
            for _ in range(3):
                assert sweep(ledger, env)[job] != "cleared", "cleared a clear slurmctld had not saved"
            assert object_bit(ledger, job) is RequeueBit.MAY_BE_SET
            lab.kill_slurmctld()
        finally:
            Path(control).write_text("+0\n")
        lab.start_slurmctld()  # on the real clock: what it saved is what comes back
        came_back = lab.job_state(job)
        assert came_back is not None
        print(f"came back {came_back.state} Requeue={came_back.requeue} RestartCnt={came_back.restarts}")
        assert object_bit(ledger, job) is RequeueBit.MAY_BE_SET
        deadline = time.monotonic() + 120
        stamp = 0
        while object_bit(ledger, job) is not RequeueBit.CLEAR:
            assert time.monotonic() < deadline, "the sweeps did not settle the object"
            sweep(ledger)
            state = lab.job_state(job)
            assert state is not None
            if object_bit(ledger, job) is RequeueBit.CLEAR:
                assert state.requeue == 0, "cleared while the job shows Requeue=1"
                break
            stamp += 1
            lab.check(["scontrol", "update", f"JobId={job}", f"Comment=save-{stamp}"])  # something to save
        final = lab.job_state(job)
        assert final is not None and final.requeue == 0
        lab.cancel(job)


SLOW_CALL_2 = f"""#!/bin/sh
# scontrol, but a requeue's call 2 is on its way for a while.
case $1 in requeue) sleep 40 ;; esac
exec {lab.SCONTROL} "$@"
"""


def test_a_forward_step_makes_no_running_operation_look_over(tmp_path: Path, preload: str) -> None:
    """Issue finding 5: after a forward step, a second run of a key found the first run's lease
    lapsed and its row no longer running, settled it absent at once and requeued, while the first
    run's call was still on its way.  Here the second run's clock is five minutes ahead (libfaketime,
    its ledger's clock with it): the first run is alive, so its operation is running, and the
    second runs nothing."""
    ledger = str(tmp_path / "ledger.sqlite3")
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(SLOW_CALL_2)
    scontrol.chmod(0o755)
    job = lab.make_job("running_rq0")
    argv = ["requeue", job, "--key", "step-5", "--retry", "1", "--settle-delay", "2", "--json", "--ledger", ledger,
            "--scontrol", str(scontrol)]
    first = subprocess.Popen([*CLI, *argv, "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        deadline = time.monotonic() + 30
        while lab.job_state(job).requeue != 1:  # type: ignore[union-attr]
            assert time.monotonic() < deadline and first.poll() is None, "the first run never set the flag"
            time.sleep(0.05)
        second = cli_process([*argv, "--timeout", "12"], env=stepped(preload, "+300"), timeout=120)
        (row,) = [json.loads(line) for line in second.stdout.splitlines()]
        assert row["result"] == "expired" and row["calls"] == [], second.stdout + second.stderr
        assert first.poll() is None, "the first run was still on its way"
    finally:
        first.kill()
        first.wait()
        lab.cancel(job)


HANGING_HOLD = f"""#!/bin/sh
# scontrol, but a hold is on its way past its run's deadline: it never reaches slurmctld.
case $1 in hold) exec sleep 60 ;; esac
exec {lab.SCONTROL} "$@"
"""


def test_a_forward_step_reads_no_absent_before_the_settle_delay(tmp_path: Path, preload: str) -> None:
    """Issue finding 5, the settle delay: a hold cut off by its deadline is unknown, and a request
    cut off so may still reach slurmctld within the settle delay (10 s).  A settle on a clock an
    hour ahead (libfaketime, the boot clock left alone, as a real step leaves it) read the ledger's
    times, an hour, and said absent at once; now it reads the delay on the boot clock: no verdict
    until it has passed."""
    ledger = str(tmp_path / "ledger.sqlite3")
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(HANGING_HOLD)
    scontrol.chmod(0o755)
    job = lab.make_job("running_rq0")
    try:
        done = cli_process(["hold", job, "--json", "--timeout", "3", "--ledger", ledger, "--scontrol", str(scontrol)])
        (row,) = [json.loads(line) for line in done.stdout.splitlines()]
        assert row["result"] == "unknown", done.stdout + done.stderr
        ahead = stepped(preload, "+3600")
        soon = cli_process(["settle", job, "--json", "--ledger", ledger], env=ahead)
        (row,) = [json.loads(line) for line in soon.stdout.splitlines()]
        assert row["effect"] is None, soon.stdout + soon.stderr  # not absent: too soon on the boot clock
        deadline = time.monotonic() + 60
        while row["effect"] is None:
            assert time.monotonic() < deadline, "never settled"
            time.sleep(0.5)
            settled = cli_process(["settle", job, "--json", "--ledger", ledger], env=ahead)
            (row,) = [json.loads(line) for line in settled.stdout.splitlines()]
        state = lab.job_state(job)
        assert row["effect"] == "absent" and state is not None and state.priority > 0
    finally:
        lab.cancel(job)


@contextlib.contextmanager
def hung_saves(hung: Hung) -> Iterator[Dict[str, str]]:
    """The lab's StateSaveLocation seen through ``hung`` (bindfs over it), for slurm-dsl only."""
    subprocess.run(["umount", "-l", str(hung.path)], check=True, capture_output=True)
    served = subprocess.Popen(["bindfs", "-f", "--no-allow-other", "/var/spool/slurmctld", str(hung.path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not os.path.ismount(hung.path):
            assert time.monotonic() < deadline, "bindfs did not mount"
            time.sleep(0.02)
        hung.pid = served.pid
        yield {"SLURM_DSL_STATE_SAVE_LOCATION": str(hung.path)}
    finally:
        os.kill(served.pid, 18)  # SIGCONT
        subprocess.run(["umount", "-l", str(hung.path)], check=False, capture_output=True)
        served.terminate()
        served.wait(30)


def test_a_state_save_location_that_stops_answering_bounds_durable_and_the_sweep(
    tmp_path: Path, hung_directory: Hung
) -> None:
    """Issue finding 6: the StateSaveLocation on a file server that stopped answering held `hold
    --durable --timeout 10` past 41 s and the sweep for ever, its lock held.  Now each keeps its
    deadline, says why, and the next sweep can run."""
    ledger = str(tmp_path / "ledger.sqlite3")
    job = lab.make_job("held_user")
    try:
        with hung_saves(hung_directory) as env:
            hung_directory.freeze()
            started = time.monotonic()
            done = cli_process(["hold", job, "--durable", "--json", "--timeout", "10", "--ledger", ledger],
                               env=dict(os.environ, **env), timeout=120)
            took = time.monotonic() - started
            (row,) = [json.loads(line) for line in done.stdout.splitlines()]
            assert (done.returncode, row["result"], row["saved"]) == (15, "ok", False), done.stdout + done.stderr
            assert "no answer within" in row["detail"], row["detail"]
            assert took < 30, f"{took:.1f} s for a 10 s deadline"
            for _ in range(2):  # the second finds the lock free: the first gave up and let go
                started = time.monotonic()
                swept = cli_process(["sweep", "--ledger", ledger, "--json"], env=dict(os.environ, **env),
                                    timeout=120)
                assert swept.returncode == 15 and "another sweep" not in swept.stderr, swept.stdout + swept.stderr
                assert "no answer within" in swept.stdout + swept.stderr
                assert time.monotonic() - started < 60
    finally:
        lab.cancel(job)
