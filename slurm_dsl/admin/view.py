"""The admin's view of the ledger: what ``history``, ``ledger status``, ``ledger prune`` and
``ledger migrate`` show, and ``migrate`` itself, which copies one store into another.

Strategy: each command's answer is built once, as JSON values (``--json`` prints them as they
are, one object per line, each with a ``kind``), and the human text is rendered from those same
values, so the two can never disagree.  Nothing here prints, opens a file or reads a clock: the
store and ``now`` come from ``cli``.  Times are ISO-8601 UTC (``2024-05-01T12:00:03Z``) for
people, with the epoch seconds beside them for scripts.  Every text a ledger row holds is
``shown`` in the human lines (docs/contract.md §10.1): rows written before the ledger escaped
what it stores may still hold raw control bytes.  ``--json`` leaves it to ``json.dumps``, which
writes every control character as ``\\u00XX``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence

from ..core import ledger_rules as rules
from ..core.errors import InvalidInput, UsageError
from ..core.model import RequeueBit
from ..core.shown import shown
from ..ledger.base import (
    HistoryEntry,
    ImportResult,
    JobObject,
    LedgerError,
    LedgerStore,
    PruneResult,
    iso_utc,
)

UNKNOWN_ACTOR = "unknown"  # rows written before schema 2 did not record who ran them


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


def history_json(job_id: str, obj: Optional[JobObject], entries: Sequence[HistoryEntry]) -> List[Dict[str, Any]]:
    """One job's ``history --json`` lines: its object, then each operation oldest first; or one
    ``no_record`` line for a job the ledger has never seen."""
    if obj is None and not entries:
        return [{"kind": "no_record", "job_id": job_id}]
    head = [object_json(obj)] if obj is not None else []
    return head + [e.to_json() for e in entries]


def history_lines(records: Sequence[Dict[str, Any]]) -> List[str]:
    """The human table of one job, from its ``history_json`` records."""
    first = records[0]
    if first["kind"] == "no_record":
        return [f"no record of job {first['job_id']}"]
    lines: List[str] = []
    if first["kind"] == "object":
        lines.append(f"job {first['job_id']}: bit {first['bit']} since {first['since']} ({shown(first['why'])})")
        if first["lookup_failures"]:
            lines.append(f"  lookup failed {first['lookup_failures']} time(s) in a row:"
                         f" {shown(first['lookup_error'] or '')}")
    ops = [r for r in records if r["kind"] == "operation"]
    if not ops:
        lines.append("  no operation recorded (an object made by sweep --orphans --fix, or pruned)")
        return lines
    lines.append(f"  {'ID':>6}  {'STARTED (UTC)':<20}  {'SECS':>6}  {'OP':<8} {'RESULT':<10} {'REQUEUE-BIT':<11}"
                 f"  {'BIT BEFORE -> AFTER':<24}  BY")
    for r in ops:
        secs = "-" if r["finished_at_epoch"] is None else f"{r['finished_at_epoch'] - r['started_at_epoch']:.1f}"
        bits = f"{r['bit_before']} -> {r['bit_after'] or '?'}"
        lines.append(
            f"  {r['id']:>6}  {r['started_at']:<20}  {secs:>6}  {r['op']:<8} {r['result'] or 'unfinished':<10}"
            f" {r['requeue_bit'] or '-':<11}  {bits:<24}  {shown(r['actor'] or UNKNOWN_ACTOR)}"
        )
        pad = " " * 10
        if r["finished_at"] is None:
            lines.append(f"{pad}not finished: still running, or its process died, or the ledger failed after it"
                         " ran (a requeue's object then stays may_be_set for the sweep)")
        for c in r["calls"]:
            said = f": {shown(c['message'])}" if c["message"] else ""
            why = f" [{c['reason']}]" if c["reason"] else ""
            lines.append(f"{pad}call {c['number']}: {shown(str(c['status']))} {c['outcome']}{said}{why}")
        if r["reason"] or r["detail"]:
            lines.append(f"{pad}why: {shown(': '.join(str(x) for x in (r['reason'], r['detail']) if x))}")
    return lines


def ago(seconds: float) -> str:
    """A duration as people read it: ``42 s``, ``17 min``, ``3.2 h``, ``12.5 d``."""
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * rules.DAY:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / rules.DAY:.1f} d"


def status_json(ledger: LedgerStore, now: float) -> Dict[str, Any]:
    """``ledger status --json``: objects by bit, the not-clear ones by the age of their bit, the
    oldest of them, how many are backing off after failed lookups, the operations without a
    result (how many, how many no longer run, the oldest of those), and the last sweep."""
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
        "last_sweep": sweep,
    }


def status_lines(status: Dict[str, Any]) -> List[str]:
    """The human ``ledger status``, from ``status_json``."""
    objects = ", ".join(f"{n} {bit}" for bit, n in status["objects"].items())
    ages = ", ".join(f"{name} {n}" for name, n in status["not_clear_by_age"].items())
    lines = [
        f"ledger {shown(status['ledger'])} (schema {status['schema']}): {status['history_rows']} history row(s)",
        f"objects: {objects}",
        f"not clear, by when their bit last changed: {ages}",
    ]
    o = status["oldest_not_clear"]
    if o is None:
        lines.append("oldest not clear: none, every object is clear")
    else:
        lines.append(f"oldest not clear: job {o['job_id']} {o['bit']} since {o['since']}"
                     f" ({ago(o['age_seconds'])} ago): {shown(o['why'])}")
    lines.append(f"lookup back-off: {status['backing_off']} object(s) whose last lookup failed")
    lines.append(unfinished_line(status["unfinished"]))
    s = status["last_sweep"]
    if s is None:
        lines.append("last sweep: none recorded (run slurm-dsl sweep; contrib/systemd has a timer for it)")
    else:
        summary = s["summary"]
        done = ", ".join(f"{n} {what}" for what, n in summary.get("counts", {}).items()) or "nothing to do"
        settled = "settled" if summary.get("settled") else "NOT settled"
        error = f"; lookup failed: {shown(str(summary['lookup_error']))}" if summary.get("lookup_error") else ""
        lines.append(f"last sweep: {s['finished_at']} ({ago(s['age_seconds'])} ago, took"
                     f" {s['finished_at_epoch'] - s['started_at_epoch']:.1f} s): {done}; {settled}{error}")
    return lines


def unfinished_line(u: Dict[str, Any]) -> str:
    """``ledger status``'s line on the operations without a result, from its ``unfinished``."""
    if not u["count"]:
        return "unfinished operations: none"
    line = f"unfinished operations: {u['count']}, of which {u['lapsed']} no longer running"
    o = u["oldest_lapsed"]
    if o is None:
        return line
    requeues = (f", {u['lapsed_requeues']} of them requeues (their object stays may_be_set until a sweep"
                " settles it)") if u["lapsed_requeues"] else ""
    return (f"{line} (the process died, or the ledger failed after the script ran: the result was never"
            f" recorded){requeues}; the oldest: {o['op']} {o['job_id']} (operation {o['id']}) started"
            f" {o['started_at']}, {ago(o['age_seconds'])} ago")


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


def prune_line(p: Dict[str, Any]) -> str:
    """The human ``ledger prune``, from ``prune_json``."""
    verb = "would remove" if p["dry_run"] else "removed"
    line = (f"prune{' (dry run)' if p['dry_run'] else ''}: {verb} {p['removed']} history row(s) of {p['jobs']}"
            f" settled job(s), finished before {p['before']} (older than {p['older_than_days']} day(s));"
            " every object keeps its newest row, unsettled and leased objects and unfinished rows are kept")
    if p["checkpointed"] is False:
        line += "; the WAL checkpoint could not finish (the ledger was busy): SQLite completes it later"
    return line


# -- ledger migrate -------------------------------------------------------------------------------

MIGRATE_BATCH = 500  # objects or history rows per transaction on the target


def migrate(
    source: LedgerStore, target: LedgerStore, *, merge: bool, batch: Optional[int] = None
) -> Dict[str, Any]:
    """Copy every object, every history row and the last sweep of ``source`` into ``target``;
    return ``ledger migrate --json``'s object.  ``source`` is only read.

    Strategy: in batches of ``batch`` records (default ``MIGRATE_BATCH``), each one transaction on the target
    (``import_records``), so that no ledger needs one giant transaction.  Objects first, the not
    clear ones first of all, then the history in id order: a migration stopped anywhere leaves no
    history row (a requeue that started, say) without its object, and every not-clear object of
    the source is in the target before anything else; ``--merge`` then finishes it, since merging
    twice is merging once.  Leases are not copied: each operation and sweep takes its own.  The
    last sweep is the later of the two.

    ``UsageError`` if both name one ledger (``identity``); ``LedgerError`` if the target holds
    objects or history and ``merge`` is not given.
    """
    batch = MIGRATE_BATCH if batch is None else batch
    if batch < 1:
        raise InvalidInput(f"batch must be at least 1, not {batch!r}")
    if source.identity() == target.identity():
        raise UsageError(f"--from and --to name the same ledger ({source.path}, {target.path}): nothing to do")
    if not merge:
        objects, rows = sum(target.count_by_bit().values()), target.count_history()
        if objects or rows:
            raise LedgerError(
                f"ledger {target.path} already holds {objects} object(s) and {rows} history row(s): migrate"
                " copies into an empty ledger only; --merge merges into it instead (an object in both keeps"
                " the less clear bit, rows already there are skipped)",
                path=target.path,
            )
    total = ImportResult()
    try:
        for not_clear in (True, False):
            after = ""
            while True:
                page = source.export_objects(not_clear=not_clear, after=after, limit=batch)
                if page:
                    total = _plus(total, target.import_records(page, [], merge=merge))
                    after = page[-1].job_id
                if len(page) < batch:
                    break
        after_id = 0
        while True:
            entries = source.export_history(after_id, batch)
            if entries:
                total = _plus(total, target.import_records([], entries, merge=merge))
                after_id = entries[-1].id
            if len(entries) < batch:
                break
        last = source.last_sweep()
        mine = target.last_sweep()
        if last is None:
            sweep = "none"
        elif mine is not None and mine.finished_at >= last.finished_at:
            sweep = "kept"
        else:
            target.record_sweep(last.started_at, last.finished_at, last.summary)
            sweep = "copied"
    except LedgerError as exc:
        if total == ImportResult():
            raise
        raise LedgerError(
            f"{exc}; the migration stopped part-way, the not-clear objects first: run it again with --merge"
            " to finish it",
            path=exc.path,
        ) from exc
    return {
        "kind": "migrate",
        "from": source.path,
        "to": target.path,
        "merge": merge,
        "objects": {"copied": total.objects_copied, "merged": total.objects_merged, "kept": total.objects_kept},
        "history": {"copied": total.history_copied, "skipped": total.history_skipped},
        "last_sweep": sweep,
        "not_clear": target.count_not_clear(),
        "leases_copied": False,
    }


def _plus(a: ImportResult, b: ImportResult) -> ImportResult:
    return ImportResult(*(x + y for x, y in zip(dataclasses.astuple(a), dataclasses.astuple(b))))


def migrate_lines(m: Dict[str, Any]) -> List[str]:
    """The human ``ledger migrate``, from ``migrate``'s object."""
    o, h = m["objects"], m["history"]
    return [
        f"migrate{' --merge' if m['merge'] else ''} {shown(m['from'])} -> {shown(m['to'])}:",
        f"  objects: {o['copied']} copied, {o['merged']} merged (took the less clear bit), {o['kept']} kept",
        f"  history rows: {h['copied']} copied, {h['skipped']} skipped (already there)",
        f"  last sweep: {m['last_sweep']}; leases: not copied (each operation and sweep takes its own)",
        f"  {m['not_clear']} object(s) not clear in {shown(m['to'])} now"
        + (": sweeps on that ledger settle them" if m["not_clear"] else ""),
    ]
