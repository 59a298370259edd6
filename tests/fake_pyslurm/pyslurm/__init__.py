"""A fake ``pyslurm``: exactly the surface in docs/pyslurm.md, over an in-memory job table.

No pyslurm on PyPI builds against Debian's Slurm (22.05, 24.11), so tests of
slurm_dsl.lookups.pyslurm import this instead (put ``tests/fake_pyslurm`` first
on ``sys.path`` and import ``pyslurm`` afresh).  Chosen at import time from the
environment:

- ``FAKE_PYSLURM_API``: ``modern`` (default; pyslurm 22.5.3, which has both
  ``pyslurm.Job``/``Jobs``/``RPCError`` and the old ``pyslurm.job()``) or ``old``
  (before 22.5.2: only ``pyslurm.job()``).
- ``FAKE_PYSLURM_VERSION``: what ``version()`` returns (default ``22.5.3``).
- ``FAKE_PYSLURM_IMPORT``: ``ImportError`` or ``RuntimeError`` makes the import
  itself raise that, as a build linked against a missing libslurm would.

Tests then fill ``JOBS`` (``add_job``), flip ``CONTROLLER_UP`` (False: errno 1800)
or ``CONTROLLER_SILENT`` (a port that accepts but never answers: errno 5004), and
read ``RPCS`` (one entry per slurmctld RPC).  What a real pyslurm 22.5.3 built for
the lab's Slurm showed, and the fake does too: ``Jobs`` is a mapping with int keys;
``Job.load`` takes a float, reads ``True`` as 1, raises ``OverflowError`` for -1
and 2**32 and ``TypeError`` for a str; ``RPCError()`` is errno 0, ``'Success'``;
``.name`` and ``to_dict()`` raise ``UnicodeDecodeError`` for a job name that is not
UTF-8.  Errors are the documented ones: modern
``RPCError`` with ``.errno`` and ``str(e)`` the plain strerror text; old builtin
``ValueError(text, errno)``.  2017 unknown id, 2037 requeue of a Requeue=0 job,
2084 hold of a finished job, 1800 with slurmctld down.  Anything docs/pyslurm.md
does not describe raises ``NotImplementedError`` rather than guess.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from typing import Any, Dict, List, Optional, Tuple, Union

_API = os.environ.get("FAKE_PYSLURM_API", "modern")
_VERSION = os.environ.get("FAKE_PYSLURM_VERSION", "22.5.3")
_IMPORT = os.environ.get("FAKE_PYSLURM_IMPORT", "")

if _IMPORT == "ImportError":
    raise ImportError("libslurm.so.38: cannot open shared object file: No such file or directory")
if _IMPORT == "RuntimeError":
    raise RuntimeError("Slurm version mismatch")
if _API not in ("modern", "old"):
    raise AssertionError(f"FAKE_PYSLURM_API must be modern or old, not {_API!r}")

INVALID_JOB_ID = (2017, "Invalid job id specified")
DISABLED = (2037, "Requested operation is presently disabled")
ALREADY_DONE = (2084, "Job has already finished")
NO_CONTROLLER = (1800, "Unable to contact slurm controller (connect failure)")
NO_ANSWER = (5004, "Socket timed out on send/recv operation")
FINISHED = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE")


@dataclass
class Record:
    """One job record as slurmctld holds it (the fields docs/pyslurm.md maps)."""

    job_id: int
    state: str = "RUNNING"
    reason: str = "None"
    requeue: bool = False
    restarts: int = 0
    priority: int = 4294901657
    array_job_id: Optional[int] = None
    array_task_id: Optional[int] = None
    array_task_str: Optional[str] = None
    name: bytes = b"wrap"  # as slurmctld holds it: bytes, decoded by pyslurm
    user_name: str = "root"
    user_id: int = 0
    partition: str = "debug"
    batch: bool = True


JOBS: Dict[int, Record] = {}
CONTROLLER_UP = True
CONTROLLER_SILENT = False
RPCS: List[str] = []


def add_job(job_id: int, **fields: Any) -> Record:
    record = Record(job_id, **fields)
    JOBS[job_id] = record
    return record


def reset() -> None:
    global CONTROLLER_UP, CONTROLLER_SILENT
    JOBS.clear()
    RPCS.clear()
    CONTROLLER_UP = True
    CONTROLLER_SILENT = False


def version() -> str:
    return _VERSION


def slurm_api_version() -> Tuple[int, int, int]:
    major, minor = (int(p) for p in _VERSION.split(".")[:2])
    return (major, minor, 8)


def slurm_ping(controller: int = 0) -> int:
    if not CONTROLLER_UP:
        raise NotImplementedError("docs/pyslurm.md does not say what slurm_ping returns with slurmctld down")
    return 0


def _rpc(name: str, error: Any) -> None:
    RPCS.append(name)
    if not CONTROLLER_UP:
        raise error(*NO_CONTROLLER)
    if CONTROLLER_SILENT:
        raise error(*NO_ANSWER)


def _record(job_id: int, error: Any) -> Record:
    record = JOBS.get(job_id)
    if record is None:
        raise error(*INVALID_JOB_ID)
    return record


# --- modern API: pyslurm.Job, pyslurm.Jobs, pyslurm.RPCError -------------------


class PyslurmError(Exception):
    pass


class RPCError(PyslurmError):
    def __init__(self, errno: int = 0, msg: Optional[str] = None) -> None:
        msg = "Success" if msg is None and errno == 0 else msg
        super().__init__(errno, msg)
        self.errno = errno
        self.msg = msg

    def __str__(self) -> str:
        return self.msg or ""


def _rpc_error(errno: int, text: str) -> RPCError:
    return RPCError(errno=errno, msg=text)


class JobSubmitDescription:
    def __init__(self, **kwargs: Any) -> None:
        for key in kwargs:
            if key not in ("is_requeueable", "priority"):
                raise NotImplementedError(f"JobSubmitDescription({key}=...) is not in docs/pyslurm.md")
        self.changes = kwargs


class Job:
    def __init__(self, job_id: int) -> None:
        self._id = job_id
        self._snapshot: Optional[Record] = None

    @staticmethod
    def load(job_id: Any) -> Job:
        if not isinstance(job_id, (int, float)):
            raise TypeError("an integer is required")
        job_id = int(job_id)  # Cython's uint32_t conversion: a float is truncated, True is 1
        if not 0 <= job_id < 2**32:
            raise OverflowError("value too large to convert to uint32_t" if job_id > 0 else
                                "can't convert negative value to uint32_t")
        _rpc("load_job", _rpc_error)
        job = Job(job_id)
        job._snapshot = replace(_record(job_id, _rpc_error))
        return job

    def _loaded(self) -> Record:
        if self._snapshot is None:
            raise NotImplementedError("attributes of a Job that was not loaded are not in docs/pyslurm.md")
        return self._snapshot

    @property
    def id(self) -> int:
        return self._id

    @property
    def state(self) -> str:
        return self._loaded().state

    @property
    def state_reason(self) -> str:
        return self._loaded().reason

    @property
    def is_requeueable(self) -> bool:
        return self._loaded().requeue

    @property
    def requeue_count(self) -> int:
        return self._loaded().restarts

    @property
    def priority(self) -> int:
        return self._loaded().priority

    @property
    def array_id(self) -> Optional[int]:
        return self._loaded().array_job_id

    @property
    def array_task_id(self) -> Optional[int]:
        return self._loaded().array_task_id

    @property
    def name(self) -> str:
        return self._loaded().name.decode("utf-8")  # UnicodeDecodeError for a non-UTF-8 name

    @property
    def user_name(self) -> str:
        return self._loaded().user_name

    @property
    def partition(self) -> str:
        return self._loaded().partition

    @property
    def is_batch_job(self) -> bool:
        return self._loaded().batch

    def to_dict(self) -> Dict[str, Any]:
        record = asdict(self._loaded())
        record["name"] = self.name
        return record

    def as_dict(self) -> Dict[str, Any]:
        return self.to_dict()

    def __repr__(self) -> str:
        return f"pyslurm.Job({self._id})"

    # Actions: the table of errors in docs/pyslurm.md §2.

    def hold(self, mode: Optional[str] = None) -> None:
        _rpc("update_job", _rpc_error)
        record = _record(self._id, _rpc_error)
        if record.state in FINISHED:
            raise _rpc_error(*ALREADY_DONE)
        record.priority = 0
        record.reason = "JobHeldUser" if mode == "user" else "JobHeldAdmin"

    def release(self) -> None:
        _rpc("update_job", _rpc_error)
        record = _record(self._id, _rpc_error)
        if record.state in FINISHED:
            raise _rpc_error(*ALREADY_DONE)
        record.priority = 4294901657
        record.reason = "None"

    def requeue(self, hold: bool = False) -> None:
        _rpc("requeue", _rpc_error)
        record = _record(self._id, _rpc_error)
        if not record.requeue:
            raise _rpc_error(*DISABLED)
        if record.state == "PENDING":
            raise NotImplementedError("docs/pyslurm.md gives no errno for 'Job is pending execution'")
        record.state = "PENDING"
        record.restarts += 1
        record.reason = "job_requeued_in_held_state" if hold else "BeginTime"
        if hold:
            record.priority = 0

    def modify(self, changes: JobSubmitDescription) -> None:
        _rpc("update_job", _rpc_error)
        record = _record(self._id, _rpc_error)
        if record.state in FINISHED:
            raise _rpc_error(*ALREADY_DONE)
        if "is_requeueable" in changes.changes:
            record.requeue = bool(changes.changes["is_requeueable"])
        if "priority" in changes.changes:
            record.priority = int(changes.changes["priority"])

    def cancel(self) -> None:
        _rpc("kill_job", _rpc_error)
        record = _record(self._id, _rpc_error)
        if record.state not in FINISHED:
            record.state = "CANCELLED"

    def suspend(self) -> None:
        raise NotImplementedError("docs/pyslurm.md names suspend() but not its errors")


class Jobs(Dict[int, Job]):
    """pyslurm 22.5's collection: a dict of job id -> Job."""

    @staticmethod
    def load() -> Jobs:
        _rpc("load_jobs", _rpc_error)
        jobs = Jobs()
        for job_id, record in JOBS.items():
            job = Job(job_id)
            job._snapshot = replace(record)
            jobs[job_id] = job
        return jobs


# --- old API: pyslurm.job() -------------------------------------------------------


def _value_error(errno: int, text: str) -> ValueError:
    return ValueError(text, errno)


def _old_dict(record: Record) -> Dict[str, Any]:
    return {
        "job_id": record.job_id,
        "job_state": record.state,
        "state_reason": record.reason,
        "requeue": record.requeue,
        "restart_cnt": record.restarts,
        "priority": record.priority,
        "array_job_id": record.array_job_id,
        "array_task_id": record.array_task_id,
        "array_task_str": record.array_task_str,
        "batch_flag": 1 if record.batch else 0,
        "user_id": record.user_id,
        "nice": 0,
        "partition": record.partition,
    }


class job:  # pyslurm's own (lowercase) name
    def find_id(self, jobid: Union[int, str]) -> List[Dict[str, Any]]:
        """One dict for a plain job, every task's for an array master id; ``"A_T"`` is translated."""
        text = str(jobid)
        _rpc("load_job", _value_error)
        if "_" in text:
            master, task = (int(p) for p in text.split("_", 1))
            found = [r for r in JOBS.values() if r.array_job_id == master and r.array_task_id == int(task)]
            if not found:  # e.g. a task of a still-unsplit pending array
                raise _value_error(*INVALID_JOB_ID)
            return [_old_dict(found[0])]
        job_id = int(text)
        own = _record(job_id, _value_error)
        if own.array_job_id == job_id:  # a master id: every task record of the array
            return [_old_dict(r) for r in JOBS.values() if r.array_job_id == job_id]
        return [_old_dict(own)]

    def get(self) -> Dict[int, Dict[str, Any]]:
        _rpc("load_jobs", _value_error)
        return {job_id: _old_dict(record) for job_id, record in JOBS.items()}


def slurm_requeue(job_id: int, state: int = 0) -> int:
    _rpc("requeue", _value_error)
    record = _record(job_id, _value_error)
    if not record.requeue:
        raise _value_error(*DISABLED)
    raise NotImplementedError("docs/pyslurm.md only describes slurm_requeue's refusal")


if _API == "old":
    del Job, Jobs, RPCError, PyslurmError, JobSubmitDescription
