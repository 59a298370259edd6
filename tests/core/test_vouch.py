"""Which ok ids the lookup before a list call vouches for (docs/contract.md §11), against a naive
reading of the rule: seen pending, running or suspended by a lookup that started less than
MinJobAge before the calls ended; and MinJobAge read from ``scontrol show config``."""

from __future__ import annotations

import math
from typing import Dict, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.vouch import min_job_age, vouched

# As `scontrol show config` prints it (22.05.8 lab, docs/lab.md): the lines around it too.
CONFIG = b"""Configuration data as of 2026-12-01T12:00:00
MessageTimeout          = 3 sec
MinJobAge               = 300 sec
MpiDefault              = none
"""


def test_min_job_age_from_the_real_line() -> None:
    assert min_job_age(CONFIG) == 300.0
    assert min_job_age(CONFIG.replace(b"= 300 sec", b"= 0 sec")) == math.inf  # never purged
    assert min_job_age(CONFIG.replace(b"= 300 sec", b"= 2 sec")) == 2.0


@pytest.mark.parametrize(
    "text",
    [b"", CONFIG.replace(b"300 sec", b"300"), CONFIG.replace(b"300", b"-1"),
     CONFIG + b"MinJobAge               = 5 sec\n", CONFIG.replace(b"300 sec", b"300 sec extra"),
     CONFIG.replace(b"MinJobAge", b"XMinJobAge"), CONFIG.replace(b"300", b"1234567890")],
)
def test_anything_else_is_not_known(text: bytes) -> None:
    assert min_job_age(text) is None


STATES = ["PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "COMPLETED", "CANCELLED", "REQUEUE_HOLD",
          "SPECIAL_EXIT", "FAILED", "TIMEOUT", "PREEMPTED"]
IDS = ["11", "12", "13", "14", "15"]


@st.composite
def answers(draw: st.DrawFn) -> Dict[str, Optional[JobInfo]]:
    out: Dict[str, Optional[JobInfo]] = {}
    for job in IDS:
        kind = draw(st.sampled_from(["absent", "gone", "record", "other"]))
        if kind == "gone":
            out[job] = None
        elif kind in ("record", "other"):
            record_of = job if kind == "record" else "99"
            out[job] = JobInfo(record_of, draw(st.sampled_from(STATES)), False, 0, 1, "None")
    return out


@given(
    answers(),
    st.one_of(st.none(), st.floats(0, 1e6)),
    st.one_of(st.none(), st.floats(1, 1e4), st.just(math.inf)),
    st.floats(0, 2e6),
)
def test_vouched_follows_the_rule(
    infos: Dict[str, Optional[JobInfo]], started: Optional[float], age: Optional[float], ended: float
) -> None:
    expected = set()
    if started is not None and age is not None and ended < started + age:
        for job in IDS:
            info = infos.get(job)
            if info is not None and info.job_id == job and info.state in ("PENDING", "RUNNING", "SUSPENDED"):
                expected.add(job)
    assert vouched(IDS, infos, started, age, ended) == expected


def test_the_calls_ending_at_the_bound_are_not_vouched_for() -> None:
    info = {"11": JobInfo("11", "RUNNING", False, 0, 1, "None")}
    assert vouched(["11"], info, 100.0, 300.0, 399.9) == {"11"}
    assert vouched(["11"], info, 100.0, 300.0, 400.0) == set()
