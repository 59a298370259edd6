"""Fixtures of the run wing's tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """slurmctld's StateSaveLocation for the test: an empty directory, named by
    ``$SLURM_DSL_STATE_SAVE_LOCATION`` (``tests.fakes.write_job_state`` writes its job_state)."""
    directory = tmp_path / "statesave"
    directory.mkdir()
    monkeypatch.setenv("SLURM_DSL_STATE_SAVE_LOCATION", str(directory))
    return directory
