"""Every intent records its idempotency key and the operation it retries (docs/contract.md §12),
on every path: a single op, one by one, a bulk chunk, a bulk one-id single.  A bad key is refused
before anything runs or is written."""

from __future__ import annotations

import time
from pathlib import Path
from types import MappingProxyType
from typing import List

import pytest

from slurm_dsl.core.jobid import distinct_ids
from slurm_dsl.core.model import InvalidInput, Op, Result
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import HistoryEntry
from slurm_dsl.run.driver import Ran, drive
from slurm_dsl.run.keyed import run_settled
from slurm_dsl.run.tracked import NO_LINK, Link, Tracker
from tests.fakes import write_fake, write_fake_squeue, write_list_fake

RECORDS = (
    "71|RUNNING|1|1|4294901|None\n"
    "72|PENDING|1|0|4294900|Priority\n"
    "73|PENDING|0|0|0|JobHeldUser\n"
    "80|80|4|RUNNING|1|0|4294899|None\n"
)


def fakes(tmp_path: Path, *, bulk: bool) -> Path:
    directory = tmp_path / "bin"
    if bulk:
        plan = {j: {"hold": "ok", "release": "ok", "set": "ok", "requeue": "ok", "clear": "ok"}
                for j in ("71", "72", "73", "80")}
        fake = write_list_fake(directory, plan)
    else:
        fake = write_fake(directory, {})
    write_fake_squeue(directory, RECORDS)
    return fake


def rows(ledger_path: str, *jobs: str) -> List[HistoryEntry]:
    with open_ledger(ledger_path) as ledger:
        return [e for job in jobs for e in ledger.history(job)]


@pytest.mark.parametrize("one_by_one", [False, True], ids=["bulk", "one-by-one"])
@pytest.mark.parametrize("op", [Op.HOLD, Op.REQUEUE], ids=str)
def test_every_path_records_the_key_and_the_retried_operation(tmp_path: Path, op: Op, one_by_one: bool) -> None:
    fake = fakes(tmp_path, bulk=not one_by_one)
    ledger = str(tmp_path / "ledger.sqlite3")
    link = Link("nightly-42", MappingProxyType({"72": 17, "80": 19}))
    with Tracker(ledger, scontrol=str(fake), squeue=str(fake.parent / "squeue")) as t:
        # 80 is an array's own JobId holding its one last task: the bulk path runs it on its own.
        events = list(drive(t, op, ["71", "72", "73", "80"], time.time() + 60, one_by_one=one_by_one, link=link))
    assert [e.outcome.result for e in events if isinstance(e, Ran)] == [Result.OK] * 4
    got = rows(ledger, "71", "72", "73", "80")
    assert [(e.job_id, e.key, e.retry_of) for e in got] == [
        ("71", "nightly-42", None), ("72", "nightly-42", 17), ("73", "nightly-42", None), ("80", "nightly-42", 19),
    ]


def test_a_single_op_records_them_and_no_link_records_none(tmp_path: Path) -> None:
    fake = fakes(tmp_path, bulk=False)
    ledger = str(tmp_path / "ledger.sqlite3")
    with Tracker(ledger, scontrol=str(fake), squeue=str(fake.parent / "squeue")) as t:
        t.run(Op.HOLD, "71", time.time() + 60, link=Link("k", MappingProxyType({"71": 3})))
        t.run(Op.HOLD, "71", time.time() + 60)
        t.run(Op.HOLD, "71", time.time() + 60, link=NO_LINK)
    assert [(e.key, e.retry_of) for e in rows(ledger, "71")] == [("k", 3), (None, None), (None, None)]


@pytest.mark.parametrize("key", ["", "two words", "x" * 129, "$(id)"])
def test_a_bad_key_is_refused_before_anything(tmp_path: Path, key: str) -> None:
    fake = fakes(tmp_path, bulk=False)
    with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=str(fake), squeue=str(fake.parent / "squeue")) as t:
        with pytest.raises(InvalidInput, match="a key is"):
            run_settled(t, Op.HOLD, distinct_ids(["71"]), time.time() + 60, key=key)
    assert not (fake.parent / "calls.log").exists()
