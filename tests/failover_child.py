"""A controller host for tests/integration/test_failover_live.py: one process with a host name and a
clock of its own, running slurm-dsl as a primary or backup slurmctld host would.

Usage: failover_child.py HOST SKEW [--lease-slack S] [--wait] MODE ARGS...

Before slurm_dsl is imported, the process moves into a UTS namespace of its own and names itself
HOST there (``-``: it stays in the machine's), so that the history's actor and the lease owners
(``tracked.current_actor``, ``tracked.lease_owner``: ``os.uname``) name HOST; and its ``time.time``
runs SKEW seconds ahead of the real clock.  Only this process's clock is skewed: scontrol and
squeue keep the real one, so Slurm's munge credentials stay valid (libfaketime would break them).

  --lease-slack S   how long this host's leases outlast an operation's deadline (30 s in
                    production), so that a killed host's leases lapse within a test's time
  --wait            print ``ready`` and wait for a line on stdin before running MODE (to start
                    several hosts at the same moment)

Modes:
  probe                         print ``HOST TIME`` (the host name, this host's time.time())
  cli ARGS...                   print ``go``, then ``slurm-dsl ARGS``; exit with its status
  requeue URL SCONTROL TIMEOUT JOB...
                                print ``go`` once the ledger is open, then one tracked requeue per job,
                                in turn, printing ``JOB RESULT`` after each
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
import time
from typing import List

CLONE_NEWUTS = 0x04000000  # <sched.h>; os.unshare arrives only in Python 3.12


def become(host: str, skew: float) -> None:
    """This process's own host name (``-``: keep the machine's) and clock; before anything reads either."""
    if host != "-":
        unshare_uts(host)
    real = time.time
    time.time = lambda: real() + skew  # every `clock: Clock = time.time` default binds this one


def unshare_uts(host: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUTS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWUTS): {os.strerror(err)}")
    socket.sethostname(host)


def main(argv: List[str]) -> int:
    host, skew, rest = argv[1], float(argv[2]), argv[3:]
    become(host, skew)
    slack = None
    wait = False
    while rest[0].startswith("--"):
        if rest[0] == "--lease-slack":
            slack, rest = float(rest[1]), rest[2:]
        elif rest[0] == "--wait":
            wait, rest = True, rest[1:]
        else:
            raise SystemExit(f"unknown option {rest[0]}")
    from slurm_dsl.admin import cli
    from slurm_dsl.run import tracked

    if slack is not None:
        defaults = tracked.Tracker.__init__.__kwdefaults__
        assert defaults is not None and "lease_slack" in defaults
        defaults["lease_slack"] = slack
    if wait:
        print("ready", flush=True)
        sys.stdin.readline()
    mode, args = rest[0], rest[1:]
    if mode == "probe":
        print(os.uname().nodename, time.time(), flush=True)
        return 0
    if mode == "cli":
        print("go", flush=True)
        return cli.main(args)
    url, scontrol, timeout, jobs = args[0], args[1], float(args[2]), args[3:]
    with tracked.Tracker(url, scontrol=scontrol) as tracker:
        print("go", flush=True)
        for job in jobs:
            outcome = tracker.run("requeue", job, time.time() + timeout)
            print(job, outcome.result.value, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
