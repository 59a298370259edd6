"""The one driver for many jobs and the one meaning of ``--timeout`` (docs/contract.md §10.0): the
whole command's deadline, computed once; no scontrol call starts after it; a job not started by
then is ``expired`` and nothing was written for it; the command ends within ``OVERRUN`` of it."""

from __future__ import annotations

import contextlib
import io
import math
import time
from pathlib import Path
from typing import List, Tuple

import pytest

from slurm_dsl import RequeueBit, Result, run_ops
from slurm_dsl.admin.cli import main
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import WholeArray
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run.arrays import LookupAnswer
from slurm_dsl.run.deadlines import OVERRUN
from slurm_dsl.run.driver import Ran, drive, overrun_seconds
from slurm_dsl.run.tracked import Tracker
from tests.fakes import calls_made, write_fake, write_fake_squeue, write_list_fake

IDS = [str(n) for n in range(11, 31)]


def cli(argv: List[str]) -> Tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stderr(err):
        code = main(argv, out=out)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - start


def rows(out: str) -> List[Tuple[str, str]]:
    return [(line.split()[0], line.split()[2]) for line in out.splitlines()]


def test_the_stated_overrun_is_what_the_code_adds_up() -> None:
    assert math.ceil(overrun_seconds()) == OVERRUN


def test_a_hung_call_one_by_one_ends_the_command_within_the_bound_and_starts_no_other(tmp_path: Path) -> None:
    fake = write_fake(tmp_path / "bin", {"hold": "sleep 600"})
    ids = IDS[:10]
    code, out, _, took = cli(["hold", *ids, "--one-by-one", "--timeout", "1", "--scontrol", str(fake),
                              "--ledger", str(tmp_path / "l.sqlite3")])
    # The bound is the contract (TIMEOUT_HELP): the one timed assertion, by the stated bound only.
    assert took <= 1 + OVERRUN
    assert rows(out) == [(ids[0], "unknown")] + [(j, "expired") for j in ids[1:]]
    assert code == 15
    assert calls_made(fake) == [f"hold {ids[0]}"], "no call starts after the deadline"
    with open_ledger(tmp_path / "l.sqlite3") as ledger:
        assert ledger.history(ids[1]) == [], "a job whose turn came after the deadline: nothing written"


def test_a_hung_bulk_requeue_ends_within_the_bound_and_clears_nothing_after_it(tmp_path: Path) -> None:
    fake = write_fake(tmp_path / "bin", {"set": "sleep 600"}, default="echo 'Slurmctld(primary) at vm is UP'")
    ids = IDS[:5]
    code, out, _, took = cli(["requeue", *ids, "--timeout", "1", "--scontrol", str(fake),
                              "--ledger", str(tmp_path / "l.sqlite3")])
    assert took <= 1 + OVERRUN
    assert {r for _, r in rows(out)} == {"unknown"} and code == 15
    assert [c for c in calls_made(fake) if c != "ping"] == [f"update JobId={','.join(ids)} Requeue=1"]
    with open_ledger(tmp_path / "l.sqlite3") as ledger:
        objects = [ledger.get(j) for j in ids]
        assert [o.bit if o is not None else None for o in objects] == [RequeueBit.MAY_BE_SET] * len(ids), (
            "the sweeper's to settle")


def test_with_many_ids_and_a_short_timeout_the_later_chunks_expire_unstarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every list call takes 0.4 s: within the 1 s deadline at most a few chunks of 2 can start.
    fake = write_fake(tmp_path / "bin", {"hold": "sleep 0.4"}, default="echo 'Slurmctld(primary) at vm is UP'")
    monkeypatch.setattr("slurm_dsl.run.bulk.MAX_CHUNK", 2)
    code, out, _, took = cli(["hold", *IDS, "--timeout", "1", "--scontrol", str(fake),
                              "--ledger", str(tmp_path / "l.sqlite3")])
    assert took <= 1 + OVERRUN
    started = [c for c in calls_made(fake) if c.startswith("hold ")]
    assert 1 <= len(started) <= 4, started
    named = {j for c in started for j in c.split()[1].split(",")}
    later = IDS[2 * len(started):]
    assert later and not named & set(later)
    assert [(j, "expired") for j in later] == [r for r in rows(out) if r[0] in later]
    assert code == 15 or code == 12


def test_run_ops_takes_one_deadline_and_starts_nothing_once_it_passed(tmp_path: Path) -> None:
    fake = write_fake(tmp_path / "bin", {})
    for one_by_one in (False, True):
        out = run_ops("hold", IDS[:3], deadline=time.time() - 1, scontrol=str(fake),
                      ledger=str(tmp_path / "l.sqlite3"), one_by_one=one_by_one)
        assert [(o.job_id, o.result) for o in out] == [(j, Result.EXPIRED) for j in IDS[:3]]
    assert calls_made(fake) == []
    with open_ledger(tmp_path / "l.sqlite3") as ledger:
        assert ledger.history(IDS[0]) == []


def _bulk_fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: str) -> Path:
    monkeypatch.delenv("SLURM_DSL_SQUEUE", raising=False)
    fake = write_list_fake(tmp_path / "bin", {j: {"hold": "ok"} for j in ("11", "12", "165")})
    write_fake_squeue(tmp_path / "bin", records)
    return fake


def test_the_bulk_array_check_starts_when_drive_is_called_and_its_answer_is_the_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20 item 3: the lookup runs while the bulk path is imported, before the first event is
    asked for; the intents still commit its answer as their baselines, before any scontrol call."""
    fake = _bulk_fakes(tmp_path, monkeypatch, "11|PENDING|0|0|1|JobHeldUser\n12|PENDING|0|0|1|None\n")
    log = tmp_path / "bin" / "squeue.log"
    with Tracker(str(tmp_path / "l.sqlite3"), scontrol=str(fake)) as tracker:
        events = drive(tracker, "hold", ["11", "12"], time.time() + 30)
        give_up = time.monotonic() + 20
        while not log.exists() and time.monotonic() < give_up:  # nothing iterated yet
            time.sleep(0.01)
        assert log.exists() and calls_made(fake) == []
        ran = [e for e in events if isinstance(e, Ran)]
    assert [(r.outcome.job_id, r.outcome.result) for r in ran] == [("11", Result.OK), ("12", Result.OK)]
    assert [c for c in calls_made(fake) if c != "ping"] == ["hold 11,12"]
    with open_ledger(tmp_path / "l.sqlite3") as ledger:
        first = ledger.history("11")[0]
        assert first.baseline is not None and first.baseline.reason == "JobHeldUser"
        assert first.baseline_at is not None


def test_a_whole_array_the_started_lookup_finds_is_raised_at_the_first_event_and_nothing_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _bulk_fakes(tmp_path, monkeypatch, "11|PENDING|0|0|1|None\n165|165|2|PENDING|0|0|1|None\n"
                       "166|165|1|PENDING|0|0|1|None\n")
    with Tracker(str(tmp_path / "l.sqlite3"), scontrol=str(fake)) as tracker:
        events = drive(tracker, "hold", ["11", "165"], time.time() + 30)
        with pytest.raises(WholeArray, match="job 165"):
            next(events)
    assert calls_made(fake) == []
    with open_ledger(tmp_path / "l.sqlite3") as ledger:
        assert ledger.history("11") == [] and ledger.history("165") == []


@pytest.mark.parametrize("one_by_one", [False, True])
def test_a_lookup_the_caller_started_is_the_one_drive_waits_for_and_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_by_one: bool
) -> None:
    """The command line starts a bulk run's array check itself, before it opens the ledger
    (``looking``): drive then asks squeue nothing more before the calls, and the answer it is
    given is the baselines' (here not what squeue would say now: a reason it does not show)."""
    fake = _bulk_fakes(tmp_path, monkeypatch, "11|PENDING|0|0|1|None\n12|PENDING|0|0|1|None\n")
    held = JobInfo("11", "PENDING", False, 0, 0, "JobHeldUser")
    asked: List[str] = []

    def looking() -> LookupAnswer:
        asked.append("asked")
        return LookupAnswer({"11": held, "12": None}, time.time() - 0.5)

    with Tracker(str(tmp_path / "l.sqlite3"), scontrol=str(fake)) as tracker:
        ran = [e for e in drive(tracker, "hold", ["11", "12"], time.time() + 30, one_by_one=one_by_one,
                                looking=looking) if isinstance(e, Ran)]
    assert asked == ["asked"]
    assert [(r.outcome.job_id, r.outcome.result) for r in ran] == [("11", Result.OK), ("12", Result.OK)]
    with open_ledger(tmp_path / "l.sqlite3") as ledger:
        first = ledger.history("11")[0]
        assert first.baseline is not None and first.baseline.reason == "JobHeldUser"
        assert ledger.history("12")[0].baseline is None


@pytest.mark.parametrize("ids", [["11", "12"], ["11"], ["11", "12", "--one-by-one"]])
def test_the_command_line_starts_the_array_check_before_the_ledger_and_a_bad_ledger_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ids: List[str]
) -> None:
    fake = _bulk_fakes(tmp_path, monkeypatch, "11|PENDING|0|0|1|None\n12|PENDING|0|0|1|None\n")
    bad = tmp_path / "not-a-ledger"
    bad.write_bytes(b"not a database\n" * 100)
    code, out, err, _ = cli(["hold", *ids, "--timeout", "30", "--scontrol", str(fake), "--ledger", str(bad)])
    assert (code, out) == (1, "")
    assert "not-a-ledger" in err
    # The check was started before the ledger was opened (it is only a lookup); nothing ran.
    log = tmp_path / "bin" / "squeue.log"
    give_up = time.monotonic() + 20
    while not log.exists() and time.monotonic() < give_up:
        time.sleep(0.01)
    assert log.exists()
    assert calls_made(fake) == []
    assert bad.read_bytes() == b"not a database\n" * 100


def test_the_command_line_refuses_a_whole_array_its_early_check_finds_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _bulk_fakes(tmp_path, monkeypatch, "11|PENDING|0|0|1|None\n165|165|2|PENDING|0|0|1|None\n"
                       "166|165|1|PENDING|0|0|1|None\n")
    code, out, err, _ = cli(["hold", "11", "165", "--timeout", "30", "--scontrol", str(fake),
                             "--ledger", str(tmp_path / "l.sqlite3")])
    assert (code, out) == (2, "")
    assert "165" in err
    assert calls_made(fake) == []
    with open_ledger(tmp_path / "l.sqlite3") as ledger:
        assert ledger.history("11") == [] and ledger.history("165") == []
