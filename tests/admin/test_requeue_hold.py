"""``requeue --hold`` and ``requeuehold`` (docs/contract.md §1): call 2 is scontrol's requeuehold,
one job or a bulk list; the ledger keeps the op (stored as a requeue with ``hold``, both backends,
across ``ledger migrate``) and reads it back as requeuehold; ``--hold`` on another op is a usage
error that runs nothing. Live: tests/integration/test_requeue_hold_live.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import pytest

from slurm_dsl.core.model import Op, RequeueBit
from slurm_dsl.ledger.choose import open_ledger
from tests.cli_run import cli
from tests.fakes import calls_made, write_fake, write_fake_squeue

RUNNING = "7|RUNNING|0|0|4294901|None\n8|RUNNING|0|0|4294901|None\n"


def setup(tmp_path: Path) -> List[str]:
    fake = write_fake(tmp_path / "bin", {})
    write_fake_squeue(fake.parent, RUNNING)
    return ["--ledger", str(tmp_path / "db" / "ledger.sqlite3"), "--scontrol", str(fake), "--squeue",
            str(fake.parent / "squeue"), "--timeout", "30", "--json"]


@pytest.mark.parametrize("command", [["requeue", "--hold"], ["requeuehold"]], ids=["requeue --hold", "requeuehold"])
@pytest.mark.parametrize("ids", [["7"], ["7", "8"]], ids=["one", "bulk"])
def test_call_2_is_requeuehold_and_the_ledger_keeps_the_op(tmp_path: Path, command: List[str], ids: List[str]) -> None:
    options = setup(tmp_path)
    code, out, err = cli([*command, *ids, *options])
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["job_id"], r["op"], r["result"], r["requeue_bit"]) for r in rows] == [
        (j, "requeuehold", "ok", "clear") for j in ids]
    made = calls_made(tmp_path / "bin" / "scontrol")
    listed = ",".join(ids)
    assert f"requeuehold {listed}" in made and not any(c.startswith("requeue ") for c in made), made
    with open_ledger(str(tmp_path / "db" / "ledger.sqlite3")) as ledger:
        assert [ledger.history(j)[0].op for j in ids] == [Op.REQUEUE_HOLD] * len(ids)
        # call 3's clear is watched until a save proves it, as a requeue's (docs/contract.md §13.3)
        assert [getattr(ledger.get(j), "bit", None) for j in ids] == [RequeueBit.MAY_BE_SET] * len(ids)
    code, out, _ = cli(["history", ids[0], "--ledger", str(tmp_path / "db" / "ledger.sqlite3")])
    assert code == 0 and "requeuehold" in out


def test_a_requeue_into_hold_survives_ledger_migrate(tmp_path: Path) -> None:
    options = setup(tmp_path)
    assert cli(["requeue", "--hold", "7", *options]).code == 0
    target = tmp_path / "other.sqlite3"
    code, _, err = cli(["ledger", "migrate", "--from", str(tmp_path / "db" / "ledger.sqlite3"), "--to", str(target)])
    assert code == 0, err
    with open_ledger(str(target)) as ledger:
        assert ledger.history("7")[0].op is Op.REQUEUE_HOLD


@pytest.mark.parametrize("op", ["hold", "release", "restore", "open"])
def test_hold_on_another_op_is_a_usage_error_that_runs_nothing(tmp_path: Path, op: str) -> None:
    options = setup(tmp_path)
    code, out, err = cli([op, "7", "--hold", *options])
    assert (code, out) == (2, "") and "--hold is requeue's" in err, err
    assert calls_made(tmp_path / "bin" / "scontrol") == []
    assert not (tmp_path / "db" / "ledger.sqlite3").exists()
