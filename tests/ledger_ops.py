"""One operation, lease or bit at a time, through the ledger's batched methods as the product calls
them (``LedgerStore.begin_operations`` and the rest, docs/contract.md §9.1): what most ledger tests
need, kept out of the store, whose every method the product calls."""

from __future__ import annotations

from typing import Any, Optional

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Op, Outcome, RequeueBit
from slurm_dsl.ledger.base import LedgerStore


def begin_operation(store: LedgerStore, job_id: str, op: Op, nonce: str, now: float, *,
                    baseline: Optional[JobInfo] = None, retry_of: Optional[int] = None, **more: Any) -> int:
    """The operation's history row (and a requeue's intent); its id."""
    return store.begin_operations([(job_id, op, nonce)], now, baselines={} if baseline is None else {job_id: baseline},
                                  retry_of={} if retry_of is None else {job_id: retry_of}, **more)[0]


def finish_operation(store: LedgerStore, op_id: int, outcome: Outcome, stderr: bytes, now: float,
                     **more: Any) -> RequeueBit:
    """Operation ``op_id`` filled in; its object's new bit."""
    return store.finish_operations([(op_id, outcome, stderr)], now, **more)[0]


def acquire_lease(store: LedgerStore, job_id: str, owner: str, now: float, ttl: float, **more: Any) -> bool:
    """Whether ``owner`` now holds the job's lease."""
    return bool(store.acquire_leases([job_id], owner, now, ttl, **more))


def set_bit(store: LedgerStore, job_id: str, bit: RequeueBit, why: str, now: float, *, owner: str) -> bool:
    """Whether the job's bit was written (only under ``owner``'s lease)."""
    return bool(store.set_bits([(job_id, bit, why)], now, owner=owner))
