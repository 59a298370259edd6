"""The simulator's tests see slurmctld's saves as the simulation makes them: the real look at
job_state (tests/conftest.py's ``real_saves``; the unit tests' fake sees a save at every look),
the simulated StateSaveLocation."""

from __future__ import annotations

import pytest

from tests.sim.world import STATE


@pytest.fixture(autouse=True)
def _simulated_saves(real_saves: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_DSL_STATE_SAVE_LOCATION", STATE)
