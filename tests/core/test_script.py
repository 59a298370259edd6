"""The rendered scripts: golden files, syntax under dash and bash, and real runs of
render -> sh -> fake scontrol -> read under both shells, with the runner as the
deadline's clock (its TERM at the deadline, its KILL after the grace)."""

from __future__ import annotations

import difflib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_dsl import InvalidInput, Op, Reason, RequeueBit, Result
from slurm_dsl.core.bulk_reader import read_list_output
from slurm_dsl.core.model import CallOutcome
from slurm_dsl.core.reader import read_outcome
from slurm_dsl.core.script import (
    CALLS,
    KILL_GRACE,
    MAX_ARG_BYTES,
    PROBE_STATUS,
    PROBE_STDERR,
    list_argv,
    render,
    render_list,
    render_probe,
)
from slurm_dsl.host import process
from slurm_dsl.host.process import Completed, fixed_env
from tests.examples import examples
from tests.fakes import calls_made, refuse, write_fake
from tests.ground import (
    ALREADY_FINISHED,
    DISABLED,
    INVALID_JOB_ID,
    INVALID_USER_ID,
    NONCE,
    PENDING_EXECUTION,
    UNEXPECTED,
)

GOLDEN = Path(__file__).parents[1] / "golden"
WRAPPED = [o for o in Op if o.wrapped]
SHELLS = [s for s in ("dash", "bash") if shutil.which(s)]
GOLDEN_ARGS: Dict[str, Any] = dict(job_id="4242", deadline=1767225600.5, nonce=NONCE, scontrol="/usr/bin/scontrol")
# One golden per op and call of a list script, on three ids (docs/contract.md §11).
GOLDEN_LIST_IDS = ("4242", "4243", "4244")
GOLDEN_LIST_ARGS: Dict[str, Any] = dict(deadline=1767225600.5, nonce=NONCE, scontrol="/usr/bin/scontrol")
LIST_CALLS = [(op, number) for op in WRAPPED for number, _ in CALLS[op]]


def list_golden(op: Op, number: int) -> Path:
    return GOLDEN / f"list-{op.value}-{number}.sh"


def render_golden_list(op: Op, number: int) -> str:
    return render_list(op, number, GOLDEN_LIST_IDS, **GOLDEN_LIST_ARGS)


def test_both_shells_are_present() -> None:
    assert SHELLS == ["dash", "bash"], "dash and bash are needed (apt-get install dash bash)"


@pytest.mark.parametrize("op", WRAPPED, ids=str)
def test_golden_scripts(op: Op) -> None:
    got = render(op, **GOLDEN_ARGS)
    path = GOLDEN / f"{op.value}.sh"
    want = path.read_text()
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(path), "rendered"))
        pytest.fail(f"{path} differs from the rendered script; review, then update it by hand "
                    f"(python -m tests.update_golden):\n{diff}")


@pytest.mark.parametrize(("op", "number"), LIST_CALLS, ids=lambda v: str(v))
def test_golden_list_scripts(op: Op, number: int) -> None:
    got = render_golden_list(op, number)
    path = list_golden(op, number)
    want = path.read_text()
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(path), "rendered"))
        pytest.fail(f"{path} differs from the rendered script; review, then update it by hand "
                    f"(python -m tests.update_golden):\n{diff}")


def test_every_golden_file_is_rendered() -> None:
    # A golden file left behind by a renamed op or call would keep passing shellcheck unseen.
    want = {f"{op.value}.sh" for op in WRAPPED} | {list_golden(op, n).name for op, n in LIST_CALLS}
    assert {p.name for p in GOLDEN.glob("*.sh")} == want


def every_script() -> List[str]:
    return ([render(op, **GOLDEN_ARGS) for op in WRAPPED] + [render(op, **GOLDEN_ARGS, expired=True) for op in WRAPPED]
            + [render_golden_list(op, n) for op, n in LIST_CALLS] + [render_probe()])


@pytest.mark.parametrize("shell", SHELLS)
def test_scripts_parse(shell: str) -> None:
    for script in every_script():
        result = subprocess.run([shell, "-n"], input=script.encode(), capture_output=True)
        assert result.returncode == 0, result.stderr


def test_the_trap_is_the_first_command_and_expired_only_sets_the_flag() -> None:
    # Nothing runs before the trap; an expired script differs only in the flag's start value.
    for op in WRAPPED:
        script = render(op, **GOLDEN_ARGS)
        commands = [line for line in script.splitlines() if line and not line.startswith("#")]
        assert commands[0] == "stopped=0; trap 'stopped=1' TERM"
        expired = render(op, **GOLDEN_ARGS, expired=True)
        changed = [(a, b) for a, b in zip(script.splitlines(), expired.splitlines()) if a != b]
        assert [b for _, b in changed if not b.startswith("#")] == ["stopped=1; trap 'stopped=1' TERM"]
    with pytest.raises(InvalidInput):
        render(Op.HOLD, **GOLDEN_ARGS, expired=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "path", ["/opt/slurm bin/scontrol", "/tmp/it's/scontrol", "/x/$(id)/`id`/scontrol", "/a/b;c|d&e/scontrol"]
)
def test_hostile_scontrol_paths_stay_quoted(path: str) -> None:
    script = render(Op.HOLD, "1", 2e9, NONCE, path)
    (assignment,) = [line for line in script.split("\n") if line.startswith("nonce=")]
    assert " scontrol='" in assignment
    done = subprocess.run(["dash", "-c", assignment + '\nprintf %s "$scontrol"'], capture_output=True)
    assert done.stdout.decode() == path


@pytest.mark.parametrize("bad", ["1;id", "$(id)", "12_3", "042", ""])
def test_render_refuses_bad_job_ids(bad: str) -> None:
    with pytest.raises(ValueError):
        render(Op.HOLD, bad, 2e9, NONCE, "/usr/bin/scontrol")


@pytest.mark.parametrize(
    ("nonce", "scontrol"), [("abc", "/usr/bin/scontrol"), (NONCE.upper(), "/usr/bin/scontrol"),
                            (NONCE + "'", "/usr/bin/scontrol"), (NONCE, "scontrol"), (NONCE, "/a\nb")]
)
def test_render_refuses_bad_nonce_or_path(nonce: str, scontrol: str) -> None:
    with pytest.raises(ValueError):
        render(Op.HOLD, "1", 2e9, nonce, scontrol)


def test_render_refuses_open() -> None:
    with pytest.raises(ValueError):
        render(Op.OPEN, "1", 2e9, NONCE, "/usr/bin/scontrol")


def run_under(shell: str, script: str, timeout: float = 10) -> Tuple[bytes, int]:
    """The script on ``shell`` with no deadline at all (no TERM ever comes)."""
    done = subprocess.run([shell, "-s"], input=script.encode(), capture_output=True, env=fixed_env(), timeout=timeout)
    return done.stderr, done.returncode


def run_to_deadline(
    shell: str, script: str, left: float, monkeypatch: pytest.MonkeyPatch
) -> Tuple[Completed, float]:
    """The script through the runner on ``shell`` (in place of /bin/sh): TERM at ``left``
    seconds, KILL ``KILL_GRACE`` later.  Also how long it took."""
    path = shutil.which(shell)
    assert path is not None
    monkeypatch.setattr(process, "SH", path)
    start = time.monotonic()
    done = process.run_script(script, timeout=left)
    return done, time.monotonic() - start


# The behaviours a scripted fake can give one call, with the call outcome the fake intends.
BEHAVIOURS: Dict[str, Tuple[str, str]] = {
    "ok": ("exit 0", "success"),
    "finished": (refuse(ALREADY_FINISHED), "rejected"),
    "finished+suspend": (refuse(ALREADY_FINISHED, suspend_line=True), "rejected"),
    "not found": (refuse(INVALID_JOB_ID), "not_found"),
    "not found+suspend": (refuse(INVALID_JOB_ID, suspend_line=True), "not_found"),
    "non-owner": (refuse(INVALID_USER_ID), "rejected"),
    "disabled": (refuse(DISABLED), "rejected"),
    "pending": (refuse(PENDING_EXECUTION), "rejected"),
    "down": (refuse(UNEXPECTED), "unknown"),
    "garbage": ("echo 'scontrol: error: something odd' >&2; exit 1", "unknown"),
    "segv": ("kill -SEGV $$", "unknown"),
    "exit 2 silent": ("exit 2", "unknown"),
    # A started call's own "not started" statuses (a site wrapper's): only the script may say that (125).
    "exit 75": ("exit 75", "unknown"),
    "exit 126": ("exit 126", "unknown"),
    "exit 127": ("exit 127", "unknown"),
}
ALLOWED_MESSAGES = {
    ("hold", 1): {"finished", "finished+suspend", "not found", "not found+suspend", "non-owner"},
    ("release", 1): {"finished", "finished+suspend", "not found", "not found+suspend", "non-owner"},
    ("restore", 1): {"finished", "not found", "non-owner"},
    ("requeue", 1): {"finished", "not found", "non-owner"},
    ("requeue", 2): {"not found", "disabled", "pending"},
    ("requeue", 3): {"finished", "not found", "non-owner"},
}
KEY_OF_CALL = {("hold", 1): "hold", ("release", 1): "release", ("restore", 1): "clear", ("requeue", 1): "set",
               ("requeue", 2): "requeue", ("requeue", 3): "clear"}


def intended(op: str, number: int, behaviour: str) -> str:
    kind = BEHAVIOURS[behaviour][1]
    if kind in ("rejected", "not_found") and behaviour not in ALLOWED_MESSAGES[(op, number)]:
        return "unknown"
    return kind


def expected_result(op: str, plan: Dict[int, str]) -> Tuple[str, Optional[str]]:
    k1 = intended(op, 1, plan[1])
    if op not in ("requeue", "requeuehold"):
        if op == "restore" and plan[1] == "not found" and k1 != "unknown":
            return "ok", None  # the job is gone, and its flag with it
        return {"success": "ok"}.get(k1, k1), None
    k3 = intended(op, 3, plan[3])
    cleared = k3 == "success" or (plan[3] == "not found" and k3 != "unknown")
    if k1 != "success":
        bit = "may_be_set" if k1 == "unknown" or not cleared else "clear"
        return k1, bit
    k2 = intended(op, 2, plan[2])
    if cleared:
        return {"success": "ok"}.get(k2, k2), "clear"
    if plan[3] == "finished" and k3 != "unknown":
        return {"success": "ok"}.get(k2, k2), "may_be_set"  # a finished job may still show Requeue=1
    return "unknown", "may_be_set"  # the fake's s3 always runs


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    op=st.sampled_from(["hold", "release", "restore", "requeue"]),
    b1=st.sampled_from(sorted(BEHAVIOURS)),
    b2=st.sampled_from(sorted(BEHAVIOURS)),
    b3=st.sampled_from(sorted(BEHAVIOURS)),
    shell=st.sampled_from(["dash", "bash"]),
)
def test_render_run_read_gives_the_intended_outcome(
    tmp_path_factory: pytest.TempPathFactory, op: str, b1: str, b2: str, b3: str, shell: str
) -> None:
    plan = {1: b1, 2: b2, 3: b3}
    fake_plan = {KEY_OF_CALL[(op, n)]: BEHAVIOURS[b][0] for n, b in plan.items() if (op, n) in KEY_OF_CALL}
    fake = write_fake(tmp_path_factory.mktemp("fake"), fake_plan, default="exit 99")
    script = render(Op(op), "4242", time.time() + 20, NONCE, str(fake))
    stderr, status = run_under(shell, script)
    out = read_outcome(op, "4242", stderr, status, NONCE)
    assert (out.result.value, out.requeue_bit.value if out.requeue_bit else None) == expected_result(op, plan)


@pytest.mark.parametrize("shell", SHELLS)
def test_requeue_skips_call_2_after_a_failed_set(shell: str, tmp_path: Path) -> None:
    fake = write_fake(tmp_path, {"set": refuse(ALREADY_FINISHED)})
    stderr, status = run_under(shell, render(Op.REQUEUE, "9", time.time() + 20, NONCE, str(fake)))
    assert (tmp_path / "calls.log").read_text().splitlines() == ["update JobId=9 Requeue=1", "update JobId=9 Requeue=0"]
    assert status == 0
    assert read_outcome("requeue", "9", stderr, status, NONCE).result is Result.REJECTED


@pytest.mark.parametrize("shell", SHELLS)
def test_an_expired_script_starts_nothing(shell: str, tmp_path: Path) -> None:
    fake = write_fake(tmp_path, {})
    stderr, status = run_under(shell, render(Op.REQUEUE, "9", time.time() - 1, NONCE, str(fake), expired=True))
    assert calls_made(fake) == []
    assert (stderr, status) == (f"\x1eDSL {NONCE} call 1 75\n".encode(), 75)
    out = read_outcome("requeue", "9", stderr, status, NONCE)
    assert (out.result, out.requeue_bit.value if out.requeue_bit else None) == (Result.EXPIRED, "clear")


@pytest.mark.parametrize("shell", SHELLS)
def test_a_script_keeps_no_clock_of_its_own(shell: str, tmp_path: Path) -> None:
    # The deadline in the script is a comment: with no runner to send TERM, a call starts
    # and ends on its own however long past the rendered deadline.
    fake = write_fake(tmp_path, {})
    stderr, status = run_under(shell, render(Op.HOLD, "9", time.time() - 1, NONCE, str(fake)))
    assert (stderr, status) == (f"\x1eDSL {NONCE} call 1 0\n".encode(), 0)
    assert calls_made(fake) == ["hold 9"]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_hung_call_is_stopped_at_the_deadline(shell: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The runner's TERM cuts call 2's wait short: 124, and call 3 is not started (75).  The
    # script then exits by itself, long before the KILL would be due.
    fake = write_fake(tmp_path, {"requeue": "exec sleep 30"})
    done, took = run_to_deadline(shell, render(Op.REQUEUE, "9", time.time() + 1, NONCE, str(fake)), 1.0, monkeypatch)
    assert (done.timed_out, done.killed_by, done.returncode) == (True, None, 75)
    assert took < 1.0 + KILL_GRACE
    out = read_outcome("requeue", "9", done.stderr, done.returncode, NONCE)
    assert [c.status for c in out.calls] == [0, 124, 75]
    assert (out.result, out.requeue_bit.value if out.requeue_bit else None) == (Result.UNKNOWN, "set")
    assert calls_made(fake) == ["update JobId=9 Requeue=1", "requeue 9"]  # call 3 never started


@pytest.mark.parametrize("shell", SHELLS)
def test_a_call_ignoring_term_is_killed_after_the_grace(
    shell: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Call 2 ignores TERM: the script waits for it, the runner KILLs the whole group after the
    # grace, and nothing more is printed: call 2's line is missing, so the output reads unknown.
    fake = write_fake(tmp_path, {"requeue": "trap '' TERM; sleep 30"})
    done, _ = run_to_deadline(shell, render(Op.REQUEUE, "9", time.time() + 0.5, NONCE, str(fake)), 0.5, monkeypatch)
    assert (done.timed_out, done.killed_by, done.returncode) == (True, signal.SIGKILL, 137)
    assert done.stderr == f"\x1eDSL {NONCE} call 1 0\n".encode()
    out = read_outcome("requeue", "9", done.stderr, done.returncode, NONCE)
    assert (out.result, out.requeue_bit.value if out.requeue_bit else None) == (Result.UNKNOWN, "may_be_set")


def inject(script: str, anchor: str, code: str) -> str:
    """``code`` put before ``anchor`` (a line of ``call``), which must occur exactly once."""
    assert script.count(anchor) == 1, anchor
    return script.replace(anchor, code + anchor)


START = '    "$scontrol" "$@" </dev/null &\n'
AFTER_WAIT = '    # Still running when the TERM came'


@pytest.mark.parametrize("shell", SHELLS)
def test_term_between_the_flag_check_and_the_start_is_124(
    shell: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The TERM lands after the flag was checked and before the call starts (here the shell
    # sends it to itself, so the call never got one): the call is started, stopped at once and
    # reported 124, since it may have reached slurmctld; the script does not wait 30 s for it.
    # (The runner's deadline is far off: it sends nothing, and kills the fake's sleep after.)
    fake = write_fake(tmp_path, {}, default="sleep 30")
    script = inject(render(Op.REQUEUE, "9", 2e9, NONCE, str(fake)), START, "    kill -TERM $$\n")
    done, took = run_to_deadline(shell, script, 60.0, monkeypatch)
    assert (done.timed_out, done.killed_by) == (False, None)
    assert took < 10
    out = read_outcome("requeue", "9", done.stderr, done.returncode, NONCE)
    assert [c.status for c in out.calls] == [124, 75]
    assert (out.result, out.requeue_bit.value if out.requeue_bit else None) == (Result.UNKNOWN, "may_be_set")


@pytest.mark.parametrize("behaviour", ["exit 0", refuse(ALREADY_FINISHED, suspend_line=True), "kill -SEGV $$"])
@pytest.mark.parametrize("shell", SHELLS)
def test_term_after_the_call_ended_keeps_its_own_status(shell: str, behaviour: str, tmp_path: Path) -> None:
    # The call has ended and been waited for; the TERM lands before its status line: the
    # status is the call's own, and the calls after it are not started.
    fake = write_fake(tmp_path, {"hold": behaviour})
    script = inject(render(Op.HOLD, "9", 2e9, NONCE, str(fake)), AFTER_WAIT, "    kill -TERM $$\n")
    stderr, status = run_under(shell, script)
    alone, alone_status = run_under(shell, render(Op.HOLD, "9", 2e9, NONCE, str(fake)))
    assert (stderr, status) == (alone, alone_status)
    assert status in (0, 1, 139)


@pytest.mark.parametrize("shell", SHELLS)
def test_calls_after_the_term_are_not_started(shell: str, tmp_path: Path) -> None:
    fake = write_fake(tmp_path, {})
    script = inject(render(Op.REQUEUE, "9", 2e9, NONCE, str(fake)), AFTER_WAIT, "    kill -TERM $$\n")
    stderr, status = run_under(shell, script)
    out = read_outcome("requeue", "9", stderr, status, NONCE)
    assert [c.status for c in out.calls] == [0, 75, 75]
    assert (out.result, out.requeue_bit.value if out.requeue_bit else None) == (Result.BIT_SET, "set")
    assert calls_made(fake) == ["update JobId=9 Requeue=1"]


def test_scripts_use_only_builtins_and_fixed_tools() -> None:
    # No clock and no helper process: the only program a script starts is scontrol.
    for script in every_script():
        assert "$(" not in script and "`" not in script and "timeout" not in script and "date +" not in script
        assert "eval" not in script and "$JOB" not in script
    script = render(Op.REQUEUE, **GOLDEN_ARGS)
    assert os.path.basename(GOLDEN_ARGS["scontrol"]) in script
    for word in ("trap", "wait", "kill", "printf"):
        assert f"{word} " in script


# --- one call on a list of ids (the bulk path, docs/contract.md §11) ---


def ids_joined_to(length: int) -> List[str]:
    """Distinct job ids whose ","-joined text is exactly ``length`` bytes."""
    first = (length - 1) % 11 + 1  # bytes before the ten-digit ids, 11 bytes each with their comma
    ids = ["40000", "40001"] if first == 11 else [str(4 * 10 ** (first - 1) if first > 1 else 7)]
    ids += [str(1000000000 + i) for i in range((length - first) // 11)]
    assert len(",".join(ids)) == length and len(set(ids)) == len(ids)
    return ids


@pytest.mark.parametrize(("op", "number", "want"), [
    (Op.HOLD, 1, ("hold", "1,22,333")),
    (Op.RELEASE, 1, ("release", "1,22,333")),
    (Op.RESTORE, 1, ("update", "JobId=1,22,333", "Requeue=0")),
    (Op.REQUEUE, 1, ("update", "JobId=1,22,333", "Requeue=1")),
    (Op.REQUEUE, 2, ("requeue", "1,22,333")),
    (Op.REQUEUE, 3, ("update", "JobId=1,22,333", "Requeue=0")),
])
def test_a_list_call_joins_its_ids_in_one_argument(op: Op, number: int, want: Tuple[str, ...]) -> None:
    assert list_argv(op, number, ["1", 22, "333"]) == want


@pytest.mark.parametrize(("number", "job_ids"), [
    (1, []),
    (1, ()),
    (1, ["5", "6", "5"]),
    (1, ["5", 5]),
    (1, "123"),
    (1, b"123"),
    (1, ["1", "12_3"]),
    (1, ["1", "1,2"]),
    (1, ["1", True]),
    (2, ["1"]),
    (0, ["1"]),
    (True, ["1"]),
    ("1", ["1"]),
])
def test_render_list_refuses(number: Any, job_ids: Any) -> None:
    with pytest.raises(InvalidInput):
        render_list(Op.HOLD, number, job_ids, **GOLDEN_LIST_ARGS)


def test_render_list_refuses_open_and_bad_calls() -> None:
    for op, number in ((Op.OPEN, 1), (Op.REQUEUE, 4), (Op.RESTORE, 2)):
        with pytest.raises(InvalidInput):
            render_list(op, number, ["1"], **GOLDEN_LIST_ARGS)
    with pytest.raises(InvalidInput):
        render_list(Op.HOLD, 1, ["1"], 2e9, NONCE, "relative/scontrol")
    with pytest.raises(InvalidInput):
        render_list(Op.HOLD, 1, ["1"], 2e9, "abc", "/usr/bin/scontrol")


@pytest.mark.parametrize(("op", "number", "prefix"), [(Op.HOLD, 1, 0), (Op.REQUEUE, 2, 0), (Op.RESTORE, 1, 6),
                                                      (Op.REQUEUE, 3, 6)])
def test_a_list_argument_is_at_most_131071_bytes(op: Op, number: int, prefix: int) -> None:
    # MAX_ARG_STRLEN (docs/slurm-bulk.md §1): "JobId=" counts, the argument is one execve string.
    fits = ids_joined_to(MAX_ARG_BYTES - prefix)
    assert max(len(a) for a in list_argv(op, number, fits)) == MAX_ARG_BYTES
    render_list(op, number, fits, **GOLDEN_LIST_ARGS)
    with pytest.raises(InvalidInput, match="131071"):
        render_list(op, number, ids_joined_to(MAX_ARG_BYTES - prefix + 1), **GOLDEN_LIST_ARGS)


def list_stderr(number: int, status: int) -> bytes:
    return f"\x1eDSL {NONCE} call {number} {status}\n".encode()


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(("op", "number"), LIST_CALLS, ids=lambda v: str(v))
def test_a_list_script_runs_one_call_with_one_status_line(shell: str, op: Op, number: int, tmp_path: Path) -> None:
    fake = write_fake(tmp_path, {}, default="printf 'Invalid job id specified for job 4243\\n' >&2; exit 1")
    stderr, status = run_under(shell, render_list(op, number, ["4242", 4243, "4244"], 2e9, NONCE, str(fake)))
    assert (stderr, status) == (b"Invalid job id specified for job 4243\n" + list_stderr(number, 1), 1)
    assert calls_made(fake) == [" ".join(list_argv(op, number, ["4242", "4243", "4244"]))]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_list_call_at_the_deadline(shell: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = write_fake(tmp_path, {}, default="sleep 30")
    script = render_list(Op.HOLD, 1, ["1", "2", "3"], time.time() + 0.5, NONCE, str(fake))
    done, took = run_to_deadline(shell, script, 0.5, monkeypatch)
    assert (done.stderr, done.returncode, done.killed_by) == (list_stderr(1, 124), 124, None)
    assert took < 0.5 + KILL_GRACE
    stderr, status = run_under(shell, render_list(Op.REQUEUE, 3, ["1", "2"], 2e9, NONCE, str(fake), expired=True))
    assert (stderr, status) == (list_stderr(3, 75), 75)
    assert calls_made(fake) == ["hold 1,2,3"]


@pytest.mark.parametrize("shell", SHELLS)
def test_the_probe_prints_what_doctor_expects(shell: str, monkeypatch: pytest.MonkeyPatch) -> None:
    done, _ = run_to_deadline(shell, render_probe(), 0.5, monkeypatch)
    assert (done.stderr, done.returncode) == (PROBE_STDERR, PROBE_STATUS)
    assert (done.timed_out, done.killed_by) == (True, None)



# --- only the script says a call was not started (docs/contract.md §4) ---


def not_startable(kind: str, tmp_path: Path) -> Tuple[Path, int]:
    """An scontrol path no call can start, and the status the script gives it."""
    path = tmp_path / "scontrol"
    if kind == "missing":
        return path, 127
    if kind == "dangling symlink":
        path.symlink_to(tmp_path / "gone")
        return path, 127
    if kind == "directory":
        path.mkdir()
        return path, 126
    if kind == "symlink to a directory":
        (tmp_path / "dir").mkdir()
        path.symlink_to(tmp_path / "dir")
        return path, 126
    if kind == "fifo":
        os.mkfifo(path)
        return path, 126
    assert kind == "no execute bit"
    write_fake(tmp_path, {}).chmod(0o644)
    return path, 126


@pytest.mark.parametrize("kind", ["missing", "dangling symlink", "directory", "symlink to a directory", "fifo",
                                  "no execute bit"])
@pytest.mark.parametrize("shell", SHELLS)
def test_a_scontrol_that_cannot_start_is_not_started(shell: str, kind: str, tmp_path: Path) -> None:
    path, status = not_startable(kind, tmp_path)
    stderr, exit_status = run_under(shell, render(Op.REQUEUE, "9", 2e9, NONCE, str(path)))
    assert (stderr, exit_status) == (list_stderr(1, status) + list_stderr(3, status), status)
    assert calls_made(tmp_path / "scontrol") == []
    out = read_outcome("requeue", "9", stderr, exit_status, NONCE)
    assert (out.result, out.requeue_bit.value if out.requeue_bit else None) == (Result.NOT_RUN, "clear")


# Each wrapped call, as the fake's key for it: (op, call number, key).
EACH_CALL = [(Op.HOLD, 1, "hold"), (Op.RELEASE, 1, "release"), (Op.RESTORE, 1, "clear"),
             (Op.REQUEUE, 1, "set"), (Op.REQUEUE, 2, "requeue"), (Op.REQUEUE, 3, "clear")]


@pytest.mark.parametrize("own", [75, 126, 127])
@pytest.mark.parametrize(("op", "number", "key"), EACH_CALL, ids=lambda v: str(v))
@pytest.mark.parametrize("shell", SHELLS)
def test_a_started_call_that_exits_75_126_or_127_itself_is_125(
    shell: str, op: Op, number: int, key: str, own: int, tmp_path: Path
) -> None:
    # A site wrapper behind --scontrol whose own command was missing, not executable or timed out:
    # the call ran, so it may have acted.  Its status line says 125, unknown (wrapper_failed).
    fake = write_fake(tmp_path, {key: f"exit {own}"})
    stderr, status = run_under(shell, render(op, "9", 2e9, NONCE, str(fake)))
    out = read_outcome(op, "9", stderr, status, NONCE)
    assert list_stderr(number, 125) in stderr
    assert [c.status for c in out.calls if c.number == number] == [125]
    assert (out.result, out.reason) == (Result.UNKNOWN, Reason.WRAPPER_FAILED if number != 3 else Reason.CLEAR_FAILED)
    if op in (Op.REQUEUE, Op.REQUEUE_HOLD):  # call 3 still cleared the flag after an unknown call 2
        assert out.requeue_bit is (RequeueBit.CLEAR if number == 2 else RequeueBit.MAY_BE_SET)


@pytest.mark.parametrize("own", [75, 126, 127])
@pytest.mark.parametrize(("op", "number"), LIST_CALLS, ids=lambda v: str(v))
@pytest.mark.parametrize("shell", SHELLS)
def test_a_started_list_call_that_exits_75_126_or_127_itself_is_125(
    shell: str, op: Op, number: int, own: int, tmp_path: Path
) -> None:
    fake = write_fake(tmp_path, {}, default=f"exit {own}")
    stderr, status = run_under(shell, render_list(op, number, ["1", "2"], 2e9, NONCE, str(fake)))
    assert (stderr, status) == (list_stderr(number, 125), 125)
    calls = read_list_output(op, number, ["1", "2"], stderr, status, NONCE)
    assert {(c.outcome, c.reason) for c in calls.values()} == {(CallOutcome.UNKNOWN, Reason.WRAPPER_FAILED)}


@pytest.mark.parametrize("kind", ["missing", "no execute bit"])
@pytest.mark.parametrize("shell", SHELLS)
def test_a_list_call_that_cannot_start_is_not_run(shell: str, kind: str, tmp_path: Path) -> None:
    path, status = not_startable(kind, tmp_path)
    stderr, exit_status = run_under(shell, render_list(Op.HOLD, 1, ["1", "2"], 2e9, NONCE, str(path)))
    assert (stderr, exit_status) == (list_stderr(1, status), status)
    calls = read_list_output(Op.HOLD, 1, ["1", "2"], stderr, exit_status, NONCE)
    assert {c.outcome for c in calls.values()} == {CallOutcome.NOT_RUN}


@pytest.mark.parametrize("gone", ['rm -f "$scontrol"', 'chmod a-x "$scontrol"'], ids=["removed", "made non-executable"])
@pytest.mark.parametrize("shell", SHELLS)
def test_a_scontrol_gone_between_the_check_and_the_start_is_125(shell: str, gone: str, tmp_path: Path) -> None:
    # The check passed, then the file went: the shell's fork fails its exec and exits 127 (or 126)
    # after the call was started, which the script cannot tell from a call that ran: 125, unknown.
    fake = write_fake(tmp_path, {})
    script = inject(render(Op.HOLD, "9", 2e9, NONCE, str(fake)), START, f"    {gone}\n")
    stderr, status = run_under(shell, script)
    assert stderr.endswith(list_stderr(1, 125)) and status == 125
    out = read_outcome("hold", "9", stderr, status, NONCE)
    assert (out.result, out.reason) == (Result.UNKNOWN, Reason.WRAPPER_FAILED)
    assert calls_made(fake) == []


def test_shared_constants_are_defined_once() -> None:
    """One argument's byte limit and what counts as blank each have one definition (issue 17
    item 3): a second copy could drift from the first unseen."""
    import re

    import slurm_dsl

    root = Path(slurm_dsl.__file__).parent
    for pattern in (r"^\s*MAX_ARG_BYTES\s*=", r"^\s*_?BLANK\s*="):
        where = [str(p.relative_to(root)) for p in sorted(root.rglob("*.py"))
                 if re.search(pattern, p.read_text(encoding="utf-8"), re.MULTILINE)]
        assert len(where) == 1, (pattern, where)
