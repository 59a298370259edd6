"""Job lookups through ``squeue`` (the ``Lookup`` of ``core.jobinfo``), and the running Slurm's version
(docs/contract.md §9.3, §9.4; how many ids each call asks: docs/lookups.md).

Reason is the only free text: it comes last, and each record ends with a fresh per-call nonce, so
no field can end a record early or add one.  ``parse_squeue`` is strict; nothing is ever skipped.
``squeue --only-job-state`` is not used: it answers neither Requeue, RestartCnt nor Reason."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import replace
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from ..core.jobid import MAX_JOB_ID, canonical_ids, validate_job_id
from ..core.jobinfo import JobInfo
from ..core.model import InvalidInput, LookupFailed
from ..host import process, world
from ..host.binaries import find_squeue
from . import plan

# Where the package installs slurm-dsl-jobinfo (debian/rules; contrib/jobinfo/build builds it).
JOBINFO = "/usr/libexec/slurm-dsl/slurm-dsl-jobinfo"
JOBINFO_ENV = "SLURM_DSL_JOBINFO"
# The ids each thread of slurm-dsl-jobinfo asks, at least: its process starts once (~3 ms: libslurm
# and its plugins, as squeue), and a thread costs next to nothing, so from 8 ids on two threads
# wait on slurmctld side by side (12 ids: one thread 8.8 ms, three 6.1; docs/lookups.md §4).
JOBINFO_SHARE = 4
# squeue gives up after 2*(MessageTimeout-1) s when slurmctld is down (docs/slurm-behaviour.md §6).
SQUEUE_TIMEOUT = 30.0  # seconds
MANY = 50  # more ids than this: one listing of all jobs instead of -j id,id,...
# The most ids an operation's own lookups (the array check, corroboration) put in ``-j``; more
# are one listing of every job.  ``squeue -j a,b,...`` loads every job as a listing does and
# then matches each job against each id: ~8 ns a pair on the lab (22.05; 1,000 ids among
# 3,020 jobs took 45 ms, the listing 25 ms), where a job nobody asked for costs ~2-4 us to
# print and ~4 us to read.  From about 500 ids on, the listing costs less at any number of
# jobs (docs/slurm-bulk.md §6.1).
MAX_LISTED = 500
SQUEUE_CAP = 64 << 20  # bytes of squeue output kept; a longer answer is refused, never used in part
PARALLEL = plan.SQUEUE_COSTS.parallel  # single-job squeue calls at once
# sdiag answers from slurmctld's own counters in a few ms; longer means a slurmctld so busy that
# the count is not worth the wait (the lookup then lists, as it did before the count was asked).
SDIAG_TIMEOUT = 2.0  # seconds
# A count learned is kept this long for every lookup of this process through the same runner:
# an operation's two lookups, or a sweep's each minute, ask sdiag once, not each time.
COUNT_MAX_AGE = 60.0  # seconds
_COUNTS: Dict[Tuple[str, object], Tuple[float, int]] = {}  # (sdiag, run) -> (when, jobs held)
# What squeue says of a selector it refuses (``select``): a node, a user or a state it does not know.
_REFUSED = re.compile(rb"^squeue: error: (Invalid (?:node name|user|job state specified)[^\n]{0,200})", re.MULTILINE)
_SDIAG_COUNT = re.compile(rb"^Jobs (pending|running):[ \t]+(0|[1-9][0-9]{0,9})[ \t]*$", re.MULTILINE)

# squeue's answer for `-j <one id>` that slurmctld does not know (docs/slurm-behaviour.md §4, §9).
GONE_STDERR = b"slurm_load_jobs error: Invalid job id specified\n"
UNREACHABLE = b"Unable to contact slurm controller"


Run = Callable[..., process.Completed]

log = logging.getLogger("slurm_dsl")


_FIELDS = ("JobID", "ArrayJobID", "ArrayTaskID", "State", "Requeue", "RestartCnt", "PriorityLong", "Reason")
_NOT_AN_ARRAY = b"N/A"  # ArrayTaskID of a plain job
_NONCE = re.compile(r"[0-9a-f]{32,}\Z")
_STATE = re.compile(rb"[A-Z][A-Z_]*\Z")
_UINT = re.compile(rb"(?:0|[1-9][0-9]*)\Z")


def squeue_format(nonce: str) -> str:
    """The ``-O`` value: each field ends in ``|`` (no width: printed whole), the last also in the nonce."""
    if not _NONCE.match(nonce):
        raise InvalidInput("nonce must be at least 32 lowercase hex digits")
    return ",".join(f"{name}:|" for name in _FIELDS) + nonce


def parse_squeue(stdout: bytes, nonce: str) -> Dict[str, JobInfo]:
    """Read squeue's records (see the module contract); ``LookupFailed`` for anything else."""
    if not isinstance(stdout, (bytes, bytearray)) or not isinstance(nonce, str) or not _NONCE.match(nonce):
        raise LookupFailed("squeue output or nonce of the wrong type")
    data = bytes(stdout)
    if not data:
        return {}
    if not data.endswith(b"\n"):
        raise LookupFailed("squeue output does not end with a newline")
    end = b"|" + nonce.encode("ascii")
    found: Dict[str, JobInfo] = {}
    tasks: Dict[str, Set[bytes]] = {}
    for number, line in enumerate(data[:-1].split(b"\n"), 1):
        info, task = _parse_record(line, end, number)
        seen = found.get(info.job_id)
        if seen is not None:
            # -r: a remainder record repeats its JobId once per pending task, all else equal.
            if seen != info or task == _NOT_AN_ARRAY or task in tasks[info.job_id]:
                raise LookupFailed(f"squeue line {number}: job {info.job_id} listed twice")
            tasks[info.job_id].add(task)
            continue
        found[info.job_id] = info
        tasks[info.job_id] = {task}
    reach: Dict[str, int] = {}
    for info in found.values():
        if info.array_job_id is not None:
            reach[info.array_job_id] = reach.get(info.array_job_id, 0) + len(tasks[info.job_id])
    return {
        job_id: replace(info, array_tasks=reach[job_id]) if info.array_job_id == job_id else info
        for job_id, info in found.items()
    }


# A record as ``_parse_record_strictly`` accepts it, in one match (the numbers' limits aside).
_RECORD = re.compile(
    rb"([1-9][0-9]{0,9})\|([1-9][0-9]{0,9})\|(N/A|0|[1-9][0-9]{0,9})\|([A-Z][A-Z_]*)\|([01])\|"
    rb"(0|[1-9][0-9]{0,9})\|(0|[1-9][0-9]{0,9})\|(.*)\Z",
    re.DOTALL,
)


def _parse_record(line: bytes, end: bytes, number: int) -> Tuple[JobInfo, bytes]:
    """One record: ``JobInfo`` and its ArrayTaskID, a well-formed line in one match, else ``_parse_record_strictly``."""
    match = _RECORD.match(line, 0, len(line) - len(end)) if line.endswith(end) else None
    if match is not None:
        raw_id, raw_array, task, state, requeue, restarts, priority, reason = match.groups()
        if (
            int(raw_id) <= MAX_JOB_ID
            and int(raw_array) <= MAX_JOB_ID
            and int(restarts) <= 0xFFFF
            and int(priority) <= 0xFFFFFFFF
            and (task != _NOT_AN_ARRAY or raw_array == raw_id)
        ):
            info = JobInfo(
                job_id=raw_id.decode("ascii"),
                state=state.decode("ascii"),
                requeue=requeue == b"1",
                restarts=int(restarts),
                priority=int(priority),
                reason=reason.decode("utf-8", "backslashreplace"),
                array_job_id=None if task == _NOT_AN_ARRAY else raw_array.decode("ascii"),
            )
            return info, task
    return _parse_record_strictly(line, end, number)


def _parse_record_strictly(line: bytes, end: bytes, number: int) -> Tuple[JobInfo, bytes]:
    where = f"squeue line {number}"
    if not line.endswith(end):
        raise LookupFailed(f"{where}: record does not end with this call's nonce")
    fields = line[: -len(end)].split(b"|", len(_FIELDS) - 1)
    if len(fields) != len(_FIELDS):
        raise LookupFailed(f"{where}: {len(fields)} fields, expected {len(_FIELDS)}")
    raw_id, raw_array, task, state, requeue, restarts, priority, reason = fields
    try:
        job_id = validate_job_id(raw_id.decode("ascii"))
        array_id = validate_job_id(raw_array.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise LookupFailed(f"{where}: bad JobID {raw_id[:40]!r} or ArrayJobID {raw_array[:40]!r}") from None
    if task != _NOT_AN_ARRAY and (not _UINT.match(task) or len(task) > 10):
        raise LookupFailed(f"{where}: bad ArrayTaskID {task[:40]!r}")
    if task == _NOT_AN_ARRAY and array_id != job_id:
        raise LookupFailed(f"{where}: job {job_id} is in array {array_id} without a task id")
    if not _STATE.match(state):
        raise LookupFailed(f"{where}: bad State {state[:40]!r}")
    if requeue not in (b"0", b"1"):
        raise LookupFailed(f"{where}: Requeue is {requeue[:40]!r}, not 0 or 1")
    for name, value, limit in (("RestartCnt", restarts, 0xFFFF), ("PriorityLong", priority, 0xFFFFFFFF)):
        if not _UINT.match(value) or len(value) > 10 or int(value) > limit:
            raise LookupFailed(f"{where}: bad {name} {value[:40]!r}")
    info = JobInfo(
        job_id=job_id,
        state=state.decode("ascii"),
        requeue=requeue == b"1",
        restarts=int(restarts),
        priority=int(priority),
        # Informational only; odd bytes in an admin's text must not stop a sweep.
        reason=reason.decode("utf-8", "backslashreplace"),
        array_job_id=None if task == _NOT_AN_ARRAY else array_id,
    )
    return info, task


def find_jobinfo(environ: Optional[Dict[str, str]] = None) -> Optional[str]:
    """The slurm-dsl-jobinfo to use: ``$SLURM_DSL_JOBINFO`` (empty: none), else ``JOBINFO`` if there, else None."""
    env = os.environ if environ is None else environ
    given = env.get(JOBINFO_ENV)
    if given is not None:
        if not given:
            return None
        if not given.startswith("/"):
            raise InvalidInput(f"{JOBINFO_ENV} must be an absolute path or empty, not {given[:200]!r}")
        return given
    return JOBINFO if os.path.isfile(JOBINFO) and os.access(JOBINFO, os.X_OK) else None


_FIND = "find"  # SqueueLookup(jobinfo=...): find_jobinfo() at construction


class SqueueLookup:
    """Lookups through ``squeue -h -a -t all -r -O <fields>``: one process per ``jobs()`` call."""

    name = "squeue"

    def __init__(
        self,
        squeue_path: Optional[str] = None,
        timeout: float = SQUEUE_TIMEOUT,
        *,
        run: Run = process.run_argv,
        many: int = MANY,
        cap: int = SQUEUE_CAP,
        parallel: int = PARALLEL,
        costs: plan.Costs = plan.SQUEUE_COSTS,
        sdiag_path: Optional[str] = None,
        clock: Callable[[], float] = world.monotonic,
        jobinfo: Optional[str] = _FIND,
        jobinfo_costs: plan.Costs = plan.JOBINFO_COSTS,
    ) -> None:
        # None: the first squeue on PATH (a site's /opt/slurm/bin), else /usr/bin/squeue.
        self.squeue_path = squeue_path = find_squeue() if squeue_path is None else squeue_path
        self.timeout = timeout
        self.run = run
        self.many = many
        self.cap = cap
        self.parallel = parallel  # 0: never one by one (the lookup as it was before issue 20)
        self.costs = replace(costs, parallel=max(parallel, 1))
        self.jobinfo = find_jobinfo() if jobinfo == _FIND else jobinfo
        self.jobinfo_costs = jobinfo_costs
        self.sdiag_path = sdiag_path or os.path.join(os.path.dirname(squeue_path), "sdiag")
        self.clock = clock
        self.jobs_held: Optional[int] = None  # records of this lookup's last listing of every job

    def argv(self, ids: Sequence[str], nonce: str) -> Tuple[str, ...]:
        """``-a``: hidden partitions too; ``-t all``: finished jobs too (MinJobAge); ``-r``: one line per task."""
        head = (self.squeue_path, "-h", "-a", "-t", "all", "-r")
        select = ("-j", ",".join(ids)) if 0 < len(ids) <= self.many else ()
        return head + select + ("-O", squeue_format(nonce))

    def jobs(self, job_ids: Sequence[str]) -> Dict[str, Optional[JobInfo]]:
        ids = canonical_ids(job_ids)
        if not ids:
            return {}
        alone = len(ids) == 1 or self._one_by_one(len(ids))
        if alone and self.jobinfo is not None and self.many > 0 and self.parallel > 0:
            answer, unusable = self._helper(ids)
            if answer is not None:
                return answer
            log.warning("%s; asking squeue instead", unusable)
            self.jobinfo = None  # for this lookup's later calls too
            alone = len(ids) == 1 or self._one_by_one(len(ids))  # squeue's costs choose again
        if len(ids) > 1 and alone:
            return self._each(ids)
        found = self._query(ids)
        return {i: found.get(i) for i in ids}

    def select(self, filters: Sequence[str], job_ids: Sequence[str] = ()) -> Dict[str, JobInfo]:
        """The records squeue lists with ``filters``, among ``job_ids`` if given: one listing.

        A filter squeue refuses is ``InvalidInput`` in squeue's words; anything else not whole, ``LookupFailed``."""
        nonce = os.urandom(16).hex()
        ids = canonical_ids(job_ids)
        argv = (self.squeue_path, "-h", "-a", "-r", *filters, *(("-j", ",".join(ids)) if ids else ()),
                "-O", squeue_format(nonce))
        done = self.run(argv, timeout=self.timeout, cap=self.cap)
        refused = _REFUSED.search(done.stderr)
        if refused is not None and not done.timed_out:
            raise InvalidInput(f"squeue: {refused.group(1).decode('utf-8', 'backslashreplace')}")
        if done.timed_out or done.truncated or done.pipes_held or done.returncode != 0 or done.stderr.strip():
            if done.timed_out:
                raise LookupFailed(f"squeue did not answer within {self.timeout:g} s")
            raise LookupFailed(_describe_failure(done))
        return parse_squeue(done.stdout, nonce)

    def all_jobs(self) -> Dict[str, JobInfo]:
        """Every job slurmctld knows (one squeue listing), e.g. to find orphans."""
        return self._query([])

    def count_jobs(self) -> Optional[int]:
        """How many jobs slurmctld holds, from the last listing, else ``sdiag``; None when neither tells."""
        if self.jobs_held is not None:
            return self.jobs_held
        kept = _COUNTS.get((self.sdiag_path, self.run))
        if kept is not None and 0 <= self.clock() - kept[0] <= COUNT_MAX_AGE:
            return kept[1]
        done = self.run((self.sdiag_path,), timeout=min(SDIAG_TIMEOUT, self.timeout), cap=1 << 20)
        if done.timed_out or done.truncated or done.pipes_held or done.returncode != 0:
            return None
        counts = _SDIAG_COUNT.findall(done.stdout)
        if sorted(kind for kind, _ in counts) != [b"pending", b"running"]:
            return None
        held = sum(int(count) for _, count in counts)
        self._keep(held)
        return held

    def _keep(self, held: int) -> None:
        if len(_COUNTS) >= 64:  # runners come and go (tests): never a dict that only grows
            _COUNTS.clear()
        _COUNTS[(self.sdiag_path, self.run)] = (self.clock(), held)

    def _one_by_one(self, count: int) -> bool:
        """Whether ``count`` ids (two or more) are asked each alone (``plan.one_by_one``), logged at INFO."""
        if self.many <= 0 or self.parallel <= 0:
            return False  # a listing of every job was asked for, or no single calls
        held: object = self.jobs_held
        costs = self.costs if self.jobinfo is None else self.jobinfo_costs
        choice = plan.one_by_one(count, self.jobs_held, costs)
        if choice is None and plan.count_matters(count, costs):
            told = self.count_jobs()
            held = "sdiag did not tell" if told is None else told
            choice = plan.one_by_one(count, told, costs)
        if not choice:
            how = "in one listing of every job" if count > self.many else "in one squeue -j list"
        elif self.jobinfo is None:
            how = f"each alone, {min(self.parallel, count)} at a time"
        else:
            threads = self._helper_threads(count)
            how = f"each alone by slurm-dsl-jobinfo, {threads} at a time"
        log.info("squeue: %d ids asked %s (jobs slurmctld holds: %s)", count, how,
                 "not needed" if held is None else held)
        return bool(choice)  # a count that cannot be told: one listing, as before

    def _helper_threads(self, count: int) -> int:
        """How many threads slurm-dsl-jobinfo asks ``count`` ids with: one per ``JOBINFO_SHARE``."""
        return max(1, min(self.jobinfo_costs.parallel, count // JOBINFO_SHARE))

    def _helper(self, ids: List[str]) -> Tuple[Optional[Dict[str, Optional[JobInfo]]], str]:
        """Every id through one slurm-dsl-jobinfo process, within ``timeout``; ``LookupFailed`` if it could not ask.

        One that could not be run (exit 126/127) gives ``(None, why)``, and squeue asks instead."""
        helper = self.jobinfo
        assert helper is not None
        nonce = os.urandom(16).hex()
        threads = ("-t", str(self._helper_threads(len(ids))))
        done = self.run((helper, *threads, nonce, *ids), timeout=self.timeout, cap=self.cap)
        if done.timed_out:
            raise LookupFailed(f"slurm-dsl-jobinfo did not answer within {self.timeout:g} s")
        if done.truncated:
            raise LookupFailed(f"slurm-dsl-jobinfo printed more than {self.cap} bytes")
        if done.pipes_held:
            raise LookupFailed(_describe_failure(done, "slurm-dsl-jobinfo"))
        if done.returncode in (126, 127):
            return None, _describe_failure(done, helper)
        if done.returncode != 0:
            raise LookupFailed(_describe_failure(done, "slurm-dsl-jobinfo"))
        found = parse_squeue(done.stdout, nonce)
        return {job: found.get(job) for job in ids}, ""

    def _each(self, ids: List[str]) -> Dict[str, Optional[JobInfo]]:
        """One ``squeue -j <id>`` per id, ``parallel`` at a time, within ``timeout``; any failure fails the whole."""
        from concurrent.futures import ThreadPoolExecutor  # here: a hold's start-up never pays for it

        deadline = self.clock() + self.timeout

        def ask(job: str) -> Optional[JobInfo]:
            left = deadline - self.clock()
            if left <= 0:
                raise LookupFailed(f"squeue did not answer {len(ids)} single lookups within {self.timeout:g} s")
            return self._query([job], timeout=left).get(job)

        with ThreadPoolExecutor(max_workers=min(self.parallel, len(ids))) as pool:
            futures = [pool.submit(world.carry(ask), job) for job in ids]
            try:
                return {job: future.result() for job, future in zip(ids, futures)}
            finally:
                for future in futures:  # after a failure: none not yet started starts
                    future.cancel()

    def _query(self, ids: List[str], timeout: Optional[float] = None) -> Dict[str, JobInfo]:
        nonce = os.urandom(16).hex()
        timeout = self.timeout if timeout is None else timeout
        done = self.run(self.argv(ids, nonce), timeout=timeout, cap=self.cap)
        if done.timed_out:
            raise LookupFailed(f"squeue did not answer within {timeout:g} s")
        if done.truncated:
            raise LookupFailed(f"squeue printed more than {self.cap} bytes")
        if done.pipes_held:
            raise LookupFailed(_describe_failure(done))
        if done.returncode == 0:
            # rc 0 means squeue got its answer and printed all of it; stderr then
            # holds at most warnings, and the records' framing is checked line by line.
            found = parse_squeue(done.stdout, nonce)
            if not ids or len(ids) > self.many:  # a listing of every job: how many it holds
                self.jobs_held = len(found)
                self._keep(len(found))
            if len(ids) == 1 and self.many > 0 and ids[0] not in found:
                # `-j <one id>` that slurmctld does not know exits 1 (below); an rc 0
                # answer without the id is not an answer squeue gives: could not ask.
                raise LookupFailed(f"squeue -j {ids[0]} exited 0 without the job's record")
            return found
        if len(ids) == 1 and done.returncode == 1 and done.stdout == b"" and done.stderr == GONE_STDERR:
            # `-j <one id>` asks slurmctld for that job alone (slurm_load_job) and
            # fails on an unknown id, where a list loads all jobs and omits it (docs/slurm-behaviour.md §9).
            return {}
        raise LookupFailed(_describe_failure(done))


def first_line(stderr: bytes) -> str:
    """A program's stderr as a diagnostic shows it: its first line, at most 200 bytes, escaped."""
    return stderr.strip().split(b"\n")[0][:200].decode("utf-8", "backslashreplace")


def _describe_failure(done: process.Completed, program: str = "squeue") -> str:
    first = first_line(done.stderr)
    if done.pipes_held:
        # Whatever was read may be all of it or not: never an answer (process.DRAIN).
        return f"{program}'s output was still held open after it exited (a process that left its session?)"
    if UNREACHABLE in done.stderr:
        return f"slurmctld unreachable ({first})"
    if done.returncode in (126, 127):
        return f"{program} could not be run (status {done.returncode}: {first})"
    return f"{program} exited {done.returncode}: {first or 'no message'}"


# --- the running Slurm's version ---------------------------------------------

# `squeue --version` prints e.g. "slurm 22.05.8" (Debian 12) or "slurm-wlm 22.05.8".
_VERSION = re.compile(rb"slurm(?:-wlm)? ([0-9]{2})\.([0-9]{2})\.[0-9]+[^\s]*\n?\Z")


def parse_slurm_version(stdout: bytes) -> Tuple[int, int]:
    """``(major, minor)`` from ``squeue --version``/``scontrol --version``; ``LookupFailed`` otherwise."""
    match = _VERSION.match(stdout) if isinstance(stdout, (bytes, bytearray)) else None
    if match is None:
        raise LookupFailed(f"unreadable Slurm version {bytes(stdout)[:80]!r}")
    return int(match.group(1)), int(match.group(2))


def slurm_version(
    squeue_path: Optional[str] = None, timeout: float = 10.0, *, run: Run = process.run_argv
) -> Tuple[int, int]:
    """The running Slurm's ``(major, minor)``, e.g. ``(22, 5)``; ``LookupFailed`` if it cannot tell."""
    squeue_path = find_squeue() if squeue_path is None else squeue_path
    done = run((squeue_path, "--version"), timeout=timeout)
    if done.timed_out or done.truncated or done.pipes_held or done.returncode != 0:
        raise LookupFailed(f"`{squeue_path} --version`: {_describe_failure(done)}")
    return parse_slurm_version(done.stdout)
