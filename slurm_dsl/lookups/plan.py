"""How a lookup of k ids asks: each id alone, or one listing of every job (docs/lookups.md).  Pure.

A wrong choice, from a count that is missing or stale, costs time only: either way is strict."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Costs:
    """What each way of asking costs, in seconds (measured: benchmarks/bench_lookup.py)."""

    batch: float  # ``parallel`` single-job lookups started together, until the last ends
    parallel: int  # single-job lookups run at once
    listing: float  # a listing with no job held: process, RPC, reading
    per_job: float  # what a listing adds per job slurmctld holds


# squeue 22.05 on the 2-CPU lab (docs/lookups.md §2): one `squeue -j <id>` 6-9 ms alone, four at
# once 25 ms; a listing (`-j` with two ids or more) 6 ms plus ~7.5 us a job held (16 ms at 1,075
# jobs, 29 ms at 3,075).  The issue measured 1,285 ms at 100k (~13 us a job) on a bigger, busier
# slurmctld: this rule then lists from ~120 ids where ~200 would still be cheaper one by one.
SQUEUE_COSTS = Costs(batch=0.025, parallel=4, listing=0.006, per_job=0.0000075)


# slurm-dsl-jobinfo (contrib/jobinfo) on the same lab, one process asking with threads, medians of
# 11 interleaved rounds (docs/lookups.md §4): 100 ids with one thread 47 ms, two 33, four 26, eight
# 24; 300 ids with eight 65 ms.  Each RPC waits on slurmctld and munged more than it computes, so
# eight at once (a round of 8 ids ~1.7 ms).  At 100,000 jobs slurmctld's locks make each wait
# longer, and more at once hide more of it.  ``batch``: one round, ``parallel``: the threads.
JOBINFO_COSTS = Costs(batch=0.0017, parallel=8, listing=SQUEUE_COSTS.listing, per_job=SQUEUE_COSTS.per_job)


# The most jobs a slurmctld is taken to hold when the count is worth asking (``count_matters``):
# ten times Slurm's default MaxJobCount (10,000), and the largest queue the lab is measured at
# (benchmarks/bench_scale.py, docs/benchmarks.md §10).  One holding more may get a listing where
# single lookups were cheaper: time only, as any wrong count.
MOST_JOBS = 100_000


def per_id_seconds(count: int, costs: Costs) -> float:
    """What ``count`` single-job lookups cost, ``costs.parallel`` at a time."""
    return math.ceil(count / costs.parallel) * costs.batch if count > 0 else 0.0


def listing_seconds(jobs: int, costs: Costs) -> float:
    """What one listing costs with ``jobs`` jobs held."""
    return costs.listing + costs.per_job * max(jobs, 0)


def one_by_one(count: int, jobs: Optional[int], costs: Costs) -> Optional[bool]:
    """Whether to ask ``count`` ids each alone (True) or with one listing (False); None when that depends
    on ``jobs``, not known.  One id is always asked alone."""
    if count <= 1:
        return True
    alone = per_id_seconds(count, costs)
    if alone <= listing_seconds(0, costs):
        return True
    if jobs is None:
        return None
    return alone < listing_seconds(jobs, costs)


def count_matters(count: int, costs: Costs, most: int = MOST_JOBS) -> bool:
    """Whether the number of jobs held, up to ``most``, can change ``one_by_one``'s choice for ``count`` ids.

    When False there is no count to ask (``sdiag``)."""
    return one_by_one(count, None, costs) is None and one_by_one(count, most, costs) is True
