"""Every test under tests/integration runs against the real Slurm lab.

Rule: without a usable lab (contrib/lab/up) these tests are skipped with the
reason, except under CI=true, where a missing lab is a failure: CI brings the
lab up itself, so a skip there would hide a broken bring-up.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

# The repo root, so that `tests.lab` imports whether or not tests/ has an
# __init__.py (without one it is a namespace package).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests import lab


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs the real Slurm lab (run contrib/lab/up as root)")
    config.addinivalue_line("markers", "squeue_only: looks jobs up with squeue alone (no slurm-dsl-jobinfo)")


@pytest.fixture(scope="session")
def jobinfo_helper() -> str:
    """slurm-dsl-jobinfo built from this checkout for the lab (contrib/jobinfo/build): skipped
    where it cannot be built, except under CI=true, where that is a failure."""
    path, why = lab.jobinfo_helper()
    if path is None:
        message = f"slurm-dsl-jobinfo cannot be built here: {why}"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture(autouse=True)
def _real_squeue(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """The real squeue for the operations' array check, the default lookup and the lab's own
    state directory (tests/conftest.py sets a fake and squeue for the unit tests); and slurm-dsl-jobinfo as the
    package installs it, so that every live test looks jobs up as an installed slurm-dsl does
    (a test marked ``squeue_only`` asks squeue alone)."""
    monkeypatch.delenv("SLURM_DSL_SQUEUE", raising=False)
    monkeypatch.delenv("SLURM_DSL_LOOKUP", raising=False)
    monkeypatch.delenv("SLURM_DSL_STATE_SAVE_LOCATION", raising=False)  # the lab's own job_state
    if request.node.get_closest_marker("squeue_only") is None:
        monkeypatch.setenv("SLURM_DSL_JOBINFO", request.getfixturevalue("jobinfo_helper"))


@pytest.fixture(scope="session", autouse=True)
def _no_jobs_left_over() -> None:
    """Start from a node with no job of the lab's users: a run killed before its cleanup
    (a chaos run, a test session) leaves sleep jobs that would hold the slots the tests need."""
    if lab.lab_available() is None:
        left = lab.cancel_left_over()
        if left:
            print(f"slurm-dsl tests: cancelled {len(left)} job(s) left over: {' '.join(left)}", file=sys.stderr)


@pytest.fixture(autouse=True)
def _slurm_lab() -> Iterator[None]:
    """Skip (or, under CI=true, fail) without a usable lab; afterwards cancel
    the jobs the test submitted through lab.submit, so that leftover sleep jobs
    do not fill the node's 8 slots for the tests that follow."""
    reason = lab.lab_available()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Slurm lab not usable under CI=true: {reason}", pytrace=False)
        pytest.skip(f"Slurm lab not usable: {reason} (run contrib/lab/up as root)")
    try:
        yield
    finally:
        lab.cancel_submitted()
