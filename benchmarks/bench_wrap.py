"""Wrapped call vs bare scontrol, interleaved in one run against the live lab.

Not a test: it prints figures.  A wrapped single call (``run.calls.execute``:
render, /bin/sh, the trap, scontrol started in the background and waited for,
the status line, the reader; the runner keeping the deadline on its own clock)
is measured against a bare ``scontrol hold`` run through ``subprocess.run`` on
the same held job, alternating, so both see the same controller load.  Then the
parts of the wrapper are timed alone, to show where the extra time goes.  The
target: a wrapped hold at most ``TARGET`` times a bare one.

    python -m benchmarks.bench_wrap [--runs 50]
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

from slurm_dsl import Op, Result
from slurm_dsl.core.script import render
from slurm_dsl.host.process import fixed_env, run_argv, run_script
from slurm_dsl.run.calls import execute, new_nonce
from slurm_dsl.run.tracked import Tracker
from tests import lab

SCONTROL = "/usr/bin/scontrol"
TARGET = 1.4  # wrapped / bare, for a single hold


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    reason = lab.lab_available()
    if reason:
        print(f"bench_wrap: no lab: {reason} (run contrib/lab/up)", file=sys.stderr)
        return 1
    job = lab.make_job("held_admin")
    env = fixed_env()

    def bare() -> None:
        done = subprocess.run([SCONTROL, "hold", job], capture_output=True, env=env, check=False)
        assert done.returncode == 0, done

    def wrapped() -> None:
        out = execute(Op.HOLD, job, time.time() + 10, scontrol=SCONTROL)
        assert out.result is Result.OK, out

    tmp = tempfile.mkdtemp()
    tracker = Tracker(os.path.join(tmp, "ledger.sqlite3"), scontrol=SCONTROL)

    def tracked() -> None:
        out = tracker.run(Op.HOLD, job, time.time() + 10)
        assert out.result is Result.OK, out

    # The wrapper with /bin/true in scontrol's place: what it costs with no controller at all.
    on_true = render(Op.HOLD, job, time.time() + 3600, new_nonce(), "/bin/true")
    parts: Dict[str, Callable[[], object]] = {
        "tracked (wrapped + ledger: lease, intent, result)": tracked,
        "runner: /bin/sh -s with 'exit 0'": lambda: run_script("exit 0\n", timeout=5),
        "runner: argv scontrol hold (no shell)": lambda: run_argv([SCONTROL, "hold", job], timeout=5),
        "runner: the hold script with /bin/true as scontrol": lambda: run_script(on_true, timeout=5),
        "runner: argv /bin/true (no shell)": lambda: run_argv(["/bin/true"], timeout=5),
    }
    samples: Dict[str, List[float]] = {"bare": [], "wrapped": [], **{k: [] for k in parts}}
    for _ in range(5):  # warm-up
        bare()
        wrapped()
    try:
        for _ in range(args.runs):
            samples["bare"].append(timed(bare))
            samples["wrapped"].append(timed(wrapped))
            for name, fn in parts.items():
                samples[name].append(timed(fn))
    finally:
        lab.cancel_submitted()
        tracker.close()

    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    print(f"{args.runs} interleaved runs each, medians (ms):")
    for name, value in med.items():
        print(f"  {name:<52} {value:7.2f}")
    ratio = med["wrapped"] / med["bare"]
    verdict = "within" if ratio <= TARGET else "OVER"
    print(f"ratio wrapped / bare scontrol hold: {ratio:.2f}x ({verdict} the {TARGET}x target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
