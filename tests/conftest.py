"""Shared fixtures: every test gets its own ledger file, never the system's, and (outside
tests/integration) a squeue that knows no jobs for the operations' array check and
``--lookup squeue`` for sweeps, so that unit tests never ask a real slurmctld and pass
whether or not a real pyslurm is installed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest


@pytest.fixture(autouse=True)
def _private_ledger(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("ledger") / "ledger.sqlite3"
    monkeypatch.setenv("SLURM_DSL_LEDGER", str(path))
    return path


@pytest.fixture(autouse=True)
def _no_slurm_for_the_array_check(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    from tests.fakes import write_empty_squeue

    path = write_empty_squeue(tmp_path_factory.mktemp("squeue"))
    monkeypatch.setenv("SLURM_DSL_SQUEUE", str(path))
    # And sweeps look jobs up with squeue, whether or not a real pyslurm is installed here.
    monkeypatch.setenv("SLURM_DSL_LOOKUP", "squeue")
    return path


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory put first on PATH, for the fake scontrol; checked empty of processes after."""
    from tests.fakes import alive_in_group

    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}:{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_DSL_SCONTROL", raising=False)
    yield d
    assert alive_in_group(str(d)) is None, "a process outlived its call"
