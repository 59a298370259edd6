"""Every operation that ran is reported, whatever the ledger does afterwards (docs/contract.md §9.2, §10).

The ledger is locked for real: another connection takes its write lock (as a stuck
process or an admin's sqlite3 or mariadb shell would) while a fake scontrol's call is
running, and the ledger's busy timeout is short (MariaDB's lock wait is whole seconds: 1).
Each test runs on both backends (``ledger_location``).  The fake's calls.log says which
scripts started.
"""

from __future__ import annotations

import json
import shlex
import threading
import time
from pathlib import Path
from typing import Any, List, Optional

import pytest

from slurm_dsl.core.model import LedgerError, NotRecorded, Op, Result
from slurm_dsl.ledger import base
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run.tracked import Tracker
from tests.cli_run import cli
from tests.fakes import calls_made, refuse, write_fake
from tests.ground import ALREADY_FINISHED
from tests.ledger_backends import Raw, store_class
from tests.ledger_ops import acquire_lease

BUSY = 0.3  # seconds a ledger write waits for the lock here (the default is 5)


@pytest.fixture(autouse=True)
def _short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "BUSY_TIMEOUT", BUSY)


@pytest.fixture
def ledger_path(ledger_location: str) -> str:
    """The ledger, once per backend."""
    return ledger_location


class Locker:
    """Holds the ledger's write lock from its own connection, from when ``trigger`` exists
    (or at once) until the block ends; creates ``locked`` once it holds it."""

    def __init__(self, path: str, flags: Path, *, at_once: bool = False) -> None:
        self.path = path
        self.trigger, self.locked = flags / "trigger", flags / "locked"
        if at_once:
            self.trigger.touch()
        self.error: Optional[BaseException] = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        try:
            while not self.trigger.exists():
                if self._done.wait(0.005):
                    return
            conn = Raw(self.path)
            try:
                conn.lock_writers()
                self.locked.touch()
                self._done.wait(60)
                conn.rollback()
            finally:
                conn.close()
        except BaseException as exc:
            self.error = exc

    def __enter__(self) -> Locker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(30)
        assert self.error is None, self.error


def lock_during(job: str, flags: Path, then: str = "exit 0") -> str:
    """sh code for a fake call: for ``job``, have the ledger locked before the call returns."""
    trigger, locked = shlex.quote(str(flags / "trigger")), shlex.quote(str(flags / "locked"))
    return (
        f'if [ "$JOB" = {job} ]; then touch {trigger}; n=0;'
        f" while [ ! -e {locked} ] && [ $n -lt 500 ]; do sleep 0.01; n=$((n + 1)); done; fi; {then}"
    )


def not_started(err: str) -> List[str]:
    last = err.splitlines()[-1]
    assert last.startswith("slurm-dsl: ledger error: "), err
    return last.split("; not started: ", 1)[1].split() if "; not started: " in last else []


# -- the command line ------------------------------------------------------------------------------


def test_hold_a_b_c_locked_during_b_prints_b_and_never_starts_c(
    tmp_path: Path, ledger_path: str
) -> None:
    then = "case $JOB in 6) " + refuse(ALREADY_FINISHED, suspend_line=True) + " ;; *) exit 0 ;; esac"
    fake = write_fake(tmp_path / "bin", {"hold": lock_during("6", tmp_path, then)})
    with Locker(ledger_path, tmp_path):
        code, out, err = cli(["--ledger", str(ledger_path), "hold", "5", "6", "7", "--one-by-one", "--timeout", "10",
                              "--scontrol", str(fake)])
    assert calls_made(fake) == ["hold 5", "hold 6"], "no script starts after the ledger failed"
    assert [line.split()[:3] for line in out.splitlines()] == [["5", "hold", "ok"], ["6", "hold", "rejected"]]
    assert code == 10, "the worst printed result (and at least 1)"
    assert not_started(err) == ["7"]
    assert all(line.startswith("slurm-dsl: ") for line in err.splitlines())
    assert "could not record hold 6: rejected" in err
    with open_ledger(ledger_path) as ledger:
        assert [h.result for h in ledger.history("5")] == [Result.OK]
        (unfinished,) = ledger.history("6")
        assert not unfinished.finished, "the intent is kept for the sweeper"
        assert ledger.history("7") == []


def test_json_rows_of_what_ran_and_exit_1_when_all_of_it_was_ok(
    tmp_path: Path, ledger_path: str
) -> None:
    fake = write_fake(tmp_path / "bin", {"hold": lock_during("6", tmp_path)})
    with Locker(ledger_path, tmp_path):
        code, out, err = cli(["hold", "5", "6", "7", "8", "--one-by-one", "--timeout", "10", "--json",
                              "--scontrol", str(fake),
                              "--ledger", str(ledger_path)])
    assert calls_made(fake) == ["hold 5", "hold 6"]
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["job_id"], r["result"]) for r in rows] == [("5", "ok"), ("6", "ok")]
    assert code == 1
    assert not_started(err) == ["7", "8"]


def test_parallel_every_job_whose_script_started_is_printed_once(
    tmp_path: Path, ledger_path: str
) -> None:
    jobs = [str(n) for n in range(101, 131)]
    fake = write_fake(tmp_path / "bin", {"hold": lock_during("110", tmp_path, "sleep 0.05; exit 0")})
    with Locker(ledger_path, tmp_path):
        code, out, err = cli(["hold", *jobs, "--one-by-one", "--timeout", "10", "--parallel", "4",
                              "--scontrol", str(fake),
                              "--ledger", str(ledger_path)])
    started = [line.split()[1] for line in calls_made(fake)]
    printed = [line.split()[0] for line in out.splitlines()]
    assert len(set(started)) == len(started)
    assert printed == [j for j in jobs if j in started], "each started job once, in the order given"
    assert "110" in printed and "130" not in started
    skipped = not_started(err)
    assert sorted(printed + skipped, key=int) == jobs, "every job is either printed or listed as not started"
    assert code >= 1


# -- the tracker ------------------------------------------------------------------------------------


def test_an_outcome_that_cannot_be_recorded_travels_with_the_error(
    tmp_path: Path, ledger_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake = write_fake(tmp_path / "bin", {"hold": lock_during("5", tmp_path)})
    with Tracker(str(ledger_path), scontrol=str(fake)) as t, Locker(ledger_path, tmp_path):
        with pytest.raises(NotRecorded) as info:
            t.run(Op.HOLD, "5", time.time() + 10)
    # The lease could not be given back either (same lock): that is logged, and masks nothing.
    assert isinstance(info.value, LedgerError)
    assert info.value.outcome.result is Result.OK
    assert (info.value.job_id, info.value.op) == ("5", "hold")
    assert "could not record hold 5: ok" in caplog.text
    assert "lease" in caplog.text


def test_a_lease_that_cannot_be_given_back_does_not_lose_the_outcome(
    tmp_path: Path, ledger_path: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def locked(*args: object, **kwargs: object) -> bool:
        raise LedgerError("database is locked", path=str(ledger_path))

    fake = write_fake(tmp_path / "bin", {})
    monkeypatch.setattr(store_class(ledger_path), "release_leases", locked)  # one job's too (tracked.record)
    with Tracker(str(ledger_path), scontrol=str(fake)) as t:
        with pytest.raises(NotRecorded) as raised:
            t.run(Op.HOLD, "5", time.time() + 10)
    # The result and the lease go back in one transaction, so neither was written; the
    # outcome travels with the error and the log says the lease lapses by itself.
    assert raised.value.outcome.result is Result.OK
    assert "could not record hold 5: ok" in caplog.text and "lapses by itself" in caplog.text
    monkeypatch.undo()
    with open_ledger(ledger_path) as ledger:
        assert [h.result for h in ledger.history("5")] == [None], "the intent stays, unfinished"


def test_a_ledger_failing_before_the_script_raises_its_own_error_and_runs_nothing(
    tmp_path: Path, ledger_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = write_fake(tmp_path / "bin", {})
    store = store_class(ledger_path)
    begin = store.begin_operations  # one job's too (tracked.start)

    def failing_begin(self: Any, *args: Any, **kwargs: Any) -> int:
        raise LedgerError("begin operation: disk I/O error", path=str(ledger_path))

    monkeypatch.setattr(store, "begin_operations", failing_begin)
    with Tracker(str(ledger_path), scontrol=str(fake)) as t:
        with pytest.raises(LedgerError, match="begin operation") as info:
            t.run(Op.HOLD, "5", time.time() + 10)
        assert not isinstance(info.value, NotRecorded), "nothing ran"
        assert calls_made(fake) == []
        monkeypatch.setattr(store, "begin_operations", begin)
        # The lease was taken in the intent's transaction, so it went with it: the next
        # operation on the job gets the job at once.
        ledger = t.ledger()
        assert acquire_lease(ledger, "5", "next", ledger.now(), 10.0)
        assert ledger.history("5") == []
