"""Which ids of a list call the lookup made before it vouches for, so that only the others need the
corroborating lookup after it (docs/contract.md §11, "One lookup where one suffices").  Rule 1: the
lookup saw the job in a ``VOUCHING`` state.  Rule 2: the call ended before the lookup's start +
MinJobAge.  Pure: the caller runs the command and keeps one clock for both times.
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
