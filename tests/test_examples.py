"""tests/examples.py: the host's major runs every property in full, the others a share of it."""

from __future__ import annotations

import pytest

from tests import examples


@pytest.mark.parametrize("major", ["", "host"])
def test_the_host_s_major_tries_every_example_asked_for(major: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_DSL_TEST_MAJOR", major)
    assert [examples.examples(n) for n in (1, 25, 60, 3000)] == [1, 25, 60, 3000]


def test_no_major_named_is_the_host_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_DSL_TEST_MAJOR", raising=False)
    assert examples.full() and examples.examples(1500) == 1500


@pytest.mark.parametrize("major", ["trixie", "sid"])
def test_another_major_tries_a_tenth_never_below_the_floor_nor_above_the_ask(
    major: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_DSL_TEST_MAJOR", major)
    assert not examples.full()
    assert [examples.examples(n) for n in (10, 25, 60, 300, 1500, 3000)] == [10, 25, 25, 30, 150, 300]
