"""A sweep of 10,000 not-clear objects: one batch lookup vs one lookup per job.

Not a test: it prints figures.  The ledger holds N objects whose bit is not
clear: most for jobs slurmctld no longer knows (gone), plus a few live lab jobs
at Requeue=0 (cleared) and at Requeue=1 (restored).  The same sweep runs twice on
two copies of that ledger, once with the batch squeue lookup and once with a
lookup that asks squeue job by job; each squeue run is one job-info RPC to
slurmctld (sdiag's statistics RPC counted too), and each restore one update RPC.
Each sweep runs in a fresh Python process of its own (``--child``), which reports
the sweep's seconds and the process's peak RSS (``VmHWM``: interpreter and imports
included, as a ``slurm-dsl sweep`` process would have them), and its RSS before.
The per-job baseline runs only with ``--per-job`` (a squeue per object: 10,000 took
205 s on the loaded lab), and ``--mariadb`` sweeps a MariaDB ledger too (batch only).

    python -m benchmarks.bench_sweep [--objects 10000] [--live 10] [--per-job] [--mariadb]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

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

    name = "squeue"

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


def build_mariadb(server: Any, name: str, url: str, ids: List[str]) -> None:
    """``build`` on a MariaDB database."""
    open_ledger(url).close()
    with server.admin() as conn, conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {name}.objects (job_id, bit, why, updated_at) VALUES (%s, 'may_be_set', 'benchmark', %s)",
            [(job, time.time()) for job in ids],
        )
        conn.commit()


def _vm(field: str) -> int:
    """A ``/proc/self/status`` figure of this process, in kB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(path: str, per_job: bool) -> int:
    """One sweep in this (fresh) process; its figures as one JSON line."""
    counter = Counting()
    squeue = SqueueLookup(run=counter)
    lookup = PerJob(squeue) if per_job else squeue
    with Tracker(path, scontrol="/usr/bin/scontrol") as tracker:
        rss_before = _vm("VmRSS")
        start = time.perf_counter()
        report = sweep(tracker, lookup, restore_timeout=15)
        elapsed = time.perf_counter() - start
        assert report.handled, report.lookup_error
        # The per-job lookup of many objects can outlast the sweep's leases (its ttl counts one
        # lookup's timeout): the objects it could not write are left busy for the next sweep.
        assert tracker.ledger().count_not_clear() == report.counts()["busy"]
    print(json.dumps({"seconds": elapsed, "squeue": counter.calls, "programs": counter.programs,
                      "counts": report.counts(), "rss_before_kb": rss_before, "peak_kb": _vm("VmHWM")}))
    return 0


def run(path: str, per_job: bool) -> Tuple[float, int]:
    """The sweep in a child process; its seconds and peak RSS (kB)."""
    argv = [sys.executable, "-m", "benchmarks.bench_sweep", "--child", path, *(["--per-job"] if per_job else [])]
    # From the tree's root, which ``-m`` puts first on the child's path, after it any PYTHONPATH given.
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=lab.REPO_ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"the sweep's process failed ({proc.returncode}): {proc.stderr.strip()}")
    got = json.loads(proc.stdout.splitlines()[-1])
    counts = got["counts"]
    print(f"    {counts['cleared']} cleared, {counts['restored']} restored, {counts['busy']} busy,"
          f" {got['seconds']:.2f} s,"
          f" {got['squeue']} lookup processes {got['programs']}, peak RSS {got['peak_kb'] / 1024:.1f} MB"
          f" ({got['rss_before_kb'] / 1024:.1f} MB before the sweep)")
    return float(got["seconds"]), int(got["peak_kb"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--live", type=int, default=10, help="live jobs among them (half at Requeue=1)")
    parser.add_argument("--per-job", action="store_true", help="also the per-job baseline (one squeue per object)")
    parser.add_argument("--mariadb", action="store_true", help="also sweep a MariaDB ledger (batch lookup)")
    parser.add_argument("--child", metavar="LEDGER", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.per_job)
    reason = lab.lab_available()
    if reason:
        print(f"bench_sweep: no lab: {reason} (run contrib/lab/up)", file=sys.stderr)
        return 1
    server = None
    if args.mariadb:
        from tests.ledger_backends import MariaDbServer

        server, why = MariaDbServer.find()
        if server is None:
            print(f"bench_sweep: no MariaDB: {why}", file=sys.stderr)
            return 1
    live = [lab.submit("--hold", *lab.SLEEP_JOB) for _ in range(args.live)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ids = [str(GONE_BASE + i) for i in range(args.objects - len(live))] + live
            base = str(Path(tmp) / "base.sqlite3")
            build(base, ids)
            names = ["batch"] + (["per-job"] if args.per_job else [])
            results = {}
            for name in names:
                for job in live[: len(live) // 2]:
                    lab.check(["scontrol", "update", f"JobId={job}", "Requeue=1"])
                path = str(Path(tmp) / f"{name}.sqlite3")
                shutil.copy(base, path)
                print(f"  {name}: {args.objects} objects ({len(live)} live jobs)")
                results[name], _ = run(path, name == "per-job")
            with open_ledger(str(Path(tmp) / "batch.sqlite3")) as ledger:
                restores = sum(1 for j in live for h in ledger.history(j) if h.op is Op.RESTORE)
            print(f"  restores (one update RPC each): {restores}")
            if "per-job" in results:
                print(f"ratio per-job / batch: {results['per-job'] / results['batch']:.1f}x")
            if server is not None:
                name = server.create()
                try:
                    url = server.url(name)
                    build_mariadb(server, name, url, ids)
                    for job in live[: len(live) // 2]:
                        lab.check(["scontrol", "update", f"JobId={job}", "Requeue=1"])
                    print(f"  batch, MariaDB: {args.objects} objects ({len(live)} live jobs)")
                    run(url, False)
                finally:
                    server.drop(name)
    finally:
        lab.cancel(*live)
    return 0


if __name__ == "__main__":
    sys.exit(main())
