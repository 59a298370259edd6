"""pyslurm against bare scontrol and the squeue lookup, interleaved in one run on the 25.11 lab.

Not a test: it prints figures (docs/slurm-25.11.md §5).  On one held job, alternating so that all
see the same controller load: a bare ``scontrol hold`` (the baseline), one ``pyslurm.Job.load`` of
it, the pyslurm lookup and the squeue lookup of it (``jobs([id])``: one id, so each asks for that
job alone), and a tracked hold (``Tracker.run``: the wrapped call and the ledger, whose baseline
lookup is squeue's).  Needs the lab built from source and pyslurm built for it
(``contrib/lab/chroot --run 'python -m benchmarks.bench_pyslurm' 25.11``).

    python -m benchmarks.bench_pyslurm [--runs 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List

from benchmarks.bench_wrap import timed
from slurm_dsl import Op, Result
from slurm_dsl.host.process import fixed_env
from slurm_dsl.lookups.pyslurm import find_pyslurm_lookup
from slurm_dsl.lookups.squeue import SqueueLookup, slurm_version
from slurm_dsl.run.tracked import Tracker
from tests import lab


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    reason = lab.lab_available()
    if reason:
        print(f"bench_pyslurm: no lab: {reason} (run contrib/lab/up)", file=sys.stderr)
        return 1
    running = slurm_version()
    found, _, why = find_pyslurm_lookup(running)
    if found is None:
        print(f"bench_pyslurm: no usable pyslurm: {why}", file=sys.stderr)
        return 1
    import pyslurm  # the one find_pyslurm_lookup just took

    job = lab.make_job("held_admin")
    env = fixed_env()

    def bare() -> None:
        done = subprocess.run([lab.SCONTROL, "hold", job], capture_output=True, env=env, check=False)
        assert done.returncode == 0, done

    squeue = SqueueLookup(jobinfo=None)
    tracker = Tracker(os.path.join(tempfile.mkdtemp(), "ledger.sqlite3"), scontrol=lab.SCONTROL)

    def tracked() -> None:
        out = tracker.run(Op.HOLD, job, time.time() + 10)
        assert out.result is Result.OK, out

    parts: Dict[str, Callable[[], object]] = {
        "bare scontrol hold (baseline)": bare,
        "pyslurm.Job.load(id)": lambda: pyslurm.Job.load(int(job)),
        "pyslurm lookup .jobs([id])": lambda: found.jobs([job]),
        "squeue lookup .jobs([id]) (no helper)": lambda: squeue.jobs([job]),
        "tracked hold (wrapped + ledger + squeue baseline)": tracked,
    }
    samples: Dict[str, List[float]] = {k: [] for k in parts}
    for fn in parts.values():  # warm-up
        fn()
    try:
        for _ in range(args.runs):
            for name, fn in parts.items():
                samples[name].append(timed(fn))
    finally:
        lab.cancel_submitted()
        tracker.close()
    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    base = med["bare scontrol hold (baseline)"]
    print(f"Slurm {running[0]}.{running[1]:02d}, pyslurm {pyslurm.__version__}; {args.runs} interleaved runs each,"
          " medians (ms) and ratio to the bare hold:")
    for name, value in med.items():
        print(f"  {name:<52} {value:8.2f}  {value / base:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
