"""Settling unknown operations on the real slurmctld (docs/contract.md §12): a bulk requeue of
four running jobs whose list call reached slurmctld for only the first two before it hung past
the deadline ends ``unknown`` for all four; ``slurm-dsl settle`` then reads each job's record and
says ``present`` for exactly the two that were requeued and ``absent`` for the other two.

The one fault real Slurm cannot be made to show on demand, a call cut off after part of its list
took effect, comes from an scontrol wrapper on PATH (the pattern of tests/fakes.py): every call
goes to the real scontrol, except ``requeue <list>``, for which it runs the real ``scontrol
requeue`` on the first half of the ids and then hangs until the deadline stops it."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from slurm_dsl.ledger.choose import open_ledger
from tests import lab
from tests.cli_run import cli_process

pytestmark = pytest.mark.integration

TIMEOUT = 6.0  # the requeue's deadline: its call 2 hangs until then
SETTLED_WITHIN = 60.0  # seconds the settle command is polled for a verdict on every row

WRAPPER = f"""#!/bin/sh
# Every call to the real scontrol, except a list requeue: only its first half, then a hang.
printf '%s\\n' "$*" >> {{log}}
if [ "$1" = requeue ]; then
    case $2 in *,*)
        ids=$(printf '%s' "$2" | tr ',' ' ')
        set -- $ids
        half=$(( $# / 2 )); first=
        i=0; for id; do i=$((i + 1)); [ $i -le $half ] && first="$first${{{{first:+,}}}}$id"; done
        {lab.SCONTROL} requeue "$first"
        exec sleep 3600 ;;
    esac
fi
exec {lab.SCONTROL} "$@"
"""


def wrapper(directory: Path) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scontrol"
    path.write_text(WRAPPER.format(log=f"'{directory / 'calls.log'}'"))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def json_rows(out: str) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_settle_tells_the_requeued_half_from_the_other(tmp_path: Path, ledger_location: str) -> None:
    jobs = [lab.make_job("running_rq0") for _ in range(4)]
    scontrol = wrapper(tmp_path / "bin")
    common = ["--ledger", ledger_location, "--scontrol", scontrol]
    try:
        done = cli_process(["requeue", *jobs, "--timeout", str(TIMEOUT), "--json", *common])
        results = {r["job_id"]: r["result"] for r in json_rows(done.stdout)}
        assert results == dict.fromkeys(jobs, "unknown"), done.stdout + done.stderr
        assert done.returncode == 15
        calls = (tmp_path / "bin" / "calls.log").read_text()
        assert f"requeue {','.join(jobs)}" in calls, calls  # one list call for the four

        # Polled: a first settle may come before the settle delay has passed since the end.
        deadline = time.monotonic() + SETTLED_WITHIN
        while True:
            settled = cli_process(["settle", *jobs, "--settle-delay", "2", "--json", "--lookup", "squeue", *common])
            rows = json_rows(settled.stdout)
            if all(r["effect"] is not None for r in rows) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        effects = {r["job_id"]: r["effect"] for r in rows}
        assert effects == {jobs[0]: "present", jobs[1]: "present", jobs[2]: "absent", jobs[3]: "absent"}, rows
        assert settled.returncode == 15  # absent exits as unknown; the worst row decides
        for r in rows:
            assert r["result"] == "unknown" and r["op"] == "requeue"
        present = next(r for r in rows if r["job_id"] == jobs[0])
        assert present["record"]["restarts"] == 1 and "RestartCnt 1 > baseline 0" in present["detail"]

        shown = cli_process(["history", jobs[0], *common])
        verdict_line = next(line for line in shown.stdout.splitlines() if "verdict:" in line)
        assert "verdict: present" in verdict_line and "RestartCnt 1 > baseline 0" in verdict_line
        assert "baseline: RUNNING, RestartCnt 0" in shown.stdout
        shown = cli_process(["history", jobs[2], *common])
        assert "verdict: absent" in shown.stdout, shown.stdout

        with open_ledger(ledger_location) as ledger:
            before = [ledger.history(job)[-1].settlement for job in jobs]
        again = cli_process(["settle", *jobs, "--settle-delay", "2", "--json", "--lookup", "squeue", *common])
        assert {r["settled"] for r in json_rows(again.stdout)} == {"earlier"}
        with open_ledger(ledger_location) as ledger:
            assert [ledger.history(job)[-1].settlement for job in jobs] == before  # nothing new written
            assert ledger.unsettled(ledger.now(), job_ids=jobs) == []
    finally:
        lab.cancel(*jobs)


# A single requeue that reaches slurmctld, then hangs until the deadline stops it: call 2 took
# effect unseen (124) and call 3, kept from starting by the deadline, never ran (75).
HANGS_AFTER_REQUEUE = f"""#!/bin/sh
printf '%s\\n' "$*" >> {{log}}
if [ "$1" = requeue ]; then
    {lab.SCONTROL} requeue "$2"
    exec sleep 3600
fi
exec {lab.SCONTROL} "$@"
"""


def test_a_settled_requeue_whose_flag_was_left_set_exits_bit_set(tmp_path: Path, ledger_location: str) -> None:
    # docs/contract.md §12, "The effect and the bit are two answers": the job was requeued
    # (present), but its Requeue flag is still 1 until the sweep restores it, so the command must
    # not exit 0.
    job = lab.make_job("running_rq0")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(HANGS_AFTER_REQUEUE.format(log=f"'{bin_dir / 'calls.log'}'"))
    scontrol.chmod(0o755)
    common = ["--ledger", ledger_location, "--scontrol", str(scontrol)]
    try:
        done = cli_process(["requeue", job, "--settle", "--settle-delay", "2", "--timeout", "8", "--json", *common])
        (row,) = json_rows(done.stdout)
        assert (row["result"], row["requeue_bit"], row["effect"]) == ("unknown", "set", "present"), done.stdout
        assert done.returncode == 14, done.stdout + done.stderr
        state = lab.job_state(job)
        assert state is not None and state.requeue and state.restarts == 1  # what the row says is true
        settled = cli_process(["settle", job, "--json", *common])
        (srow,) = json_rows(settled.stdout)
        assert srow["effect"] == "present" and settled.returncode == 14, settled.stdout
    finally:
        lab.cancel(job)
