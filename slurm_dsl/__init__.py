"""slurm-dsl: safe, deadline-wrapped Slurm job control.

Every hold, release, requeue and restore runs as a short deadline-wrapped sh
script whose output is read strictly into one ``Outcome``: ok, rejected,
not_found, expired, not_run, unknown or bit_set (docs/contract.md §7).  A result is ok or
rejected only when it certainly is; anything else is unknown.
"""

from .api import hold, open_job, release, requeue, restore, run_op, run_ops
from .core.errors import (
    ConfigError,
    DSLError,
    Expired,
    InvalidInput,
    LedgerError,
    LookupFailed,
    NotFound,
    NotRecorded,
    NotRun,
    OutcomeUnknown,
    Rejected,
    RequeueBitSet,
    SweepBusy,
    UsageError,
    WholeArray,
)
from .core.jobid import validate_job_id
from .core.model import Call, CallOutcome, Op, Outcome, Reason, RequeueBit, Result
from .core.reader import read_outcome
from .core.script import render
from .run.calls import execute

__version__ = "0.1.0"

__all__ = [
    "Call",
    "CallOutcome",
    "ConfigError",
    "DSLError",
    "Expired",
    "InvalidInput",
    "LedgerError",
    "LookupFailed",
    "NotFound",
    "NotRecorded",
    "NotRun",
    "Op",
    "Outcome",
    "OutcomeUnknown",
    "Reason",
    "Rejected",
    "RequeueBit",
    "RequeueBitSet",
    "Result",
    "SweepBusy",
    "UsageError",
    "WholeArray",
    "execute",
    "hold",
    "open_job",
    "read_outcome",
    "release",
    "render",
    "requeue",
    "restore",
    "run_op",
    "run_ops",
    "validate_job_id",
]
