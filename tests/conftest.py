"""Shared fixtures: every test gets its own ledger file, never the system's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_ledger(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("ledger") / "ledger.sqlite3"
    monkeypatch.setenv("SLURM_DSL_LEDGER", str(path))
    return path
