"""The rendered scripts: golden files, syntax under dash and bash, and real runs of
render -> sh -> fake scontrol -> read under both shells."""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_dsl import Op, Result, read_outcome, render
from slurm_dsl.runner import fixed_env
from tests.fakes import refuse, write_fake
from tests.ground import (
    ALREADY_FINISHED,
    DISABLED,
    INVALID_JOB_ID,
    INVALID_USER_ID,
    NONCE,
    PENDING_EXECUTION,
    UNEXPECTED,
)

GOLDEN = Path(__file__).parent / "golden"
WRAPPED = [o for o in Op if o.wrapped]
SHELLS = [s for s in ("dash", "bash") if shutil.which(s)]
GOLDEN_ARGS: Dict[str, Any] = dict(job_id="4242", deadline=1767225600.5, nonce=NONCE, scontrol="/usr/bin/scontrol")


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


@pytest.mark.parametrize("op", WRAPPED, ids=str)
@pytest.mark.parametrize("shell", SHELLS)
def test_scripts_parse(op: Op, shell: str) -> None:
    result = subprocess.run([shell, "-n"], input=render(op, **GOLDEN_ARGS).encode(),
                            capture_output=True)
    assert result.returncode == 0, result.stderr


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
    done = subprocess.run([shell, "-s"], input=script.encode(), capture_output=True, env=fixed_env(), timeout=timeout)
    return done.stderr, done.returncode


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
    if op != "requeue":
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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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
def test_a_passed_deadline_starts_nothing(shell: str, tmp_path: Path) -> None:
    fake = write_fake(tmp_path, {})
    stderr, status = run_under(shell, render(Op.REQUEUE, "9", time.time() - 1, NONCE, str(fake)))
    assert not (tmp_path / "calls.log").exists()
    assert (stderr, status) == (f"\x1eDSL {NONCE} call 1 75\n".encode(), 75)
    out = read_outcome("requeue", "9", stderr, status, NONCE)
    assert (out.result, out.requeue_bit.value if out.requeue_bit else None) == (Result.EXPIRED, "clear")


@pytest.mark.parametrize("shell", SHELLS)
def test_a_hung_call_is_stopped_at_the_deadline(shell: str, tmp_path: Path) -> None:
    fake = write_fake(tmp_path, {"requeue": "exec sleep 30"})
    stderr, status = run_under(shell, render(Op.REQUEUE, "9", time.time() + 1, NONCE, str(fake)))
    out = read_outcome("requeue", "9", stderr, status, NONCE)
    assert [c.status for c in out.calls] == [0, 124, 75]
    assert (out.result, out.requeue_bit.value if out.requeue_bit else None) == (Result.UNKNOWN, "set")


def test_scripts_use_only_builtins_and_fixed_tools() -> None:
    script = render(Op.REQUEUE, **GOLDEN_ARGS)
    words: List[str] = [w for w in ("date", "timeout", "printf") if w in script]
    assert words == ["date", "timeout", "printf"]
    assert "eval" not in script and "$JOB" not in script
    assert os.path.basename(GOLDEN_ARGS["scontrol"]) in script
