"""``requeue --hold`` (``requeuehold``) on the real lab (docs/contract.md §1, issue 45 item 2): the job
comes back PENDING and held; a key's requeues are one, with or without --hold; an unknown one is
settled from its own effect (RestartCnt one up and held); --hold on another op changes nothing.
Every major's live part runs it; test_ops_live.py runs requeuehold on every kind of job."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any, Dict, List

import pytest

from slurm_dsl import Op
from slurm_dsl.ledger.choose import open_ledger
from tests import lab
from tests.cli_run import cli

pytestmark = pytest.mark.integration

HELD_AGAIN = "job requeued in held state"  # squeue's words; scontrol show job's has underscores (§2)


def held_again(state: lab.JobState) -> bool:
    """Back PENDING and held by a requeuehold, whichever of the two spellings the reason has."""
    return state.state == "PENDING" and state.reason.replace("_", " ") == HELD_AGAIN and state.priority == 0


def rows(out: str) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run(*argv: str, ledger: Path) -> Any:
    return cli([*argv, "--json", "--timeout", "20", "--ledger", str(ledger), "--scontrol", lab.SCONTROL,
                "--squeue", lab.SQUEUE])


def released(state: lab.JobState) -> bool:
    """Released: no longer held (a requeued job then waits for its BeginTime, ~2 minutes)."""
    return state.priority > 0 and state.reason.replace("_", " ") != HELD_AGAIN


def test_requeue_hold_brings_the_job_back_held_and_release_lets_it_go(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    job = lab.make_job("running_rq0")
    try:
        done = run("requeue", job, "--hold", ledger=ledger)
        assert done.code == 0, done
        (row,) = rows(done.out)
        assert (row["op"], row["result"], row["requeue_bit"]) == ("requeuehold", "ok", "clear"), row
        assert [c["number"] for c in row["calls"]] == [1, 2, 3]
        held = lab.wait_for(job, held_again)
        assert (held.restarts, held.priority, held.requeue) == (1, 0, 0), held
        with open_ledger(str(ledger)) as opened:
            (entry,) = opened.history(job)
        assert entry.op is Op.REQUEUE_HOLD, entry
        assert run("release", job, ledger=ledger).code == 0
        lab.wait_for(job, released)
    finally:
        lab.cancel(job)


def test_a_keys_requeues_are_one_with_or_without_hold(tmp_path: Path) -> None:
    """A rerun of the key, into hold or not, never requeues a job its first run requeued."""
    ledger = tmp_path / "ledger.sqlite3"
    job = lab.make_job("running_rq0")
    try:
        assert run("requeue", job, "--hold", "--key", "drain-1", ledger=ledger).code == 0
        lab.wait_for(job, held_again)
        assert run("release", job, ledger=ledger).code == 0
        lab.wait_for(job, released)
        # Made to run again (a requeued job waits for its BeginTime): a second requeue would be accepted.
        lab.check([lab.SCONTROL, "update", f"JobId={job}", "StartTime=now"])
        lab.wait_for(job, lab.Expect("RUNNING"))
        for again in (("requeue", job, "--key", "drain-1"), ("requeuehold", job, "--key", "drain-1")):
            done = run(*again, ledger=ledger)
            assert done.code == 0, done
            state = lab.job_state(job)
            assert state is not None and (state.state, state.restarts) == ("RUNNING", 1), (again, state)
    finally:
        lab.cancel(job)


def test_an_unknown_requeue_hold_is_settled_from_its_own_effect(tmp_path: Path) -> None:
    """Call 2 takes effect, then its scontrol outlives the deadline: unknown. The record then shows
    RestartCnt one up and the job held: present; call 3 never ran, so the flag is the sweep's."""
    ledger = tmp_path / "ledger.sqlite3"
    shim = tmp_path / "scontrol"
    shim.write_text(f'#!/bin/sh\ncase "$1" in requeuehold) {lab.SCONTROL} "$@"; exec sleep 60 ;; esac\n'
                    f'exec {lab.SCONTROL} "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    job = lab.make_job("running_rq0")
    try:
        done = cli(["requeue", job, "--hold", "--json", "--timeout", "6", "--settle", "--settle-delay", "2",
                    "--ledger", str(ledger), "--scontrol", str(shim), "--squeue", lab.SQUEUE])
        (row,) = rows(done.out)
        assert (row["result"], row["effect"]) == ("unknown", "present"), row
        assert row["requeue_bit"] != "clear", row
        assert done.code == 14, done  # present, its flag not cleared: bit_set until the sweep restores it
        state = lab.wait_for(job, held_again)
        assert (state.restarts, state.priority, state.requeue) == (1, 0, 1), state
        with lab.saving():  # the flag the sweep clears is seen saved (docs/contract.md §13.3)
            swept = cli(["sweep", "--json", "--ledger", str(ledger), "--scontrol", lab.SCONTROL,
                         "--squeue", lab.SQUEUE])
        assert swept.code == 0, swept
        assert lab.wait_for(job, lab.Expect("PENDING", requeue=0)).requeue == 0
    finally:
        lab.cancel(job)


@pytest.mark.parametrize("op", ["hold", "release", "restore", "open"])
def test_hold_on_another_op_is_a_usage_error_that_runs_nothing(tmp_path: Path, op: str) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    job = lab.make_job("running_rq0")
    try:
        before = lab.job_state(job)
        done = run(op, job, "--hold", ledger=ledger)
        assert done.code == 2 and "--hold is requeue's" in done.err, done
        assert lab.job_state(job) == before
        assert not ledger.exists(), "checked before the ledger is opened"
    finally:
        lab.cancel(job)
