"""Job lookups through pyslurm: the only module of slurm-dsl that imports it.

Contract: ``load_pyslurm_lookup(slurm_version)`` returns a ``Lookup`` (see
``lookup``) only when pyslurm imports and its ``version()`` X.Y is the running
Slurm's release (pyslurm 22.5.x <-> Slurm 22.05, 24.11.x <-> 24.11): a pyslurm
built for another Slurm must not talk to this one (pyslurm-api.md).  Otherwise
it returns None and logs exactly one line on the "slurm_dsl" logger (INFO when
pyslurm is simply not installed, WARNING when it is there but unusable), and the
caller falls back to squeue.

The adapter maps exactly the surface in pyslurm-api.md:

- modern API (``pyslurm.Job``/``Jobs``/``RPCError``, 22.5.2+): ``Job.load(int)``
  per id for a few ids, ``Jobs.load()`` once for many; attributes ``state``,
  ``state_reason``, ``is_requeueable`` (bool), ``requeue_count``, ``priority``.
- old API (``pyslurm.job()`` only): ``find_id(id)`` per id, ``get()`` for many;
  keys ``job_state``, ``state_reason``, ``requeue`` (bool), ``restart_cnt``,
  ``priority``.  Errors are ``ValueError(text, errno)``.

errno 2017 (``Invalid job id specified``) is gone (None).  Anything else,
including 1800 (``Unable to contact slurm controller``), any other exception and
any value of the wrong type, is ``LookupFailed``: never gone.  pyslurm has no
timeout of its own: with slurmctld down a load takes 2*(MessageTimeout-1) s.
"""

from __future__ import annotations

import importlib
import logging
import re
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .lookup import MANY, JobInfo, Lookup, LookupFailed, canonical_ids

logger = logging.getLogger("slurm_dsl")

INVALID_JOB_ID = 2017  # ESLURM_INVALID_JOB_ID: slurmctld does not know the id
_PYSLURM_VERSION = re.compile(r"([0-9]+)\.([0-9]+)\.")


def load_pyslurm_lookup(slurm_version: Tuple[int, int], *, many: int = MANY) -> Optional[Lookup]:
    """A pyslurm-backed ``Lookup``, or None (one log line) if pyslurm is missing, broken or mismatched."""
    try:
        mod = importlib.import_module("pyslurm")
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "pyslurm":
            logger.info("pyslurm is not installed; using squeue for job lookups")
        else:
            logger.warning("pyslurm is installed but does not import (%s); using squeue", exc)
        return None
    except Exception as exc:  # a broken build can raise anything at import
        logger.warning("pyslurm raised %s on import (%s); using squeue", type(exc).__name__, exc)
        return None
    try:
        text = mod.version()
        match = _PYSLURM_VERSION.match(text) if isinstance(text, str) else None
    except Exception as exc:
        logger.warning("pyslurm.version() raised %s (%s); using squeue", type(exc).__name__, exc)
        return None
    if match is None:
        logger.warning("unreadable pyslurm.version() %r; using squeue", text)
        return None
    built_for = (int(match.group(1)), int(match.group(2)))
    if built_for != tuple(slurm_version):
        logger.warning(
            "pyslurm %s is built for Slurm %d.%02d, but Slurm %d.%02d is running; using squeue",
            text,
            built_for[0],
            built_for[1],
            slurm_version[0],
            slurm_version[1],
        )
        return None
    if all(hasattr(mod, name) for name in ("Job", "Jobs", "RPCError")):
        return ModernPyslurmLookup(mod, many=many)
    if hasattr(mod, "job"):
        return OldPyslurmLookup(mod, many=many)
    logger.warning("pyslurm %s has neither pyslurm.Job nor pyslurm.job(); using squeue", text)
    return None


class _PyslurmLookup:
    """The imported pyslurm module, and above how many ids one call loads all jobs."""

    def __init__(self, mod: ModuleType, *, many: int = MANY) -> None:
        self.mod = mod
        self.many = many


class ModernPyslurmLookup(_PyslurmLookup):
    """``pyslurm.Job.load`` / ``pyslurm.Jobs.load`` (pyslurm 22.5.2+)."""

    def jobs(self, job_ids: Sequence[str]) -> Dict[str, Optional[JobInfo]]:
        ids = canonical_ids(job_ids)
        if len(ids) > self.many:
            by_id = _ask(self._errno, _all_modern, self.mod)
            return {i: _modern(i, by_id[i]) if i in by_id else None for i in ids}
        out: Dict[str, Optional[JobInfo]] = {}
        for i in ids:
            # Job.load wants an int ("an integer is required" for "123").
            job = _ask(self._errno, self.mod.Job.load, int(i), gone_ok=True)
            out[i] = None if job is _GONE else _modern(i, job)
        return out

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
        if len(ids) > self.many:
            every = _ask(_value_errno, _all_old, self.mod)
            if not isinstance(every, dict):
                raise LookupFailed(f"pyslurm.job().get() returned {type(every).__name__}, not dict")
            return {i: _old(i, every[int(i)]) if int(i) in every else None for i in ids}
        out: Dict[str, Optional[JobInfo]] = {}
        for i in ids:
            # find_id returns every task record for an array master id: keep the id's own.
            records = _ask(_value_errno, _find_old, self.mod, i, gone_ok=True)
            if records is _GONE:
                out[i] = None
                continue
            own = [r for r in records if isinstance(r, dict) and r.get("job_id") == int(i)]
            if len(own) != 1:
                raise LookupFailed(f"pyslurm.job().find_id({i}) did not return job {i}'s own record once")
            out[i] = _old(i, own[0])
        return out


def _value_errno(exc: Exception) -> Optional[int]:
    """The old API raises the builtin ValueError with args (strerror text, errno)."""
    if type(exc) is ValueError and len(exc.args) == 2 and isinstance(exc.args[1], int):
        return int(exc.args[1])
    return None


_GONE: Any = object()


def _all_modern(mod: ModuleType) -> Dict[str, Any]:
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
    try:
        values = (job.id, job.state, job.is_requeueable, job.requeue_count, job.priority, job.state_reason)
    except Exception as exc:
        raise LookupFailed(f"pyslurm: job {job_id}: {type(exc).__name__}: {exc}") from exc
    return _info(job_id, "pyslurm.Job", values)


def _old(job_id: str, record: Any) -> JobInfo:
    keys = ("job_id", "job_state", "requeue", "restart_cnt", "priority", "state_reason")
    if not isinstance(record, dict) or not all(k in record for k in keys):
        raise LookupFailed(f"pyslurm: job {job_id}: record lacks one of {', '.join(keys)}")
    return _info(job_id, "pyslurm.job()", tuple(record[k] for k in keys))


def _info(job_id: str, source: str, values: Tuple[Any, ...]) -> JobInfo:
    """Check the types pyslurm-api.md promises; anything else is an answer we cannot read."""
    own_id, state, requeue, restarts, priority, reason = values
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
    if bad:
        raise LookupFailed(f"{source} for job {job_id}: unexpected {', '.join(bad)}")
    return JobInfo(job_id, state, requeue, int(restarts), int(priority), reason or "")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
