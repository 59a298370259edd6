"""Rendering the deadline-wrapped POSIX sh script of an operation (docs/contract.md §2, §3).

Contract: ``render`` is a pure function of (op, job id, deadline, nonce,
scontrol path).  The script runs under dash and bash.  For each call it reads
the wall clock (``date +%s%3N``); a call starts only while the deadline has
not passed (else status 75), and runs under GNU ``timeout --foreground`` with
the time that is left, so a call still running at the deadline gets TERM, then
KILL after ``KILL_GRACE`` seconds (status 124, or 137 after KILL).  After each
call it prints ``<RS>DSL <nonce> call <i> <status>`` on stderr.  Every value
from outside is copied to a plain built-in (``plain``: a subclass's own methods
never run), validated and single-quoted; the job id also passes §1.

``--foreground`` keeps timeout (and scontrol) in the script's process group,
so the runner's outer guard can stop the whole group.  scontrol's stdin is
/dev/null: the script itself arrives on the shell's stdin.
"""

from __future__ import annotations

import math
import re
from typing import List, Tuple

from .errors import InvalidInput
from .jobid import validate_job_id
from .model import Op
from .plain import plain_float, plain_str

KILL_GRACE = 1  # seconds between TERM and KILL at the deadline (the script's and the runner's guard)
_NONCE = re.compile(r"[0-9a-f]{32,}\Z", re.ASCII)

# The argv (after the scontrol path) of each call of each wrapped op, by call number.
# ``{j}`` is the job id; docs/contract.md §1.
CALLS = {
    Op.HOLD: ((1, ("hold", "{j}")),),
    Op.RELEASE: ((1, ("release", "{j}")),),
    Op.RESTORE: ((1, ("update", "JobId={j}", "Requeue=0")),),
    Op.REQUEUE: (
        (1, ("update", "JobId={j}", "Requeue=1")),
        (2, ("requeue", "{j}")),
        (3, ("update", "JobId={j}", "Requeue=0")),
    ),
}

_PRELUDE = r"""# call NUMBER ARGS...: run scontrol ARGS unless the deadline has passed, then print its status line.
call() {
  number=$1; shift
  # The wall clock in milliseconds; a clock that cannot be read is the wrapper failing (125).
  now_ms=$(date +%s%3N) || now_ms=
  case $now_ms in
    ''|*[!0-9]*) status=125 ;;
    *)
      left_ms=$((deadline_ms - now_ms))
      if [ "$left_ms" -gt 0 ]; then
        # Run it for the time left: TERM at the deadline (124), KILL $grace s later (137).
        frac=$((left_ms % 1000 + 1000))
        timeout --foreground -k "$grace" "$((left_ms / 1000)).${frac#1}" "$scontrol" "$@" </dev/null
        status=$?
      else
        # The deadline has passed: the call is not started.
        status=75
      fi ;;
  esac
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
}


def quote(value: str) -> str:
    """Single-quote ``value`` for POSIX sh (the ``shlex.quote`` rule, always quoting)."""
    return "'" + plain_str(value, "script value").replace("'", "'\"'\"'") + "'"


def call_argv(op: Op, job_id: str) -> Tuple[Tuple[int, Tuple[str, ...]], ...]:
    """Each call's number and scontrol arguments for a wrapped op."""
    job_id = validate_job_id(job_id)
    return tuple((number, tuple(a.format(j=job_id) for a in args)) for number, args in CALLS[op])


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


def render(op: Op, job_id: str, deadline: float, nonce: str, scontrol: str) -> str:
    """The script for a wrapped op.  Raises ``ValueError`` on any bad input."""
    op = Op(op)
    if not op.wrapped:
        raise InvalidInput("open is not wrapped: it runs scontrol release directly")
    job_id = validate_job_id(job_id)
    lines: List[str] = [
        f"# slurm-dsl {op.value} {job_id}: rendered by slurm_dsl.script; runs under dash and bash\n",
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin; export PATH\n",
        "# This script's nonce, the scontrol it runs, the deadline (ms since the epoch), the\n"
        "# seconds from TERM to KILL at the deadline, and the status of the last call.\n",
        f"nonce={quote(check_nonce(nonce))} scontrol={quote(check_scontrol_path(scontrol))}\n",
        f"deadline_ms={deadline_ms(deadline)} grace={KILL_GRACE} status=0\n",
        _PRELUDE,
    ]
    for number, args in call_argv(op, job_id):
        lines.append(f"# {_STEP[(op, number)]}\n")
        lines.append(_BODY[number].format(args=" ".join(quote(a) for a in args)))
        if number == 1 and op is Op.REQUEUE:
            lines.append("first=$status\n")
    lines.append("# The script's exit status is the last call's.\n")
    lines.append('exit "$status"\n')
    return "".join(lines)
