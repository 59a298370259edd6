"""Every row of docs/contract.md §4."""

from __future__ import annotations

import pytest

from slurm_dsl.core.statuses import StatusClass, classify, parse_status


@pytest.mark.parametrize(
    ("status", "cls"),
    [(0, StatusClass.SUCCESS)]
    + [(s, StatusClass.FAILED) for s in (1, 2, 74, 76, 100, 123)]
    + [(75, StatusClass.EXPIRED), (124, StatusClass.TIMED_OUT), (125, StatusClass.WRAPPER_FAILED)]
    + [(126, StatusClass.NOT_RUN), (127, StatusClass.NOT_RUN)]
    + [(s, StatusClass.SIGNALLED) for s in (128, 129, 137, 143, 255)],
)
def test_status_table(status: int, cls: StatusClass) -> None:
    assert classify(status) is cls


@pytest.mark.parametrize(("raw", "value"), [(0, 0), ("0", 0), ("1", 1), ("75", 75), ("255", 255), (255, 255)])
def test_readable_statuses(raw: object, value: int) -> None:
    assert parse_status(raw) == value


@pytest.mark.parametrize(
    "raw",
    [
        256,
        "256",
        -1,
        "-1",
        "+1",
        "01",
        "00",
        " 1",
        "1 ",
        "1\n",
        "",
        "0x1",
        "1.0",
        "\u0661",
        "999",
        "1000",
        True,
        False,
        None,
        1.0,
        b"1",
        [1],
    ],
)
def test_unreadable_statuses(raw: object) -> None:
    assert parse_status(raw) is None
