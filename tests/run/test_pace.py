"""run.pace: at most ``rate`` calls a second over a run, a burst's worth at once, the deadline ruling
(docs/contract.md §10.5); a simulated clock and sleep (the world's edges), so no test waits."""

from __future__ import annotations

from typing import List

import pytest

from slurm_dsl.core.model import InvalidInput, Op
from slurm_dsl.host import world
from slurm_dsl.run.pace import BURST, Pace, calls_of, rate_of


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0
        self.slept: List[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_unpaced_never_waits(clock: Clock) -> None:
    pace = Pace(None, clock)
    with world.bound(world.World(sleep=clock.sleep)):
        assert all(pace.take(1000, clock.t) for _ in range(100))
    assert clock.slept == [] and pace.chunk(3) is None


@pytest.mark.parametrize("rate, size", [(10.0, 1), (100.0, 7), (250.0, 50)])
def test_over_a_long_run_the_rate_holds_and_a_burst_at_most_goes_at_once(clock: Clock, rate: float, size: int) -> None:
    pace = Pace(rate, clock)
    start, calls = clock.t, 0
    with world.bound(world.World(sleep=clock.sleep)):
        while calls < rate * 60:
            assert pace.take(size, clock.t + 3600)
            calls += size
            # Never more calls started by now than the rate allows since the start, plus a burst and one slot.
            assert calls <= rate * (clock.t - start) + rate * BURST + size + 1e-6
    assert clock.t - start >= calls / rate - BURST - size / rate - 1e-6  # a minute's calls took about a minute


def test_a_slot_after_the_deadline_is_not_taken_and_returns_at_the_deadline(clock: Clock) -> None:
    pace = Pace(10.0, clock)
    with world.bound(world.World(sleep=clock.sleep)):
        assert pace.take(30, clock.t + 100)  # 3 s worth: the next slot starts 2 s on
        deadline = clock.t + 1.0
        assert pace.take(1, deadline) is False
        assert clock.t == deadline  # waited until the deadline, no longer
        assert pace.take(1, clock.t + 100)  # the refused slot was not reserved: the next is at 2 s
    assert clock.t == pytest.approx(1000.0 + 2.0)


def test_threads_share_one_rate(clock: Clock) -> None:
    pace = Pace(5.0, clock)
    with world.bound(world.World(sleep=clock.sleep)):
        for _ in range(20):
            pace.take(1, clock.t + 100)
    assert clock.t - 1000.0 == pytest.approx(20 / 5.0 - BURST - 1 / 5.0)


def test_a_chunk_is_a_bursts_worth_of_its_calls() -> None:
    assert Pace(300.0).chunk(calls_of(Op.REQUEUE)) == 100 and Pace(300.0).chunk(calls_of(Op.HOLD)) == 300
    assert Pace(1.0).chunk(3) == 1


@pytest.mark.parametrize("text, rate", [("0", None), ("1", 1.0), ("250", 250.0), ("1000000", 1e6)])
def test_a_rate_is_zero_or_calls_a_second(text: str, rate: object) -> None:
    assert rate_of(text) == rate


@pytest.mark.parametrize("text", ["0.5", "-1", "1e7", "nan", "", "fast", "١٠"])
def test_a_bad_rate_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        rate_of(text)


def test_a_paced_bulk_run_chunks_by_the_rate_and_expires_what_could_not_start_in_time(tmp_path: object) -> None:
    # Real time, a fake scontrol: at 1 call a second, each chunk is one id (a burst's worth) and
    # the 8th job's slot is 6 s after the start at the earliest, past the 4.5 s deadline.
    import json
    from pathlib import Path

    from tests.cli_run import cli
    from tests.fakes import calls_made, write_fake, write_fake_squeue

    base = Path(str(tmp_path))
    # A paced chunk comes later than the lookup's answer stands for a ping: the fake answers one.
    fake = write_fake(base / "bin", {}, default="case $1 in ping) echo 'Slurmctld(primary) at vm is UP' ;; esac")
    ids = [str(n) for n in range(11, 19)]
    write_fake_squeue(fake.parent, "".join(f"{j}|PENDING|0|0|4294901|BeginTime\n" for j in ids))
    code, out, err = cli(["hold", *ids, "--rate", "1", "--timeout", "4.5", "--json", "--ledger",
                          str(base / "db" / "ledger.sqlite3"), "--scontrol", str(fake), "--squeue",
                          str(fake.parent / "squeue")])
    rows = {r["job_id"]: r["result"] for r in map(json.loads, out.splitlines())}
    holds = [c for c in calls_made(fake) if c.startswith("hold")]
    assert all(len(c.split()[1].split(",")) == 1 for c in holds), holds  # one id a chunk
    assert 2 <= len(holds) < len(ids) and rows["18"] == "expired", (holds, rows, err)
    assert {j for j, r in rows.items() if r == "ok"} == {c.split()[1] for c in holds}
    assert {r for j, r in rows.items() if f"hold {j}" not in holds} == {"expired"} and code == 12, (rows, holds, err)
