"""The ledger's rows as both dialects store them (docs/contract.md §9.1): arguments checked, values encoded and
decoded, decisions on the rows a backend read (``ledger_rules`` applied).  Pure; here as ``ledger.records`` is.

Rule 1: values are taken and given by column name (``ledger.schema``'s; ``named``, ``ordered``), never by position, but
in the narrow reads of prune, finish and leases.  Rule 2: no I/O: rows in, what to write (or the error) out.  Rule 2a: a
batch is read in ``IN`` lists of ``IN_PIECE`` ids and decided as if its items came one after the other.  Rule 3: only
stderr differs between the backends: MariaDB's goes as hex, so that bytes never pass as utf8mb4 text."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
from typing import (
    TYPE_CHECKING,
    AbstractSet,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Literal,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
    Type,
    TypeVar,
)

from ..core import ledger_rules as rules
from ..core import life
from ..core.jobid import validate_job_id
from ..core.jobinfo import JobInfo
from ..core.keys import check_key, check_reason
from ..core.model import InvalidInput, LedgerError, Op, Outcome, Reason, RequeueBit, Result, Verdict
from ..core.shown import shown
from . import schema
from .base import STDERR_CAP

if TYPE_CHECKING:
    from ..core.model import Verdict
    from ..core.settle import Recorded, Unsettled
    from .records import HistoryEntry, JobObject, Settlement, SweepRecord, Unfinished

# The records (``ledger.records``) are imported by the reads that build them: an operation never
# does (docs/benchmarks.md §7).

_E = TypeVar("_E", bound=enum.Enum)
_T = TypeVar("_T")

# What each read takes of a row, by column name (``ledger.schema``), in this order: a decoder reads
# a row's values by these names (``named``), never by position.  A JobObject's (the marks of what
# was seen of slurmctld's saves are read alone, ``marks``); every column of a history row; its
# settlement's, but those of its row (``op_id``, ``job_id``); what settling reads of a row
# (``settle.Recorded``'s fields, a test checks) and what a sweep first reads of one
# (``settle.Unsettled``'s).
MARK_COLUMNS = ("quiet_at", "quiet_mark", "quiet_look", "gone_mark", "gone_look")
OBJECT_COLUMNS = tuple(c for c in schema.OBJECTS.names() if c not in MARK_COLUMNS)
HISTORY_COLUMNS = schema.HISTORY.names()
SETTLEMENT_COLUMNS = tuple(c for c in schema.SETTLEMENTS.names() if c not in ("op_id", "job_id"))
TO_SETTLE_COLUMNS = (
    "id", "job_id", "op", "result", "started_at", "finished_at", "ends_by", "baseline", "baseline_at", "requeue_bit",
    "reason", "baseline_ctl", "calls_ctl",
)
UNSETTLED_COLUMNS = TO_SETTLE_COLUMNS[:7]
# What a write gives of a row, in this order: an imported history row's every column but its id
# (``history_values``); a settlement's (``SettlementRow``).
IMPORT_COLUMNS = HISTORY_COLUMNS[1:]
SETTLE_COLUMNS = schema.SETTLEMENTS.names()[1:]

# What ``job_object`` and ``entry`` read: their columns in their order (a backend appends its
# WHERE, ORDER BY and LIMIT).
SELECT_OBJECTS = " ".join(("SELECT", schema.listed(OBJECT_COLUMNS), "FROM objects"))
# A history row is read with its settlement, if any (``h`` the history, ``s`` the settlement:
# a backend's WHERE and ORDER BY name their columns so).
SETTLED_HISTORY = " FROM history h LEFT JOIN settlements s ON s.op_id = h.id"
# A requeue into hold is stored as op 'requeue' with ``hold`` 1 (ledger.schema) and read back as
# its own op: every read of a history row's op is this expression (``stored_op`` writes it).
OP_READ = {"op": "CASE WHEN h.hold = 1 THEN 'requeuehold' ELSE h.op END"}
_HISTORY_READ = schema.listed(HISTORY_COLUMNS, "h.", OP_READ) + ", " + schema.listed(SETTLEMENT_COLUMNS, "s.")
SELECT_HISTORY = "".join(("SELECT ", _HISTORY_READ, SETTLED_HISTORY))
# ``later_operations``: SELECT_HISTORY's columns of the later rows (``h``, their stderr not
# read) of each given row's job (``g``), the given id first.
SELECT_LATER = "".join((
    "SELECT g.id, ", schema.listed(HISTORY_COLUMNS, "h.", {"stderr": "''", **OP_READ}), ", ",
    schema.listed(SETTLEMENT_COLUMNS, "s."),
    " FROM history g JOIN history h ON h.job_id = g.job_id AND h.id > g.id"
    " LEFT JOIN settlements s ON s.op_id = h.id WHERE g.id",
))

# ``unsettled``: what settling reads of a row (``recorded``), no more: not its calls, stderr or
# detail (a sweep reads up to 10,000 of them: docs/benchmarks.md §9).  A backend appends its
# WHERE (``s`` the settlement, none for these rows) and ORDER BY.
SELECT_TO_SETTLE = "".join(("SELECT ", schema.listed(TO_SETTLE_COLUMNS, "h.", OP_READ), SETTLED_HISTORY))

# ``to_settle``: what a sweep first reads of a row (``unsettled_rows``): not even its baseline, which
# only the verdicts of jobs still known read (they are read again whole, ``SELECT_TO_SETTLE``).
SELECT_UNSETTLED = "".join(("SELECT ", schema.listed(UNSETTLED_COLUMNS, "h.", OP_READ), SETTLED_HISTORY))

# What ``unfinished`` reads, ``{mark}`` the backend's placeholder for the time now: each row
# without a result, whether it is its job's newest, and whether the job is leased now.
SELECT_UNFINISHED = "".join((
    "SELECT h.id, h.job_id, ", OP_READ["op"], ", h.started_at,"
    "  h.id = (SELECT max(n.id) FROM history n WHERE n.job_id = h.job_id),"
    "  EXISTS (SELECT 1 FROM leases l WHERE l.job_id = h.job_id AND l.expires_at > {mark})"
    " FROM history h WHERE h.finished_at IS NULL ORDER BY h.id",
))


def stored_op(op: Op) -> str:
    """The ``op`` a row stores for ``op``: a requeue into hold's is 'requeue' (``hold`` 1 beside it, ``OP_READ``)."""
    return Op.REQUEUE.value if op is Op.REQUEUE_HOLD else op.value


def named(columns: Sequence[str], row: Sequence[Any]) -> Dict[str, Any]:
    """A row read as ``columns`` lists them, by column name."""
    return dict(zip(columns, row))


@functools.cache
def positions(columns: Tuple[str, ...]) -> Dict[str, int]:
    """Where each of ``columns`` stands in a row read as they list them, found by name once (``unsettled_rows``)."""
    return {c: i for i, c in enumerate(columns)}


def ordered(columns: Sequence[str], values: Mapping[str, Any]) -> Tuple[Any, ...]:
    """A row's ``values`` by column name, in the order a statement lists ``columns``."""
    return tuple([values[c] for c in columns])


ImportAction = Literal["insert", "update", "keep"]


# -- arguments -----------------------------------------------------------------------------------


def finite(name: str, value: float) -> float:
    """``value`` as a float; InvalidInput unless it is a finite number (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(f"{name} must be a finite number, not {value!r}")
    return float(value)


def positive_ttl(ttl: float) -> float:
    """A lease's ttl: finite and positive, else InvalidInput."""
    ttl = finite("ttl", ttl)
    if ttl <= 0:
        raise InvalidInput(f"ttl must be positive, not {ttl!r}")
    return ttl


def checked_starts(starts: Sequence[Tuple[str, Op, str]]) -> List[Tuple[str, Op, str]]:
    """``begin_operations``' ``(job_id, op, nonce)``, checked."""
    return [(validate_job_id(j), Op(op), str(nonce)) for j, op, nonce in starts]


def checked_changes(changes: Sequence[Tuple[str, RequeueBit, str]]) -> List[Tuple[str, RequeueBit, str]]:
    """``set_bits``' ``(job_id, bit, why)``, checked, the why as ``stored_text``."""
    stored: Dict[str, str] = {}  # a sweep's 100,000 clears share a few whys: each made shown once

    def text(why: str) -> str:
        why = str(why)
        return stored[why] if why in stored else stored.setdefault(why, stored_text(why))

    return [(validate_job_id(j), RequeueBit(b), text(why)) for j, b, why in changes]


def stored_text(text: str) -> str:
    """Text from outside as the ledger keeps it (a lookup's error, a detail, who ran it): ``shown``, never raw
    control bytes.  ``history`` and ``ledger status`` escape again when printing, for older rows."""
    return shown(str(text))


# -- reading rows --------------------------------------------------------------------------------


@functools.cache
def _members(cls: Type[_E]) -> Dict[Any, _E]:
    """``cls``'s members by value: a dict lookup costs a tenth of ``cls(value)`` (docs/benchmarks.md §9)."""
    return {member.value: member for member in cls}


def _member(cls: Type[_E], value: Any) -> _E:
    """``cls(value)``, found by value first; anything else goes to ``cls(value)``, which raises as before."""
    found = _members(cls).get(value) if isinstance(value, str) else None
    return cls(value) if found is None else found


def _enum_or_none(cls: Type[_E], value: Optional[str]) -> Optional[_E]:
    return None if value is None else _member(cls, value)


def job_object(row: Sequence[Any]) -> JobObject:
    """An ``objects`` row (``SELECT_OBJECTS``) as a ``JobObject``."""
    from .records import JobObject

    o = named(OBJECT_COLUMNS, row)
    return JobObject(
        job_id=o["job_id"],
        bit=RequeueBit(o["bit"]),
        why=o["why"],
        updated_at=float(o["updated_at"]),
        lookup_failures=int(o["lookup_failures"]),
        next_lookup_at=float(o["next_lookup_at"]),
        lookup_error=o["lookup_error"],
    )


def _time(value: Any) -> Optional[float]:
    return None if value is None else float(value)


def entry(r: Sequence[Any], path: str = "") -> HistoryEntry:
    """A ``history`` row with its settlement (``SELECT_HISTORY``) as a ``HistoryEntry``; LedgerError if malformed."""
    from .records import CallRecord, HistoryEntry

    h = named(HISTORY_COLUMNS, r)
    s = named(SETTLEMENT_COLUMNS, r[len(HISTORY_COLUMNS):])
    calls = h["calls"]
    return HistoryEntry(
        id=int(h["id"]),
        job_id=h["job_id"],
        op=_member(Op, h["op"]),
        nonce=h["nonce"],
        started_at=float(h["started_at"]),
        prior_bit=_member(RequeueBit, h["prior_bit"]),
        finished_at=_time(h["finished_at"]),
        result=_enum_or_none(Result, h["result"]),
        requeue_bit=_enum_or_none(RequeueBit, h["requeue_bit"]),
        bit_after=_enum_or_none(RequeueBit, h["bit_after"]),
        reason=_enum_or_none(Reason, h["reason"]),
        detail=h["detail"] or "",
        exit_status=h["exit_status"],
        calls=() if not calls or calls == "[]" else tuple(CallRecord(**c) for c in json.loads(calls)),
        stderr=bytes(h["stderr"] or b""),
        stderr_len=int(h["stderr_len"] or 0),
        actor=h["actor"],
        baseline=job_info(path, h["baseline"]),
        baseline_at=_time(h["baseline_at"]),
        key=h["op_key"],
        retry_of=None if h["retry_of"] is None else int(h["retry_of"]),
        ends_by=_time(h["ends_by"]),
        baseline_boot=h["baseline_boot"],
        admin_reason=h["admin_reason"],
        baseline_ctl=h["baseline_ctl"],
        calls_ctl=h["calls_ctl"],
        settlement=None if s["id"] is None else settlement(path, int(h["id"]), str(h["job_id"]), s),
    )


def recorded(rows: Iterable[Sequence[Any]], path: str = "") -> List[Recorded]:
    """Rows as ``SELECT_TO_SETTLE`` reads them, as ``settle.Recorded``; LedgerError for a malformed baseline."""
    from ..core.settle import Recorded

    # What a settling sweep reads, 10,000 rows at a time: as ``unsettled_rows``, each value at its
    # column's position, found by name once.
    at = positions(TO_SETTLE_COLUMNS)
    id_, job, op, result, started, finished, ends, baseline, baseline_at, bit, reason, base_ctl, calls_ctl = (
        at[c] for c in ("id", "job_id", "op", "result", "started_at", "finished_at", "ends_by", "baseline",
                        "baseline_at", "requeue_bit", "reason", "baseline_ctl", "calls_ctl"))
    return [
        Recorded(
            id=int(r[id_]),
            job_id=r[job],
            op=_member(Op, r[op]),
            result=_enum_or_none(Result, r[result]),
            started_at=float(r[started]),
            finished_at=None if r[finished] is None else float(r[finished]),
            ends_by=None if r[ends] is None else float(r[ends]),
            baseline=job_info(path, r[baseline]),
            baseline_at=None if r[baseline_at] is None else float(r[baseline_at]),
            requeue_bit=_enum_or_none(RequeueBit, r[bit]),
            reason=_enum_or_none(Reason, r[reason]),
            baseline_ctl=r[base_ctl],
            calls_ctl=r[calls_ctl],
        )
        for r in rows
    ]


def unsettled_rows(rows: Iterable[Sequence[Any]]) -> List[Unsettled]:
    """Rows as ``SELECT_UNSETTLED`` reads them, as the core's ``settle.Unsettled``."""
    from ..core.settle import Unsettled

    ops, results = _members(Op), _members(Result)
    # A sweep's first read, 10,000 rows at a time (docs/benchmarks.md §9): each value taken at
    # its column's position, found by name once, not through a dict a row.
    at = positions(UNSETTLED_COLUMNS)
    id_, job, op, res, started, finished, ends = (at[c] for c in (
        "id", "job_id", "op", "result", "started_at", "finished_at", "ends_by"))
    found = []
    for r in rows:
        result, finished_at, ends_by = r[res], r[finished], r[ends]
        found.append(Unsettled(
            int(r[id_]),
            r[job],
            ops.get(r[op]) or Op(r[op]),  # a member is a non-empty str: true
            None if result is None else results.get(result) or Result(result),
            float(r[started]),
            None if finished_at is None else float(finished_at),
            None if ends_by is None else float(ends_by),
        ))
    return found


def settlement(path: str, op_id: int, job_id: str, s: Mapping[str, Any]) -> Settlement:
    """A ``settlements`` row by column name, of operation ``op_id``, as a ``Settlement``; LedgerError if malformed."""
    from ..core.model import Verdict
    from .records import Settlement

    try:
        verdict = Verdict(s["verdict"])
    except ValueError:
        raise LedgerError(
            f"ledger {path}: operation {op_id} has a settlement of unknown verdict {s['verdict']!r}", path=path
        ) from None
    return Settlement(
        id=int(s["id"]),
        op_id=op_id,
        job_id=job_id,
        verdict=verdict,
        looked_at=float(s["looked_at"]),
        record=job_info(path, s["record"]),
        settled_at=float(s["settled_at"]),
        by=str(s["settled_by"]),
        detail=str(s["detail"]),
    )


# -- a job's record (a baseline, a settlement's): every field, as compact JSON text --------------

# The fields and their types, in JobInfo's order (array_job_id may be null).
_JOB_INFO_FIELDS: Tuple[Tuple[str, Tuple[type, ...]], ...] = (
    ("job_id", (str,)),
    ("state", (str,)),
    ("requeue", (bool,)),
    ("restarts", (int,)),
    ("priority", (int,)),
    ("reason", (str,)),
    ("array_job_id", (str, type(None))),
    ("array_tasks", (int,)),
)


_JOB_INFO_NAMES = frozenset(name for name, _ in _JOB_INFO_FIELDS)


# What ``json.dumps`` writes a str as (``ensure_ascii``): the same C function.
_JSON_STR = json.encoder.encode_basestring_ascii


def job_info_text(info: Optional[JobInfo]) -> Optional[str]:
    """The column a record is stored in: its ``JobInfo``'s fields as compact JSON, or None; InvalidInput unless
    each field has its type.  A record of exact types (what lookups make) is written field by field, the text
    ``json.dumps`` would give (tests/ledger/test_job_info_text.py), at a fifth of its cost."""
    if info is None:
        return None
    if not isinstance(info, JobInfo):
        raise InvalidInput(f"a job's record must be a JobInfo, not {type(info).__name__}")
    job_id, state, reason, array_job_id = info.job_id, info.state, info.reason, info.array_job_id
    requeue, restarts, priority, tasks = info.requeue, info.restarts, info.priority, info.array_tasks
    if (
        type(job_id) is str and type(state) is str and type(requeue) is bool and type(restarts) is int
        and type(priority) is int and type(reason) is str and type(tasks) is int
        and (array_job_id is None or type(array_job_id) is str)
    ):
        validate_job_id(job_id)
        return (
            f'{{"job_id":{_JSON_STR(job_id)},"state":{_JSON_STR(state)},'
            f'"requeue":{"true" if requeue else "false"},"restarts":{restarts},"priority":{priority},'
            f'"reason":{_JSON_STR(reason)},'
            f'"array_job_id":{"null" if array_job_id is None else _JSON_STR(array_job_id)},'
            f'"array_tasks":{tasks}}}'
        )
    values = {}
    for name, types in _JOB_INFO_FIELDS:
        value = getattr(info, name)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise InvalidInput(f"a job's record has {name} {value!r}, not of its type")
        values[name] = value
    validate_job_id(info.job_id)
    return json.dumps(values, separators=(",", ":"))


def job_info(path: str, text: Optional[str]) -> Optional[JobInfo]:
    """A stored record (``job_info_text``) as a ``JobInfo``; None for NULL.  LedgerError unless it
    is a JSON object with exactly JobInfo's fields, each of its type."""
    if text is None:
        return None
    try:
        values = json.loads(text)
    except ValueError:
        values = None
    # json.loads gives exact types only, so an exact type check is isinstance's with bool kept
    # apart from int (True is no RestartCnt), at a third of its cost.
    ok = type(values) is dict and values.keys() == _JOB_INFO_NAMES and all(
        type(values[name]) in types for name, types in _JOB_INFO_FIELDS
    )
    if not ok:
        raise LedgerError(f"ledger {path}: a stored job record is malformed: {shown(str(text)[:200])}", path=path)
    assert isinstance(values, dict)
    return JobInfo(**values)


def sweep_summary(summary: Mapping[str, Any]) -> str:
    """What ``last_sweep.summary`` holds: the summary as JSON."""
    return json.dumps(dict(summary), sort_keys=True)


def sweep_record(path: str, row: Sequence[Any]) -> SweepRecord:
    """A ``last_sweep`` row (started_at, finished_at, summary); LedgerError if the summary is no JSON object."""
    from .records import SweepRecord

    started, finished, text = row
    try:
        summary = json.loads(text)
    except ValueError:
        summary = None
    if not isinstance(summary, dict):
        raise LedgerError(f"ledger {path}: the last sweep's summary is not a JSON object", path=path)
    return SweepRecord(float(started), float(finished), summary)


# -- decisions on a row read ---------------------------------------------------------------------


def finish(path: str, op_id: int, row: Optional[Sequence[Any]], outcome: Outcome) -> Tuple[str, rules.BitChange]:
    """The job and ``ledger_rules.after`` for finishing ``op_id``, from its ``query.FINISHING_ONE`` row (None: none);
    LedgerError if there is none or it finished, InvalidInput if ``outcome`` is another job's or op's."""
    if row is None:
        raise LedgerError(f"ledger {path}: no operation {op_id}", path=path)
    job_id, op_text, nonce, prior_text, finished_at, current_text, later = row
    op = Op(op_text)
    if finished_at is not None:
        raise LedgerError(f"ledger {path}: operation {op_id} already finished", path=path)
    if outcome.op is not op or outcome.job_id != job_id:
        raise InvalidInput(f"operation {op_id} is {op.value} {job_id}, not {outcome.op.value} {outcome.job_id}")
    return job_id, rules.after(op, nonce, RequeueBit(prior_text), RequeueBit(current_text), outcome,
                               later_began=bool(later))


def calls_json(outcome: Outcome) -> str:
    """The history's ``calls`` column: the outcome's calls as JSON, each distinct list made once (``_calls_text``)."""
    return _calls_text(tuple((c.number, c.status, c.status_text, c.outcome, c.message, c.reason)
                             for c in outcome.calls))


@functools.lru_cache(maxsize=256)
def _calls_text(calls: Tuple[Tuple[Any, ...], ...]) -> str:
    return json.dumps([
        {
            "number": number,
            "status": status,
            "status_text": status_text,
            "outcome": outcome.value,
            "message": message,
            "reason": reason.value if reason else None,
        }
        for number, status, status_text, outcome, message, reason in calls
    ])


def finished_values(
    now: float, outcome: Outcome, bit_after: RequeueBit, stderr: bytes, op_id: int, *, hex_stderr: bool = False,
    controller: Optional[str] = None,
) -> Tuple[Any, ...]:
    """Finishing's writes to row ``op_id``: ``schema.FINISH``'s columns (stderr cut to ``STDERR_CAP``), the id last."""
    kept = stderr[:STDERR_CAP]
    return (*ordered(schema.FINISH, {
        "finished_at": now,
        "result": outcome.result.value,
        "requeue_bit": outcome.requeue_bit.value if outcome.requeue_bit else None,
        "bit_after": bit_after.value,
        "reason": outcome.reason.value if outcome.reason else None,
        "detail": stored_text(outcome.detail),
        "exit_status": outcome.exit_status,
        "calls": calls_json(outcome),
        "stderr": kept.hex() if hex_stderr else kept,
        "stderr_len": len(stderr),
        "calls_ctl": None if controller is None else stored_text(controller)[:512],
    }), op_id)


def held_by_another(
    row: Optional[Sequence[Any]], owner: str, now: float, reclaim_sweeps: bool = False,
    alive: Optional[Callable[[str], Optional[bool]]] = None,
) -> bool:
    """Whether the lease row (owner, expires_at) keeps ``owner`` from the job at ``now``: never another sweep's with
    ``reclaim_sweeps``; a lapsed one does while ``alive`` says its holder is known alive (docs/contract.md §13.7)."""
    if row is None:
        return False
    holder, expires_at = row
    if holder == owner:
        return False
    if reclaim_sweeps and rules.sweep_owned(str(holder)):
        return False
    return expires_at > now or (alive is not None and alive(str(holder)) is True)


def holds(row: Optional[Sequence[Any]], owner: str, now: float) -> bool:
    """Whether the lease row (owner, expires_at) is ``owner``'s and has not lapsed at ``now`` (a sweep's writes)."""
    if row is None:
        return False
    holder, expires_at = row
    return bool(holder == owner and expires_at > now)


def leases_taken(
    ids: Sequence[str], rows: Mapping[str, Sequence[Any]], owner: str, now: float, reclaim_sweeps: bool = False,
    alive: Optional[Callable[[str], Optional[bool]]] = None,
) -> List[str]:
    """``acquire_leases``' answer: the ``ids`` (a repeat too) ``owner`` holds after taking them one after the
    other, given the lease rows there (job id -> (owner, expires_at)); ``alive`` is asked once per holder."""
    asked: Dict[str, Optional[bool]] = {}

    def once(holder: str) -> Optional[bool]:
        if holder not in asked:
            asked[holder] = None if alive is None else alive(holder)
        return asked[holder]

    return [job_id for job_id in ids
            if not held_by_another(rows.get(job_id), owner, now, reclaim_sweeps, once if alive else None)]


# ``due_objects``' query, ``?`` placeholders; with the sweeps' leases passed over, or not.  ``{columns}``:
# ``SELECT_OBJECTS``' columns, or the job id alone (``due_ids``).
_DUE_UNLEASED = (
    "SELECT {columns} FROM objects o"
    " WHERE bit <> 'clear' AND next_lookup_at <= ?"
    " AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.job_id = o.job_id AND l.expires_at > ?)"
    " ORDER BY next_lookup_at, updated_at, job_id"
)
_DUE_RECLAIMING = (
    "SELECT {columns} FROM objects o"
    " WHERE bit <> 'clear' AND next_lookup_at <= ?"
    " AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.job_id = o.job_id AND l.expires_at > ?"
    " AND l.owner NOT LIKE ?)"
    " ORDER BY next_lookup_at, updated_at, job_id"
)


def due_query(mark: str, now: float, reclaim_sweeps: bool, *, ids_only: bool = False) -> Tuple[str, List[Any]]:
    """``due_objects``' SQL in placeholder ``mark`` (``ids_only``: the job id alone) and its values; no LIMIT."""
    columns = "job_id" if ids_only else schema.listed(OBJECT_COLUMNS)
    if reclaim_sweeps:
        return _DUE_RECLAIMING.format(columns=columns).replace("?", mark), [now, now, rules.SWEEP_OWNERS]
    return _DUE_UNLEASED.format(columns=columns).replace("?", mark), [now, now]


def failed_lookup(
    path: str, job_id: str, row: Optional[Sequence[Any]], now: float, base: float, cap: float
) -> Tuple[int, float]:
    """The failure count and next lookup time after one more failed lookup; LedgerError if there is no object."""
    if row is None:
        raise LedgerError(f"ledger {path}: no object for job {job_id}", path=path)
    (failed,) = row
    failures = int(failed) + 1
    return failures, now + rules.backoff(failures, base, cap)


def doomed(rows: Sequence[Sequence[Any]], before: float) -> List[Tuple[int, str]]:
    """Of prune's rows (``query.PRUNE_ROWS``), the (id, job_id) of those ``ledger_rules.may_prune`` lets go."""
    return [
        (int(op_id), str(job_id))
        for op_id, job_id, finished_at, bit, newest, leased in rows
        if rules.may_prune(rules.PruneRow(finished_at, bool(newest), RequeueBit(bit), bool(leased)), before)
    ]


def unfinished(rows: Sequence[Sequence[Any]]) -> Unfinished:
    """``Unfinished`` of ``SELECT_UNFINISHED``'s rows.  A row runs only if it is its job's newest and the job is
    leased: a lease is the job's, so an older row under a later operation's lease has lapsed too."""
    from .records import Unfinished

    lapsed = [
        (float(started_at), int(op_id), str(job_id), Op(op))
        for op_id, job_id, op, started_at, newest, leased in rows
        if not (newest and leased)
    ]
    oldest: Optional[Tuple[int, str, Op, float]] = None
    if lapsed:
        started_at, op_id, job_id, op = min(lapsed)  # the earliest start, then the smallest id
        oldest = (op_id, job_id, op, started_at)
    return Unfinished(
        count=len(rows),
        lapsed=len(lapsed),
        lapsed_requeues=sum(1 for *_, op in lapsed if op.requeues),
        oldest_lapsed=oldest,
    )


# -- batches: a chunk's items in a few statements ------------------------------------------------

IN_PIECE = 500  # the most ids in one ``IN (...)`` list (and so placeholders in one read)

# What a batch writes into ``objects``: (job_id, bit, why, updated_at), each job once.
ObjectWrite = Tuple[str, str, str, float]


def distinct(values: Iterable[_T]) -> List[_T]:
    """``values`` each once, in the order first seen."""
    return list(dict.fromkeys(values))


def pieces(values: Sequence[_T], size: int = IN_PIECE) -> List[Sequence[_T]]:
    """``values`` cut into consecutive pieces of at most ``size``: one ``IN`` list each."""
    if len(values) <= size:
        return [values] if values else []
    return [values[start:start + size] for start in range(0, len(values), size)]


@functools.lru_cache(maxsize=256)
def in_list(sql: str, n: int, mark: str, tail: str = "") -> str:
    """``sql IN (mark, ..., mark) tail`` with ``n`` placeholders: with ``multi_row``, the only SQL text built at
    run time, and of placeholders only (every value is bound)."""
    return sql + " IN (" + ", ".join([mark] * n) + ")" + tail


@functools.lru_cache(maxsize=256)
def _values(sql: str, width: int, n: int, mark: str, tail: str) -> str:
    one = "(" + ", ".join([mark] * width) + ")"
    return sql + " VALUES " + ", ".join([one] * n) + tail


def multi_row(
    sql: str, rows: Sequence[Sequence[Any]], mark: str, tail: str = "", size: int = IN_PIECE
) -> Iterator[Tuple[str, List[Any]]]:
    """``rows`` (all as wide as the first) as ``sql VALUES (mark, ...), (mark, ...) tail``
    statements of at most ``size`` placeholders (one row at least) each, with their values, flat."""
    if not rows:
        return
    width = len(rows[0])
    for piece in pieces(rows, max(1, size // width)):
        yield _values(sql, width, len(piece), mark, tail), [value for row in piece for value in row]


# A history row as ``begin_operations`` appends it: its ``schema.START`` columns in their order.
HistoryStart = Tuple[Any, ...]
# What tells the rows one transaction appended when it reads them back (``inserted_ids``).
APPENDED = ("job_id", "op", "nonce", "prior_bit")


class StartFields(NamedTuple):
    """What a row records at its start besides job, op and nonce, checked and encoded (``start_fields``)."""

    baselines: Mapping[str, str] = {}
    baseline_at: Optional[float] = None
    key: Optional[str] = None
    retry_of: Mapping[str, int] = {}
    ends_by: Optional[float] = None
    baseline_boot: Optional[str] = None
    admin_reason: Optional[str] = None
    baseline_ctl: Optional[str] = None


def checked_key(key: Optional[str]) -> Optional[str]:
    """An idempotency key: None, or one ``core.keys.check_key`` accepts (matched exactly later), else InvalidInput."""
    return None if key is None else check_key(key)


def start_fields(
    baselines: Mapping[str, JobInfo],
    baseline_at: Optional[float],
    key: Optional[str],
    retry_of: Mapping[str, int],
    ends_by: Optional[float],
    started: AbstractSet[str] = frozenset(),
    baseline_boot: Optional[str] = None,
    admin_reason: Optional[str] = None,
    baseline_ctl: Optional[str] = None,
) -> StartFields:
    """``begin_operations``' keyword arguments, checked (InvalidInput) and encoded; a baseline's id that is
    exactly one of ``started`` (validated already) is not validated again."""
    texts: Dict[str, str] = {}
    for job_id, info in dict(baselines).items():
        text = job_info_text(info)
        if text is not None:
            texts[job_id if type(job_id) is str and job_id in started else validate_job_id(job_id)] = text
    retries: Dict[str, int] = {}
    for job_id, op_id in dict(retry_of).items():
        if isinstance(op_id, bool) or not isinstance(op_id, int) or op_id <= 0:
            raise InvalidInput(f"retry_of must name a history id (a positive integer), not {op_id!r}")
        retries[validate_job_id(job_id)] = op_id
    return StartFields(
        texts,
        None if baseline_at is None else finite("baseline_at", baseline_at),
        checked_key(key),
        retries,
        None if ends_by is None else finite("ends_by", ends_by),
        None if baseline_boot is None else stored_text(baseline_boot)[:512],
        None if admin_reason is None else check_reason(admin_reason),
        None if baseline_ctl is None else stored_text(baseline_ctl)[:512],
    )


class BeginPlan(NamedTuple):
    """What ``begin_operations`` writes: the objects it creates or gives an intent (upserted, back-off reset),
    the history rows in the order of the starts, and the objects' quiet moments."""

    objects: List[ObjectWrite]
    history: List[HistoryStart]
    quiet: List[QuietWrite]


# An object's quiet moment, and its job (docs/contract.md §13): ``quiet_at`` (the ledger's clock:
# shown only), ``quiet_mark`` and ``quiet_look`` (core.durable Rule 2; None and None: a call of
# slurm-dsl's may still change the job's flag).  A requeue or restore writes (its ``ends_by``, None,
# None) when it begins, and (its finish, the looks' mark, its own look) when it finishes (a late
# finish, Rule 7 of ledger_rules, leaves it as it is).
QuietWrite = Tuple[Optional[float], Optional[int], Optional[str], str]
FLAG_OPS = (Op.REQUEUE, Op.REQUEUE_HOLD, Op.RESTORE)  # the ops whose calls change the job's flag


def begin_plan(
    starts: Sequence[Tuple[str, Op, str]],
    bits: Mapping[str, str],
    now: float,
    actor: str,
    fields: Optional[StartFields] = None,
) -> BeginPlan:
    """``BeginPlan`` of the checked ``starts`` at ``now``, given the objects' bits there (none: no object), as
    the starts one after the other would write it; ``baseline_at`` is kept only with a baseline."""
    current: Dict[str, RequeueBit] = {job_id: RequeueBit(bit) for job_id, bit in bits.items()}
    objects: Dict[str, ObjectWrite] = {}
    history: List[HistoryStart] = []
    who = stored_text(actor) or None
    fields = fields or StartFields()
    quiet: Dict[str, QuietWrite] = {}
    for job_id, op, nonce in starts:
        if op in FLAG_OPS:
            quiet[job_id] = (fields.ends_by, None, None, job_id)
        prior = current.get(job_id)
        if prior is None:  # a new object, bit clear (an intent below may overwrite it at once)
            prior = current[job_id] = RequeueBit.CLEAR
            objects[job_id] = (job_id, prior.value, rules.first_seen_why(op, nonce), now)
        intent = rules.intent(op, nonce)
        if intent is not None:
            current[job_id] = intent.bit
            objects[job_id] = (job_id, intent.bit.value, intent.why, now)
        baseline = fields.baselines.get(job_id)
        history.append(ordered(schema.START, {
            "job_id": job_id,
            "op": stored_op(op),
            "hold": 1 if op is Op.REQUEUE_HOLD else None,
            "nonce": nonce,
            "started_at": now,
            "prior_bit": prior.value,
            "actor": who,
            "baseline": baseline,
            "baseline_at": None if baseline is None else fields.baseline_at,
            "op_key": fields.key,
            "retry_of": fields.retry_of.get(job_id),
            "ends_by": fields.ends_by,
            "baseline_boot": None if baseline is None else fields.baseline_boot,
            "admin_reason": fields.admin_reason,
            "baseline_ctl": None if baseline is None else fields.baseline_ctl,
        }))
    return BeginPlan(list(objects.values()), history, list(quiet.values()))


def inserted_ids(path: str, rows: Sequence[Sequence[Any]], found: Sequence[Sequence[Any]]) -> List[int]:
    """The ids of ``rows``, from the rows one transaction read back above the largest id before (id, then
    ``APPENDED``): under the write lock they are its own, in order; else LedgerError."""
    appended = [ordered(APPENDED, named(schema.START, r)) for r in rows]
    if len(found) != len(rows) or any(tuple(there) != mine for (_, *there), mine in zip(found, appended)):
        raise LedgerError(
            f"ledger {path}: the history rows read back are not the {len(rows)} this transaction"
            " appended (has another writer appended history without the write lock?)",
            path=path,
        )
    return [int(op_id) for op_id, *_ in found]


class FinishPlan(NamedTuple):
    """What ``finish_operations`` returns and writes: bits after, changed objects, history rows, quiet moments."""

    bits: List[RequeueBit]
    objects: List[ObjectWrite]
    history: List[Tuple[Any, ...]]
    quiet: List[QuietWrite]


def finish_plan(
    path: str,
    finishes: Sequence[Tuple[int, Outcome, bytes]],
    rows: Mapping[int, Sequence[Any]],
    now: float,
    *,
    hex_stderr: bool = False,
    mark: int = 0,
    look: Optional[str] = None,
    controller: Optional[str] = None,
) -> FinishPlan:
    """``FinishPlan`` of ``finishes`` at ``now``, given ``finish``'s row per op id, as the finishes one after the
    other would (``mark``, ``look``: the quiet moment); the first refused raises, so nothing is written."""
    current: Dict[str, str] = {}  # job id -> the bit the batch left so far
    done: Set[int] = set()
    objects: Dict[str, ObjectWrite] = {}
    bits: List[RequeueBit] = []
    history: List[Tuple[Any, ...]] = []
    quiet: Dict[str, QuietWrite] = {}
    for op_id, outcome, stderr in finishes:
        stderr = bytes(stderr)
        row = rows.get(op_id)
        later = True
        if row is not None:
            job, op_text, nonce, prior_text, finished_at, bit, later = row
            row = (job, op_text, nonce, prior_text, now if op_id in done else finished_at, current.get(job, bit), later)
        job_id, after = finish(path, op_id, row, outcome)
        if outcome.op in FLAG_OPS and not later:  # no operation began on the job after it
            quiet[job_id] = (now, mark, look, job_id)  # its calls are over, every earlier one's too (its lease)
        done.add(op_id)
        if after.why is not None:
            current[job_id] = after.bit.value
            objects[job_id] = (job_id, after.bit.value, after.why, now)
        bits.append(after.bit)
        history.append(finished_values(now, outcome, after.bit, stderr, op_id, hex_stderr=hex_stderr,
                                       controller=controller))
    return FinishPlan(bits, list(objects.values()), history, list(quiet.values()))


# -- import: another ledger's records ------------------------------------------------------------


def import_action(path: str, values: Mapping[str, Any], row: Optional[Sequence[Any]], merge: bool) -> ImportAction:
    """What importing an object does where the job's object has bit ``row`` (None: none): insert it, update to
    it (its bit is less clear) or keep the one there; LedgerError if there is one and not ``merge``."""
    job_id, bit = values["job_id"], RequeueBit(values["bit"])
    if row is not None and not merge:
        raise LedgerError(f"ledger {path}: job {job_id} already has an object here (--merge combines them)", path=path)
    if row is None:
        return "insert"
    (there,) = row
    return "update" if rules.less_clear(bit, RequeueBit(there)) else "keep"


def object_values(obj: JobObject) -> Dict[str, Any]:
    """An object's ``OBJECT_COLUMNS`` by name, checked."""
    return {
        "job_id": validate_job_id(obj.job_id),
        "bit": RequeueBit(obj.bit).value,
        "why": str(obj.why),
        "updated_at": finite("updated_at", obj.updated_at),
        "lookup_failures": int(obj.lookup_failures),
        "next_lookup_at": finite("next_lookup_at", obj.next_lookup_at),
        "lookup_error": str(obj.lookup_error),
    }


# What tells an imported history row already there (``import_records`` with merge).
SAME_ROW = ("job_id", "op", "nonce", "started_at")


def history_values(e: HistoryEntry, *, hex_stderr: bool = False, retry_of: Optional[int] = None) -> Dict[str, Any]:
    """A history row's ``IMPORT_COLUMNS`` by name, checked (unfinished: NULL where finishing writes);
    ``retry_of``: the id here of the row it names (None: none here)."""
    done = e.finished_at is not None
    return {
        "job_id": validate_job_id(e.job_id),
        "op": stored_op(Op(e.op)),
        "hold": 1 if Op(e.op) is Op.REQUEUE_HOLD else None,
        "nonce": str(e.nonce),
        "started_at": finite("started_at", e.started_at),
        "prior_bit": RequeueBit(e.prior_bit).value,
        "finished_at": finite("finished_at", e.finished_at) if e.finished_at is not None else None,
        "result": None if e.result is None else Result(e.result).value,
        "requeue_bit": None if e.requeue_bit is None else RequeueBit(e.requeue_bit).value,
        "bit_after": None if e.bit_after is None else RequeueBit(e.bit_after).value,
        "reason": None if e.reason is None else Reason(e.reason).value,
        "detail": e.detail if done else None,
        "exit_status": e.exit_status,
        "calls": json.dumps([dataclasses.asdict(c) for c in e.calls]) if done else None,
        "stderr": (bytes(e.stderr).hex() if hex_stderr else bytes(e.stderr)) if done else None,
        "stderr_len": int(e.stderr_len) if done else None,
        "actor": e.actor,
        "baseline": job_info_text(e.baseline),
        "baseline_at": None if e.baseline_at is None else finite("baseline_at", e.baseline_at),
        "op_key": checked_key(e.key),
        "retry_of": retry_of,
        "ends_by": None if e.ends_by is None else finite("ends_by", e.ends_by),
        "baseline_boot": None if e.baseline_boot is None else stored_text(e.baseline_boot)[:512],
        "admin_reason": None if e.admin_reason is None else check_reason(e.admin_reason),
        "baseline_ctl": None if e.baseline_ctl is None else stored_text(e.baseline_ctl)[:512],
        "calls_ctl": None if e.calls_ctl is None else stored_text(e.calls_ctl)[:512],
    }


# -- settlements ---------------------------------------------------------------------------------

# (op_id, verdict, looked_at, record, detail): what ``add_settlements`` is given for each.
SettlementIn = Tuple[int, "Verdict", float, Optional[JobInfo], str]
# What a settlement row is written as: op_id, job_id, verdict, looked_at, record, settled_at,
# settled_by, detail.
SettlementRow = Tuple[int, str, str, float, Optional[str], float, str, str]


def checked_op_id(op_id: int) -> int:
    """A history id: an integer (not a bool), else InvalidInput."""
    if isinstance(op_id, bool) or not isinstance(op_id, int):
        raise InvalidInput(f"an op_id must be a history id (an integer), not {shown(repr(op_id))}")
    return op_id


def checked_op_ids(op_ids: Iterable[int]) -> List[int]:
    """History ids each once, in the order first seen (``checked_op_id`` each; InvalidInput)."""
    ids = list(op_ids)
    if not all(type(i) is int for i in ids):  # the common case checked at once; any other as before
        ids = [checked_op_id(i) for i in ids]
    return list(dict.fromkeys(ids))  # checked first: 2.0 == 2 would hide in a dict


def checked_verdicts(verdicts: Sequence[SettlementIn]) -> List[Tuple[int, str, float, Optional[str], str]]:
    """``add_settlements``' items, checked (InvalidInput) and encoded (``job_info_text``, ``stored_text``)."""
    checked = []
    # A sweep's 10,000 verdicts share a few details ("gone: ..."): each distinct one made
    # ``stored_text`` once (docs/benchmarks.md §9).
    stored: Dict[str, str] = {}
    for op_id, verdict, looked_at, record, detail in verdicts:
        checked_op_id(op_id)
        try:
            value = Verdict(verdict).value
        except ValueError:
            raise InvalidInput(f"not a verdict: {shown(repr(verdict))}") from None
        text = stored.get(detail) if type(detail) is str else None
        if text is None:
            text = stored_text(detail)
            if type(detail) is str:
                stored[detail] = text
        checked.append((op_id, value, finite("looked_at", looked_at), job_info_text(record), text))
    return checked


def settlement_plan(
    path: str,
    checked: Sequence[Tuple[int, str, float, Optional[str], str]],
    rows: Mapping[int, Sequence[Any]],
    now: float,
    by: str,
) -> List[SettlementRow]:
    """The rows ``add_settlements`` writes, given each op id's (job_id, finished_at, result, settled?): one
    settled, or earlier in the batch, is skipped; LedgerError for no row or a verdict ``core.life`` does not allow."""
    settled: Set[int] = set()
    written: List[SettlementRow] = []
    for op_id, verdict, looked_at, record, detail in checked:
        row = rows.get(op_id)
        if row is None:
            raise LedgerError(f"ledger {path}: no operation {op_id} to settle", path=path)
        job_id, finished_at, result, has_one = row
        # The table says which verdicts a row may take (core.life: an acknowledged one only absent or gone).
        if not life.verdict_allowed(None if finished_at is None else Result(result), Verdict(verdict)):
            raise LedgerError(
                f"ledger {path}: operation {op_id} finished {result}, not unknown: it has nothing to settle",
                path=path,
            )
        if has_one or op_id in settled:
            continue
        settled.add(op_id)
        written.append((op_id, str(job_id), verdict, looked_at, record, now, by, detail))
    return written


def settlement_values(s: Settlement, op_id: int) -> SettlementRow:
    """An imported settlement's columns (``SettlementRow``), of the history row ``op_id`` here."""
    return (
        op_id,
        validate_job_id(s.job_id),
        Verdict(s.verdict).value,
        finite("looked_at", s.looked_at),
        job_info_text(s.record),
        finite("settled_at", s.settled_at),
        str(s.by),
        str(s.detail),
    )


def age_counts(started: Sequence[float], now: float, edges: Sequence[float]) -> List[int]:
    """``count_unsettled``'s answer: the ``started`` times by age in ``[0, e0), ..., [e_last, inf)`` (after
    ``now``: 0); InvalidInput unless the edges are finite, positive and increasing."""
    bounds = [finite("edge", e) for e in edges]
    if any(e <= 0 for e in bounds) or any(b <= a for a, b in zip(bounds, bounds[1:])):
        raise InvalidInput(f"the age edges must be positive and increasing, not {list(edges)!r}")
    counts = [0] * (len(bounds) + 1)
    for at in started:
        age = max(0.0, now - float(at))
        counts[sum(1 for e in bounds if age >= e)] += 1
    return counts
