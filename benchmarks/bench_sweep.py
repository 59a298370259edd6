"""A sweep of 10,000 not-clear objects: one batch lookup vs one lookup per job.

Not a test: it prints figures.  The ledger holds N objects whose bit is not
clear: most for jobs slurmctld no longer knows (gone), plus a few live lab jobs
at Requeue=0 (cleared) and at Requeue=1 (restored).  The same sweep runs twice on
two copies of that ledger, once with the batch squeue lookup and once with a
lookup that asks squeue job by job; each squeue run is one job-info RPC to
slurmctld, and each restore one update RPC.

    python -m benchmarks.bench_sweep [--objects 10000] [--live 10]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from benchmarks._ledgers import GONE_BASE, Counting
from slurm_dsl import Op
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups.squeue import SqueueLookup
from slurm_dsl.run.sweep import sweep
from slurm_dsl.run.tracked import Tracker
from tests import lab


class PerJob:
    """The baseline: one squeue per job."""

    def __init__(self, inner: SqueueLookup) -> None:
        self.inner = inner
        self.timeout = inner.timeout

    def jobs(self, job_ids: Sequence[str]) -> Dict[str, Optional[JobInfo]]:
        found: Dict[str, Optional[JobInfo]] = {}
        for job in job_ids:
            found.update(self.inner.jobs([job]))
        return found


def build(path: str, ids: List[str]) -> None:
    """Objects as unknown requeues leave them, written in one transaction for speed."""
    open_ledger(path).close()  # create and migrate
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT INTO objects (job_id, bit, why, updated_at) VALUES (?, 'may_be_set', 'benchmark', ?)",
            [(job, time.time()) for job in ids],
        )
    conn.close()


def run(path: str, lookup: Any, counter: Counting) -> float:
    with Tracker(path, scontrol="/usr/bin/scontrol") as tracker:
        start = time.perf_counter()
        report = sweep(tracker, lookup, restore_timeout=15)
        elapsed = time.perf_counter() - start
        assert report.settled, report.lookup_error
        assert tracker.ledger().count_not_clear() == 0
    counts = report.counts()
    print(f"    {counts['cleared']} cleared, {counts['restored']} restored, {elapsed:.2f} s,"
          f" {counter.calls} squeue (job-info RPCs)")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--live", type=int, default=10, help="live jobs among them (half at Requeue=1)")
    args = parser.parse_args()
    reason = lab.lab_available()
    if reason:
        print(f"bench_sweep: no lab: {reason} (run contrib/lab/up)", file=sys.stderr)
        return 1
    live = [lab.submit("--hold", *lab.SLEEP_JOB) for _ in range(args.live)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ids = [str(GONE_BASE + i) for i in range(args.objects - len(live))] + live
            base = str(Path(tmp) / "base.sqlite3")
            build(base, ids)
            results = {}
            for name in ("batch", "per-job"):
                for job in live[: len(live) // 2]:
                    lab.check(["scontrol", "update", f"JobId={job}", "Requeue=1"])
                path = str(Path(tmp) / f"{name}.sqlite3")
                shutil.copy(base, path)
                counter = Counting()
                squeue = SqueueLookup(run=counter)
                print(f"  {name}: {args.objects} objects ({len(live)} live jobs)")
                results[name] = run(path, squeue if name == "batch" else PerJob(squeue), counter)
            with open_ledger(str(Path(tmp) / "batch.sqlite3")) as ledger:
                restores = sum(1 for j in live for h in ledger.history(j) if h.op is Op.RESTORE)
            print(f"  restores (one update RPC each): {restores}")
            print(f"ratio per-job / batch: {results['per-job'] / results['batch']:.1f}x")
    finally:
        lab.cancel(*live)
    return 0


if __name__ == "__main__":
    sys.exit(main())
