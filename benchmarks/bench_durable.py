"""What durability costs (issue 32 item 7; docs/contract.md §13): a requeue with ``--durable`` vs
the same requeue without, and a sweep whose objects wait for a save vs one that clears them.

Not a test: it prints figures, on the lab (``contrib/lab/up``; as root, which reads job_state).

1. **Waiting for the save.**  Each round requeues two running jobs of the lab, one with
   ``--durable``, one without, one right after the other (in alternating order), as
   ``slurm-dsl requeue JOB --timeout 30`` processes.  For the durable one: its time, and how long
   after slurmctld wrote the save it waited for (job_state's mtime, nanoseconds) it returned: the
   target is at most 1 s after slurmctld's own save.
2. **The watch in a sweep.**  A ledger of N objects whose jobs are gone (ids the lab never
   reaches), swept twice as the admin's timer does (``slurm-dsl sweep``): once before any save
   began after their last change (each is kept: ``unsaved``), once after one (each cleared).  The
   figures: each sweep's time and the squeue/slurm-dsl-jobinfo processes it ran (the RPCs): the
   watch must add none.

    python -m benchmarks.bench_durable [--rounds 7] [--objects 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from slurm_dsl import Op
from slurm_dsl.core.model import Outcome, RequeueBit, Result
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups.saves import last_save, state_save_location
from tests import lab
from tests.ledger_ops import acquire_lease

COMMAND = (sys.executable, "-m", "slurm_dsl")


def requeue(job: str, ledger: str, durable: bool) -> Tuple[float, Dict[str, object]]:
    argv = [*COMMAND, "requeue", job, "--json", "--timeout", "30", "--ledger", ledger]
    if durable:
        argv.append("--durable")
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    took = time.monotonic() - start
    row = json.loads(done.stdout.splitlines()[-1])
    return took, row


def waiting(rounds: int) -> None:
    state = Path(state_save_location()) / "job_state"
    plain: List[float] = []
    durable: List[float] = []
    after_save: List[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        ledger = os.path.join(tmp, "ledger.sqlite3")
        for n in range(rounds):
            jobs = [lab.make_job("running_rq0"), lab.make_job("running_rq0")]
            order = [True, False] if n % 2 else [False, True]
            for job, is_durable in zip(jobs, order):
                took, row = requeue(job, ledger, is_durable)
                returned = time.time()
                if is_durable:
                    assert row["saved"] is True, row
                    durable.append(took)
                    after_save.append(returned - state.stat().st_mtime_ns / 1e9)
                else:
                    assert row["result"] == "ok", row
                    plain.append(took)
            lab.cancel(*jobs)
    print(f"requeue, {rounds} rounds: plain median {statistics.median(plain):.3f} s (worst {max(plain):.3f});"
          f" --durable median {statistics.median(durable):.3f} s (worst {max(durable):.3f});"
          f" returned after slurmctld's save by median {statistics.median(after_save):.3f} s"
          f" (worst {max(after_save):.3f}; target <= 1 s)")


COUNTING = """#!/bin/sh
printf '%s\\n' "$0" >> {log}
exec {real} "$@"
"""


def watch(objects: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = os.path.join(tmp, "ledger.sqlite3")
        ids = [str(4_100_000 + n) for n in range(objects)]  # ids the lab never reaches: gone
        with open_ledger(ledger) as opened:
            op_ids = opened.begin_operations([(j, Op.RESTORE, "0" * 32) for j in ids], opened.now(),
                                             ends_by=opened.now() + 1)
            opened.finish_operations([(i, Outcome(Op.RESTORE, j, Result.UNKNOWN, None), b"")
                                      for i, j in zip(op_ids, ids)], opened.now())
            for j in ids:  # as an unknown requeue leaves them
                acquire_lease(opened, j, "bench", opened.now(), 10)
            opened.set_bits([(j, RequeueBit.MAY_BE_SET, "bench") for j in ids], opened.now(), owner="bench")
            opened.release_leases(ids, "bench")
        log = Path(tmp) / "programs.log"
        wrappers = Path(tmp) / "bin"
        wrappers.mkdir()
        for name in ("squeue", "scontrol"):
            real = subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True, text=True).stdout.strip()
            path = wrappers / name
            path.write_text(COUNTING.format(log=f"'{log}'", real=real))
            path.chmod(0o755)
        env = {**os.environ, "SLURM_DSL_JOBINFO": ""}

        def swept() -> Tuple[float, Dict[str, int], int]:
            before = len(log.read_text().splitlines()) if log.exists() else 0
            start = time.monotonic()
            done = subprocess.run([*COMMAND, "sweep", "--json", "--ledger", ledger, "--scontrol",
                                   str(wrappers / "scontrol"), "--squeue", str(wrappers / "squeue")],
                                  capture_output=True, text=True, env=env, check=False)
            took = time.monotonic() - start
            summary = json.loads(done.stdout.splitlines()[-1])
            ran = len(log.read_text().splitlines()) - before
            return took, summary["summary"], ran

        first = swept()
        lab.saved_after(time.time())
        second = swept()
    for name, (took, counts, ran) in (("before a save", first), ("after one", second)):
        done = {k: v for k, v in counts.items() if v}
        print(f"sweep of {objects} objects {name}: {took:.3f} s, {ran} squeue/scontrol process(es), {done}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--objects", type=int, default=1000)
    args = parser.parse_args()
    if last_save().started is None:
        sys.exit(f"job_state cannot be read: {last_save()}")
    waiting(args.rounds)
    watch(args.objects)


if __name__ == "__main__":
    main()
