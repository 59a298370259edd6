"""slurm-dsl: safe, deadline-wrapped Slurm job control.

Every hold, release, requeue and restore runs as a short deadline-wrapped sh
script whose output is read strictly into one ``Outcome``: ok, rejected,
not_found, expired, not_run, unknown or bit_set (docs/contract.md §7).  A result is ok or
rejected only when it certainly is; anything else is unknown.

Importing the package loads none of it: each public name is imported from its home on first use
(PEP 562), so that ``slurm-dsl hold``, which imports ``slurm_dsl.admin.cli`` and with it this
package, does not pay for the public api's modules at every start (docs/benchmarks.md §7).
``from slurm_dsl import hold`` and ``slurm_dsl.hold`` work as they always did.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Dict, List

if TYPE_CHECKING:  # what a type checker sees: every public name, from its home
    from .api import configuration, hold, open_job, release, requeue, restore, run_op, run_ops
    from .core.jobid import validate_job_id
    from .core.model import (
        Call,
        CallOutcome,
        ConfigError,
        DSLError,
        Expired,
        InvalidInput,
        LedgerError,
        LookupFailed,
        NotFound,
        NotRecorded,
        NotRun,
        Op,
        Outcome,
        OutcomeUnknown,
        Reason,
        Rejected,
        RequeueBit,
        RequeueBitSet,
        Result,
        SweepBusy,
        UsageError,
        Verdict,
        WholeArray,
    )
    from .core.reader import read_outcome
    from .core.script import render
    from .run.calls import execute
    from .run.config import ConfigFileError, Configuration

__version__ = "0.1.0"

__all__ = [
    "Call",
    "CallOutcome",
    "ConfigError",
    "ConfigFileError",
    "Configuration",
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
    "Verdict",
    "WholeArray",
    "configuration",
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

# The module each public name is imported from, on first use.
_HOMES: Dict[str, str] = {
    **dict.fromkeys(("configuration", "hold", "open_job", "release", "requeue", "restore", "run_op", "run_ops"),
                    "api"),
    **dict.fromkeys(
        ("ConfigError", "DSLError", "Expired", "InvalidInput", "LedgerError", "LookupFailed", "NotFound",
         "NotRecorded", "NotRun", "OutcomeUnknown", "Rejected", "RequeueBitSet", "SweepBusy", "UsageError",
         "WholeArray"),
        "core.model",
    ),
    "validate_job_id": "core.jobid",
    **dict.fromkeys(("Call", "CallOutcome", "Op", "Outcome", "Reason", "RequeueBit", "Result"), "core.model"),
    "read_outcome": "core.reader",
    "render": "core.script",
    "Verdict": "core.model",
    "execute": "run.calls",
    "ConfigFileError": "run.config",  # the config file's (docs/contract.md §10.2), a ConfigError
    "Configuration": "run.config",  # what ``configuration()`` returns (docs/contract.md §8)
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
