"""core.select: the selectors' values, their squeue options and what a listing chooses (docs/contract.md §10.3)."""

from __future__ import annotations

import pytest

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import InvalidInput
from slurm_dsl.core.select import Selection, check_states, check_value, chosen, missing


@pytest.mark.parametrize("text", ["", "  ", "a\nb", "a\x7fb", "-w", "x" * 1025])
def test_a_value_that_selects_nothing_meant_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        check_value(text, "--node")


@pytest.mark.parametrize("text", ["node[01-04],gpu1", "launch failed requeued held", "x" * 1024, "é"])
def test_a_value_is_kept_as_given(text: str) -> None:
    assert check_value(text) == text


@pytest.mark.parametrize("given, names", [
    ("pd", "PENDING"), ("R,PD", "RUNNING,PENDING"), ("running,R", "RUNNING"), ("all", "ALL"),
    ("requeue_hold", "REQUEUE_HOLD"), (" CG ", "COMPLETING"),
])
def test_states_are_squeues_names(given: str, names: str) -> None:
    assert check_states(given) == names


@pytest.mark.parametrize("given", ["BOGUS", "PENDING,nope", "P", ",", "R,,PD"])
def test_an_unknown_state_is_named(given: str) -> None:
    with pytest.raises(InvalidInput, match="unknown job state"):
        check_states(given)


def test_no_selector_is_false_and_each_one_is_true() -> None:
    assert not Selection()
    for field in ("node", "partition", "user", "account", "state", "name", "reservation", "pending_reason"):
        assert Selection(**{field: "x"})


def test_the_filters_are_squeues_options_and_the_reason_is_none_of_them() -> None:
    s = Selection(node="n[1-2]", partition="a,b", user="u", account="acc", state="PENDING", name="job x",
                  reservation="r", pending_reason="JobHeldAdmin")
    assert s.filters() == ("-w", "n[1-2]", "-p", "a,b", "-u", "u", "-A", "acc", "-t", "PENDING", "-n", "job x",
                           "-R", "r")
    assert Selection(pending_reason="x").filters() == ()


def test_the_text_names_every_selector_given_once_in_one_order() -> None:
    assert Selection(state="RUNNING", node="vm").text() == "--node 'vm' --state 'RUNNING'"
    assert Selection(pending_reason="a b").text() == "--pending-reason 'a b'"
    assert Selection(node="vm").text() != Selection(node="vm", state="RUNNING").text()


def info(job: str, reason: str = "None", array: str = "", tasks: int = 1) -> JobInfo:
    return JobInfo(job, "PENDING", False, 0, 1, reason, array_job_id=array or None, array_tasks=tasks)


def test_a_listing_chooses_its_jobs_in_order_and_leaves_whole_arrays_out() -> None:
    listed = {"7": info("7"), "5": info("5", array="5", tasks=3), "6": info("6", array="5"), "9": info("9", array="9")}
    got = chosen(Selection(node="vm"), listed)
    assert got.job_ids == ("7", "6", "9")  # 9: an array's last task, its JobId reaching it alone
    assert got.arrays_left == {"5": 3}


def test_the_pending_reason_picks_by_squeues_reason_in_any_case() -> None:
    listed = {"1": info("1", "launch failed requeued held"), "2": info("2", "JobHeldAdmin"), "3": info("3")}
    assert chosen(Selection(pending_reason="Launch Failed Requeued Held"), listed).job_ids == ("1",)
    assert chosen(Selection(pending_reason="jobheldadmin"), listed).job_ids == ("2",)
    assert chosen(Selection(pending_reason="held"), listed).job_ids == ()  # the whole reason, not a part


def test_missing_names_the_first_name_slurm_lacks() -> None:
    assert missing(["a", "b", "c"], ["a", "c"]) == "b"
    assert missing(["a"], ["a", "b"]) is None
