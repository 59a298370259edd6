"""Running the ``slurm-dsl`` command line from the tests, the two ways there are.

``cli``: in this process, ``main(argv, out)``, with stdout and stderr captured and stdin given
(empty unless said), so a test sees what an admin would without a process's start-up time.
``cli_process``: the console script itself, ``python -m slurm_dsl``, for what only a real process
shows (its exit through ``os._exit``, EPIPE, buffering, the environment it reads).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import pytest

from slurm_dsl.admin.cli import main

COMMAND = (sys.executable, "-m", "slurm_dsl")


class Ran(NamedTuple):
    """What ``cli`` saw: the exit status, stdout and stderr (a tuple: ``code, out, err = cli(...)``)."""

    code: int
    out: str
    err: str


def cli(argv: Sequence[str], stdin: str = "") -> Ran:
    """``main(argv)`` in this process; ``stdin`` is what it reads for ``-`` (or ``read``)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8"))
        code = main(list(argv), out=out)
    return Ran(code, out.getvalue(), err.getvalue())


def cli_process(
    argv: Sequence[str], *, capture: bool = True, text: bool = True, **run: Any
) -> subprocess.CompletedProcess[Any]:
    """``python -m slurm_dsl argv`` to its end; ``run`` goes to ``subprocess.run`` (``env``,
    ``input``, ``timeout``, ``stdout``...).  Output is captured and text unless said otherwise."""
    return subprocess.run([*COMMAND, *argv], capture_output=capture, text=text, check=False, **run)


def killed_when(argv: Sequence[str], marker: Path, within: float = 30.0) -> None:
    """``python -m slurm_dsl argv``, SIGKILLed as soon as ``marker`` exists (a fake or a wrapper
    makes it at the moment the test wants the command dead); it must not end before."""
    command = subprocess.Popen([*COMMAND, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + within
        while not marker.exists():
            assert command.poll() is None and time.monotonic() < deadline, command.communicate()
            time.sleep(0.02)
        os.kill(command.pid, signal.SIGKILL)
    finally:
        if command.poll() is None:
            command.kill()
        command.communicate()
