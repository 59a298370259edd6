"""A process on a stepped wall clock, through Debian's libfaketime, its monotonic and boot clocks
left alone as a real step leaves them (``FAKETIME_DONT_FAKE_MONOTONIC``), with the fix of
tests/faketime_monotonic.c preloaded before it (libfaketime 0.9.10's absolute monotonic sleeps)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict

import pytest

LIBRARY = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
FIX = Path(__file__).resolve().parent / "faketime_monotonic.c"


def preload(directory: Path) -> str:
    """LD_PRELOAD for a stepped clock: the fix, compiled into ``directory``, then libfaketime.
    Fails where libfaketime or a C compiler is missing (contrib/test installs both)."""
    if not os.path.exists(LIBRARY):
        pytest.fail(f"no {LIBRARY}: Debian's libfaketime (contrib/test installs faketime)")
    fix = directory / "faketime_monotonic.so"
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", str(fix),
                    str(FIX), "-ldl"], check=True)
    return f"{fix} {LIBRARY}"


def on_file(preloaded: str, control: Path) -> Dict[str, str]:
    """The environment that puts a process on the offset ``control`` holds (``+N``/``-N``
    seconds), read at every clock read, so that writing it steps the clock of a running process."""
    return {"LD_PRELOAD": preloaded, "FAKETIME_TIMESTAMP_FILE": str(control), "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_RESET": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def offset(preloaded: str, seconds: str) -> Dict[str, str]:
    """The environment of a process whose wall clock is ``seconds`` (``+N``/``-N``) off."""
    return {"LD_PRELOAD": preloaded, "FAKETIME": seconds, "FAKETIME_DONT_RESET": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
