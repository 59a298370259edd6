"""The real runner against a fake scontrol first on PATH, for the faults real Slurm
cannot be made to show on demand.  Short real deadlines, no mocks of subprocess;
each test asserts the outcome and that no process was left behind."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

import pytest

from slurm_dsl import Op, Reason, RequeueBit, Result
from slurm_dsl.admin.doctor import run_checks
from slurm_dsl.core.model import Call, CallOutcome, LookupFailed, Outcome
from slurm_dsl.core.reader import read_outcome
from slurm_dsl.core.script import KILL_GRACE, render
from slurm_dsl.host import process
from slurm_dsl.host.process import run_argv, run_script
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups.squeue import SqueueLookup, slurm_version
from slurm_dsl.run.calls import GUARD_MARGIN, execute, run_list_call, run_open_list
from slurm_dsl.run.sweep import Done, sweep
from slurm_dsl.run.tracked import Tracker
from tests.fakes import alive_in_group, calls_made, refuse, write_fake, write_fake_squeue
from tests.ground import ALREADY_FINISHED, OTHER_NONCE
from tests.ledger_ops import begin_operation, finish_operation

T = TypeVar("T")


def soon(seconds: float = 1.0) -> float:
    return time.time() + seconds


def test_the_fake_on_path_is_the_one_run(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {"hold": refuse(ALREADY_FINISHED, suspend_line=True)})
    out = execute(Op.HOLD, "5", soon(5))
    assert out.result is Result.REJECTED
    assert calls_made(fake) == ["hold 5"]


@pytest.mark.parametrize("op", [Op.HOLD, Op.RELEASE, Op.RESTORE])
def test_a_call_hanging_past_the_deadline_is_unknown(bin_dir: Path, op: Op) -> None:
    write_fake(bin_dir, {}, default="sleep 30")
    out = execute(op, "5", soon())
    assert (out.result, out.reason) == (Result.UNKNOWN, Reason.TIMED_OUT)
    assert out.calls[0].status == 124


@pytest.fixture(params=["dash", "bash"])
def shell(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run wrapped scripts under this shell in place of /bin/sh."""
    path = shutil.which(request.param)
    assert path is not None, f"{request.param} is needed"
    monkeypatch.setattr(process, "SH", path)
    return str(request.param)


@pytest.mark.parametrize(("op", "plan", "printed"), [
    (Op.HOLD, {"hold": "trap '' TERM; sleep 30"}, ()),
    (Op.REQUEUE, {"requeue": "trap '' TERM; sleep 30"}, (0,)),
], ids=["hold", "requeue call 2"])
def test_a_call_ignoring_term_is_killed_after_the_grace_and_unknown(
    bin_dir: Path, shell: str, op: Op, plan: Dict[str, str], printed: Tuple[int, ...]
) -> None:
    # The script waits for the call; the runner KILLs the whole group KILL_GRACE after the
    # deadline, so the call's status line never comes: unknown, and a requeue's bit may be set.
    fake = write_fake(bin_dir, plan)
    out, took = timed(lambda: execute(op, "5", soon()))
    assert took < BOUND
    assert (out.result, out.reason, out.exit_status) == (Result.UNKNOWN, Reason.TIMED_OUT, 137)
    assert out.requeue_bit is (RequeueBit.MAY_BE_SET if op in (Op.REQUEUE, Op.REQUEUE_HOLD) else None)
    assert len(calls_made(fake)) == len(printed) + 1


def test_a_requeue_killed_mid_call_reads_unknown_from_its_output_alone(bin_dir: Path) -> None:
    # What the reader makes of a script the runner KILLed in call 2: call 1's line, exit 137.
    nonce = "ab" * 16
    fake = write_fake(bin_dir, {"requeue": "trap '' TERM; sleep 30"})
    done = run_script(render(Op.REQUEUE, "5", soon(), nonce, str(fake)), timeout=0.5)
    assert (done.timed_out, done.killed_by, done.returncode) == (True, signal.SIGKILL, 137)
    out = read_outcome(Op.REQUEUE, "5", done.stderr, done.returncode, nonce)
    assert out.reason in (Reason.WRONG_CALLS, Reason.EXIT_STATUS_MISMATCH)
    assert (out.result, out.requeue_bit) == (Result.UNKNOWN, RequeueBit.MAY_BE_SET)


def test_requeue_hanging_in_call_2_leaves_the_bit_set(bin_dir: Path, shell: str) -> None:
    # The runner's TERM at the deadline cuts call 2 short (124); call 3 is not started (75).
    # The script then exits by itself: back well before the KILL would be due.
    fake = write_fake(bin_dir, {"requeue": "exec sleep 30"})
    out, took = timed(lambda: execute(Op.REQUEUE, "5", soon()))
    assert took < 1.0 + KILL_GRACE
    assert [c.status for c in out.calls] == [0, 124, 75]
    assert (out.result, out.requeue_bit) == (Result.UNKNOWN, RequeueBit.SET)
    assert calls_made(fake) == ["update JobId=5 Requeue=1", "requeue 5"]


def test_a_passed_deadline_starts_nothing(bin_dir: Path, shell: str) -> None:
    fake = write_fake(bin_dir, {})
    for op in (Op.HOLD, Op.REQUEUE):
        out = execute(op, "5", time.time() - 1)
        assert [c.status for c in out.calls] == [75]
        assert out.result is Result.EXPIRED
        assert out.requeue_bit is (RequeueBit.CLEAR if op in (Op.REQUEUE, Op.REQUEUE_HOLD) else None)
    assert calls_made(fake) == []
    assert not (bin_dir / "calls.log").exists()


def test_a_deadline_in_the_shells_first_moments_is_never_a_bare_unknown(bin_dir: Path, shell: str) -> None:
    # The runner's TERM may land before the script's trap is set: the shell dies of it having
    # started nothing, and execute runs the expired script instead (75).  Or the trap is set and
    # the call is cut short (124).  Never an output with no status line.  (The fake ends by
    # itself well within the grace: a TERM that lands in its fork-to-exec window is lost, and
    # the call then runs on to its end, still 124; a hung one would wait for the KILL.)  On a
    # loaded machine the runner's TERM may come only after call 1 has ended (it started before
    # the deadline, which the script checks itself before each call): call 1 then counts, calls 2
    # and 3 are past the deadline and never start, and the flag is known set.
    write_fake(bin_dir, {}, default="sleep 0.2")
    seen = set()
    allowed: Dict[Tuple[Result, Tuple[Optional[int], ...]], RequeueBit] = {
        (Result.EXPIRED, (75,)): RequeueBit.CLEAR,
        (Result.UNKNOWN, (124, 75)): RequeueBit.MAY_BE_SET,
        (Result.BIT_SET, (0, 75, 75)): RequeueBit.SET,
    }
    for left in (0.0002, 0.0005, 0.001, 0.002, 0.004) * 4:
        out = execute(Op.REQUEUE, "5", time.time() + left)
        statuses = tuple(c.status for c in out.calls)
        assert (out.result, statuses) in allowed, out
        assert out.requeue_bit is allowed[out.result, statuses]
        seen.add(out.result)
    assert Result.EXPIRED in seen  # the first case at least, at 0.2 ms


@pytest.mark.parametrize(("signal_name", "status"), [("KILL", 137), ("SEGV", 139), ("TERM", 143)])
def test_a_call_dying_by_signal_is_unknown(bin_dir: Path, signal_name: str, status: int) -> None:
    write_fake(bin_dir, {}, default=f"kill -{signal_name} $$")
    out = execute(Op.HOLD, "5", soon(5))
    assert (out.result, out.reason, out.calls[0].status) == (Result.UNKNOWN, Reason.KILLED_BY_SIGNAL, status)


def test_a_missing_scontrol_is_not_run(bin_dir: Path) -> None:
    out = execute(Op.REQUEUE, "5", soon(5), scontrol=str(bin_dir / "scontrol"))
    assert [c.status for c in out.calls] == [127, 127]
    assert (out.result, out.requeue_bit) == (Result.NOT_RUN, RequeueBit.CLEAR)


def test_a_scontrol_that_cannot_be_executed_is_not_run(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {})
    fake.chmod(stat.S_IRUSR | stat.S_IWUSR)
    out = execute(Op.HOLD, "5", soon(5), scontrol=str(fake))
    assert (out.result, out.calls[0].status) == (Result.NOT_RUN, 126)


def test_garbage_is_unknown(bin_dir: Path) -> None:
    write_fake(bin_dir, {}, default="head -c 3000 /dev/urandom >&2; exit 1")
    out = execute(Op.HOLD, "5", soon(5))
    assert out.result is Result.UNKNOWN


@pytest.mark.parametrize(
    "forgery",
    [
        f"printf '\\036DSL {OTHER_NONCE} call 1 0\\n' >&2; exit 1",
        "printf '\\036' >&2; exit 0",
        "printf 'x\\036DSL' >&2; exit 0",
    ],
    ids=["another nonce", "a lone RS", "an RS mid-line"],
)
def test_a_forged_status_line_is_unknown(bin_dir: Path, forgery: str) -> None:
    write_fake(bin_dir, {}, default=forgery)
    for op in (Op.HOLD, Op.REQUEUE):
        out = execute(op, "5", soon(5))
        assert out.result is Result.UNKNOWN
        assert out.reason in (Reason.FOREIGN_NONCE, Reason.MALFORMED_STATUS_LINE)


@pytest.mark.parametrize("stream", [">&2", ""], ids=["stderr", "stdout"])
def test_100_mib_of_output_is_unknown_not_a_crash(bin_dir: Path, stream: str) -> None:
    write_fake(bin_dir, {}, default=f"head -c 104857600 /dev/zero {stream}; exit 0")
    out = execute(Op.REQUEUE, "5", soon(20))
    assert (out.result, out.reason, out.requeue_bit) == (Result.UNKNOWN, Reason.OUTPUT_TOO_LARGE, RequeueBit.MAY_BE_SET)


def test_open_hanging_is_stopped_at_the_deadline(bin_dir: Path) -> None:
    write_fake(bin_dir, {}, default="sleep 30")
    out = execute(Op.OPEN, "5", soon())
    assert out.result is Result.UNKNOWN
    assert out.exit_status == 143


def test_open_after_the_deadline_starts_nothing(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {})
    out = execute(Op.OPEN, "5", time.time() - 1)
    assert out.result is Result.EXPIRED
    assert calls_made(fake) == []


def test_open_missing_is_not_run(bin_dir: Path) -> None:
    out = execute(Op.OPEN, "5", soon(), scontrol=str(bin_dir / "nothing"))
    assert out.result is Result.NOT_RUN


def test_open_runs_release_directly(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {"release": refuse(ALREADY_FINISHED, suspend_line=True)})
    out = execute(Op.OPEN, "5", soon(5))
    assert out.result is Result.REJECTED
    assert calls_made(fake) == ["release 5"]


def test_stragglers_in_the_group_are_killed(bin_dir: Path) -> None:
    # The fake leaves a child behind holding stderr open; the runner kills it when the
    # script exits (the fixture checks that nothing under bin_dir is still alive).
    write_fake(bin_dir, {}, default="sleep 30 & exit 0")
    out = execute(Op.HOLD, "5", soon(10))
    assert out.result is Result.OK


def test_hostile_job_ids_start_no_process(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {})
    for bad in ("1;id", "$(id)", "12_3", "042", "\u0661\u0662", "4294967295", ""):
        with pytest.raises(ValueError):
            execute(Op.HOLD, bad, soon())
    assert calls_made(fake) == []


def test_run_argv_reports_a_missing_binary_as_127() -> None:
    assert run_argv(["/nonexistent/squeue"], timeout=1).returncode == 127


def test_run_argv_under_its_guards_keeps_the_programs_status_output_and_exec_errors(tmp_path: Path) -> None:
    # The program runs under a shell that starts the guards and execs it: its own status, signal
    # and output; a missing or non-executable one is 127 or 126 with the message exec gives.
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\necho out; echo err >&2; exit 3\n")
    assert run_argv([str(plain)], timeout=5).returncode == 126
    assert run_argv([str(plain)], timeout=5).stderr == f"{plain}: Permission denied\n".encode()
    assert run_argv(["/nonexistent/squeue"], timeout=1).stderr == b"/nonexistent/squeue: No such file or directory\n"
    plain.chmod(0o755)
    done = run_argv([str(plain), "$1", "'"], timeout=5)
    assert (done.returncode, done.stdout, done.stderr, done.killed_by) == (3, b"out\n", b"err\n", None)
    done = run_argv(["sh", "-c", 'printf "%s|" "$0" "$@"; kill -SEGV $$', "zero", "$2", ""], timeout=5)
    assert (done.stdout, done.returncode, done.killed_by) == (b"zero|$2||", 139, signal.SIGSEGV)


# --- a child that escapes: a daemon in a session of its own holding the pipes ---
#
# The fakes below start a sleeper that calls setsid (so no kill of the call's process
# group reaches it) and inherits stdout and stderr, then exit or hang.  The runner must
# stop reading at its own bound, not when the sleeper lets go (60 s), and say the output
# may be incomplete.  BOUND is a correctness bound, far below the sleeper's lifetime,
# not a speed claim.  Each sleeper's pid is written to a file and killed at teardown.

ESCAPED_LIFETIME = 60
BOUND = 15.0


class Escapes:
    """sh code that leaves a sleeper holding the caller's stdout and stderr, and its pids."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir()
        self.directory = directory

    def code(self, *, new_session: bool = True) -> str:
        """Start the sleeper and wait until it has written its pid (so it holds the pipes).

        ``new_session``: setsid (beyond our reach); else only a process group of its own
        in the call's session (setpgid), which the runner can still find and kill."""
        d = _sh_quote(str(self.directory))
        if new_session:
            start = "setsid sh -c 'echo $$ > \"$1\"; exec sleep {t}' sh \"$f\" &"
        else:
            start = (f"{_sh_quote(sys.executable)} -c 'import os, sys, time; os.setpgid(0, 0);"
                     " open(sys.argv[1], \"w\").write(str(os.getpid())); time.sleep({t})' \"$f\" &")
        return (f"f=$(mktemp {d}/pid.XXXXXX); " + start.format(t=ESCAPED_LIFETIME)
                + ' while [ ! -s "$f" ]; do sleep 0.01; done;')

    def pids(self) -> List[int]:
        return [int(p.read_text()) for p in sorted(self.directory.glob("pid.*")) if p.read_text().strip()]

    def alive(self) -> List[int]:
        return [pid for pid in self.pids() if _sleeping(pid)]


def _sh_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def _sleeping(pid: int) -> bool:
    """Whether ``pid`` is still one of our live sleepers (not a zombie, not a reused pid)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z" and str(ESCAPED_LIFETIME).encode() in cmd and (b"sleep" in cmd)


@pytest.fixture
def escapes(bin_dir: Path, tmp_path: Path) -> Iterator[Escapes]:
    """Torn down before ``bin_dir`` checks for leftovers: kills every sleeper the fakes left."""
    e = Escapes(tmp_path / "escaped")
    yield e
    for pid in e.alive():
        os.kill(pid, signal.SIGKILL)
    give_up = time.monotonic() + 5
    while e.alive() and time.monotonic() < give_up:
        time.sleep(0.01)
    assert e.alive() == [], "an escaped sleeper survived the test"


def timed(call: Callable[[], T]) -> Tuple[T, float]:
    start = time.monotonic()
    value = call()
    return value, time.monotonic() - start


@pytest.mark.parametrize("then", ["exit 0", "sleep 30"], ids=["exits", "hangs"])
@pytest.mark.parametrize("op", [Op.HOLD, Op.REQUEUE])
def test_an_escaped_daemon_does_not_keep_a_wrapped_op(escapes: Escapes, bin_dir: Path, op: Op, then: str) -> None:
    # "exits": the script prints every status line and exits 0, so the framing would read
    # ok; the daemon could still have written after we stopped reading: unknown all the same.
    # "hangs": the runner's TERM at the deadline stops it, so timed_out.
    write_fake(bin_dir, {}, default=f"{escapes.code()} {then}")
    out, took = timed(lambda: execute(op, "5", soon()))
    assert took < BOUND
    reason = Reason.OUTPUT_NOT_CLOSED if then == "exit 0" else Reason.TIMED_OUT
    assert (out.result, out.reason) == (Result.UNKNOWN, reason)
    assert out.requeue_bit is (RequeueBit.MAY_BE_SET if op in (Op.REQUEUE, Op.REQUEUE_HOLD) else None)
    assert len(escapes.alive()) == (3 if op in (Op.REQUEUE, Op.REQUEUE_HOLD) and then == "exit 0" else 1)


@pytest.mark.parametrize(
    ("then", "reason"),
    [("exit 0", Reason.OUTPUT_NOT_CLOSED), ("sleep 30", Reason.TIMED_OUT)],
    ids=["exits", "hangs"],
)
def test_an_escaped_daemon_does_not_keep_open(escapes: Escapes, bin_dir: Path, then: str, reason: Reason) -> None:
    write_fake(bin_dir, {}, default=f"{escapes.code()} {then}")
    out, took = timed(lambda: execute(Op.OPEN, "5", soon()))
    assert took < BOUND
    assert (out.result, out.reason) == (Result.UNKNOWN, reason)
    assert len(escapes.alive()) == 1


def test_run_argv_stops_reading_when_the_child_has_exited(escapes: Escapes, bin_dir: Path) -> None:
    # What the child printed just before it exited is still read; the result says a pipe
    # was still held, so a caller cannot take the output for complete.
    fake = write_fake(bin_dir, {}, default=f"{escapes.code()} echo last words; echo on stderr >&2; exit 3")
    done, took = timed(lambda: run_argv([str(fake), "ping"], timeout=30))
    assert took < BOUND
    assert (done.returncode, done.stdout, done.stderr) == (3, b"last words\n", b"on stderr\n")
    assert (done.pipes_held, done.timed_out) == (True, False)
    assert len(escapes.alive()) == 1


def test_run_argv_stops_reading_at_the_guard(escapes: Escapes, bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {}, default=f"{escapes.code()} echo started; sleep 30")
    done, took = timed(lambda: run_argv([str(fake), "ping"], timeout=1))
    assert took < BOUND
    assert (done.returncode, done.stdout) == (143, b"started\n")
    assert (done.pipes_held, done.timed_out) == (True, True)
    assert len(escapes.alive()) == 1


def test_a_holder_left_in_the_calls_session_is_killed(escapes: Escapes, bin_dir: Path) -> None:
    # A process group of its own (setpgid) misses the group kill but not the session:
    # it is killed, the pipes close, and the output is whole.
    write_fake(bin_dir, {}, default=f"{escapes.code(new_session=False)} exit 0")
    out, took = timed(lambda: execute(Op.HOLD, "5", soon(5)))
    assert took < BOUND
    assert out.result is Result.OK
    assert len(escapes.pids()) == 1 and escapes.alive() == []


def write_escaping_squeue(directory: Path, escapes: Escapes) -> Path:
    """A squeue that leaves a daemon, then answers as ``write_fake_squeue`` does (22.05;
    job 5 RUNNING at Requeue=1): an answer a sweep would act on, were it taken as whole."""
    answer = write_fake_squeue(directory / "answer", "5|RUNNING|1|0|1|None\n")
    path = directory / "squeue"
    path.write_text(f"#!/bin/sh\n{escapes.code()}\nexec {_sh_quote(str(answer))} \"$@\"\n")
    path.chmod(0o755)
    return path


def test_a_squeue_lookup_with_an_escaped_daemon_fails(escapes: Escapes, bin_dir: Path) -> None:
    lookup = SqueueLookup(squeue_path=str(write_escaping_squeue(bin_dir, escapes)))
    start = time.monotonic()
    with pytest.raises(LookupFailed, match="held open"):
        lookup.jobs(["5"])
    assert time.monotonic() - start < BOUND
    assert len(escapes.alive()) == 1


def test_slurm_version_with_an_escaped_daemon_fails(escapes: Escapes, bin_dir: Path) -> None:
    squeue = str(write_escaping_squeue(bin_dir, escapes))
    start = time.monotonic()
    with pytest.raises(LookupFailed, match="held open"):
        slurm_version(squeue)
    assert time.monotonic() - start < BOUND
    assert len(escapes.alive()) == 1


def test_doctor_with_an_escaped_daemon_fails_its_checks(escapes: Escapes, bin_dir: Path, tmp_path: Path) -> None:
    fake = write_fake(bin_dir, {}, default=f"{escapes.code()} echo 'Slurmctld(primary) at vm is UP'")
    squeue = write_escaping_squeue(tmp_path / "sq", escapes)
    checks, took = timed(lambda: run_checks(str(fake), str(squeue), str(tmp_path / "ledger.sqlite3")))
    assert took < BOUND
    status = {c.name: c.status for c in checks}
    assert (status["slurmctld"], status["slurm"]) == ("fail", "fail")
    assert "held open" in next(c.detail for c in checks if c.name == "slurmctld")
    assert escapes.alive()


def test_a_sweep_whose_squeue_escapes_changes_nothing(escapes: Escapes, bin_dir: Path, tmp_path: Path) -> None:
    # The answer squeue printed says job 5 shows Requeue=1: a sweep taking it would
    # restore; the output may be incomplete, so the lookup failed and nothing ran.
    fake = write_fake(bin_dir, {})
    path = str(tmp_path / "ledger.sqlite3")
    with open_ledger(path) as ledger:
        op_id = begin_operation(ledger, "5", Op.REQUEUE, "0" * 32, time.time())
        finish_operation(ledger, op_id, Outcome(Op.REQUEUE, "5", Result.UNKNOWN, RequeueBit.MAY_BE_SET), b"",
                                time.time())
    lookup = SqueueLookup(squeue_path=str(write_escaping_squeue(tmp_path / "sq", escapes)))
    with Tracker(path, scontrol=str(fake)) as tracker:
        report, took = timed(lambda: sweep(tracker, lookup))
    assert took < BOUND
    assert report.lookup_error is not None and "held open" in report.lookup_error
    assert [s.done for s in report.swept] == [Done.LOOKUP_FAILED]
    assert calls_made(fake) == []
    with open_ledger(path) as ledger:
        assert ledger.get("5").bit is RequeueBit.MAY_BE_SET  # type: ignore[union-attr]
    assert len(escapes.alive()) == 1


# --- a wrapper's own 75, 126 or 127 (docs/contract.md §4) ---

# Each call of each op as the fake's key for it: (op, call number, key); open's is release's argv.
EACH_CALL = [(Op.HOLD, 1, "hold"), (Op.RELEASE, 1, "release"), (Op.RESTORE, 1, "clear"), (Op.OPEN, 1, "release"),
             (Op.REQUEUE, 1, "set"), (Op.REQUEUE, 2, "requeue"), (Op.REQUEUE, 3, "clear")]


@pytest.mark.parametrize("own", [75, 126, 127])
@pytest.mark.parametrize(("op", "number", "key"), EACH_CALL, ids=lambda v: str(v))
def test_a_wrapper_exiting_75_126_or_127_itself_is_unknown(bin_dir: Path, op: Op, number: int, key: str,
                                                           own: int) -> None:
    # A site wrapper behind --scontrol that ran and exited so (its own command missing or timed
    # out) may have acted: 125, unknown (wrapper_failed), never expired or not_run.
    fake = write_fake(bin_dir, {key: f"exit {own}"})
    out = execute(op, "5", soon(5))
    assert [c.status for c in out.calls if c.number == number] == [125]
    assert out.result is Result.UNKNOWN
    assert out.reason is (Reason.CLEAR_FAILED if number == 3 else Reason.WRAPPER_FAILED)
    if op is Op.OPEN:
        assert f"exited {own} itself" in out.detail
    # Started, every one: a requeue's call 3 still runs after a call 1 that is not 0 (docs/contract.md §2).
    assert len(calls_made(fake)) == ({1: 2, 2: 3, 3: 3}[number] if op in (Op.REQUEUE, Op.REQUEUE_HOLD) else 1)


@pytest.mark.parametrize("op", [Op.HOLD, Op.OPEN], ids=str)
def test_a_directory_in_place_of_scontrol_is_not_run(bin_dir: Path, op: Op) -> None:
    (bin_dir / "scontrol").mkdir()
    out = execute(op, "5", soon(5), scontrol=str(bin_dir / "scontrol"))
    assert (out.result, out.calls[0].status) == (Result.NOT_RUN, 126)


def test_open_that_cannot_be_executed_is_not_run(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {})
    fake.chmod(stat.S_IRUSR | stat.S_IWUSR)
    out = execute(Op.OPEN, "5", soon(5), scontrol=str(fake))
    assert (out.result, out.calls[0].status) == (Result.NOT_RUN, 126)
    assert run_argv([str(fake)], timeout=1).started is False


LIST_CALLS = [(Op.HOLD, 1), (Op.RELEASE, 1), (Op.RESTORE, 1), (Op.REQUEUE, 1), (Op.REQUEUE, 2), (Op.REQUEUE, 3),
              (Op.OPEN, 1)]


def list_call(op: Op, number: int, scontrol: Path) -> Dict[str, Call]:
    """One list call of the bulk path on jobs 5 and 6 (open's: its direct call)."""
    if op is Op.OPEN:
        return run_open_list(["5", "6"], soon(5), str(scontrol))
    return run_list_call(op, number, ["5", "6"], soon(5), str(scontrol))


@pytest.mark.parametrize("own", [75, 126, 127])
@pytest.mark.parametrize(("op", "number"), LIST_CALLS, ids=lambda v: str(v))
def test_a_list_call_whose_wrapper_exits_75_126_or_127_itself_is_unknown(bin_dir: Path, op: Op, number: int,
                                                                         own: int) -> None:
    fake = write_fake(bin_dir, {}, default=f"exit {own}")
    calls = list_call(op, number, fake)
    assert {(c.status, c.outcome, c.reason) for c in calls.values()} == {
        (125, CallOutcome.UNKNOWN, Reason.WRAPPER_FAILED)
    }
    assert len(calls_made(fake)) == 1


@pytest.mark.parametrize("kind", ["missing", "not executable"])
@pytest.mark.parametrize(("op", "number"), LIST_CALLS, ids=lambda v: str(v))
def test_a_list_call_that_cannot_start_is_not_run(bin_dir: Path, op: Op, number: int, kind: str) -> None:
    path = bin_dir / "scontrol"
    if kind == "not executable":
        write_fake(bin_dir, {}).chmod(stat.S_IRUSR | stat.S_IWUSR)
    calls = list_call(op, number, path)
    assert {(c.status, c.outcome) for c in calls.values()} == {
        (127 if kind == "missing" else 126, CallOutcome.NOT_RUN)
    }
    assert calls_made(path) == []


def test_an_open_list_stopped_at_the_deadline_keeps_only_its_printed_lines(bin_dir: Path) -> None:
    # The guard's TERM ends the direct call (143): 5's printed refusal stands (lines are never
    # torn), 6 got no line and may or may not have been released: unknown.
    write_fake(bin_dir, {}, default=f"printf '%s for job 5\\n' {ALREADY_FINISHED!r} >&2; exec sleep 30")
    calls = run_open_list(["5", "6"], soon(0.5), str(bin_dir / "scontrol"))
    assert (calls["5"].outcome, calls["5"].message) == (CallOutcome.REJECTED, ALREADY_FINISHED)
    assert (calls["6"].outcome, calls["6"].reason, calls["6"].status) == (
        CallOutcome.UNKNOWN, Reason.KILLED_BY_SIGNAL, 143)


# --- the runner dies or freezes: its scripts and their calls die too (issue 16) ---
#
# The runner runs in a child python (``_RUNNER``) so that it can be killed or stopped for real;
# the fake call execs ``hang`` (sleep, under a name in bin_dir, so its command line is found).
# The bounds are the issue's: gone within 2 s of the runner's death; a frozen runner's calls gone
# by the backstop, within what the leases allow for (GUARD_MARGIN), with 2 s for a loaded host.

_RUNNER = """
import sys, time
from slurm_dsl.run.calls import execute
from slurm_dsl.host import process
from slurm_dsl.run.tracked import Tracker
process.SH = sys.argv[1]
deadline = time.time() + float(sys.argv[3])
if sys.argv[5] == "tracked":  # through the ledger, its leases outlasting the run by nothing more
    out = Tracker(scontrol=sys.argv[4], lease_slack=0.0).run(sys.argv[2], "5", deadline)
else:
    out = execute(sys.argv[2], "5", deadline, scontrol=sys.argv[4])
print(out.result.value, out.reason.value if out.reason else "-", flush=True)
"""
HANG = 300


def _hanging_runner(
    bin_dir: Path, shell: str, op: str, timeout: float, how: str = "untracked"
) -> Tuple[subprocess.Popen[str], int]:
    """The child runner, once its call hangs; and the hung call's pid."""
    hang = bin_dir / "hang"
    hang.symlink_to(shutil.which("sleep") or "/bin/sleep")
    fake = write_fake(bin_dir, {}, default=f"exec {hang} {HANG}")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, "-c", _RUNNER, shell, op, str(timeout), str(fake), how],
                             stdout=subprocess.PIPE, text=True, env=env)
    give_up = time.monotonic() + 10
    while (pid := alive_in_group(str(hang))) is None:
        assert child.poll() is None and time.monotonic() < give_up, "the call never started"
        time.sleep(0.01)
    return child, pid


def _gone_within(marker: str, seconds: float) -> float:
    """Seconds until no process matching ``marker`` is left; fails (killing them) after ``seconds``."""
    start = time.monotonic()
    while alive_in_group(marker) is not None:
        if time.monotonic() - start > seconds:
            while (pid := alive_in_group(marker)) is not None:
                os.kill(pid, signal.SIGKILL)
            pytest.fail(f"a call outlived its runner by over {seconds} s")
        time.sleep(0.01)
    return time.monotonic() - start


@pytest.mark.parametrize("op", ["hold", "requeue", "open"])
def test_a_killed_runner_takes_its_hung_call_with_it(bin_dir: Path, shell: str, op: str) -> None:
    # The lifeline: the kernel closes the runner's end of the pipe as it dies, the guard reads EOF
    # and KILLs the script's group, the call with it.  ``open`` runs its call through the same guard.
    child, _ = _hanging_runner(bin_dir, shell, op, 60)
    child.kill()
    child.wait()
    # Everything of the run, not only the hung call: the guard KILLs the whole group, and a
    # member (a guard's subshell, whose command line names the fake) may take a moment to go.
    assert _gone_within(str(bin_dir), 2.0) < 2.0


@pytest.mark.parametrize("op", ["hold", "open"])
def test_a_frozen_runner_s_hung_call_dies_at_the_backstop(bin_dir: Path, shell: str, op: str) -> None:
    # A stopped runner sends no TERM at the deadline: the backstop KILLs the group by itself,
    # and the runner, once it goes on, reads what is left as unknown, never as done.
    # The bound is the leases' rule: every call gone by the deadline + KILL_GRACE + GUARD_MARGIN.
    timeout = 0.5
    bound = timeout + KILL_GRACE + GUARD_MARGIN + 2.0
    child, _ = _hanging_runner(bin_dir, shell, op, timeout)
    child.send_signal(signal.SIGSTOP)
    try:
        took = _gone_within(str(bin_dir / "hang"), bound)
    finally:
        child.send_signal(signal.SIGCONT)
    assert took < bound
    out, _ = child.communicate(timeout=10)
    assert out.split()[0] == "unknown"


def test_a_lease_never_lapses_while_a_call_of_it_may_run(bin_dir: Path, shell: str) -> None:
    # A tracked requeue hangs in call 1 and its runner is frozen, with no lease slack at all: for
    # as long as the call lives the job stays leased (a sweep cannot take it); the backstop ends
    # the call before the lease lapses.  Then the sweep may have it: its intent is may_be_set.
    child, _ = _hanging_runner(bin_dir, shell, "requeue", 0.5, "tracked")
    child.send_signal(signal.SIGSTOP)
    marker = str(bin_dir / "hang")
    give_up = time.monotonic() + 0.5 + KILL_GRACE + GUARD_MARGIN + 2.0
    try:
        with open_ledger(os.environ["SLURM_DSL_LEDGER"]) as ledger:
            while alive_in_group(marker) is not None and time.monotonic() < give_up:
                assert [o.job_id for o in ledger.due_objects(ledger.now())] == [], "a lease lapsed while its call ran"
                time.sleep(0.05)
            _gone_within(marker, 0.0)
            obj = ledger.get("5")
            assert obj is not None and obj.bit is RequeueBit.MAY_BE_SET
    finally:
        while (pid := alive_in_group(marker)) is not None:
            os.kill(pid, signal.SIGKILL)
        child.send_signal(signal.SIGCONT)
    out, _ = child.communicate(timeout=10)
    assert out.split()[0] == "unknown"
