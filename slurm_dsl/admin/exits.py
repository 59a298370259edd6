"""The exit statuses of ``slurm-dsl`` (docs/contract.md §10); a library error's is decided in ``cli`` only."""

from __future__ import annotations

from typing import Dict

from ..core.model import Result

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
# docs/contract.md §10, worst first: the exit status of one job, or the worst of several.
EXIT_CODES: Dict[Result, int] = {
    Result.UNKNOWN: 15,
    Result.BIT_SET: 14,
    Result.NOT_RUN: 13,
    Result.EXPIRED: 12,
    Result.NOT_FOUND: 11,
    Result.REJECTED: 10,
    Result.OK: 0,
}
EXIT_SWEEP_BUSY = 3  # another sweep holds the lock: nothing done

# ``history`` and ``settle`` when none of the jobs has a record: the ledger does not know them, as
# not_found says slurmctld does not.  (1 stays "the ledger could not be read".)
EXIT_NO_RECORD = EXIT_CODES[Result.NOT_FOUND]

# ``sweep`` that recorded an acknowledged operation as lost, and ``history --lost`` that lists one not
# redone: slurmctld lost a change it acknowledged (docs/contract.md §13.4), news an alert must carry.
EXIT_LOST = 16
