"""The chaos run's scontrol and lookup wrappers (tests/chaos/runner.py), against a fake scontrol
that logs its argv: what they log for the checker, and each wrapper fault.  No lab."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import List, Tuple

import pytest

from tests.chaos import runner

FAKE = """#!/bin/sh
printf '%s\\n' "$*" >> {log}
case "$2" in *refuse*) echo "Invalid job id specified for job $2" >&2; exit 1 ;; esac
exit 0
"""


def tools(tmp_path: Path) -> Tuple[Path, Path, Path]:
    """The wrapper over a fake scontrol, a lookup wrapper over /bin/true, and the fake's log."""
    for sub in ("err", "once", "bin"):
        (tmp_path / sub).mkdir()
    fake = tmp_path / "fake-scontrol"
    fake.write_text(FAKE.format(log=runner.quote(str(tmp_path / "real.log"))))
    fake.chmod(0o755)
    wrapper = tmp_path / "bin" / "chaos-scontrol"
    wrapper.write_text(runner.WRAPPER.replace("@REAL@", runner.quote(str(fake))))
    lookup = tmp_path / "bin" / "chaos-squeue"
    lookup.write_text(runner.LOOKUP_WRAPPER.replace("@REAL@", "/bin/true"))
    for path in (wrapper, lookup):
        path.chmod(0o755)
    return wrapper, lookup, tmp_path / "real.log"


def run(
    tmp_path: Path, program: Path, fault: str, *argv: str, timeout: float = 10.0
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "CHAOS_DIR": str(tmp_path), "CHAOS_INV": "o7", "CHAOS_FAULT": fault,
           "CHAOS_SQUEUE_SLOW": ""}
    return subprocess.run([str(program), *argv], env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def log(tmp_path: Path) -> List[List[str]]:
    return [line.split(" ", 3) for line in (tmp_path / "calls.log").read_text().splitlines()]


def test_every_call_is_logged_with_its_end_exit_and_stderr(tmp_path: Path) -> None:
    wrapper, _, real = tools(tmp_path)
    done = run(tmp_path, wrapper, "", "hold", "refuse9")
    assert done.returncode == 1 and done.stderr == "Invalid job id specified for job refuse9\n"
    (start, end) = log(tmp_path)
    assert start[0] == "S" and start[1].startswith("o7.") and start[3] == "hold refuse9"
    assert end[:2] == ["E", start[1]] and end[3] == "1" and float(end[2]) >= float(start[2])
    assert (tmp_path / "err" / start[1]).read_text() == done.stderr
    assert real.read_text() == "hold refuse9\n"


@pytest.mark.parametrize(("fault", "argv", "real_calls", "logged"), [
    # the first call of its verb only: a second passes
    ("update-0:die-after", ["update", "JobId=5", "Requeue=0"], ["update JobId=5 Requeue=0"], ["S", "E"]),
    ("update-0:die-before", ["update", "JobId=5", "Requeue=0"], [], ["S"]),
    ("requeue:half", ["requeue", "1,2,3,4"], ["requeue 1,2"], ["S", "E"]),
    ("update-1:half", ["update", "JobId=1,2,3,4", "Requeue=1"], ["update JobId=1,2 Requeue=1"], ["S", "E"]),
    ("hold:die-before", ["release", "5"], ["release 5"], ["S", "E"]),  # another verb: untouched
])
def test_a_wrapper_fault_hits_the_first_call_of_its_verb(
    tmp_path: Path, fault: str, argv: List[str], real_calls: List[str], logged: List[str]
) -> None:
    wrapper, _, real = tools(tmp_path)
    hangs = fault.endswith("half")  # the rest of the list hangs until the command's deadline
    with pytest.raises(subprocess.TimeoutExpired) if hangs else contextlib.nullcontext():
        run(tmp_path, wrapper, fault, *argv, timeout=1.0 if hangs else 10.0)
    calls = real.read_text().splitlines() if real.exists() else []
    assert calls == real_calls
    assert [x[0] for x in log(tmp_path)] == logged


def test_a_lookup_is_logged_when_it_starts(tmp_path: Path) -> None:
    _, lookup, _ = tools(tmp_path)
    assert run(tmp_path, lookup, "", "-h").returncode == 0
    ((kind, cid, when),) = log(tmp_path)
    assert kind == "L" and cid.startswith("o7.") and float(when) > 0


def test_the_shim_names_its_command_and_fault(tmp_path: Path) -> None:
    text = runner.SHIM.format(dir=runner.quote("/d"), inv=runner.quote("o7"), fault=runner.quote("hold:hang"),
                              slow=runner.quote(""), target=runner.quote("/d/bin/chaos-scontrol"))
    assert "CHAOS_INV='o7'" in text and "CHAOS_FAULT='hold:hang'" in text
    assert subprocess.run(["sh", "-n"], input=text, text=True, check=False).returncode == 0
