"""A job's record as the ledger stores it (``ledger.rows.job_info_text``): the field-by-field text
of a well-typed record is what ``json.dumps`` of its fields gives, and reads back as the record;
a record of other types takes the checked path, with the same answer or the same refusal."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.core.jobid import MAX_JOB_ID
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import InvalidInput
from slurm_dsl.ledger.rows import job_info, job_info_text

JOB_IDS = st.integers(1, MAX_JOB_ID).map(str)
INFOS = st.builds(
    JobInfo,
    job_id=JOB_IDS,
    state=st.text(max_size=20),
    requeue=st.booleans(),
    restarts=st.integers(0, 0xFFFF),
    priority=st.integers(0, 0xFFFFFFFF),
    reason=st.text(max_size=60),  # free text: quotes, backslashes, controls, non-ASCII
    array_job_id=st.one_of(st.none(), JOB_IDS),
    array_tasks=st.integers(0, 10**6),
)


def naive_text(info: JobInfo) -> str:
    """The stored text by its definition: every field, in order, as compact JSON."""
    return json.dumps({f.name: getattr(info, f.name) for f in dataclasses.fields(info)}, separators=(",", ":"))


@given(INFOS)
def test_the_stored_text_is_compact_json_of_every_field_and_reads_back(info: JobInfo) -> None:
    text = job_info_text(info)
    assert text == naive_text(info)
    assert job_info("ledger", text) == info


class Text(str):
    pass


class Count(int):
    pass


@pytest.mark.parametrize("field, value", [("reason", Text("a \"held\" job")), ("state", Text("PENDING")),
                                          ("restarts", Count(3)), ("array_job_id", Text("77"))])
def test_a_subclass_takes_the_checked_path_with_the_same_text(field: str, value: Any) -> None:
    info = dataclasses.replace(JobInfo("77", "PENDING", False, 0, 5, "None"), **{field: value})
    assert job_info_text(info) == naive_text(info)


@pytest.mark.parametrize("field, value", [("job_id", "0"), ("job_id", "012"), ("job_id", "1_2"),
                                          ("restarts", True), ("priority", 1.0), ("reason", None),
                                          ("requeue", 1), ("array_job_id", 7)])
def test_a_record_with_a_bad_field_is_refused(field: str, value: Any) -> None:
    info = dataclasses.replace(JobInfo("77", "PENDING", False, 0, 5, "None"), **{field: value})
    with pytest.raises(InvalidInput):
        job_info_text(info)
