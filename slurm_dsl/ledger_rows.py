"""The ledger's rows as both backends store them (docs/contract.md §9.1): values in, values out.

Strategy: ``sqlite_ledger`` and ``mariadb_ledger`` keep the same tables with the same columns, so
all that is not storage is written once, here: checking the arguments; the columns a value is
written as (``object_values``, ``history_values``, ``finished_values``, ``calls_json``) and read
back from (``job_object``, ``entry``, ``sweep_record``); and the decisions taken on a row a backend
read (``finish``, ``held_by_another``, ``failed_lookup``, ``import_action``, ``doomed``), which
apply ``ledger_rules``.  A backend keeps only its SQL dialect, connections, transactions, locks
and the mapping of its errors.

Rule 1: a row is read by ``SELECT_OBJECTS`` or ``SELECT_HISTORY`` (or, in prune, finish and
leases, the columns each function names), in that order.  Rule 2: no I/O: a function gets the
row its backend read and returns what to write, or raises the typed error (``LedgerError`` with
the ledger's ``path``, ``InvalidInput``).  Rule 3: the backends differ only in how stderr is
passed: MariaDB's as hex (``hex_stderr``), so that bytes never pass as utf8mb4 text.  Not in the
pure core (tests/test_layers.py) only because the values it builds live in ``ledger``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any, List, Literal, Mapping, Optional, Sequence, Tuple, Type, TypeVar

from . import ledger_rules as rules
from .errors import InvalidInput, LedgerError
from .jobid import validate_job_id
from .ledger import STDERR_CAP, CallRecord, HistoryEntry, JobObject, SweepRecord
from .model import Op, Outcome, Reason, RequeueBit, Result

_E = TypeVar("_E", bound=enum.Enum)

# What ``job_object`` and ``entry`` read: their columns in their order (a backend appends its
# WHERE, ORDER BY and LIMIT).
SELECT_OBJECTS = "SELECT job_id, bit, why, updated_at, lookup_failures, next_lookup_at, lookup_error FROM objects"
SELECT_HISTORY = (
    "SELECT id, job_id, op, nonce, started_at, prior_bit, finished_at, result, requeue_bit,"
    " bit_after, reason, detail, exit_status, calls, stderr, stderr_len, actor FROM history"
)

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
    """``set_bits``' ``(job_id, bit, why)``, checked."""
    return [(validate_job_id(j), RequeueBit(b), why) for j, b, why in changes]


# -- reading rows --------------------------------------------------------------------------------


def _enum_or_none(cls: Type[_E], value: Optional[str]) -> Optional[_E]:
    return None if value is None else cls(value)


def job_object(row: Sequence[Any]) -> JobObject:
    """An ``objects`` row (``SELECT_OBJECTS``) as a ``JobObject``."""
    return JobObject(row[0], RequeueBit(row[1]), row[2], float(row[3]), int(row[4]), float(row[5]), row[6])


def entry(r: Sequence[Any]) -> HistoryEntry:
    """A ``history`` row (``SELECT_HISTORY``) as a ``HistoryEntry``."""
    return HistoryEntry(
        id=int(r[0]),
        job_id=r[1],
        op=Op(r[2]),
        nonce=r[3],
        started_at=float(r[4]),
        prior_bit=RequeueBit(r[5]),
        finished_at=None if r[6] is None else float(r[6]),
        result=_enum_or_none(Result, r[7]),
        requeue_bit=_enum_or_none(RequeueBit, r[8]),
        bit_after=_enum_or_none(RequeueBit, r[9]),
        reason=_enum_or_none(Reason, r[10]),
        detail=r[11] or "",
        exit_status=r[12],
        calls=tuple(CallRecord(**c) for c in json.loads(r[13] or "[]")),
        stderr=bytes(r[14] or b""),
        stderr_len=int(r[15] or 0),
        actor=r[16],
    )


def sweep_summary(summary: Mapping[str, Any]) -> str:
    """What ``last_sweep.summary`` holds: the summary as JSON."""
    return json.dumps(dict(summary), sort_keys=True)


def sweep_record(path: str, row: Sequence[Any]) -> SweepRecord:
    """A ``last_sweep`` row (started_at, finished_at, summary); LedgerError if the summary is not
    a JSON object."""
    started, finished, text = row
    try:
        summary = json.loads(text)
    except ValueError:
        summary = None
    if not isinstance(summary, dict):
        raise LedgerError(f"ledger {path}: the last sweep's summary is not a JSON object", path=path)
    return SweepRecord(float(started), float(finished), summary)


# -- decisions on a row read ---------------------------------------------------------------------


def prior_bit(row: Optional[Sequence[Any]]) -> RequeueBit:
    """The bit of the object row (bit) read before an operation; clear if there is none yet."""
    return RequeueBit(row[0]) if row else RequeueBit.CLEAR


def finish(path: str, op_id: int, row: Optional[Sequence[Any]], outcome: Outcome) -> Tuple[str, rules.BitChange]:
    """The job and ``ledger_rules.after`` for finishing operation ``op_id``, from its row (job_id,
    op, nonce, prior_bit, finished_at and the object's bit).  LedgerError if there is no such
    operation or it already finished; InvalidInput if ``outcome`` is another job's or op's."""
    if row is None:
        raise LedgerError(f"ledger {path}: no operation {op_id}", path=path)
    job_id, op_text, nonce, prior_text, finished_at, current_text = row
    op = Op(op_text)
    if finished_at is not None:
        raise LedgerError(f"ledger {path}: operation {op_id} already finished", path=path)
    if outcome.op is not op or outcome.job_id != job_id:
        raise InvalidInput(f"operation {op_id} is {op.value} {job_id}, not {outcome.op.value} {outcome.job_id}")
    return job_id, rules.after(op, nonce, RequeueBit(prior_text), RequeueBit(current_text), outcome)


def calls_json(outcome: Outcome) -> str:
    """The history's ``calls`` column: each scontrol call of the outcome (``CallRecord``'s fields)."""
    calls = [
        {
            "number": c.number,
            "status": c.status,
            "status_text": c.status_text,
            "outcome": c.outcome.value,
            "message": c.message,
            "reason": c.reason.value if c.reason else None,
        }
        for c in outcome.calls
    ]
    return json.dumps(calls)


def finished_values(
    now: float, outcome: Outcome, bit_after: RequeueBit, stderr: bytes, op_id: int, *, hex_stderr: bool = False
) -> Tuple[Any, ...]:
    """What finishing writes into history row ``op_id``: finished_at, result, requeue_bit,
    bit_after, reason, detail, exit_status, calls, stderr (its first ``STDERR_CAP`` bytes),
    stderr_len, and the id last."""
    kept = stderr[:STDERR_CAP]
    return (
        now,
        outcome.result.value,
        outcome.requeue_bit.value if outcome.requeue_bit else None,
        bit_after.value,
        outcome.reason.value if outcome.reason else None,
        outcome.detail,
        outcome.exit_status,
        calls_json(outcome),
        kept.hex() if hex_stderr else kept,
        len(stderr),
        op_id,
    )


def held_by_another(row: Optional[Sequence[Any]], owner: str, now: float) -> bool:
    """Whether the lease row (owner, expires_at) keeps ``owner`` from taking the job at ``now``."""
    return row is not None and row[0] != owner and row[1] > now


def failed_lookup(
    path: str, job_id: str, row: Optional[Sequence[Any]], now: float, base: float, cap: float
) -> Tuple[int, float]:
    """After one more failed lookup of the object (row: lookup_failures): its failure count and
    when it may be looked up again (``ledger_rules.backoff``).  LedgerError if there is no object."""
    if row is None:
        raise LedgerError(f"ledger {path}: no object for job {job_id}", path=path)
    failures = int(row[0]) + 1
    return failures, now + rules.backoff(failures, base, cap)


def doomed(rows: Sequence[Sequence[Any]], before: float) -> List[Tuple[int, str]]:
    """Of prune's rows (id, job_id, finished_at, the object's bit, newest?, leased?), the (id,
    job_id) of those ``ledger_rules.may_prune`` lets go."""
    return [
        (int(op_id), str(job_id))
        for op_id, job_id, finished_at, bit, newest, leased in rows
        if rules.may_prune(rules.PruneRow(finished_at, bool(newest), RequeueBit(bit), bool(leased)), before)
    ]


# -- import: another ledger's records ------------------------------------------------------------


def import_action(path: str, values: Sequence[Any], row: Optional[Sequence[Any]], merge: bool) -> ImportAction:
    """What importing an object (its ``object_values``) does where the job's object row (bit) is
    ``row`` (None: no object): insert it, update to it (its bit is less clear,
    ``ledger_rules.less_clear``), or keep the one there.  LedgerError if there is one and
    ``merge`` is off."""
    job_id, bit = values[0], RequeueBit(values[1])
    if row is not None and not merge:
        raise LedgerError(f"ledger {path}: job {job_id} already has an object here (--merge combines them)", path=path)
    if row is None:
        return "insert"
    return "update" if rules.less_clear(bit, RequeueBit(row[0])) else "keep"


def object_values(obj: JobObject) -> Tuple[Any, ...]:
    """An object's columns in ``SELECT_OBJECTS``' order, checked."""
    return (
        validate_job_id(obj.job_id),
        RequeueBit(obj.bit).value,
        str(obj.why),
        finite("updated_at", obj.updated_at),
        int(obj.lookup_failures),
        finite("next_lookup_at", obj.next_lookup_at),
        str(obj.lookup_error),
    )


def history_values(e: HistoryEntry, *, hex_stderr: bool = False) -> Tuple[Any, ...]:
    """A history row's columns for ``import_records``: job_id, nonce, op, started_at first (what
    tells a row already there), then prior_bit, finished_at, result, requeue_bit, bit_after,
    reason, detail, exit_status, calls, stderr, stderr_len, actor; an unfinished row keeps NULL in
    every column written at finish."""
    done = e.finished_at is not None
    return (
        validate_job_id(e.job_id),
        str(e.nonce),
        Op(e.op).value,
        finite("started_at", e.started_at),
        RequeueBit(e.prior_bit).value,
        finite("finished_at", e.finished_at) if e.finished_at is not None else None,
        None if e.result is None else Result(e.result).value,
        None if e.requeue_bit is None else RequeueBit(e.requeue_bit).value,
        None if e.bit_after is None else RequeueBit(e.bit_after).value,
        None if e.reason is None else Reason(e.reason).value,
        e.detail if done else None,
        e.exit_status,
        json.dumps([dataclasses.asdict(c) for c in e.calls]) if done else None,
        (bytes(e.stderr).hex() if hex_stderr else bytes(e.stderr)) if done else None,
        int(e.stderr_len) if done else None,
        e.actor,
    )
