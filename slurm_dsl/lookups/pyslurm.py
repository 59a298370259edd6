"""Job lookups through pyslurm: the only module of slurm-dsl that imports it (docs/contract.md §9.3).

The adapter maps exactly the surface in docs/pyslurm.md §2, §3, and loads only a pyslurm built for
the running Slurm (docs/pyslurm.md §1).  errno 2017 is gone; anything else, including any value of
the wrong type, is ``LookupFailed``, never gone."""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
from dataclasses import replace
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..core.jobid import canonical_ids
from ..core.jobinfo import JobInfo, Lookup
from ..core.model import LookupFailed
from ..host.files import NotRead, read_regular
from . import plan

logger = logging.getLogger("slurm_dsl")

INVALID_JOB_ID = 2017  # ESLURM_INVALID_JOB_ID: slurmctld does not know the id
FEW = 4  # up to this many ids: one Job.load each; more: one Jobs.load() of every job
# docs/pyslurm.md §4 (the lab, 22.05): a Job.load ~3.7 ms (it loads the job's steps too), one at a
# time (pyslurm holds the GIL); Jobs.load() 5-9 ms at ~440 jobs: ~2 ms plus ~13 us a job.
PYSLURM_COSTS = plan.Costs(batch=0.0037, parallel=1, listing=0.002, per_job=0.000013)
_PYSLURM_VERSION = re.compile(r"([0-9]+)\.([0-9]+)\.")


def load_pyslurm_lookup(slurm_version: Tuple[int, int], *, many: int = FEW) -> Optional[Lookup]:
    """A pyslurm-backed ``Lookup``, or None (one log line) if pyslurm is missing, broken or mismatched."""
    found, level, why = find_pyslurm_lookup(slurm_version, many=many)
    if found is None:
        logger.log(level, "%s; using squeue", why)
    return found


def find_pyslurm_lookup(slurm_version: Tuple[int, int], *, many: int = FEW) -> Tuple[Optional[Lookup], int, str]:
    """A pyslurm-backed ``Lookup``, or None with a log level (INFO: not installed; WARNING: unusable) and why."""
    # import pyslurm runs slurm_init(), which reads slurm.conf: one it cannot read makes libslurm
    # retry for 60 s and then end the process (docs/slurm-25.11.md §2). A $SLURM_CONF is checked
    # first; libslurm's built-in path is its own.
    named = os.environ.get("SLURM_CONF")
    if named and "pyslurm" not in sys.modules:
        found = read_regular(named, 1, head=True)
        if isinstance(found, NotRead):
            return None, logging.WARNING, (
                f"pyslurm not imported: SLURM_CONF={named} cannot be read ({found.why}), and libslurm would"
                " wait 60 s for it and then end the process"
            )
    try:
        mod = importlib.import_module("pyslurm")
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "pyslurm":
            return None, logging.INFO, "pyslurm is not installed"
        return None, logging.WARNING, f"pyslurm is installed but does not import ({exc})"
    except Exception as exc:  # a broken build can raise anything at import
        return None, logging.WARNING, f"pyslurm raised {type(exc).__name__} on import ({exc})"
    # __version__ where there is one: in pyslurm 25.11, pyslurm.version is a module, not the
    # function of 22.5 (docs/slurm-25.11.md §2).
    dunder = hasattr(mod, "__version__")
    asked = "pyslurm.__version__" if dunder else "pyslurm.version()"
    try:
        text = mod.__version__ if dunder else mod.version()
        match = _PYSLURM_VERSION.match(text) if isinstance(text, str) else None
    except Exception as exc:
        return None, logging.WARNING, f"{asked} raised {type(exc).__name__} ({exc})"
    if match is None:
        return None, logging.WARNING, f"unreadable {asked} {text!r}"
    built_for = (int(match.group(1)), int(match.group(2)))
    if built_for != tuple(slurm_version):
        return None, logging.WARNING, (
            f"pyslurm {text} is built for Slurm {built_for[0]}.{built_for[1]:02d},"
            f" but Slurm {slurm_version[0]}.{slurm_version[1]:02d} is running"
        )
    if all(hasattr(mod, name) for name in ("Job", "Jobs", "RPCError")):
        return ModernPyslurmLookup(mod, many=many), logging.DEBUG, ""
    if hasattr(mod, "job"):
        return OldPyslurmLookup(mod, many=many), logging.DEBUG, ""
    return None, logging.WARNING, f"pyslurm {text} has neither pyslurm.Job nor pyslurm.job()"


class _PyslurmLookup:
    """The imported pyslurm module, and above how many ids one call loads all jobs."""

    name = "pyslurm"

    def __init__(self, mod: ModuleType, *, many: int = FEW, costs: plan.Costs = PYSLURM_COSTS) -> None:
        self.mod = mod
        self.many = many
        self.costs = costs
        self.jobs_held: Optional[int] = None  # jobs in this lookup's last load of every job

    def _load_all(self, count: int) -> bool:
        """Whether ``count`` ids are one load of every job rather than one load each."""
        if self.many <= 0:
            return True  # a load of every job was asked for
        choice = plan.one_by_one(count, self.jobs_held, self.costs) if self.jobs_held is not None else None
        return count > self.many if choice is None else not choice


class ModernPyslurmLookup(_PyslurmLookup):
    """``pyslurm.Job.load`` / ``pyslurm.Jobs.load`` (pyslurm 22.5.2+)."""

    def jobs(self, job_ids: Sequence[str]) -> Dict[str, Optional[JobInfo]]:
        ids = canonical_ids(job_ids)
        every: Optional[Dict[str, Any]] = None
        if self._load_all(len(ids)):
            every = self._all()
            found = {i: every[i] for i in ids if i in every}
        else:
            found = {}
            for i in ids:
                # Job.load wants an int ("an integer is required" for "123").
                job = _ask(self._errno, self.mod.Job.load, int(i), gone_ok=True)
                if job is not _GONE:
                    found[i] = job
        out: Dict[str, Optional[JobInfo]] = {i: _modern(i, found[i]) if i in found else None for i in ids}
        arrays = {i for i, info in out.items() if info is not None and info.array_job_id == i}
        if arrays:
            if every is None:
                every = self._all()
            # Only the arrays' own records are read: an odd record elsewhere must not fail this.
            records = [_modern(key, job) for key, job in every.items() if str(_array_id(job)) in arrays]
            out = {i: _with_reach(info, records) if info is not None else None for i, info in out.items()}
        return out

    def _all(self) -> Dict[str, Any]:
        every: Dict[str, Any] = _ask(self._errno, _all_modern, self.mod)
        self.jobs_held = len(every)
        return every

    def _errno(self, exc: Exception) -> Optional[int]:
        rpc_error = getattr(self.mod, "RPCError", None)
        if isinstance(rpc_error, type) and isinstance(exc, rpc_error):
            code = getattr(exc, "errno", None)
            return code if _is_int(code) else None
        return None


class OldPyslurmLookup(_PyslurmLookup):
    """``pyslurm.job().find_id`` / ``pyslurm.job().get()`` (pyslurm before 22.5.2)."""

    def jobs(self, job_ids: Sequence[str]) -> Dict[str, Optional[JobInfo]]:
        ids = canonical_ids(job_ids)
        if self._load_all(len(ids)):
            every = _ask(_value_errno, _all_old, self.mod)
            if not isinstance(every, dict):
                raise LookupFailed(f"pyslurm.job().get() returned {type(every).__name__}, not dict")
            self.jobs_held = len(every)
            records = [_old(str(key), record) for key, record in every.items()]
            return {i: _with_reach(_old(i, every[int(i)]), records) if int(i) in every else None for i in ids}
        out: Dict[str, Optional[JobInfo]] = {}
        for i in ids:
            # find_id returns every task record for an array's own JobId: the id's own one answers.
            found = _ask(_value_errno, _find_old, self.mod, i, gone_ok=True)
            if found is _GONE:
                out[i] = None
                continue
            own = [r for r in found if isinstance(r, dict) and r.get("job_id") == int(i)]
            if len(own) != 1:
                raise LookupFailed(f"pyslurm.job().find_id({i}) did not return job {i}'s own record once")
            records = [_old(str(r.get("job_id")), r) for r in found]
            out[i] = _with_reach(_old(i, own[0]), records)
        return out


def _array_id(job: Any) -> Any:
    try:
        return job.array_id
    except Exception:  # read again, strictly, by _modern if it matters
        return None


def _with_reach(info: JobInfo, records: Sequence[JobInfo]) -> JobInfo:
    """``info`` with ``array_tasks`` counted over ``records`` when it is an array's own JobId."""
    if info.array_job_id != info.job_id:
        return info
    return replace(info, array_tasks=sum(r.array_tasks for r in records if r.array_job_id == info.job_id))


def _value_errno(exc: Exception) -> Optional[int]:
    if type(exc) is ValueError and len(exc.args) == 2 and isinstance(exc.args[1], int):
        return int(exc.args[1])
    return None


_GONE: Any = object()


def _all_modern(mod: ModuleType) -> Dict[str, Any]:
    """Every job, by its id as a string (``Jobs`` itself is keyed by int)."""
    by_id: Dict[str, Any] = {}
    for job in mod.Jobs.load().values():
        key = str(job.id)
        if key in by_id:
            raise LookupFailed(f"pyslurm.Jobs.load() listed job {key} twice")
        by_id[key] = job
    return by_id


def _all_old(mod: ModuleType) -> Any:
    return mod.job().get()


def _find_old(mod: ModuleType, job_id: str) -> List[Any]:
    return list(mod.job().find_id(job_id))


def _ask(
    errno_of: Callable[[Exception], Optional[int]],
    call: Callable[..., Any],
    *args: Any,
    gone_ok: bool = False,
) -> Any:
    """Run one pyslurm call; errno 2017 is ``_GONE`` where allowed, any other failure ``LookupFailed``."""
    try:
        return call(*args)
    except LookupFailed:
        raise
    except Exception as exc:  # the boundary: whatever pyslurm raises means "could not ask"
        code = errno_of(exc)
        if gone_ok and code == INVALID_JOB_ID:
            return _GONE
        detail = f"errno {code}" if code is not None else type(exc).__name__
        raise LookupFailed(f"pyslurm: {exc} ({detail})") from exc


def _modern(job_id: str, job: Any) -> JobInfo:
    # Only these attributes: others (.name, to_dict()) raise UnicodeDecodeError on a
    # job name that is not UTF-8 (real pyslurm 22.5.3).
    try:
        values = (
            job.id, job.state, job.is_requeueable, job.requeue_count, job.priority, job.state_reason,
            job.array_id, job.array_task_id,
        )
    except Exception as exc:
        raise LookupFailed(f"pyslurm: job {job_id}: {type(exc).__name__}: {exc}") from exc
    return _info(job_id, "pyslurm.Job", values)


def _old(job_id: str, record: Any) -> JobInfo:
    keys = (
        "job_id", "job_state", "requeue", "restart_cnt", "priority", "state_reason", "array_job_id", "array_task_id",
    )
    if not isinstance(record, dict) or not all(k in record for k in keys):
        raise LookupFailed(f"pyslurm: job {job_id}: record lacks one of {', '.join(keys)}")
    return _info(job_id, "pyslurm.job()", tuple(record[k] for k in keys))


def _info(job_id: str, source: str, values: Tuple[Any, ...]) -> JobInfo:
    """Check the types docs/pyslurm.md promises; anything else is an answer we cannot read."""
    own_id, state, requeue, restarts, priority, reason, array_id, task_id = values
    bad: List[str] = []
    if not _is_int(own_id) or own_id != int(job_id):
        bad.append(f"id {own_id!r}")
    if not isinstance(state, str) or not state:
        bad.append(f"state {state!r}")
    if not isinstance(requeue, bool):
        bad.append(f"requeue flag {requeue!r}")
    if not _is_int(restarts) or restarts < 0:
        bad.append(f"restart count {restarts!r}")
    if not _is_int(priority) or priority < 0:
        bad.append(f"priority {priority!r}")
    if reason is not None and not isinstance(reason, str):
        bad.append(f"reason {reason!r}")
    # A plain job has no array id (None, or 0 where pyslurm passes Slurm's value through).
    in_array = array_id is not None and array_id != 0
    if in_array and (not _is_int(array_id) or array_id < 0):
        bad.append(f"array id {array_id!r}")
    if task_id is not None and (not _is_int(task_id) or task_id < 0):
        bad.append(f"array task id {task_id!r}")
    if bad:
        raise LookupFailed(f"{source} for job {job_id}: unexpected {', '.join(bad)}")
    return JobInfo(
        job_id, state, requeue, int(restarts), int(priority), reason or "",
        array_job_id=str(array_id) if in_array else None,
        # A record without a task id holds a range of pending tasks: at least two.
        array_tasks=2 if in_array and task_id is None else 1,
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
