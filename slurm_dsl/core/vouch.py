"""Which ids of a list call the lookup made before it vouches for, so that only the others need
the corroborating lookup after it (docs/contract.md §11, "One lookup where one suffices").

Strategy: a list call's SUCCESS for an id (no line of its own) can be false only when slurmctld
does not know the id at the moment of its RPC: a plain id that is not found falls into "update
all tasks of this array", whose empty hash bucket answers SUCCESS (docs/slurm-bulk.md §3.4).
slurmctld forgets a job only by purging it, and it purges a job only MinJobAge seconds after the
job ended (``purge_old_job``: ``end_time + MinJobAge < now``; MinJobAge 0: never).  So:

Rule 1: the lookup before the call showed the job's record in a state of ``VOUCHING``: pending,
running or suspended, so the job had not ended when the lookup started, and it ends, if at all,
after that.  (COMPLETING and the flag states that follow an end, such as REQUEUE_HOLD, are not
there: their job may have ended long before.)
Rule 2: the call ended before the lookup's start + MinJobAge: no purge can have come in between.
Rule 1 and 2 together vouch for the id: its SUCCESS is slurmctld's answer for a job it knows.
Every other id read as ok is looked up after the call, as before: one the lookup said was gone
or finished, one it did not answer for, any id when MinJobAge is not known (``min_job_age`` could
not read it) or when the call ended too late.

``min_job_age`` reads ``scontrol show config``'s ``MinJobAge = N sec`` line (22.05 to 26.05 print it
so); anything else is None: nothing is vouched for.  Pure: the caller runs the command and keeps
the clock (one clock for the lookup's start and the call's end).
"""

from __future__ import annotations

import math
import re
from typing import Iterable, Mapping, Optional, Set

from .jobinfo import JobInfo

VOUCHING = frozenset({"PENDING", "RUNNING", "SUSPENDED"})
_MIN_JOB_AGE = re.compile(rb"^MinJobAge\s+= (\d{1,9}) sec$", re.M)


def min_job_age(show_config: bytes) -> Optional[float]:
    """MinJobAge in seconds from ``scontrol show config``'s stdout (``math.inf`` for 0: jobs are
    never purged); None unless exactly one such line is there."""
    found = _MIN_JOB_AGE.findall(show_config)
    if len(found) != 1:
        return None
    seconds = int(found[0])
    return math.inf if seconds == 0 else float(seconds)


def vouched(
    ids: Iterable[str],
    infos: Mapping[str, Optional[JobInfo]],
    looked_started: Optional[float],
    min_age: Optional[float],
    calls_ended: float,
) -> Set[str]:
    """The ids among ``ids`` whose SUCCESS needs no corroboration (Rules 1 and 2)."""
    if looked_started is None or min_age is None or not calls_ended < looked_started + min_age:
        return set()
    out = set()
    for job in ids:
        info = infos.get(job)
        if isinstance(info, JobInfo) and info.job_id == job and info.state in VOUCHING:
            out.add(job)
    return out
