"""Waiting for slurmctld's save (``--durable``, run/durable.py, docs/contract.md §13.5): a fake
scontrol, a fake squeue that shows the job's record in the real ``-O`` shape, and a slurmctld that
saves between any two looks (the default of the unit tests) or a state directory whose job_state
only the test replaces (``real_saves``).  The expected answers follow §13.5's words: a changed row
is saved once two saves are seen replaced after its calls and a lookup after them still shows the
change; else ``saved`` False, and the row exits as unknown; the wait itself calls nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import slurm_dsl
from slurm_dsl.core.model import Op, OutcomeUnknown, Result
from tests.cli_run import cli
from tests.fakes import (
    REAL_LOOK_AT_SAVE,
    ScriptedSaves,
    calls_made,
    refuse,
    write_fake,
    write_fake_squeue,
    write_job_state,
)
from tests.ground import INVALID_USER_ID

HELD = "7|PENDING|0|0|0|JobHeldAdmin\n"
NOT_HELD = "7|PENDING|0|0|4294901|Priority\n"


def fakes(tmp_path: Path, record: str, plan: dict) -> Path:  # type: ignore[type-arg]
    fake = write_fake(tmp_path / "bin", plan)
    write_fake_squeue(tmp_path / "bin", record)
    return fake


def hold(tmp_path: Path, fake: Path, *extra: str) -> tuple:  # type: ignore[type-arg]
    code, out, err = cli(["hold", "7", "--durable", "--json", "--scontrol", str(fake), "--squeue",
                          str(fake.parent / "squeue"), "--ledger", str(tmp_path / "ledger.sqlite3"), *extra])
    return code, [json.loads(line) for line in out.splitlines()], err


def test_a_change_saved_after_its_calls_and_still_there_is_saved(tmp_path: Path) -> None:
    fake = fakes(tmp_path, HELD, {})
    code, (row,), _ = hold(tmp_path, fake, "--timeout", "10")
    assert (code, row["result"], row["saved"]) == (0, "ok", True), row
    assert row["detail"] == "saved by slurmctld"
    assert calls_made(fake) == ["hold 7"]


def test_no_save_by_the_deadline_is_said_and_exits_unknown_and_the_wait_calls_nothing(
    tmp_path: Path, state: Path, real_saves: None
) -> None:
    """The job_state the op's own look saw is the one there at the deadline.  The wait made the
    op's call again (issue: another admin's release between the two was undone; docs/contract.md
    §13.8, no call outside an operation): now it only looks."""
    write_job_state(state, int(time.time()))
    fake = fakes(tmp_path, HELD, {})
    started = time.monotonic()
    code, (row,), err = hold(tmp_path, fake, "--timeout", "2")
    assert (code, row["result"], row["saved"]) == (15, "ok", False), row
    assert "2 more of slurmctld's saves not seen by the deadline" in row["detail"]
    assert "not known saved" in err
    assert calls_made(fake) == ["hold 7"]
    assert time.monotonic() - started < 10  # the deadline's bound, generously


def test_one_save_seen_after_the_calls_is_not_enough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first save after the calls may have begun packing before them (core.durable Rule 2):
    seen replaced once after the calls, the row is not saved; twice, it is.  (The looks: the
    operation's own when it is recorded, the wait's own, then the wait's polls.)"""
    fake = fakes(tmp_path, HELD, {})
    monkeypatch.setattr("slurm_dsl.lookups.saves.look_at_save", ScriptedSaves([1, 1, 1, 2]))
    code, (row,), _ = hold(tmp_path, fake, "--timeout", "2")
    assert (code, row["saved"]) == (15, False) and "1 more of slurmctld's saves" in row["detail"], row
    monkeypatch.setattr("slurm_dsl.lookups.saves.look_at_save", ScriptedSaves([1, 1, 1, 2, 2, 3]))
    code, (row,), _ = hold(tmp_path, fake, "--timeout", "10")
    assert (code, row["saved"]) == (0, True), row


def test_a_change_no_longer_there_after_the_save_is_not_saved(tmp_path: Path) -> None:
    code, (row,), _ = hold(tmp_path, fakes(tmp_path, NOT_HELD, {}), "--timeout", "10")
    assert (code, row["saved"]) == (15, False) and "not known saved" in row["detail"], row


def test_a_save_that_cannot_be_seen_confirms_nothing(tmp_path: Path, state: Path, real_saves: None) -> None:
    code, (row,), _ = hold(tmp_path, fakes(tmp_path, HELD, {}), "--timeout", "2")
    assert (code, row["saved"]) == (15, False) and "cannot be seen" in row["detail"], row


def test_a_refused_row_has_nothing_to_save(tmp_path: Path) -> None:
    code, (row,), _ = hold(tmp_path, fakes(tmp_path, HELD, {"hold": refuse(INVALID_USER_ID)}), "--timeout", "10")
    assert (code, row["result"]) == (10, "rejected") and "saved" not in row, row


def test_a_keyed_run_again_after_its_key_is_done_and_saved_is_saved(tmp_path: Path) -> None:
    """Its row is the earlier run's (nothing ran): looked for under the key, not as this process's
    own operation (issue: it always exited 15)."""
    fake = fakes(tmp_path, HELD, {})
    first = hold(tmp_path, fake, "--timeout", "10", "--key", "drain-7")
    again = hold(tmp_path, fake, "--timeout", "10", "--key", "drain-7")
    assert (first[0], first[1][0]["saved"]) == (0, True), first
    assert (again[0], again[1][0]["saved"]) == (0, True), again
    assert calls_made(fake) == ["hold 7"]


def test_a_requeue_whose_clear_was_lost_is_not_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Requeued (RestartCnt above its baseline), but the job shows Requeue=1 again: the clear is gone.
    before = write_fake_squeue(tmp_path / "sq", "7|RUNNING|0|0|4294901|None\n")
    after = write_fake_squeue(tmp_path / "after", "7|PENDING|1|1|4294901|BeginTime\n")
    fake = write_fake(tmp_path / "bin", {"requeue": f"cp '{after}' '{before}'; exit 0"})
    monkeypatch.setenv("SLURM_DSL_SQUEUE", str(before))
    done = slurm_dsl.run_op("requeue", "7", timeout=10, scontrol=str(fake), ledger=str(tmp_path / "l.sqlite3"),
                            durable=True)
    assert (done.result, done.saved) == (Result.OK, False), done
    assert "Requeue=1 again" in done.detail and done.exits_as is Result.UNKNOWN


def test_the_api_raises_a_change_not_known_saved(tmp_path: Path, state: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fakes(tmp_path, HELD, {})
    monkeypatch.setenv("SLURM_DSL_SQUEUE", str(fake.parent / "squeue"))
    done = slurm_dsl.hold("7", timeout=10, scontrol=str(fake), ledger=str(tmp_path / "ledger.sqlite3"), durable=True)
    assert done.saved is True
    monkeypatch.setattr("slurm_dsl.lookups.saves.look_at_save", REAL_LOOK_AT_SAVE)  # and nothing saves
    write_job_state(state, int(time.time()))
    with pytest.raises(OutcomeUnknown) as info:
        slurm_dsl.hold("7", timeout=2, scontrol=str(fake), ledger=str(tmp_path / "ledger.sqlite3"), durable=True)
    refused = info.value.outcome
    assert refused is not None and refused.saved is False and refused.op is Op.HOLD
