"""One timeout rule (docs/contract.md §10.0, §10.2): the library's ``timeout``, the command line's
``--timeout`` and the config file's ``timeout`` take the same seconds and refuse the same, each in
its own words; the command line's deadline is the library's ``resolve_deadline``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

import pytest

from slurm_dsl.admin.options import positive_seconds
from slurm_dsl.core.model import InvalidInput
from slurm_dsl.run.config import ConfigFileError, configure
from slurm_dsl.run.deadlines import MAX_TIMEOUT, MIN_TIMEOUT, resolve_deadline, timeout_of

TAKEN = ["0.001", "1", "2.5", "86400"]
REFUSED = ["0", "0.0005", "-1", "86400.5", "1e9", "nan", "inf", "1_0", "\u0665"]


def library(text: str) -> Optional[float]:
    try:
        return resolve_deadline(float(text), None, clock=lambda: 0.0)
    except (InvalidInput, ValueError):
        return None


def command_line(text: str) -> Optional[float]:
    try:
        return positive_seconds(text)
    except argparse.ArgumentTypeError:
        return None


def config_file(text: str, folder: Path) -> Optional[float]:
    path = folder / "slurm-dsl.conf"
    path.write_text(f"[slurm-dsl]\ntimeout = {text}\n", encoding="utf-8")
    try:
        return configure({}, config=str(path), env={}).timeout
    except ConfigFileError:
        return None


@pytest.mark.parametrize("text", TAKEN)
def test_every_door_takes_a_timeout_within_the_bounds(text: str, tmp_path: Path) -> None:
    assert MIN_TIMEOUT <= float(text) <= MAX_TIMEOUT
    assert timeout_of(text) == library(text) == command_line(text) == config_file(text, tmp_path) == float(text)


@pytest.mark.parametrize("text", REFUSED)
def test_every_door_refuses_a_timeout_outside_them(text: str, tmp_path: Path) -> None:
    assert timeout_of(text) is None and command_line(text) is None and config_file(text, tmp_path) is None
    if text.isascii() and "_" not in text:  # the library takes a number, not its text
        assert library(text) is None
