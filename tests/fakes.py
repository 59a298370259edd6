"""A fake ``scontrol`` for the faults real Slurm cannot be made to show on demand
(a hung call, a kill, a missing binary, garbage output).  Its refusal texts are
the real ones (tests/ground.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import LookupFailed
from slurm_dsl.host import runs
from slurm_dsl.host.files import Identity
from slurm_dsl.lookups import saves as _saves

# What every fake's ``show config`` prints (not logged: no job call): the controller in control,
# one that never restarts (``lookups.controller``), as the real one prints it.
FAKE_CTL = "2026-12-07T09:00:00"  # what ``lookups.controller`` reads of it
BOOT_TIME = f"BOOT_TIME               = {FAKE_CTL}"
SHOW_CONFIG = f'case "$1 $2" in "show config") echo \'{BOOT_TIME}\'; exit 0 ;; esac\n'

# Which call an argv is: the key the fake's plan uses.
KEYS = {
    "hold": '"hold "*',
    "release": '"release "*',
    "set": '"update Requeue=1"',
    "requeue": '"requeue "*',
    "clear": '"update Requeue=0"',
    "comment": '"update AdminComment="*',
}


def write_fake(directory: Path, plan: Dict[str, str], default: str = "exit 0", name: str = "scontrol") -> Path:
    """Write an executable sh ``scontrol`` into ``directory``.

    ``plan`` maps a call key (``KEYS``) to sh code run for that call; ``$JOB`` is the
    job id the call was given.  Every call appends its argv to ``calls.log`` beside it, but
    ``show config``, which prints ``BOOT_TIME`` at once, unless ``default`` answers ``show``
    itself (then that answer, logged).
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    log = directory / "calls.log"
    arms = "".join(f"  {KEYS[key]}) {code} ;;\n" for key, code in plan.items())
    path.write_text(
        "#!/bin/sh\n"
        f"{'' if 'show)' in default else SHOW_CONFIG}"
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
    if not fields[1].isdigit():  # a State, not an ArrayJobID: a plain job's short form
        fields[1:1] = [fields[0], "N/A"]
    return "|".join(fields)


def write_fake_squeue(directory: Path, records: str, *, exit_code: int = 0, stderr: str = "") -> Path:
    """A fake ``squeue`` that answers ``--version`` like 22.05 and prints ``records``
    (lines of ``id|STATE|requeue|restarts|priority|reason``, or with the array fields after
    the id) each ending with the caller's nonce, taken from the ``-O`` format as the real
    squeue would print it.  With ``-j LIST`` only the records whose JobID or ArrayJobID is
    in the list; ``-j <one id>`` it does not know exits 1 with ``Invalid job id specified``,
    as real squeue does (docs/slurm-behaviour.md §9)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "squeue"
    records = "".join(squeue_record(line) + "\n" for line in records.splitlines())
    path.write_text(
        "#!/bin/sh\n"
        'case $1 in --version) echo "slurm 22.05.8"; exit 0 ;; esac\n'
        f"printf '%s\\n' \"$*\" >> {_q(str(directory / 'squeue.log'))}\n"
        'ids=; for a; do fmt=$a; done; nonce=${fmt##*|}\n'
        'while [ $# -gt 0 ]; do case $1 in -j) ids=,$2, ;; esac; shift; done\n'
        f"[ -z {_q(stderr)} ] || printf '%s\\n' {_q(stderr)} >&2\n"
        "found=$(printf '%s' " + _q(records) + " | while IFS='|' read -r job array rest; do\n"
        '  case $ids in \'\'|*,"$job",*|*,"$array",*)\n'
        '    printf \'%s|%s|%s|%s\\n\' "$job" "$array" "$rest" "$nonce" ;;\n'
        '  esac\n'
        "done)\n"
        'case $ids in ,*,*,) ;; ,*,) if [ -z "$found" ] && [ ' + str(exit_code) + ' = 0 ]; then\n'
        "  echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1; fi ;; esac\n"
        '[ -z "$found" ] || printf \'%s\\n\' "$found"\n'
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


# The texts a list call prints per failing id (docs/slurm-bulk.md §2): ``<message> for job <id>``.
LIST_MESSAGES = {
    "finished": "Job has already finished",
    "missing": "Invalid job id specified",
    "denied": "Invalid user id",
    "access": "Access/permission denied",
    "pending": "Job is pending execution",
    "disabled": "Requested operation is presently disabled",
    "down": "Unexpected message received",
}


def write_list_fake(
    directory: Path, plan: Dict[str, Dict[str, str]], *, up: bool = True, min_job_age: Optional[int] = None
) -> Path:
    """A fake ``scontrol`` that takes id lists as real scontrol does (``hold 1,2,3``,
    ``update JobId=1,2 Requeue=1``): for each id in order, ``plan[id][call]`` (call: a KEYS
    key) is ``ok`` (silent) or a LIST_MESSAGES key (one line for that id); hold and release
    end with one ``slurm_suspend error: <last message>`` line, as in the comma form.  It exits
    1 if any id failed.  ``ping`` answers UP (or DOWN).  Every call on jobs is logged in
    calls.log.  ``show config`` (no job call, not logged) prints ``BOOT_TIME``, and ``MinJobAge =
    N sec`` as the real one does when ``min_job_age`` is given (else nothing is vouched for)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scontrol"
    config = BOOT_TIME + ("" if min_job_age is None else f"\nMinJobAge               = {int(min_job_age)} sec")
    arms = "".join(
        f"    '{job}:{call}') msg={_q(LIST_MESSAGES[b]) if b != 'ok' else ''} ;;\n"
        for job, calls in plan.items()
        for call, b in calls.items()
    )
    ping = "echo 'Slurmctld(primary) at vm is UP'; exit 0" if up else "echo 'Slurmctld(primary) at vm is DOWN'; exit 1"
    path.write_text(
        "#!/bin/sh\n"
        f'case "$1 $2" in "show config") [ -z {_q(config)} ] || printf \'%s\\n\' {_q(config)}; exit 0 ;; esac\n'
        f"printf '%s\\n' \"$*\" >> {_q(str(directory / 'calls.log'))}\n"
        f"case $1 in ping) {ping} ;; esac\n"
        'case $1 in update) list=${2#JobId=}; key="set"; [ "$3" = Requeue=0 ] && key=clear ;;'
        ' *) list=$2; key=$1 ;; esac\n'
        "rc=0; last=\n"
        "IFS=,\n"
        "for id in $list; do\n"
        "  msg=\n"
        '  case "$id:$key" in\n'
        f"{arms}"
        "  esac\n"
        '  if [ -n "$msg" ]; then printf \'%s for job %s\\n\' "$msg" "$id" >&2; rc=1; last=$msg; fi\n'
        "done\n"
        'case $1 in hold|release) [ -z "$last" ] || printf \'slurm_suspend error: %s\\n\' "$last" >&2 ;; esac\n'
        "exit $rc\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


class MemoryLookup:
    """A ``Lookup`` answering from a dict (an id it does not hold: gone) that keeps every call's
    ids (``asked``: a test counts the lookups, the one RPC each); ``fail``: every call raises
    ``LookupFailed`` with that reason, as a lookup that could not ask."""

    name = "memory"

    def __init__(self, jobs: Dict[str, JobInfo], fail: Optional[str] = None) -> None:
        self.known = jobs
        self.fail = fail
        self.asked: List[List[str]] = []

    def jobs(self, job_ids: Sequence[str]) -> Dict[str, Optional[JobInfo]]:
        self.asked.append(list(job_ids))
        if self.fail:
            raise LookupFailed(self.fail)
        return {j: self.known.get(j) for j in job_ids}


def write_heartbeat(directory: Path, at: int, writer: int) -> Path:
    """A ``heartbeat`` as the controller in control writes it (docs/contract.md §13.6): its time and
    its index among the SlurmctldHost lines, two big-endian 64-bit integers, renamed into place."""
    new = directory / "heartbeat.new"
    new.write_bytes(at.to_bytes(8, "big") + writer.to_bytes(8, "big"))
    return new.replace(directory / "heartbeat")


# The real look, kept before any test replaces it (``tests.conftest._saved_state``).
REAL_LOOK_AT_SAVE = _saves.look_at_save


class SavesAtEveryLook:
    """``lookups.saves.look_at_save`` of a slurmctld that saves between any two looks at its
    job_state: each look sees a file no look saw before (docs/contract.md §13.2, Rule 1: each save
    is a new file).  ``looks``: how many were taken."""

    def __init__(self) -> None:
        self.looks = 0

    def __call__(self, location: Optional[str], timeout: float = 2.0) -> _saves.Seen:
        self.looks += 1
        path = os.path.join(location or "", "job_state")
        return _saves.Seen(Identity(self.looks, self.looks, self.looks), path)


class ScriptedSaves:
    """``lookups.saves.look_at_save`` of a slurmctld whose job_state the n-th look sees as
    ``files[n]`` (the last one from then on): a number per save's file."""

    def __init__(self, files: Sequence[int]) -> None:
        self.files = list(files)
        self.looks = 0

    def __call__(self, location: Optional[str], timeout: float = 2.0) -> _saves.Seen:
        n = self.files[min(self.looks, len(self.files) - 1)]
        self.looks += 1
        return _saves.Seen(Identity(n, n, n), os.path.join(location or "", "job_state"))


def write_job_state(directory: Path, started: int, protocol_version: int = 0x2600) -> Path:
    """A ``job_state`` whose header says a save began at ``started`` (epoch seconds), as
    slurmctld packs it (docs/contract.md §13: ``JOB_STATE_VERSION`` as a packed string, a
    16-bit protocol version, the 64-bit start), followed by bytes no reader looks at."""
    version = b"PROTOCOL_VERSION\0"
    header = (len(version).to_bytes(4, "big") + version + protocol_version.to_bytes(2, "big")
              + started.to_bytes(8, "big", signed=True))
    path = directory / "job_state"
    new = directory / "job_state.new"
    new.write_bytes(header + b"\0" * 64)
    new.replace(path)
    return path


def ended_ago(seconds: float) -> str:
    """An operation's end ``seconds`` ago on this host's boot clock, as ``host.runs.ended`` writes it."""
    return f"{runs.observer()}/{runs.boot_clock() - seconds:.6f}"
