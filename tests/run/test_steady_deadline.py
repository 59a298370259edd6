"""The deadline is kept on a clock that never steps (docs/contract.md §10.0, run/deadlines.py): a
step of the wall clock while a command runs moves it not.  The command runs on a wall clock that
its fake scontrol steps back a minute during the first call (libfaketime: tests/faketime.py); the
second job's call, whose turn comes after the deadline, must not start."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests import faketime
from tests.cli_run import COMMAND
from tests.fakes import calls_made, write_fake, write_fake_squeue


def test_a_wall_clock_stepped_back_during_a_command_moves_not_its_deadline(tmp_path: Path) -> None:
    preloaded = faketime.preload(tmp_path)
    # A machine so loaded that the command cannot reach its first call within the deadline shows
    # nothing about the deadline (job 1 expires, the clock is never stepped): then once more with
    # a longer one. Job 1's call outlasts either, and a deadline the step moved (60 s later) too.
    for timeout in (6, 20):
        control = tmp_path / f"offset{timeout}"
        control.write_text("+0\n")
        # Job 1's hold steps the clock back 60 s and is still running at the deadline: cut, unknown.
        fake = write_fake(tmp_path / f"bin{timeout}",
                          {"hold": f"case $JOB in 1) echo -60 > '{control}'; exec sleep 40 ;; esac"})
        squeue = write_fake_squeue(tmp_path / f"sq{timeout}",
                                   "1|PENDING|0|0|4294901|BeginTime\n2|PENDING|0|0|4294901|BeginTime\n")
        env = dict(os.environ, **faketime.on_file(preloaded, control), SLURM_DSL_SQUEUE=str(squeue))
        done = subprocess.run([*COMMAND, "hold", "1", "2", "--one-by-one", "--timeout", str(timeout), "--json",
                               "--ledger", str(tmp_path / f"ledger{timeout}.sqlite3"), "--scontrol", str(fake)],
                              capture_output=True, text=True, env=env, timeout=90, check=False)
        rows = {r["job_id"]: r["result"] for r in map(json.loads, done.stdout.splitlines())}
        if control.read_text().strip() == "+0" and rows.get("1") == "expired":
            continue
        assert control.read_text().strip() == "-60", "the clock was stepped during the first call"
        assert rows == {"1": "unknown", "2": "expired"}, done.stdout + done.stderr
        assert "hold 2" not in calls_made(fake), "a call started after the deadline"
        return
    raise AssertionError("the first call never started, even with 20 s: " + done.stdout + done.stderr)
