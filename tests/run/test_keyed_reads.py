"""What ``run.keyed`` reads of the ledger (docs/contract.md §12, "Keyed and settled runs"): a
batch of unknown results is found with one read, not one per job, and a verdict just written is
not read back.  The ledger is counted through the tracker's own store; the fakes as in
tests/run/test_keyed.py (a killed call is the one unknown a fake can make on demand)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, Tuple

import pytest

from slurm_dsl.core.model import Op, Result, Verdict
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run.keyed import run_settled
from slurm_dsl.run.tracked import Tracker
from tests.fakes import write_fake, write_fake_squeue
from tests.run.test_keyed import DELAY, KILLED, rows

JOBS = ["7", "8", "9", "10"]
HELD = "".join(f"{j}|PENDING|0|0|0|JobHeldAdmin\n" for j in JOBS)
NOT_HELD = "".join(f"{j}|PENDING|0|0|4294901|Priority\n" for j in JOBS)
# The store's reads of whole history rows: by job, by actor and time, by history id.
READS = ("history", "operations_by", "operations")


def counted(tracker: Tracker, monkeypatch: pytest.MonkeyPatch, names: Tuple[str, ...] = READS) -> Dict[str, int]:
    """How many times each of the store's ``names`` is called while the test runs."""
    ledger = tracker.ledger()
    counts = dict.fromkeys(names, 0)
    for name in names:
        real: Callable[..., Any] = getattr(ledger, name)

        def call(*args: Any, _real: Callable[..., Any] = real, _name: str = name, **kwargs: Any) -> Any:
            counts[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(ledger, name, call)
    return counts


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: str) -> Dict[str, int]:
    directory = tmp_path / "bin"
    fake = write_fake(directory, {"hold": KILLED})
    write_fake_squeue(directory, record)
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake), squeue=str(directory / "squeue")) as t:
        counts = counted(t, monkeypatch)
        got = rows(run_settled(t, Op.HOLD, JOBS, time.time() + 60, settle=True, settle_delay=DELAY))
    assert sorted(o.job_id for o in got) == sorted(JOBS)
    assert {o.result for o in got} == {Result.UNKNOWN}
    return counts


def test_own_unknown_results_are_found_in_one_read_and_not_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = run(tmp_path, monkeypatch, HELD)  # present at once: one look, every verdict written
    # The rows of the history ids its intents were committed under: never looked for by actor and time.
    assert counts == {"history": 0, "operations_by": 0, "operations": 1}
    with open_ledger(str(tmp_path / "ledger.sqlite3")) as ledger:
        for job in JOBS:
            (op,) = ledger.history(job)
            assert op.settlement is not None and op.settlement.verdict is Verdict.PRESENT


def test_a_second_look_after_the_delay_rereads_them_in_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = run(tmp_path, monkeypatch, NOT_HELD)  # no verdict at once; absent after the delay
    assert counts == {"history": 0, "operations_by": 0, "operations": 2}
    with open_ledger(str(tmp_path / "ledger.sqlite3")) as ledger:
        for job in JOBS:
            (op,) = ledger.history(job)
            assert op.settlement is not None and op.settlement.verdict is Verdict.ABSENT
