"""Pacing on the real lab (docs/contract.md §10.5), read from slurmctld's own log: a paced bulk hold
sends its RPCs no faster than ``--rate`` allows, whatever the machine's speed.

slurmctld logs one ``_slurm_rpc_update_job: complete JobId=N`` line per hold RPC at its default
level (docs/slurm-bulk.md §7; 22.05 to 26.05, and 25.11's proc_req.c), with milliseconds.  The pace
lets a burst of ``BURST`` seconds' worth of calls start at once and reserves the next, so the
``i``-th call can start no sooner than ``(i // chunk - 1) * BURST`` seconds after the first (less
``SLACK``: each chunk's script starts some milliseconds after its slot); only that lower bound is
asserted (a slow machine only spreads the calls further).
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Dict, List

import pytest

from slurm_dsl.run.pace import BURST
from tests import lab
from tests.cli_run import cli_process

pytestmark = pytest.mark.integration

RATE = 20  # calls a second: 100 holds take at least 3 s at it, a few tenths unpaced
JOBS = 100
SLACK = 0.25  # seconds: one chunk's script may start later after its slot than another's
_COMPLETE = re.compile(r"^\[(?P<t>[0-9T:.-]{23})\] _slurm_rpc_update_job: complete JobId=(?P<id>\d+) ")


def log_path() -> Path:
    return Path(lab._conf_value("SlurmctldLogFile", "/var/log/slurm/slurmctld.log"))


def update_times(text: str, jobs: List[str]) -> Dict[str, List[float]]:
    """Each of ``jobs``' completed update RPCs in ``text`` (slurmctld's log lines), as epoch seconds."""
    wanted = set(jobs)
    found: Dict[str, List[float]] = {j: [] for j in jobs}
    for line in text.splitlines():
        m = _COMPLETE.match(line)
        if m and m.group("id") in wanted:
            found[m.group("id")].append(datetime.datetime.fromisoformat(m.group("t")).timestamp())
    return found


def test_a_paced_bulk_hold_sends_no_faster_than_its_rate(tmp_path: Path) -> None:
    log = log_path()
    if not log.is_file():
        pytest.fail(f"slurmctld's log {log} is not a file: the lab writes one", pytrace=False)
    jobs = [lab.submit("--hold", *lab.SLEEP_JOB) for _ in range(JOBS)]
    for job in jobs:
        lab.wait_for(job, lab.Expect("PENDING", "JobHeldUser"))
    start = log.stat().st_size
    done = cli_process(["hold", *jobs, "--rate", str(RATE), "--timeout", "120", "--json",
                        "--ledger", str(tmp_path / "ledger.sqlite3")], timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(r["job_id"] for r in rows) == sorted(jobs) and {r["result"] for r in rows} == {"ok"}
    with log.open("rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    times = update_times(text, jobs)
    assert all(len(t) == 1 for t in times.values()), {j: t for j, t in times.items() if len(t) != 1}
    order = sorted(t[0] for t in times.values())
    chunk = int(RATE * BURST)  # ids in one list call (``Pace.chunk``), one RPC each
    first = order[0]
    too_soon = [(i, round(t - first, 3)) for i, t in enumerate(order) if t - first < (i // chunk - 1) * BURST - SLACK]
    assert too_soon == [], (f"{len(too_soon)} RPCs sooner than a rate of {RATE}/s allows (index, seconds after the"
                             f" first): {too_soon[:10]}")
    span = order[-1] - first
    print(f"\n{JOBS} holds at --rate {RATE}: {span:.2f} s from the first RPC to the last in slurmctld's log"
          f" ({(JOBS - 1) / span:.1f} calls/s)")
