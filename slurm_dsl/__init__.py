"""slurm-dsl: safe, deadline-wrapped Slurm job control (docs/contract.md §1-§13).

The public API is ``__all__`` (docs/contract.md §8); every subpackage is private.  Importing the
package loads none of it: each public name is imported from its home on first use (PEP 562,
docs/benchmarks.md §7)."""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Dict, List

if TYPE_CHECKING:  # what a type checker sees: every public name, from its home
    from .api import configuration, hold, open_job, release, requeue, restore, run_op, run_ops
    from .core.model import (
        AdminComment,
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
    from .run.config import ConfigFileError, Configuration

__version__ = "0.1.0"

__all__ = [
    "AdminComment",
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
    "hold",
    "open_job",
    "release",
    "requeue",
    "restore",
    "run_op",
    "run_ops",
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
    **dict.fromkeys(("AdminComment", "Call", "CallOutcome", "Op", "Outcome", "Reason", "RequeueBit", "Result"),
                    "core.model"),
    "Verdict": "core.model",
    "ConfigFileError": "run.config",  # the config file's (docs/contract.md §10.2), a ConfigError
    "Configuration": "run.config",  # what ``configuration()`` returns (docs/contract.md §8)
}


# Exported until this release, private now (CHANGELOG.md): still found, with a DeprecationWarning
# saying what to use; they go in the next release.
_WITHDRAWN: Dict[str, str] = {
    "execute": "run.calls",  # the bare call: no ledger, lease or array check
    "render": "core.script",
    "read_outcome": "core.reader",
    "validate_job_id": "core.jobid",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None and name in _WITHDRAWN:
        warnings.warn(
            f"slurm_dsl.{name} is no longer public and goes in the next release: use run_op or run_ops, which"
            " record the operation and hold the job's lease (docs/contract.md §8)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(f"{__name__}.{_WITHDRAWN[name]}"), name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
