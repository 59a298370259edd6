"""``ledger migrate``: every object, history row and the last sweep of one ledger copied into another
(docs/contract.md §9.1.2), through two ``LedgerStore``s, so between any two backends."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional

from ..core.model import InvalidInput, LedgerError, UsageError
from .base import LedgerStore
from .records import ImportResult

MIGRATE_BATCH = 500  # objects or history rows per transaction on the target


def migrate(
    source: LedgerStore, target: LedgerStore, *, merge: bool, batch: Optional[int] = None
) -> Dict[str, Any]:
    """Copy every object, every history row and the last sweep of ``source`` into ``target`` (docs/contract.md §9.1.2).

    Returns ``ledger migrate --json``'s object; ``source`` is only read, in batches of ``batch`` records.
    ``UsageError`` if both name one ledger; ``LedgerError`` if the target is not empty and ``merge`` is not given."""
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

