"""The simulator's stand-in for /bin/sh running one of slurm-dsl's wrapped scripts.

Written from docs/contract.md §2-§4 (what the script does: each call's status line on stderr,
``\\x1eDSL <nonce> call <n> <status>``; call 2 of a requeue only if call 1 succeeded, call 3
unless call 1 never started; no call starts after the deadline, 75; a call still running at the
deadline is TERMed, 124; the exit status is the last call's), not from slurm_dsl's code.  It reads
the script's own lines (``nonce='...'``, ``call N 'arg' ...`` and the two conditions) and makes each
call on a ``Cluster``; anything else in a line that would run is refused, so a script the
simulator does not understand fails loudly instead of being half-run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from tests.sim.slurmctld import ROOT, Cluster

EXPIRED, TIMED_OUT = 75, 124
_NONCE = re.compile(r"^nonce='([0-9a-f]{32})' ")
_CALL = re.compile(r"^(\[ \"\$first\" -(ne 0|eq 75) \] \|\| )?call (\d) (.*)$")
_QUIET = ("#", "stopped=", "PATH=", "if ", "fi", "{ (", "call()", "  ", "}", "first=$status", 'exit "$status"')


@dataclass(frozen=True)
class Call:
    number: int
    argv: Tuple[str, ...]
    when: Optional[str]  # None: always; "ne 0": only if call 1 succeeded; "eq 75": unless call 1 never started


@dataclass(frozen=True)
class Ran:
    """What the script did: its exit status, stderr, when it ended, and per call the reply."""

    status: int
    stderr: bytes
    ends: float


def parse(script: str) -> Tuple[str, List[Call]]:
    """The nonce and the calls of a rendered script."""
    nonce, calls = "", []
    for line in script.splitlines():
        found = _NONCE.match(line)
        if found:
            nonce = found.group(1)
            continue
        call = _CALL.match(line)
        if call:
            calls.append(Call(int(call.group(3)), tuple(shlex.split(call.group(4))), call.group(2)))
        elif line and not line.startswith(_QUIET):
            raise ValueError(f"the simulator does not know this line of the script: {line!r}")
    if not nonce or not calls:
        raise ValueError("not a rendered script: no nonce or no call")
    return nonce, calls


def run(cluster: Cluster, t: float, script: str, deadline: float, uid: int = ROOT, who: str = "dsl",
        calls_made: Optional[int] = None, after_call: Optional[Callable[[int, float], None]] = None,
        in_flight: bool = False) -> Ran:
    """Run ``script`` from ``t``; the runner TERMs it at ``deadline`` (simulated time).
    ``calls_made``: the script is KILLed once so many calls were made (with its runner), and with
    ``in_flight`` as the next call's request is on its way (slurmctld applies it anyway);
    ``after_call``: called with 0 and the start, then with each call's number and end, before
    the next (a fault between calls)."""
    nonce, calls = parse(script)
    cut = None
    if calls_made is not None:
        calls, cut = calls[:calls_made], next(iter(calls[calls_made:]), None)
    out: List[str] = []
    status, first, now = 0, 0, t
    if after_call is not None:
        after_call(0, now)
    for call in calls:
        if (call.when == "ne 0" and first != 0) or (call.when == "eq 75" and first == EXPIRED):
            continue
        if now >= deadline:
            status, text = EXPIRED, ""
        else:
            # whose: the command's and its operation's; TERMed at the deadline
            reply = cluster.call(now, call.argv, uid, f"{who}#{nonce}", gives_up=deadline)
            if reply.ends > deadline:  # TERMed while it ran: what it printed is lost with it
                status, text, now = TIMED_OUT, "", deadline
            else:
                status, text, now = reply.rc, reply.stderr, reply.ends
        out.append(f"{text}\x1eDSL {nonce} call {call.number} {status}\n")
        if call.number == 1:
            first = status
        if after_call is not None:
            after_call(call.number, now)
    if in_flight and cut is not None and now < deadline and not (
            (cut.when == "ne 0" and first != 0) or (cut.when == "eq 75" and first == EXPIRED)):
        cluster.send_and_die(now, cut.argv, uid, f"{who}#{nonce}")
    return Ran(status, "".join(out).encode(), now)
