"""Rendering the deadline-wrapped POSIX sh script of an operation, and of one call on a list of ids
(docs/contract.md §2, §3, §11).  Pure; the scripts run under dash and bash and read no clock: the
runner TERMs their process group at the deadline and KILLs it ``KILL_GRACE`` s later.

The races, which docs/contract.md §2 leaves to this list; the runner's TERM lands:
- before the trap: the shell dies, nothing started; ``run.calls.run_wrapped`` reruns it ``expired``: 75s;
- between the flag check and the call's start: the call missed it, and a TERM before its exec is lost:
  KILL, reap, 124;
- during the wait: 143 with the flag set, so 124 (a call that lost it in its own fork-to-exec window
  runs on: still 124, or the runner's KILL);
- after the wait, before the status line: the call's own status (its own 143 reads 124); later calls 75;
- before the guards' subshell ignores it: no guards, but the runner is alive and keeps its KILL.
The flag is only ever set, never cleared; a trap action keeps ``$?``.
"""

from __future__ import annotations

import math
import re
from typing import List, Optional, Sequence, Set, Tuple, Union

from .jobid import checked_list, validate_job_id
from .model import InvalidInput, Op
from .plain import plain_float, plain_str

KILL_GRACE = 1  # seconds between the runner's TERM at the deadline and its KILL
MAX_ARG_BYTES = 131071  # the longest single argument execve takes (MAX_ARG_STRLEN less its NUL)
_NONCE = re.compile(r"[0-9a-f]{32,}\Z", re.ASCII)

# The argv (after the scontrol path) of each call of each wrapped op, by call number.
# ``{j}`` is the job id (or, for ``render_list``, the ids joined with ","); docs/contract.md §1.
CALLS = {
    Op.HOLD: ((1, ("hold", "{j}")),),
    Op.RELEASE: ((1, ("release", "{j}")),),
    Op.RESTORE: ((1, ("update", "JobId={j}", "Requeue=0")),),
    Op.REQUEUE: (
        (1, ("update", "JobId={j}", "Requeue=1")),
        (2, ("requeue", "{j}")),
        (3, ("update", "JobId={j}", "Requeue=0")),
    ),
    Op.REQUEUE_HOLD: (
        (1, ("update", "JobId={j}", "Requeue=1")),
        (2, ("requeuehold", "{j}")),
        (3, ("update", "JobId={j}", "Requeue=0")),
    ),
}

# The guards (docs/contract.md §2): the lifeline (fd ``$1``: ``read`` returns only at the runner's EOF,
# and a failed open KILLs at once) and the backstop (``$2`` s).  They ignore TERM (so does ``sleep``:
# an ignored signal stays ignored across exec) and hold none of the runner's pipes.  Started by a
# subshell that exits at once, so neither is a child of the script: bash's ``wait PID`` may otherwise
# wait for a guard until the KILL (bash 5.2: about one run in 25, when the TERM and a call's exit meet).
GUARD = (
    "{ ( trap '' TERM; (read -r _ </dev/fd/\"$1\"; kill -KILL 0) & (sleep \"$2\"; kill -KILL 0) & ) & }"
    " </dev/null >/dev/null 2>&1"
)

_PRELUDE = r"""# call NUMBER ARGS...: run scontrol ARGS unless the deadline has passed, then print its status line.
call() {
  number=$1; shift
  if [ "$stopped" -eq 1 ]; then
    # The deadline has passed: the call is not started.
    status=75
  elif [ ! -e "$scontrol" ]; then
    # No such file (or a symlink to nothing): the call is not started.
    status=127
  elif [ ! -f "$scontrol" ] || [ ! -x "$scontrol" ]; then
    # A directory, a device or a file we may not execute: exec would fail, so it is not started.
    status=126
  else
    # Start it in the background, so that the runner's TERM at the deadline ends the wait at once.
    "$scontrol" "$@" </dev/null &
    pid=$!
    if [ "$stopped" -eq 1 ]; then
      # The TERM came as it was started, so it never got one, and a TERM before its exec is lost: KILL.
      kill -KILL "$pid" 2>/dev/null; status=143
    else
      # Wait for it; a wait the TERM cuts short returns 143.  (The waits' stderr is the shell's own.)
      wait "$pid" 2>/dev/null; status=$?
      # 75, 126 and 127 say "not started", which only this script may say: a started call (a site
      # wrapper, or a file gone between the check and its exec) that exits so failed: 125.
      case $status in 75|126|127) status=125 ;; esac
    fi
    # Still running when the TERM came: TERM it (its group got one too), reap it, and report 124.
    if [ "$stopped" -eq 1 ] && [ "$status" -eq 143 ]; then
      kill -TERM "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      status=124
    fi
  fi
  # The status line on stderr: RS, "DSL", the nonce, the call number, its status.
  printf '\036DSL %s call %s %s\n' "$nonce" "$number" "$status" >&2
}
"""

# Which calls run is fixed by docs/contract.md §2: requeue's call 2 only after call 1 exited 0,
# call 3 in every case except when call 1 got 75.  Each step says what it does.
_BODY = {
    1: "call 1 {args}\n",
    2: '[ "$first" -ne 0 ] || call 2 {args}\n',
    3: '[ "$first" -eq 75 ] || call 3 {args}\n',
}
_STEP = {
    (Op.HOLD, 1): "hold the job",
    (Op.RELEASE, 1): "release the job",
    (Op.RESTORE, 1): "clear the job's Requeue flag",
    (Op.REQUEUE, 1): "1: set the job's Requeue flag",
    (Op.REQUEUE, 2): "2: requeue the job, only if call 1 succeeded",
    (Op.REQUEUE, 3): "3: clear the Requeue flag again, unless call 1 never started",
    (Op.REQUEUE_HOLD, 1): "1: set the job's Requeue flag",
    (Op.REQUEUE_HOLD, 2): "2: requeue the job into hold, only if call 1 succeeded",
    (Op.REQUEUE_HOLD, 3): "3: clear the Requeue flag again, unless call 1 never started",
}
# The one call of a list script; which ids it gets is the bulk path's (docs/contract.md §11).
_LIST_STEP = {
    (Op.HOLD, 1): "hold the jobs",
    (Op.RELEASE, 1): "release the jobs",
    (Op.RESTORE, 1): "clear the jobs' Requeue flags",
    (Op.REQUEUE, 1): "requeue's call 1: set the jobs' Requeue flags",
    (Op.REQUEUE, 2): "requeue's call 2: requeue the jobs",
    (Op.REQUEUE, 3): "requeue's call 3: clear the jobs' Requeue flags again",
    (Op.REQUEUE_HOLD, 1): "requeuehold's call 1: set the jobs' Requeue flags",
    (Op.REQUEUE_HOLD, 2): "requeuehold's call 2: requeue the jobs into hold",
    (Op.REQUEUE_HOLD, 3): "requeuehold's call 3: clear the jobs' Requeue flags again",
}


def quote(value: str) -> str:
    """Single-quote ``value`` for POSIX sh (the ``shlex.quote`` rule, always quoting)."""
    return "'" + plain_str(value, "script value").replace("'", "'\"'\"'") + "'"


def call_argv(op: Op, job_id: str) -> Tuple[Tuple[int, Tuple[str, ...]], ...]:
    """Each call's number and scontrol arguments for a wrapped op."""
    job_id = validate_job_id(job_id)
    return tuple((number, tuple(a.format(j=job_id) for a in args)) for number, args in CALLS[op])


def list_argv(op: Op, number: int, job_ids: Sequence[Union[str, int]]) -> Tuple[str, ...]:
    """The scontrol arguments of call ``number`` of ``op`` on ``job_ids``, joined with "," in one argument;
    ``InvalidInput`` for a bad op, call or id, a duplicate, no ids, or over ``MAX_ARG_BYTES``."""
    return _list_call(_wrapped(op), number, job_ids)[1]


def _list_call(op: Op, number: int, job_ids: Sequence[Union[str, int]]) -> Tuple[int, Tuple[str, ...], int]:
    """(call number, scontrol arguments, how many ids) of one list call; see ``list_argv``."""
    if isinstance(number, bool) or not isinstance(number, int) or not issubclass(type(number), int):
        raise InvalidInput(f"call number must be an int, not {type(number).__name__}")
    number = int.__int__(number)
    templates = dict(CALLS[op])
    if number not in templates:
        raise InvalidInput(f"{op.value} has no call {number}: its calls are {', '.join(map(str, templates))}")
    if isinstance(job_ids, (str, bytes, bytearray, memoryview)):
        raise InvalidInput("job ids must be a sequence of job ids, not one string")
    ids = checked_list(job_ids)
    if not ids:
        raise InvalidInput("no job ids: a list call needs at least one")
    seen: Set[str] = set()
    twice: List[str] = []
    for job_id in ids:
        if job_id in seen:
            twice.append(job_id)
        seen.add(job_id)
    if twice:
        raise InvalidInput(f"job id(s) given twice: {' '.join(twice[:10])}; a list call sends each id once")
    joined = ",".join(ids)  # ASCII digits and commas: its length is its size in bytes
    args = tuple(a.format(j=joined) for a in templates[number])
    longest = max(len(a) for a in args)
    if longest > MAX_ARG_BYTES:
        raise InvalidInput(f"{len(ids)} job ids make a {longest}-byte argument; at most {MAX_ARG_BYTES} bytes fit one")
    return number, args, len(ids)


def check_scontrol_path(path: str) -> str:
    path = plain_str(path, "scontrol path")
    if not path.startswith("/") or any(ch in path for ch in "\0\n"):
        raise InvalidInput(f"scontrol path must be absolute, got {path!r}")
    return path


def check_nonce(nonce: str) -> str:
    if not isinstance(nonce, str) or not _NONCE.match(nonce):
        raise InvalidInput("nonce must be at least 128 bits of lowercase hex")
    return plain_str(nonce, "nonce")


def deadline_ms(deadline: float) -> int:
    """The deadline in whole milliseconds since the epoch, rounded down (never later)."""
    deadline = plain_float(deadline, "deadline")  # a float subclass's own __mul__ or __floor__ never runs
    if not math.isfinite(deadline) or deadline <= 0:
        raise InvalidInput(f"deadline must be a positive epoch time, got {deadline!r}")
    return math.floor(deadline * 1000)


def render(op: Op, job_id: str, deadline: float, nonce: str, scontrol: str, *, expired: bool = False) -> str:
    """The script for a wrapped op; ``ValueError`` on any bad input.  ``deadline``: epoch seconds, shown
    only; ``expired``: it passed before the start, so no call starts (75)."""
    op = _wrapped(op)
    job_id = validate_job_id(job_id)
    lines = _head(f"{op.value} {job_id}", deadline, nonce, scontrol, expired)
    for number, args in call_argv(op, job_id):
        lines.append(f"# {_STEP[(op, number)]}\n")
        lines.append(_BODY[number].format(args=" ".join(quote(a) for a in args)))
        if number == 1 and op.requeues:
            lines.append("first=$status\n")
    lines.append("# The script's exit status is the last call's.\n")
    lines.append('exit "$status"\n')
    return "".join(lines)


def render_comment(job_id: str, text: str, deadline: float, nonce: str, scontrol: str, *,
                   expired: bool = False) -> str:
    """The script of an AdminComment copy (docs/contract.md §10.4), as ``render``; ``text``: a checked
    ``--reason``."""
    job_id = validate_job_id(job_id)
    lines = _head(f"admin comment {job_id}", deadline, nonce, scontrol, expired)
    lines.append("# write the reason to the job's AdminComment\n")
    args = ("update", f"JobId={job_id}", f"AdminComment={text}")
    lines.append(_BODY[1].format(args=" ".join(quote(a) for a in args)))
    lines.append('exit "$status"\n')
    return "".join(lines)


def render_list(
    op: Op,
    number: int,
    job_ids: Sequence[Union[str, int]],
    deadline: float,
    nonce: str,
    scontrol: str,
    *,
    expired: bool = False,
) -> str:
    """The script of call ``number`` of ``op`` on every id of ``job_ids`` in one scontrol process
    (``list_argv``), as ``render``."""
    op = _wrapped(op)
    number, args, count = _list_call(op, number, job_ids)
    lines = _head(f"{op.value} call {number} on {count} jobs", deadline, nonce, scontrol, expired)
    lines.append(f"# {_LIST_STEP[(op, number)]}\n")
    lines.append(f"call {number} {' '.join(quote(a) for a in args)}\n")
    lines.append("# The script's exit status is the call's.\n")
    lines.append('exit "$status"\n')
    return "".join(lines)


# ``admin.doctor``'s probe of the wrapper: the same ``call``, on ``/bin/sh -c`` in place of scontrol.
# Run with a deadline well after call 1 and well before call 2 could end, it must print exactly
# ``PROBE_STDERR`` and exit ``PROBE_STATUS``: a call's own status, 124 for the call the deadline's
# TERM cuts short, 75 for the call after it, not started.
PROBE_NONCE = "0" * 32
PROBE_CALLS = ((1, ("-c", "exit 3")), (2, ("-c", "exec sleep 30")), (3, ("-c", "exit 0")))
PROBE_STDERR = "".join(f"\x1eDSL {PROBE_NONCE} call {n} {s}\n" for n, s in ((1, 3), (2, 124), (3, 75))).encode()
PROBE_STATUS = 75


def render_probe(shell: str = "/bin/sh") -> str:
    """The script of ``admin.doctor``'s wrapper check (``PROBE_CALLS`` on ``shell``)."""
    lines = _head("doctor's probe of the wrapper", None, PROBE_NONCE, shell, False)
    for number, args in PROBE_CALLS:
        lines.append(f"call {number} {' '.join(quote(a) for a in args)}\n")
    lines.append('exit "$status"\n')
    return "".join(lines)


def _wrapped(op: Op) -> Op:
    op = Op(op)
    if not op.wrapped:
        raise InvalidInput("open is not wrapped: it runs scontrol release directly")
    return op


def _head(title: str, deadline: Optional[float], nonce: str, scontrol: str, expired: bool) -> List[str]:
    """The lines every script starts with: the trap first, then the guards, the values, ``call``."""
    if not isinstance(expired, bool):
        raise InvalidInput(f"expired must be a bool, not {type(expired).__name__}")
    when = "" if deadline is None else f", {deadline_ms(deadline)} ms since the epoch"
    nonce = check_nonce(nonce)
    scontrol = check_scontrol_path(scontrol)
    if expired:
        flag = "# The deadline had passed before this script started: no call starts (75).\nstopped=1"
    else:
        flag = "# Set by the runner's TERM at the deadline: from then on no call starts (75).\nstopped=0"
    return [
        f"# slurm-dsl {title}: rendered by slurm_dsl.core.script; runs under dash and bash\n",
        f"{flag}; trap 'stopped=1' TERM\n",
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin; export PATH\n",
        "# Die with the runner: given the lifeline's fd and the backstop's seconds (as the runner\n",
        "# gives them), the guards KILL this script's group if the runner dies or stops keeping time.\n",
        'if [ "$#" -ge 2 ]; then\n',
        f"  {GUARD}\n",
        "fi\n",
        f"# The runner keeps the deadline{when}: TERM to this script's\n",
        f"# process group then, KILL {KILL_GRACE} s later.  No clock is read here.\n",
        "# This script's nonce, the scontrol it runs, and the status of the last call.\n",
        f"nonce={quote(nonce)} scontrol={quote(scontrol)} status=0\n",
        _PRELUDE,
    ]
