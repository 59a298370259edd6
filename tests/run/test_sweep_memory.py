"""What a large sweep holds at once (issue 20 item 5, docs/benchmarks.md §4): a sweep of many
objects, mostly gone jobs, keeps their ids, the lookup's answers and its report (one ``Swept`` per
object), and no full record of each object beside them.  Measured with tracemalloc, the bound
generous; no timing."""

from __future__ import annotations

import sqlite3
import time
import tracemalloc
from pathlib import Path
from typing import Dict, Optional, Sequence

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run.sweep import Done, sweep
from slurm_dsl.run.tracked import Tracker
from tests.fakes import calls_made, write_fake

OBJECTS = 20_000
# Bytes a sweep may hold at its peak per object.  What it must: the id (~60), the lookup's answer
# (a dict entry, ~40), its line of the report (~80 with the list), and a piece of rows at a time
# while writing; ~330 measured on Python 3.11 when this was written, ~590 on today's code at rest
# (2026-12-06), and up to 640 on a loaded machine, where the
# lookup's thread and the writes overlap differently.  Reading each object's full record and
# keeping a list of every decision beside the clears and the report came to ~920.
PEAK_PER_OBJECT = 750


class AllGone:
    """A lookup in which slurmctld knows none of the jobs."""

    name = "all gone"
    timeout = 10.0

    def jobs(self, job_ids: Sequence[str]) -> Dict[str, Optional[JobInfo]]:
        return {job: None for job in job_ids}


def test_a_sweep_of_many_gone_jobs_holds_no_full_record_per_object(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    open_ledger(path).close()
    conn = sqlite3.connect(path)
    with conn:  # objects as unknown requeues leave them, written behind the ledger's back for speed
        conn.executemany(
            "INSERT INTO objects (job_id, bit, why, updated_at) VALUES (?, 'may_be_set', 'unknown requeue', ?)",
            [(str(3_000_000 + n), time.time()) for n in range(OBJECTS)],
        )
    conn.close()
    fake = write_fake(tmp_path / "bin", {})
    with Tracker(path, scontrol=str(fake)) as tracker:
        tracemalloc.start()
        try:
            report = sweep(tracker, AllGone())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert report.handled and report.counts()[Done.CLEARED.value] == OBJECTS
        assert tracker.ledger().count_not_clear() == 0
    assert calls_made(fake) == []
    assert peak <= PEAK_PER_OBJECT * OBJECTS, f"{peak / OBJECTS:.0f} bytes per object"
