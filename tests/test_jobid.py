from __future__ import annotations

import pytest

from slurm_dsl import validate_job_id
from slurm_dsl.jobid import MAX_JOB_ID

HOSTILE = [
    "1;id",
    "$(id)",
    "`id`",
    "12_3",
    "123_[1-3]",
    "1,2",
    "1 2",
    " 12",
    "12 ",
    "12\n",
    "042",
    "0",
    "-1",
    "+1",
    "\u0661\u0662",
    "\uff11\uff12",
    "１２",
    "4294967295",
    "4294967296",
    "99999999999999999999",
    "",
    "abc",
    "12.0",
    "0x10",
    "1e3",
    "12\x00",
    "'12'",
]


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_job_ids_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="job id"):
        validate_job_id(bad)


@pytest.mark.parametrize("bad", [True, False, None, 1.0, b"12", -5, 0, MAX_JOB_ID + 1])
def test_non_string_job_ids_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        validate_job_id(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "canonical"), [("1", "1"), ("1234", "1234"), (1234, "1234"), (str(MAX_JOB_ID), str(MAX_JOB_ID))]
)
def test_plain_job_ids_pass(given: object, canonical: str) -> None:
    assert validate_job_id(given) == canonical  # type: ignore[arg-type]
