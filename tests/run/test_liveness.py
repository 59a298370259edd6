"""A run is over only when it is known over (docs/contract.md §13.7): a lease past its expiry on the
ledger's clock still holds while its run is alive, and an unfinished operation of a live run is not
settled, whatever that clock says.  Real processes, a real SQLite ledger (and a MariaDB one, shared
with a run of "another host": a process in a UTS namespace of its own, its host name another); the
ledger's clock of the second run moved forward, as a step of the host's clock would (the live test
steps it for real: tests/integration/test_clocks_live.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import pytest

from slurm_dsl.core.model import Op, Result
from slurm_dsl.host import runs, world
from slurm_dsl.host.files import NotRead
from slurm_dsl.host.runs import Run, this_run
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.mariadb import MariaDbLedger
from slurm_dsl.ledger.sqlite import SqliteLedger
from slurm_dsl.run.driver import Ran
from slurm_dsl.run.keyed import run_settled
from slurm_dsl.run.tracked import Tracker
from tests.cli_run import COMMAND
from tests.fakes import calls_made, write_fake, write_fake_squeue
from tests.ledger_ops import acquire_lease

HOUR = 3600.0


def test_a_lease_past_its_expiry_holds_while_its_run_is_alive(tmp_path: Path) -> None:
    ledger_path = str(tmp_path / "ledger.sqlite3")
    fake = write_fake(tmp_path / "bin", {})
    gone = Run(this_run().host, this_run().boot, 999_999_999, this_run().start)
    with open_ledger(ledger_path) as ledger:
        long_ago = ledger.now() - HOUR
        assert acquire_lease(ledger, "1", f"op:other:1:2:abcd@{this_run()}", long_ago, 60.0)  # alive: this one
        assert acquire_lease(ledger, "2", f"op:other:1:2:abcd@{gone}", long_ago, 60.0)  # its run is gone
    with Tracker(ledger_path, scontrol=str(fake)) as t:
        held = t.run(Op.HOLD, "1", time.time() + 1)
        done = t.run(Op.HOLD, "2", time.time() + 5)
    assert held.result is Result.EXPIRED and "held the job until the deadline" in held.detail
    assert done.result is Result.OK
    assert calls_made(fake) == ["hold 2"]


def test_no_liveness_question_is_asked_under_the_ledgers_write_lock(tmp_path: Path) -> None:
    """Asking whether a lease's holder is alive may look through every process of the host; asked
    inside the transaction that takes the leases, it held the write lock every other writer waits
    for (a chaos run: writers starved for 30 s, a 4.6 s command took 34 s).  So an operation and a
    sweep ask before the transaction, and still honour the answers."""
    ledger_path = str(tmp_path / "ledger.sqlite3")
    fake = write_fake(tmp_path / "bin", {})
    gone = Run(this_run().host, this_run().boot, 999_999_999, this_run().start)
    alive_one = f"op:other:1:2:abcd@{this_run()}"
    unexpired = Run(this_run().host, this_run().boot, 999_999_998, this_run().start)
    asked_inside: List[bool] = []
    asked: List[Optional[str]] = []
    with open_ledger(ledger_path) as ledger:
        long_ago = ledger.now() - HOUR
        assert acquire_lease(ledger, "1", alive_one, long_ago, 60.0)
        assert acquire_lease(ledger, "2", f"op:other:1:2:abcd@{gone}", long_ago, 60.0)
        assert acquire_lease(ledger, "3", f"op:other:1:2:abcd@{unexpired}", ledger.now(), 60.0)
    with Tracker(ledger_path, scontrol=str(fake)) as t:
        opened = t.ledger()
        assert isinstance(opened, SqliteLedger)

        def alive(text: Optional[str]) -> Optional[bool]:
            asked_inside.append(opened._conn.in_transaction)
            asked.append(text)
            return None if text is None else text == str(this_run())  # the first holder's run is this one

        with world.bound(world.World(alive=alive)):
            held = t.run(Op.HOLD, "1", time.time() + 1)
            done = t.run(Op.HOLD, "2", time.time() + 5)
            kept = t.run(Op.HOLD, "3", time.time() + 0.5)
    assert held.result is Result.EXPIRED and "held the job until the deadline" in held.detail
    assert done.result is Result.OK
    assert kept.result is Result.EXPIRED  # an unexpired lease holds, whoever holds it
    assert asked_inside and not any(asked_inside), asked_inside
    assert str(unexpired) not in asked  # and nobody is asked whether its holder is alive


def test_a_look_through_the_process_table_has_one_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each /proc file is read within its own deadline, and the whole look within ``SCAN_TIMEOUT``:
    a host whose process files answer slowly makes the answer "cannot tell", not a wait of a
    deadline per process."""
    reads = []

    def slow(path: str, limit: int, timeout: float = 2.0, *, head: bool = False) -> NotRead:
        reads.append(path)
        time.sleep(0.2)
        return NotRead(path, "No such file or directory", True)  # gone: read whole, "no such run"

    monkeypatch.setattr(runs, "SCAN_TIMEOUT", 0.1)
    assert len([name for name in os.listdir("/proc") if name.isdigit()]) >= 2  # this test and its parent
    with world.bound(world.World(read_regular=slow)):
        assert runs._marked("no-such-run", 0) is None  # not False: the scan did not end
    assert len(reads) == 1, reads


@pytest.fixture
def clock_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's ledger clock an hour ahead: every lease and ends_by of another process lapsed."""
    real = SqliteLedger.now
    monkeypatch.setattr(SqliteLedger, "now", lambda self: real(self) + HOUR)


def at_call_2(tmp_path: Path, ledger: str, monkeypatch: pytest.MonkeyPatch,
              prefix: Sequence[str] = ()) -> Tuple[subprocess.Popen[bytes], Path, Path]:
    """A first run of key ``k`` (a requeue of job 7, run under ``prefix``), its call 2 on its way
    once this returns; and its fake scontrol and squeue."""
    fake = write_fake(tmp_path / "bin", {"requeue": "exec sleep 60"})
    squeue = write_fake_squeue(tmp_path / "sq", "7|RUNNING|0|0|4294901|None\n")
    monkeypatch.setenv("SLURM_DSL_SQUEUE", str(squeue))
    first = subprocess.Popen([*prefix, *COMMAND, "requeue", "7", "--key", "k", "--timeout", "50", "--ledger", ledger,
                              "--scontrol", str(fake), "--squeue", str(squeue)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while "requeue 7" not in calls_made(fake):
        if time.monotonic() > deadline or first.poll() is not None:
            first.kill()
            first.wait()
            pytest.fail("the first run never reached call 2")
        time.sleep(0.05)
    return first, fake, squeue


def test_a_second_run_of_a_key_does_not_act_while_the_first_is_on_its_way(
    tmp_path: Path, clock_ahead: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41 item 5: a forward step made the second run find the first's lease lapsed and its row
    no longer running; it settled it absent at once and requeued while the first run's call 2 was
    still on its way.  Now the first run is alive, so its operation is running: the second waits,
    and at its deadline runs nothing."""
    ledger_path = str(tmp_path / "ledger.sqlite3")
    first, fake, squeue = at_call_2(tmp_path, ledger_path, monkeypatch)
    try:
        with Tracker(ledger_path, scontrol=str(fake), squeue=str(squeue)) as t:
            rows = list(run_settled(t, Op.REQUEUE, ["7"], time.time() + 8, key="k", retry=1, settle_delay=2.0))
        assert [r.outcome.result for r in rows if isinstance(r, Ran)] == [Result.EXPIRED], rows  # nothing ran
        assert calls_made(fake).count("requeue 7") == 1, calls_made(fake)
        with open_ledger(ledger_path) as ledger:
            assert [h.settlement for h in ledger.history("7")] == [None], "the running operation was settled"
    finally:
        first.kill()
        first.wait()


def test_a_run_of_another_host_paused_mid_call_keeps_its_operation_running(
    tmp_path: Path, mariadb_location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41 item 5, across hosts: a host paused whole while the other host of a pair ran the key
    (its clock, or the ledger server's, past the lease).  The paused run's mark on the shared
    ledger (``lock_run``: the server keeps it while its connection is there) tells the other host it
    is not over: the second run acts on nothing."""
    # "Another host": the run's host name, in a UTS namespace of its own, is not this one's.
    another = ["unshare", "--uts", "sh", "-c", 'hostname another-host && exec "$@"', "sh"]
    first, fake, squeue = at_call_2(tmp_path, mariadb_location, monkeypatch, another)
    try:
        os.kill(first.pid, signal.SIGSTOP)  # the host paused whole: its run says nothing
        with open_ledger(mariadb_location) as ledger:
            (holder,) = ledger.lease_holders(["7"]).values()
            assert "@another-host/" in holder
        real = MariaDbLedger.now
        monkeypatch.setattr(MariaDbLedger, "now", lambda self: real(self) + HOUR)  # past every lease and ends_by
        with Tracker(mariadb_location, scontrol=str(fake), squeue=str(squeue)) as t:
            rows = list(run_settled(t, Op.REQUEUE, ["7"], time.time() + 8, key="k", retry=1, settle_delay=2.0))
        assert [r.outcome.result for r in rows if isinstance(r, Ran)] == [Result.EXPIRED], rows  # nothing ran
        assert calls_made(fake).count("requeue 7") == 1, calls_made(fake)
    finally:
        os.kill(first.pid, signal.SIGCONT)
        first.kill()
        first.wait()
