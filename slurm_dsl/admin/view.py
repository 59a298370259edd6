"""The admin's view of the ledger (docs/contract.md §10, §9.1.2): what ``history``, ``ledger status``
and ``ledger prune`` answer, as JSON values ``render`` writes both ways.  Nothing here prints, opens
a file or reads a clock."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..core import ledger_rules as rules
from ..core.model import RequeueBit, Verdict
from ..ledger.base import LedgerStore
from ..ledger.records import CommentRecord, HistoryEntry, JobObject, PruneResult, iso_utc


def object_json(obj: JobObject) -> Dict[str, Any]:
    """A job's object as ``history --json`` shows it before its operations (``kind`` ``object``)."""
    return {
        "kind": "object",
        "job_id": obj.job_id,
        "bit": obj.bit.value,
        "why": obj.why,
        "since": iso_utc(obj.updated_at),
        "since_epoch": obj.updated_at,
        "lookup_failures": obj.lookup_failures,
        "lookup_error": obj.lookup_error or None,
    }


def history_json(job_id: str, obj: Optional[JobObject], entries: Sequence[HistoryEntry],
                 comments: Mapping[int, Sequence[CommentRecord]] = {}) -> List[Dict[str, Any]]:
    """One job's ``history --json`` lines: its object, then each operation oldest first; or a ``no_record`` line."""
    if obj is None and not entries:
        return [{"kind": "no_record", "job_id": job_id}]
    head = [object_json(obj)] if obj is not None else []
    return head + [{**e.to_json(), **({"admin_comments": [c.to_json() for c in comments[e.id]]}
                                      if comments.get(e.id) else {})} for e in entries]


def redo_command(e: HistoryEntry) -> Optional[str]:
    """The command that redoes a lost operation (docs/contract.md §13.4); None when its job is gone."""
    if e.settlement is not None and e.settlement.verdict is Verdict.GONE:
        return None
    return f"slurm-dsl {e.op.value} {e.job_id}" + (f" --key {e.key}" if e.key is not None else "")


def lost_json(entries: Sequence[HistoryEntry]) -> List[Dict[str, Any]]:
    """``history --lost --json``: each lost operation not redone (``kind`` ``lost``), with its ``redo``."""
    return [{**e.to_json(), "kind": "lost", "redo": redo_command(e)} for e in entries]


def status_json(ledger: LedgerStore, now: float) -> Dict[str, Any]:
    """``ledger status --json``: objects by bit and age, back-offs, unfinished and unsettled operations, last sweep."""
    by_bit = ledger.count_by_bit()
    not_clear = ledger.objects_not_clear()  # oldest change first
    last = ledger.last_sweep()
    oldest: Optional[Dict[str, Any]] = None
    if not_clear:
        o = not_clear[0]
        oldest = {"job_id": o.job_id, "bit": o.bit.value, "why": o.why, "since": iso_utc(o.updated_at),
                  "since_epoch": o.updated_at, "age_seconds": round(now - o.updated_at, 3)}
    left = ledger.unfinished(now)
    oldest_left: Optional[Dict[str, Any]] = None
    if left.oldest_lapsed is not None:
        op_id, job_id, op, started = left.oldest_lapsed
        oldest_left = {"id": op_id, "job_id": job_id, "op": op.value, "started_at": iso_utc(started),
                       "started_at_epoch": started, "age_seconds": round(now - started, 3)}
    unfinished = {"count": left.count, "lapsed": left.lapsed, "lapsed_requeues": left.lapsed_requeues,
                  "oldest_lapsed": oldest_left}
    # The unknown and unfinished operations without a verdict yet, by how long ago they started.
    edges = [limit for _, limit in rules.AGE_BUCKETS[:-1]]
    unsettled_counts = ledger.count_unsettled(now, edges)
    unsettled = {name: n for (name, _), n in zip(rules.AGE_BUCKETS, unsettled_counts)}
    sweep: Optional[Dict[str, Any]] = None
    if last is not None:
        sweep = {"started_at": iso_utc(last.started_at), "started_at_epoch": last.started_at,
                 "finished_at": iso_utc(last.finished_at), "finished_at_epoch": last.finished_at,
                 "age_seconds": round(now - last.finished_at, 3), "summary": dict(last.summary)}
    return {
        "kind": "status",
        "ledger": ledger.path,
        "schema": ledger.schema_version(),
        "history_rows": ledger.count_history(),
        "objects": {bit.value: by_bit[bit] for bit in RequeueBit},
        "not_clear": len(not_clear),
        "not_clear_by_age": rules.ages((o.updated_at for o in not_clear), now),
        "oldest_not_clear": oldest,
        "backing_off": sum(1 for o in not_clear if o.lookup_failures > 0),
        "unfinished": unfinished,
        "unsettled": {"count": sum(unsettled_counts), "by_age": unsettled},
        "last_sweep": sweep,
    }


def prune_json(result: PruneResult, days: int, before: float, dry_run: bool) -> Dict[str, Any]:
    """``ledger prune --json``: what was removed (or would be), and the cutoff."""
    return {
        "kind": "prune",
        "dry_run": dry_run,
        "removed": result.removed,
        "jobs": result.jobs,
        "older_than_days": days,
        "before": iso_utc(before),
        "before_epoch": before,
        "checkpointed": result.checkpointed,
    }


# -- ledger migrate -------------------------------------------------------------------------------
