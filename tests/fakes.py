"""A fake ``scontrol`` for the faults real Slurm cannot be made to show on demand
(a hung call, a kill, a missing binary, garbage output).  Its refusal texts are
the real ones (tests/ground.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Dict, List, Optional

# Which call an argv is: the key the fake's plan uses.
KEYS = {
    "hold": '"hold "*',
    "release": '"release "*',
    "set": '"update Requeue=1"',
    "requeue": '"requeue "*',
    "clear": '"update Requeue=0"',
}


def write_fake(directory: Path, plan: Dict[str, str], default: str = "exit 0", name: str = "scontrol") -> Path:
    """Write an executable sh ``scontrol`` into ``directory``.

    ``plan`` maps a call key (``KEYS``) to sh code run for that call; ``$JOB`` is the
    job id the call was given.  Every call appends its argv to ``calls.log`` beside it.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    log = directory / "calls.log"
    arms = "".join(f"  {KEYS[key]}) {code} ;;\n" for key, code in plan.items())
    path.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$*\" >> {_q(str(log))}\n"
        'JOB=$2; case $JOB in JobId=*) JOB=${JOB#JobId=} ;; esac\n'
        'case "$1 $3" in\n'
        f"{arms}"
        f"  *) {default} ;;\n"
        "esac\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def calls_made(fake: Path) -> list:  # type: ignore[type-arg]
    log = fake.parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def refuse(message: str, suspend_line: bool = False) -> str:
    """sh code printing a real refusal for $JOB and exiting 1."""
    code = f"printf '%s for job %s\\n' {_q(message)} \"$JOB\" >&2; "
    if suspend_line:
        code += f"printf 'slurm_suspend error: %s\\n' {_q(message)} >&2; "
    return code + "exit 1"


def _q(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def alive_in_group(marker: str) -> Optional[int]:
    """The pid of a live process whose command line contains ``marker``, if any."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != b"Z":
            return int(entry)
    return None


def squeue_record(line: str) -> str:
    """A plain job's ``id|STATE|requeue|restarts|priority|reason`` as the full ``-r -O`` record
    (``JobID|ArrayJobID|ArrayTaskID|...``); a line that already has the array fields is kept."""
    fields = line.split("|")
    if len(fields) == 6:
        fields[1:1] = [fields[0], "N/A"]
    return "|".join(fields)


def write_fake_squeue(directory: Path, records: str, *, exit_code: int = 0, stderr: str = "") -> Path:
    """A fake ``squeue`` that answers ``--version`` like 22.05 and prints ``records``
    (lines of ``id|STATE|requeue|restarts|priority|reason``, or with the array fields after
    the id) each ending with the caller's nonce, taken from the ``-O`` format as the real
    squeue would print it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "squeue"
    records = "".join(squeue_record(line) + "\n" for line in records.splitlines())
    path.write_text(
        "#!/bin/sh\n"
        'case $1 in --version) echo "slurm 22.05.8"; exit 0 ;; esac\n'
        f"printf '%s\\n' \"$*\" >> {_q(str(directory / 'squeue.log'))}\n"
        'for a; do fmt=$a; done; nonce=${fmt##*|}\n'
        f"[ -z {_q(stderr)} ] || printf '%s\\n' {_q(stderr)} >&2\n"
        f"printf '%s' {_q(records)} | while IFS= read -r line; do printf '%s|%s\\n' \"$line\" \"$nonce\"; done\n"
        f"exit {exit_code}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def write_empty_squeue(directory: Path) -> Path:
    """A fake ``squeue`` for a cluster with no jobs, answering as 22.05 does (docs/slurm-behaviour.md §9):
    ``-j <one id>`` exits 1 with ``Invalid job id specified``; a list or a listing prints nothing."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "squeue"
    path.write_text(
        "#!/bin/sh\n"
        'case $1 in --version) echo "slurm 22.05.8"; exit 0 ;; esac\n'
        "ids=\n"
        'while [ $# -gt 0 ]; do case $1 in -j) ids=$2; shift ;; esac; shift; done\n'
        'case $ids in ""|*,*) exit 0 ;; esac\n'
        "echo 'slurm_load_jobs error: Invalid job id specified' >&2\n"
        "exit 1\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def descendants(pid: int) -> List[int]:
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
