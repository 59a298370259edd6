"""Rendering the deadline-wrapped POSIX sh script of an operation (SPEC §2, §3).

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

from .jobid import validate_job_id
from .model import Op
from .plain import plain_float, plain_str

KILL_GRACE = 1  # seconds between TERM and KILL at the deadline
_NONCE = re.compile(r"[0-9a-f]{32,}\Z", re.ASCII)

# The argv (after the scontrol path) of each call of each wrapped op, by call number.
# ``{j}`` is the job id; SPEC §1.
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

_PRELUDE = r"""r() {
  i=$1; shift
  t=$(date +%s%3N) || t=
  case $t in
    ''|*[!0-9]*) s=125 ;;
    *)
      t=$((d - t))
      if [ "$t" -gt 0 ]; then
        f=$((t % 1000 + 1000))
        timeout --foreground -k "$g" "$((t / 1000)).${f#1}" "$c" "$@" </dev/null
        s=$?
      else
        s=75
      fi ;;
  esac
  printf '\036DSL %s call %s %s\n' "$n" "$i" "$s" >&2
}
"""

# Which calls run is fixed by SPEC §2: requeue's call 2 only after call 1 exited 0,
# call 3 in every case except when call 1 got 75.
_BODY = {
    1: "r 1 {args}\n",
    2: '[ "$s1" -ne 0 ] || r 2 {args}\n',
    3: '[ "$s1" -eq 75 ] || r 3 {args}\n',
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
        raise ValueError(f"scontrol path must be absolute, got {path!r}")
    return path


def check_nonce(nonce: str) -> str:
    if not isinstance(nonce, str) or not _NONCE.match(nonce):
        raise ValueError("nonce must be at least 128 bits of lowercase hex")
    return plain_str(nonce, "nonce")


def deadline_ms(deadline: float) -> int:
    """The deadline in whole milliseconds since the epoch, rounded down (never later)."""
    deadline = plain_float(deadline, "deadline")  # a float subclass's own __mul__ or __floor__ never runs
    if not math.isfinite(deadline) or deadline <= 0:
        raise ValueError(f"deadline must be a positive epoch time, got {deadline!r}")
    return math.floor(deadline * 1000)


def render(op: Op, job_id: str, deadline: float, nonce: str, scontrol: str) -> str:
    """The script for a wrapped op.  Raises ``ValueError`` on any bad input."""
    op = Op(op)
    if not op.wrapped:
        raise ValueError("open is not wrapped: it runs scontrol release directly")
    job_id = validate_job_id(job_id)
    lines: List[str] = [
        f"# slurm-dsl {op.value} {job_id}: rendered by slurm_dsl.script; runs under dash and bash\n",
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin; export PATH\n",
        f"n={quote(check_nonce(nonce))} c={quote(check_scontrol_path(scontrol))}"
        f" d={deadline_ms(deadline)} g={KILL_GRACE} s=0\n",
        _PRELUDE,
    ]
    for number, args in call_argv(op, job_id):
        lines.append(_BODY[number].format(args=" ".join(quote(a) for a in args)))
        if number == 1:
            lines.append("s1=$s\n")
    lines.append('exit "$s"\n')
    return "".join(lines)
