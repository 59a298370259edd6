"""A child process for tests/ledger/test_ledger.py: writes to a ledger in a loop.

Usage:
  ledger_crash_child.py crash PATH FIRST_JOB
      Prints ``opening`` before it opens (creates, migrates) the ledger, then does one
      operation per fresh job id from FIRST_JOB on, forever.  Prints ``begun <op_id> <job>``
      after each committed begin and ``finished <op_id> <bit>`` after each committed finish,
      flushing before it goes on; the parent SIGKILLs it at random moments.
  ledger_crash_child.py worker PATH NAME COUNT
      Prints ``ready``, waits for a line on stdin, then COUNT times: a hold begun and finished on
      the shared job 7, a failed lookup on job 7 (a read-modify-write), and under the lease of
      the shared job 8 a set_bits that no other worker may overwrite while the lease is held.
      Exits 1 on the first violation, 0 after printing ``done``.
  ledger_crash_child.py open PATH
      Prints ``waiting``, waits for a line on stdin, opens the ledger and prints its version.
"""

from __future__ import annotations

import sys
import time
from typing import List, Optional, Tuple

from slurm_dsl.core.model import Call, CallOutcome, Op, Outcome, Reason, RequeueBit, Result
from slurm_dsl.ledger.choose import open_ledger


def _call(number: int, status: int, outcome: CallOutcome, reason: Optional[Reason] = None) -> Call:
    return Call(number, status, str(status), b"", outcome, None, reason)


def _outcome(op: Op, job_id: str, i: int) -> Outcome:
    ok = _call(1, 0, CallOutcome.SUCCESS)
    if op is not Op.REQUEUE:
        return Outcome(op, job_id, Result.OK, None, None, (ok,), 0)
    kind = i % 3
    calls: Tuple[Call, ...]
    if kind == 0:
        calls = (ok, _call(2, 0, CallOutcome.SUCCESS), _call(3, 0, CallOutcome.SUCCESS))
        return Outcome(op, job_id, Result.OK, RequeueBit.CLEAR, None, calls, 0)
    if kind == 1:
        calls = (_call(1, 124, CallOutcome.UNKNOWN, Reason.TIMED_OUT), _call(3, 0, CallOutcome.SUCCESS))
        return Outcome(op, job_id, Result.UNKNOWN, RequeueBit.MAY_BE_SET, Reason.TIMED_OUT, calls, 0)
    calls = (ok, _call(2, 0, CallOutcome.SUCCESS), _call(3, 75, CallOutcome.EXPIRED))
    return Outcome(op, job_id, Result.BIT_SET, RequeueBit.SET, Reason.CLEAR_NOT_RUN, calls, 75)


def crash(path: str, first_job: int) -> int:
    print("opening", flush=True)
    with open_ledger(path) as ledger:
        i = 0
        while True:
            job_id = str(first_job + i)
            op = Op.HOLD if i % 4 == 3 else Op.REQUEUE
            op_id = ledger.begin_operations([(job_id, op, f"{i:032x}")], time.time())[0]
            print(f"begun {op_id} {job_id}", flush=True)
            bit = ledger.finish_operations([(op_id, _outcome(op, job_id, i), b"e" * (i % 7))], time.time())[0]
            print(f"finished {op_id} {bit.value}", flush=True)
            i += 1


def worker(path: str, name: str, count: int) -> int:
    with open_ledger(path) as ledger:
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(count):
            op_id = ledger.begin_operations([("7", Op.HOLD, f"{name}-{i}")], time.time())[0]
            ledger.finish_operations([(op_id, _outcome(Op.HOLD, "7", i), b"")], time.time())
            ledger.lookup_failed("7", f"{name} {i}", time.time())
            while not ledger.acquire_leases(["8"], name, time.time(), 60.0):
                pass  # polling the other worker's lease, as a sweeper would skip and come back
            mine = f"{name} {i}"
            if not ledger.set_bits([("8", RequeueBit.SET, mine)], time.time(), owner=name):
                print(f"set_bits refused under my own lease at {i}", flush=True)
                return 1
            seen = ledger.get("8")
            if seen is None or seen.why != mine:
                print(f"lease violated at {i}: {seen}", flush=True)
                return 1
            if not ledger.release_lease("8", name):
                print(f"lease lost at {i}", flush=True)
                return 1
    print("done", flush=True)
    return 0


def open_at_once(path: str) -> int:
    print("waiting", flush=True)
    sys.stdin.readline()
    with open_ledger(path) as ledger:
        print(ledger.schema_version(), flush=True)
    return 0


def main(argv: List[str]) -> int:
    if argv[1] == "open":
        return open_at_once(argv[2])
    if argv[1] == "crash":
        return crash(argv[2], int(argv[3]))
    return worker(argv[2], argv[3], int(argv[4]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
