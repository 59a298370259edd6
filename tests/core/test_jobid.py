from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl import InvalidInput
from slurm_dsl.core.jobid import MAX_JOB_ID, JobIds, checked_list, distinct_ids, validate_job_id

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


# -- at the edges (issue 16 item 10) ------------------------------------------------------------

@pytest.mark.parametrize("bad", ["1" * 4301, "9" * 100_000, "\x00" * 1_000_000, "1" * 11, "x" * 41])
def test_a_token_of_any_length_is_invalid_input_echoed_bounded(bad: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_job_id(bad)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert len(message) < 300
    if len(bad) > 40:
        assert f"{bad[:40]!r}... ({len(bad)} characters)" in message and repr(bad[:41]) not in message
    else:
        assert repr(bad) in message


def test_an_int_too_large_for_its_decimal_text_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match=f"larger than {MAX_JOB_ID}"):
        validate_job_id(10**5000)


def test_a_short_token_is_echoed_whole_as_before() -> None:
    with pytest.raises(InvalidInput, match=r"^invalid job id '12\\x00': expected"):
        validate_job_id("12\x00")


def naive_valid(text: str) -> bool:
    """docs/contract.md §1 word by word: ASCII digits, no leading zero, at most MAX_JOB_ID."""
    return re.fullmatch("[1-9][0-9]*", text, re.ASCII) is not None and int(text) <= MAX_JOB_ID


NEAR_IDS = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="0123456789", max_size=12),
    st.text(alphabet="0123456789\u0661\uff11\u00b2 _\n", max_size=12),
    st.integers(MAX_JOB_ID - 10, MAX_JOB_ID + 10).map(str),
    st.integers(0, 10**12).map(lambda n: "0" + str(n)),
)


@given(NEAR_IDS)
def test_any_text_passes_exactly_when_the_rule_says_and_comes_back_as_given(text: str) -> None:
    if naive_valid(text):
        assert validate_job_id(text) == text
    else:
        with pytest.raises(InvalidInput):
            validate_job_id(text)


# -- JobIds: ids checked once, where they come in ------------------------------------------------


class _Sly(str):
    def __str__(self) -> str:
        return "1; rm -rf /"


def test_distinct_ids_checks_each_once_keeps_the_first_of_each_and_refuses_as_validate_job_id() -> None:
    ids = distinct_ids(["12", 7, "12", _Sly("9")])
    assert type(ids) is JobIds and ids == ("12", "7", "9") and all(type(j) is str for j in ids)
    with pytest.raises(InvalidInput) as refused:
        distinct_ids(["12", "1_2"])
    with pytest.raises(InvalidInput) as alone:
        validate_job_id("1_2")
    assert str(refused.value) == str(alone.value)


def test_job_ids_are_trusted_as_they_are_and_only_made_by_the_checks() -> None:
    ids = distinct_ids(["3", "1", "2"])
    assert distinct_ids(ids) is ids and checked_list(ids) == ["3", "1", "2"]
    with pytest.raises(TypeError):
        JobIds(["not checked"])
    parts = [ids.part(1, 3), ids.among({"2", "3", "99"}), ids.without({"1"}), ids.pick(["2", "99", "3", "2"])]
    assert [tuple(p) for p in parts] == [("1", "2"), ("3", "2"), ("3", "2"), ("2", "3")]
    assert all(type(p) is JobIds for p in parts)
    # A chosen id equal to one of them is that one: an exact str, never the caller's object.
    (picked,) = ids.pick([_Sly("3")])
    assert type(picked) is str and str(picked) == "3"
