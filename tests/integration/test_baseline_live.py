"""The baseline committed with the intent, on the real lab (docs/contract.md §9.2, §12): a real
running job and a real pending one, held and then requeued, single and bulk, on an SQLite and a
MariaDB ledger.  Each history row's baseline is the job's real state, RestartCnt and PriorityLong
as squeue showed them just before; and after the requeue that ran, the job's RestartCnt is above
its baseline's, which is what settling a requeue will read."""

from __future__ import annotations

import time
from typing import Dict, List

import pytest

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Op, Result
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import HistoryEntry
from slurm_dsl.run.bulk import run_many
from slurm_dsl.run.tracked import Tracker
from tests import lab

pytestmark = pytest.mark.integration

TIMEOUT = 15.0


def same(info: JobInfo, real: lab.JobState) -> bool:
    return (info.job_id, info.state, int(info.requeue), info.restarts, info.priority, info.reason) == (
        real.job_id, real.state, real.requeue, real.restarts, real.priority, real.reason)


def run(t: Tracker, op: Op, jobs: List[str], bulk: bool) -> Dict[str, Result]:
    deadline = time.time() + TIMEOUT
    if bulk:
        return {o.job_id: o.result for o in run_many(t, op, jobs, deadline=deadline)}
    return {j: t.run(op, j, deadline).result for j in jobs}


def last_rows(location: str, jobs: List[str]) -> Dict[str, HistoryEntry]:
    with open_ledger(location) as ledger:
        return {j: ledger.history(j)[-1] for j in jobs}


@pytest.mark.parametrize("bulk", [False, True], ids=["single", "bulk"])
def test_hold_and_requeue_commit_the_jobs_real_records(ledger_location: str, bulk: bool) -> None:
    running, pending = lab.make_job("running_rq1"), lab.make_job("pending")
    jobs = [running, pending]
    with Tracker(ledger_location, scontrol=lab.SCONTROL) as t:
        before = {j: lab.job_state(j) for j in jobs}
        assert run(t, Op.HOLD, jobs, bulk) == {running: Result.OK, pending: Result.OK}
        held = last_rows(ledger_location, jobs)
        for j in jobs:
            real, row = before[j], held[j]
            assert real is not None and row.op is Op.HOLD and row.baseline is not None
            assert same(row.baseline, real), (row.baseline, real)
            assert row.baseline_at is not None and row.ends_by is not None
            assert row.started_at - 10 < row.baseline_at <= row.started_at < row.ends_by
        running_base = held[running].baseline
        assert running_base is not None and running_base.priority > 0

        before = {j: lab.job_state(j) for j in jobs}  # now held: PriorityLong 0
        results = run(t, Op.REQUEUE, jobs, bulk)
    assert results == {running: Result.OK, pending: Result.REJECTED}  # a pending job is not requeued
    requeued = last_rows(ledger_location, jobs)
    for j in jobs:
        real, row = before[j], requeued[j]
        assert real is not None and real.priority == 0 and row.op is Op.REQUEUE and row.baseline is not None
        assert same(row.baseline, real), (row.baseline, real)
    baseline = requeued[running].baseline
    assert baseline is not None and baseline.state == "RUNNING" and baseline.restarts == 0
    after = lab.job_state(running)
    assert after is not None and after.restarts == baseline.restarts + 1, "what a requeue's verdict reads"
