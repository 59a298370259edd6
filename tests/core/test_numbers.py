"""Numbers an admin types (core/numbers.py, docs/contract.md §10.1): the ASCII rule, held to a
naive second reading of its words, character by character, without a regular expression."""

from __future__ import annotations

from typing import Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.core.numbers import seconds, whole_number

ASCII_DIGITS = "0123456789"


def naive_whole(text: str, low: int, high: int) -> Optional[int]:
    """A whole number is ASCII digits only, then held to the range; more than 30 digits is out
    of every range."""
    if not text or len(text) > 30 or any(c not in ASCII_DIGITS for c in text):
        return None
    value = 0
    for c in text:
        value = value * 10 + ASCII_DIGITS.index(c)
    return value if low <= value <= high else None


def naive_decimal(text: str) -> bool:
    """Digits, with at most one '.', and a digit somewhere: 5, 5., .5, 5.25."""
    whole, dot, fraction = text.partition(".")
    if "." in fraction or not (whole or fraction):
        return False
    return all(c in ASCII_DIGITS for c in whole + fraction) and len(whole) <= 30 and len(fraction) <= 30 and (
        bool(whole) or bool(dot and fraction))


def naive_seconds(text: str, low: float, high: float) -> Optional[float]:
    """A decimal, then at most one exponent: e or E, an optional sign, 1 to 4 ASCII digits."""
    mantissa, exponent = text, ""
    for marker in "eE":
        if marker in text:
            mantissa, _, exponent = text.partition(marker)
            if exponent[:1] in ("+", "-"):
                exponent = exponent[1:]
            if not exponent or len(exponent) > 4 or any(c not in ASCII_DIGITS for c in exponent):
                return None
            break
    if any(m in exponent for m in "eE") or not naive_decimal(mantissa):
        return None
    value = float(text)
    return value if low <= value <= high else None


# What int() and float() take that the rule refuses, and a few that it takes.
TRICKY = ["1_000", "١٢", "５", "²", " 5", "5 ", "+5", "-5", "inf", "nan", "Infinity", "0x10", "1e", "e5", ".", "",
          "1.2.3", "5\n", "1e99999", "0005", "1e308", "1e309", ".5", "5.", "2E-3", "1" * 31]
alphabet = st.sampled_from(list("0123456789.eE+-_ x١５"))


@given(st.one_of(st.sampled_from(TRICKY), st.text(alphabet, max_size=12), st.text(max_size=6)),
       st.integers(0, 10), st.integers(0, 10 ** 12))
def test_whole_numbers_are_the_rule_s_words(text: str, low: int, high: int) -> None:
    assert whole_number(text, low, high) == naive_whole(text, low, high)


@given(st.one_of(st.sampled_from(TRICKY), st.text(alphabet, max_size=12), st.text(max_size=6)),
       st.sampled_from([0.0, 0.001, 2.0]), st.sampled_from([86400.0, float("inf")]))
def test_seconds_are_the_rule_s_words(text: str, low: float, high: float) -> None:
    assert seconds(text, low, high) == naive_seconds(text, low, high)


@given(st.integers(0, 10 ** 30 - 1))
def test_every_whole_number_in_range_reads_back(value: int) -> None:
    assert whole_number(str(value), 0, 10 ** 30) == value


@pytest.mark.parametrize("text", ["1_000", "١", "٥", "５", " 5", "+1", "nan", "inf", "1" * 31])
def test_what_int_and_float_take_and_a_job_id_refuses_is_no_number(text: str) -> None:
    assert whole_number(text, 0, 10 ** 40) is None and seconds(text, 0.0, float("inf")) is None
