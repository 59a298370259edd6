"""What each way of looking jobs up costs on the lab, at the number of jobs it holds now.

Not a test: it prints figures (milliseconds, median of ``--repeat``) for the costs the lookup
rule is built on (slurm_dsl/lookups/plan.py, docs/lookups.md): one ``squeue -j <id>`` alone,
``parallel`` of them at once, a ``-j`` list, a listing of every job, ``sdiag``; then
``SqueueLookup.jobs`` of k ids by the rule, one by one, and by one listing.  It only reads:
submit held jobs first (``sbatch --hold --no-requeue ...``) to measure at more jobs.

    python -m benchmarks.bench_lookup [--repeat 7] [--ks 2,5,10,20,50,100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Callable, List, Optional, Sequence

from slurm_dsl.host.binaries import DEFAULT_SQUEUE
from slurm_dsl.host.process import run_argv
from slurm_dsl.lookups.squeue import SqueueLookup, squeue_format

SDIAG = os.path.join(os.path.dirname(DEFAULT_SQUEUE), "sdiag")


def ms(action: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``action`` in milliseconds."""
    spent: List[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        spent.append(time.perf_counter() - start)
    return statistics.median(spent) * 1e3


def squeue(*select: str) -> Callable[[], object]:
    argv = (DEFAULT_SQUEUE, "-h", "-a", "-t", "all", "-r", *select, "-O", squeue_format(os.urandom(16).hex()))
    return lambda: run_argv(argv, timeout=60.0, cap=256 << 20)


def at_once(actions: Sequence[Callable[[], object]]) -> Callable[[], object]:
    def run() -> object:
        with ThreadPoolExecutor(max_workers=len(actions)) as pool:
            return list(pool.map(lambda action: action(), actions))

    return run


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--ks", default="2,5,10,20,50,100")
    args = parser.parse_args(argv)
    ids = sorted(SqueueLookup(many=0).all_jobs(), key=int)
    if len(ids) < 100:
        print(f"need 100 jobs or more to look up, slurmctld holds {len(ids)}", file=sys.stderr)
        return 1
    one = ids[len(ids) // 2]
    print(f"jobs held: {len(ids)} (records of a listing)")
    print(f"squeue -j <one id>:          {ms(squeue('-j', one), args.repeat):8.1f} ms")
    print(f"squeue -j <one missing id>:  {ms(squeue('-j', '4294967290'), args.repeat):8.1f} ms")
    for parallel in (2, 4, 8):
        batch = at_once([squeue("-j", job) for job in ids[:parallel]])
        print(f"{parallel} x squeue -j <id> at once: {ms(batch, args.repeat):8.1f} ms")
    print(f"squeue -j <2 ids>:           {ms(squeue('-j', ','.join(ids[:2])), args.repeat):8.1f} ms")
    print(f"squeue -j <100 ids>:         {ms(squeue('-j', ','.join(ids[:100])), args.repeat):8.1f} ms")
    print(f"squeue (every job):          {ms(squeue(), args.repeat):8.1f} ms")
    print(f"sdiag:                       {ms(lambda: run_argv((SDIAG,), timeout=10.0), args.repeat):8.1f} ms")
    print(f"{'SqueueLookup.jobs, k ids':28}{'rule':>10}{'one by one':>12}{'listing':>10}")
    for k in (int(k) for k in args.ks.split(",")):
        asked = ids[:k]
        rule = ms(partial(SqueueLookup(many=500).jobs, asked), args.repeat)
        each = ms(partial(SqueueLookup(many=500)._each, asked), args.repeat)
        listed = ms(partial(SqueueLookup(many=500, parallel=0).jobs, asked), args.repeat)
        print(f"{k:<28}{rule:10.1f}{each:12.1f}{listed:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
