"""The ledger's domain (docs/contract.md §9.1; docs/wings.md §3): ``SqlStore``, every ``ledger.base.LedgerStore``
method written once for both dialects over the statements of ``ledger.query``; no SQL text here.

Rule: a batch's items are read and written in a few statements (``IN`` lists of ``ledger_rows.IN_PIECE`` ids),
decided by ``ledger.rows`` as if one came after the other.  Times come in as ``now``: only prune reads a clock."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Self, Sequence, Set, Tuple

from ..core import life
from ..core.durable import LOOKS_KEPT
from ..core.jobid import checked_list, validate_job_id
from ..core.model import Op, Outcome, RequeueBit
from . import query
from . import rows as ledger_rows
from .base import Alive, Looks, Marks

if TYPE_CHECKING:
    from ..core.jobinfo import JobInfo
    from ..core.model import Verdict
    from ..core.settle import Recorded, Unsettled
    from .records import CommentRecord, HistoryEntry, ImportResult, JobObject, PruneResult, SweepRecord, Unfinished

# The records (``ledger.records``) are imported by the reads and reports that build them: an
# operation never does (docs/benchmarks.md §7).


class SqlStore(query.SqlQueries):
    """``ledger.base.LedgerStore`` over the query layer; a dialect subclass states the rest."""

    def __init__(self, path: str, backoff_base: float, backoff_cap: float) -> None:
        super().__init__(path)
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        # ``import_records``: the id each history row imported (or found there) had in its source,
        # to this ledger's, so that a later row's ``retry_of`` names the same operation here.
        self._imported_ids: Dict[int, int] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every write inside is one transaction, committed when the block returns, rolled back if it raises."""
        if self._batched:
            raise RuntimeError("batches do not nest")
        with self._atomic("batch"):
            self._batched = True
            try:
                yield
            finally:
                self._batched = False

    # -- the schema ------------------------------------------------------------------------------

    def schema_version(self) -> int:
        return self._stored_version()

    # -- operations ------------------------------------------------------------------------------

    def begin_operations(
        self,
        starts: Sequence[Tuple[str, Op, str]],
        now: float,
        *,
        actor: str = "",
        baselines: Mapping[str, JobInfo] = {},
        baseline_at: Optional[float] = None,
        key: Optional[str] = None,
        retry_of: Mapping[str, int] = {},
        ends_by: Optional[float] = None,
        baseline_boot: Optional[str] = None,
        admin_reason: Optional[str] = None,
        baseline_ctl: Optional[str] = None,
    ) -> List[int]:
        """The history rows of many ``(job_id, op, nonce)`` (and a requeue's intent), in one committed
        transaction; their ids (``ledger_rows.begin_plan``).  Called under the jobs' leases; a script
        starts only after it returned.  ``actor`` "": recorded as unknown."""
        checked = ledger_rows.checked_starts(starts)
        now = ledger_rows.finite("now", now)
        fields = ledger_rows.start_fields(baselines, baseline_at, key, retry_of, ends_by,
                                          {job_id for job_id, _, _ in checked}, baseline_boot, admin_reason,
                                          baseline_ctl)
        with self._atomic("begin operation") as cur:
            found = self._keyed(cur, query.BIT_OF_ONE, query.BITS_OF, [job_id for job_id, _, _ in checked])
            bits = {job_id: row[0] for job_id, row in found.items()}
            plan = ledger_rows.begin_plan(checked, bits, now, actor, fields)
            # A new object is inserted (back-off 0 by default); one there only gets an intent, and
            # a new intent is news for the sweep: an old back-off must not delay it.
            tail = self._upsert("job_id", query.BIT_COLUMNS, query.INTENT_NEWS)
            self._write_rows(cur, query.WRITE_BIT, plan.objects, tail)
            self._write_quiet(cur, plan.quiet)
            return self._append_history(cur, plan.history)

    def finish_operations(
        self, finishes: Sequence[Tuple[int, Outcome, bytes]], now: float, *, look: Optional[str] = None,
        ended: Optional[str] = None, controller: Optional[str] = None,
    ) -> List[RequeueBit]:
        """Fill in many operations ``(op_id, outcome, stderr)`` in one transaction; their objects' new bits
        (``ledger_rules.after``).  If one is refused, none is written (``ledger_rows.finish_plan``)."""
        now = ledger_rows.finite("now", now)
        finishes = list(finishes)
        with self._atomic("finish operation") as cur:
            rows = self._keyed(cur, query.FINISHING_ONE, query.FINISHING_ROWS, [op_id for op_id, _, _ in finishes])
            mark = self._last_place(cur)
            plan = ledger_rows.finish_plan(self.path, finishes, rows, now, hex_stderr=self.HEX_STDERR, mark=mark,
                                           look=look, controller=controller)
            self._write_rows(cur, query.WRITE_BIT, plan.objects, self._upsert("job_id", query.BIT_COLUMNS))
            self._write_quiet(cur, plan.quiet)
            self._finish_history(cur, plan.history)
            marks = [(op_id, mark, look, ended) for op_id in ledger_rows.distinct([op_id for op_id, _, _ in finishes])]
            self._write_rows(cur, query.OP_LOOK, marks, self._upsert("op_id", ("mark", "look", "ended")))
        return plan.bits

    # -- leases ----------------------------------------------------------------------------------

    def acquire_leases(
        self, job_ids: Sequence[str], owner: str, now: float, ttl: float, *, reclaim_sweeps: bool = False,
        alive: Optional[Alive] = None,
    ) -> List[str]:
        """Take (or renew) the jobs' leases until ``now + ttl``, in one transaction; the ids ``owner`` now
        holds, in order.  ``reclaim_sweeps`` (only for the sweep holding the sweep lock): other sweeps'
        leases are taken too."""
        ids = checked_list(job_ids)
        now, ttl = ledger_rows.finite("now", now), ledger_rows.positive_ttl(ttl)
        with self._atomic("acquire lease") as cur:
            rows = self._keyed(cur, query.LEASE_OF_ONE, query.LEASES_OF, ids)
            held = ledger_rows.leases_taken(ids, rows, owner, now, reclaim_sweeps, alive)
            self._write_leases(cur, [(job_id, owner, now + ttl) for job_id in ledger_rows.distinct(held)])
        return held

    def lease_holders(self, job_ids: Sequence[str], *, lapsed_at: Optional[float] = None) -> Dict[str, str]:
        found: Dict[str, str] = {}
        for piece in ledger_rows.pieces(ledger_rows.distinct(checked_list(job_ids))):
            sql = ledger_rows.in_list(query.LEASES_OF, len(piece), "?")
            found.update((str(r[0]), str(r[1])) for r in self._read("read leases", sql, piece)
                         if lapsed_at is None or r[2] <= lapsed_at)
        return found

    def lock_run(self, run: str) -> None:
        """No mark: a SQLite ledger is of one host, where ``host.runs`` tells a run alive."""

    def run_locked(self, run: str) -> Optional[bool]:
        return None

    def release_lease(self, job_id: str, owner: str) -> bool:
        """Give the lease back; False if ``owner`` did not hold it (it lapsed and was taken)."""
        return self.release_leases([job_id], owner) > 0

    def release_leases(self, job_ids: Sequence[str], owner: str) -> int:
        """``release_lease`` for many in one transaction; how many were held (a job named twice counts once)."""
        released = 0
        with self._atomic("release lease") as cur:
            for piece in ledger_rows.pieces(ledger_rows.distinct(job_ids)):
                sql = ledger_rows.in_list(query.RELEASE, len(piece), "?")
                released += self._run(cur, sql, (owner, *piece)).rowcount
        return released

    # -- objects and the sweep -----------------------------------------------------------------

    def get(self, job_id: str) -> Optional[JobObject]:
        rows = self._read("get object", query.OBJECT_OF, (job_id,))
        return ledger_rows.job_object(rows[0]) if rows else None

    def due_objects(
        self, now: float, limit: Optional[int] = None, *, reclaim_sweeps: bool = False
    ) -> List[JobObject]:
        """The objects not clear that a sweep may look at now (back-off elapsed, no lease but, with
        ``reclaim_sweeps``, a sweep's), longest waiting first; a negative ``limit``, as None, is no limit."""
        sql, args = self._due_query(now, limit, reclaim_sweeps, ids_only=False)
        return [ledger_rows.job_object(row) for row in self._read("list pending objects", sql, args)]

    def due_ids(self, now: float, limit: Optional[int] = None, *, reclaim_sweeps: bool = False) -> List[str]:
        """``due_objects``' job ids alone, in its order, ``query.DUE_CHUNK`` rows a fetch (docs/benchmarks.md §4)."""
        sql, args = self._due_query(now, limit, reclaim_sweeps, ids_only=True)
        ids: List[str] = []
        with self._reading("list pending objects") as cursor:
            self._run(cursor, sql, args)
            while chunk := cursor.fetchmany(query.DUE_CHUNK):
                ids += [str(row[0]) for row in chunk]
        return ids

    # -- what was seen of slurmctld's saves (core.durable Rules 1, 2, 8) -------------------------

    def look_at_saves(self, observer: str, look: Callable[[], Optional[str]]) -> Looks:
        """One look at slurmctld's job_state by ``observer`` (``look()``; None: nothing), inside the write lock so that
        the looks' places are their order; kept when it differs from its last (its last ``LOOKS_KEPT`` kept)."""
        with self._atomic("look at saves") as cur:
            seen = look()
            chain = self._look(cur, observer, seen, None)
            return Looks(self._last_place(cur), tuple((place, text) for place, text, _ in chain), seen)

    def look_at_heartbeat(
        self, observer: str, look: Callable[[], Optional[Tuple[str, float]]]
    ) -> Tuple[Tuple[int, str, float], ...]:
        """``look_at_saves`` for the heartbeat (core.durable Rules 6, 7): kept ones as ``(place, seen, boot clock)``."""
        with self._atomic("look at the heartbeat") as cur:
            found = look()
            chain = self._look(cur, observer, None if found is None else found[0], None if found is None else found[1])
            return tuple((place, text, float(at)) for place, text, at in chain if at is not None)

    def _look(self, cur: query.Cursor, observer: str, seen: Optional[str],
              at: Optional[float]) -> List[Tuple[int, str, Optional[float]]]:
        """Keep ``seen`` if it differs from ``observer``'s last kept look; its last ``LOOKS_KEPT``, oldest first."""
        last = self._run(cur, self._locked(query.LAST_LOOK), (observer,)).fetchone()
        if seen is not None and (last is None or str(last[0]) != seen):
            self._run(cur, query.ADD_LOOK, (observer, seen, at))
        chain = [(int(place), str(text), None if when is None else float(when)) for place, text, when in
                 self._run(cur, query.LOOKS_OF, (observer, LOOKS_KEPT)).fetchall()][::-1]
        if len(chain) == LOOKS_KEPT:
            self._run(cur, query.DROP_LOOKS, (observer, chain[0][0]))
        return chain

    def marks(self, job_ids: Sequence[str]) -> Dict[str, Marks]:
        """Each object's ``Marks`` (a job without one absent; equal marks share one value); reads only."""
        found: Dict[str, Marks] = {}
        same: Dict[Tuple[Any, ...], Marks] = {}
        for piece in ledger_rows.pieces(ledger_rows.distinct(checked_list(job_ids))):
            sql = ledger_rows.in_list(query.MARKS_OF, len(piece), "?")
            for r in self._read("read marks", sql, piece):
                values = (_int(r[1]), _text(r[2]), _int(r[3]), _text(r[4]), float(r[5]))
                found[str(r[0])] = same.get(values) or same.setdefault(values, Marks(*values))
        return found

    def anchors(self, job_ids: Sequence[str], *, quiet: bool = True) -> Set[Tuple[Optional[int], Optional[str]]]:
        """The distinct ``(mark, look)`` of these objects' gone marks ((None, None): not marked gone) and, with
        ``quiet``, of their quiet marks; reads only."""
        found: Set[Tuple[Optional[int], Optional[str]]] = set()
        for piece in ledger_rows.pieces(ledger_rows.distinct(checked_list(job_ids))):
            for sql in (query.QUIET_ANCHORS, query.GONE_ANCHORS)[0 if quiet else 1:]:
                found.update((_int(r[0]), _text(r[1]))
                             for r in self._read("read anchors", ledger_rows.in_list(sql, len(piece), "?"), piece))
        return found

    def anchor_quiet(self, job_ids: Sequence[str], look: Optional[str]) -> int:
        """Where the looks stand now, with ``look``, become the quiet mark of each object without one (call it holding
        their leases, once nothing of slurm-dsl's can still change their flags); how many got one."""
        with self._atomic("anchor quiet") as cur:
            return self._in_lists(cur, query.ANCHOR_QUIET, (self._last_place(cur), look), checked_list(job_ids))

    def mark_gone(self, job_ids: Sequence[str], look: Optional[str]) -> int:
        """Where the looks stand now, with ``look``, become the gone mark of each object without one; how many."""
        with self._atomic("mark gone") as cur:
            return self._in_lists(cur, query.MARK_GONE, (self._last_place(cur), look), checked_list(job_ids))

    def forget_gone(self, job_ids: Sequence[str]) -> int:
        """The gone marks of these jobs go: a lookup showed them again.  How many had one."""
        with self._atomic("forget gone") as cur:
            return self._in_lists(cur, query.FORGET_GONE, (), checked_list(job_ids))

    def op_marks(self, op_ids: Sequence[int]) -> Dict[int, Tuple[int, Optional[str]]]:
        """Where the looks stood when each operation was over, and its own look then (None: not its own); reads only."""
        return {op_id: (mark, look) for op_id, (mark, look, _) in self.op_ends(op_ids).items()}

    def op_ends(self, op_ids: Sequence[int]) -> Dict[int, Tuple[int, Optional[str], Optional[str]]]:
        """``op_marks`` with where and when each was over (``host/boot/seconds``; None: not known); reads only."""
        found: Dict[int, Tuple[int, Optional[str], Optional[str]]] = {}
        for piece in ledger_rows.pieces(ledger_rows.distinct([int(i) for i in op_ids])):
            sql = ledger_rows.in_list(query.OP_MARKS_OF, len(piece), "?")
            found.update((int(r[0]), (int(r[1]), _text(r[2]), _text(r[3])))
                         for r in self._read("read operation marks", sql, piece))
        return found

    def seen_over(self, op_ids: Sequence[int], observer: str, at: float, *, keep: bool = True) -> Dict[int, float]:
        """When ``observer`` (``host/boot``) first found each operation over, on its boot clock: ``at`` for one it had
        not found over before, kept for the next time unless not ``keep``."""
        ids = ledger_rows.distinct([int(i) for i in op_ids])
        if keep and ids:
            with self._atomic("note operations found over") as cur:
                self._write_rows(cur, query.SEEN_OVER, [(i, observer, at) for i in ids],
                                 self._upsert("op_id, observer", (), "op_id = op_id"))
        found = {i: at for i in ids}
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(query.SEEN_OF, len(piece), "?")
            found.update((int(r[0]), float(r[1])) for r in self._read("read when operations were found over", sql,
                                                                        (observer, *piece)))
        return found

    def anchor_operations(self, op_ids: Sequence[int], look: Optional[str]) -> int:
        """Where the looks stand, with ``look``, become the mark of each finished operation without one; how many."""
        with self._atomic("anchor operations") as cur:
            return self._in_lists(cur, query.ANCHOR_OPERATIONS, (self._last_place(cur), look),
                                  [int(i) for i in op_ids])

    def count_not_clear(self) -> int:
        """How many objects have a bit that is not clear (leased and backed-off ones included)."""
        return int(self._read("count objects", query.COUNT_NOT_CLEAR)[0][0])

    def set_bits(
        self, changes: Sequence[Tuple[str, RequeueBit, str]], now: float, *, owner: str
    ) -> List[str]:
        """Set each job's bit and reset its lookup back-off, only while ``owner`` holds its lease (a sweep whose lease
        lapsed must not overwrite a newer intent), in one transaction; the ids written, in order."""
        checked = ledger_rows.checked_changes(changes)
        now = ledger_rows.finite("now", now)
        upsert = self._upsert("job_id", query.BIT_COLUMNS, query.BACKOFF_RESET)
        written: List[str] = []
        with self._atomic("set bit") as cur:
            for piece in ledger_rows.pieces(checked):
                leases = self._keyed(cur, query.LEASE_OF_ONE, query.LEASES_OF, [job_id for job_id, _, _ in piece])
                held = [change for change in piece if ledger_rows.holds(leases.get(change[0]), owner, now)]
                # One row per job, its last change: what writing them one after the other leaves.
                last = {job_id: (job_id, bit.value, why, now) for job_id, bit, why in held}
                self._write_rows(cur, query.WRITE_BIT, list(last.values()), upsert)
                written += [job_id for job_id, _, _ in held]
        return written

    def watch(self, job_ids: Sequence[str], now: float, *, owner: str) -> List[str]:
        """Keep the objects for the next sweep, without back-off, behind those waiting longer (docs/contract.md §9.5);
        only while ``owner`` holds the job's lease; the ids written."""
        ids = checked_list(job_ids)
        now = ledger_rows.finite("now", now)
        written: List[str] = []
        with self._atomic("watch") as cur:
            for job_id in ids:
                # Decided by reading, not by the UPDATE's row count, which MariaDB gives for
                # changed rows only.
                there = self._run(cur, self._locked(query.OBJECT_THERE), (job_id,))
                if there.fetchone() is None or not self._holds(cur, job_id, owner, now):
                    continue
                self._run(cur, query.WATCH, (now, job_id))
                written.append(job_id)
        return written

    def lookup_failed(self, job_id: str, why: str, now: float) -> float:
        """Record a failed lookup of the job; when a sweep may look again (``ledger_rules.backoff``)."""
        return self.lookups_failed([job_id], why, now)[0]

    def lookups_failed(self, job_ids: Sequence[str], why: str, now: float) -> List[float]:
        """``lookup_failed`` for many in one transaction (a job named twice counts twice); each next lookup time."""
        ids = list(job_ids)
        why = ledger_rows.stored_text(why)
        now = ledger_rows.finite("now", now)
        times: List[float] = []
        with self._atomic("record failed lookup") as cur:
            rows = self._keyed(cur, query.FAILURES_OF, query.FAILURES_OF_MANY, ids)
            after: Dict[str, Tuple[int, float]] = {}
            for job_id in ids:
                after[job_id] = ledger_rows.failed_lookup(
                    self.path, job_id, rows.get(job_id), now, self.backoff_base, self.backoff_cap
                )
                rows[job_id] = (after[job_id][0],)
                times.append(after[job_id][1])
            alike: Dict[Tuple[int, float], List[str]] = {}
            for job_id, failed in after.items():
                alike.setdefault(failed, []).append(job_id)
            for (failures, next_at), jobs in alike.items():
                for piece in ledger_rows.pieces(jobs):
                    sql = ledger_rows.in_list(query.WRITE_FAILURES, len(piece), "?")
                    self._run(cur, sql, (failures, next_at, why, *piece))
        return times

    def history(self, job_id: str) -> List[HistoryEntry]:
        """Every operation on the job, oldest first, each with its settlement if it has one."""
        rows = self._read("read history", query.HISTORY_OF, (job_id,))
        return [ledger_rows.entry(r, self.path) for r in rows]

    def lost(self, limit: int = 1000) -> List[HistoryEntry]:
        """The operations recorded "acknowledged, then lost" (life S12) that no later acknowledged operation of the same
        op on the job redid (one lost too is listed itself), oldest first, at most ``limit``."""
        acknowledged = sorted(r.value for r in life.ACKNOWLEDGED_RESULTS)
        lost = sorted(v.value for v in life.LOST_VERDICTS)
        args = [*acknowledged, *lost, *acknowledged, max(int(limit), 0)]
        rows = self._read("read lost operations", query.LOST, args)
        return [ledger_rows.entry(r, self.path) for r in rows]

    # -- settling (docs/contract.md §12) -----------------------------------------------------------

    def unsettled(
        self, now: float, *, since: float = 0.0, limit: Optional[int] = None, job_ids: Optional[Sequence[str]] = None
    ) -> List[Recorded]:
        """The operations to settle (docs/contract.md §9.1, and its cost), newest first, at most ``limit`` (None or
        negative: no limit), as ``settle.Recorded``: only what settling reads (docs/benchmarks.md §9).  Reads only."""
        now, since = ledger_rows.finite("now", now), ledger_rows.finite("since", since)
        tail = (query.LIMIT, [int(limit)]) if limit is not None and limit >= 0 else ("", [])
        if job_ids is None:
            sql = self._unsettled(ledger_rows.SELECT_TO_SETTLE) + query.NEWEST_FIRST + tail[0]
            rows = self._read("read unsettled", sql, [since, now, now, *tail[1]])
            return ledger_rows.recorded(rows, self.path)
        ids = ledger_rows.distinct(checked_list(job_ids))
        found: List[Recorded] = []
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(self._unsettled(ledger_rows.SELECT_TO_SETTLE, query.OF_JOBS), len(piece), "?")
            rows = self._read("read unsettled", sql + query.NEWEST_FIRST + tail[0], [since, now, now, *piece, *tail[1]])
            found.extend(ledger_rows.recorded(rows, self.path))
        found.sort(key=lambda e: (e.started_at, e.id), reverse=True)
        return found if not tail[1] else found[: tail[1][0]]

    def to_settle(self, now: float, *, since: float = 0.0, limit: Optional[int] = None) -> List[Unsettled]:
        """``unsettled``'s operations as ``settle.Unsettled``, without baselines (``recorded`` reads those needed)."""
        now, since = ledger_rows.finite("now", now), ledger_rows.finite("since", since)
        tail = (query.LIMIT, [int(limit)]) if limit is not None and limit >= 0 else ("", [])
        sql = self._unsettled(ledger_rows.SELECT_UNSETTLED) + query.NEWEST_FIRST + tail[0]
        return ledger_rows.unsettled_rows(self._read("read unsettled", sql, [since, now, now, *tail[1]]))

    def acknowledged(self, from_id: int, since: float, limit: Optional[int] = None) -> List[Recorded]:
        """The rows a sweep reads again after a crash (docs/contract.md §13.4), in id order, at most ``limit`` (None:
        all); reads only, one range of the primary key."""
        from_id, since = ledger_rows.checked_op_id(from_id), ledger_rows.finite("since", since)
        tail = (" LIMIT ?", [int(limit)]) if limit is not None and limit >= 0 else ("", [])
        sql = query.ACKNOWLEDGED + tail[0]
        args = [from_id, since, *sorted(r.value for r in life.ACKNOWLEDGED_RESULTS), *tail[1]]
        return ledger_rows.recorded(self._read("read acknowledged operations", sql, args), self.path)

    def recorded(self, op_ids: Sequence[int]) -> Dict[int, Recorded]:
        """The history rows ``op_ids`` as ``settle.Recorded``, baseline and all, by id; reads only."""
        ids = ledger_rows.distinct(ledger_rows.checked_op_id(i) for i in op_ids)
        found: Dict[int, Recorded] = {}
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(query.TO_SETTLE_OF, len(piece), "?")
            found.update((e.id, e) for e in ledger_rows.recorded(self._read("read operations", sql, piece), self.path))
        return found

    def count_unsettled(self, now: float, edges: Sequence[float] = (3600.0, 86400.0, 604800.0)) -> List[int]:
        """How many operations ``unsettled`` would give at ``now``, by age (``ledger_rows.age_counts``)."""
        now = ledger_rows.finite("now", now)
        sql = self._unsettled(query.STARTED + ledger_rows.SETTLED_HISTORY)
        started = [float(r[0]) for r in self._read("count unsettled", sql, (query.EVER, now, now))]
        return ledger_rows.age_counts(started, now, edges)

    def add_settlements(
        self,
        verdicts: Sequence[Tuple[int, Verdict, float, Optional[JobInfo], str]],
        now: float,
        *,
        by: str,
        gone: Sequence[int] = (),
        gone_at: float = 0.0,
    ) -> int:
        """Append the settlements, the ``verdicts`` first, in one transaction; how many were written.  The ``gone``
        ones by ``INSERT ... SELECT``, their rows read one by one only if fewer were written than given."""
        from ..core.settle import GONE_DETAIL

        checked = ledger_rows.checked_verdicts(verdicts)
        now, who = ledger_rows.finite("now", now), ledger_rows.stored_text(by)
        gone_ids = ledger_rows.checked_op_ids(gone)
        if gone_ids:
            gone_at = ledger_rows.finite("gone_at", gone_at)
        if not checked and not gone_ids:
            return 0
        with self._atomic("add settlements") as cur:
            written = []
            if checked:
                rows = self._keyed(cur, query.SETTLING_ONE, query.SETTLING_ROWS, [op_id for op_id, *_ in checked])
                written = ledger_rows.settlement_plan(self.path, checked, rows, now, who)
                self._write_rows(cur, query.SETTLE, written)
            count = len(written) + self._settle_gone(cur, gone_ids, gone_at, now, who, GONE_DETAIL)
        return count

    def keyed(self, job_ids: Sequence[str], op: Op, key: str) -> Dict[str, List[HistoryEntry]]:
        """The operations ``op`` with key ``key`` per job, oldest first (index ``history_key``); reads only."""
        op, checked = Op(op), ledger_rows.checked_key(key)
        ids = ledger_rows.distinct(checked_list(job_ids))
        found: Dict[str, List[HistoryEntry]] = {}
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(query.KEYED, len(piece), "?", query.OLDEST_FIRST)
            for r in self._read("read keyed operations", sql, [checked, ledger_rows.stored_op(op), *piece]):
                e = ledger_rows.entry(r, self.path)
                found.setdefault(e.job_id, []).append(e)
        return found

    def selection(self, key: str, op: Op) -> Optional[Tuple[str, List[str]]]:
        """What key ``key``'s ``op`` selected at its first run (``select_once``), or None.  Reads only."""
        found = self._read("read the selection", query.SELECTION_OF,
                           (ledger_rows.checked_key(key), ledger_rows.stored_op(Op(op))))
        return (str(found[0][0]), str(found[0][1]).split()) if found else None

    def select_once(
        self, key: str, op: Op, selector: str, job_ids: Sequence[str], now: float, actor: Optional[str]
    ) -> Tuple[str, List[str]]:
        """The jobs key ``key``'s ``op`` acts on (core.select Rule 4): its first run's, else ``job_ids``, recorded."""
        op, checked = Op(op), ledger_rows.checked_key(key)
        ids = ledger_rows.distinct(checked_list(job_ids))
        now = ledger_rows.finite("now", now)
        with self._atomic("record the selection") as cur:
            row = self._run(cur, self._locked(query.SELECTION_OF), (checked, ledger_rows.stored_op(op))).fetchone()
            if row is not None:
                return str(row[0]), str(row[1]).split()
            self._run(cur, query.ADD_SELECTION,
                      (checked, ledger_rows.stored_op(op), str(selector), " ".join(ids), now, actor))
        return str(selector), list(ids)

    def operations_by(
        self, job_ids: Sequence[str], op: Op, actor: str, since: float
    ) -> Dict[str, List[HistoryEntry]]:
        """The operations ``op`` per job run by ``actor`` since ``since``, oldest first; reads only."""
        op, since = Op(op), ledger_rows.finite("since", since)
        ids = ledger_rows.distinct(checked_list(job_ids))
        found: Dict[str, List[HistoryEntry]] = {}
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(query.OPERATIONS_BY, len(piece), "?", query.OLDEST_FIRST)
            for r in self._read("read own operations", sql, [ledger_rows.stored_op(op), str(actor), since, *piece]):
                e = ledger_rows.entry(r, self.path)
                found.setdefault(e.job_id, []).append(e)
        return found

    def operations(self, op_ids: Sequence[int]) -> Dict[int, HistoryEntry]:
        """The rows of the history ids given, with settlements; an id with none is absent.  Reads only."""
        ids = ledger_rows.checked_op_ids(op_ids)
        found: Dict[int, HistoryEntry] = {}
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(query.OPERATIONS, len(piece), "?", query.OLDEST_FIRST)
            for r in self._read("read operations", sql, piece):
                e = ledger_rows.entry(r, self.path)
                found[e.id] = e
        return found

    def later_operations(self, op_ids: Sequence[int]) -> Dict[int, List[HistoryEntry]]:
        """For each history id, its job's later rows, oldest first, with settlements, stderr b""; reads only."""
        ids = ledger_rows.distinct(ledger_rows.checked_op_id(i) for i in op_ids)
        found: Dict[int, List[HistoryEntry]] = {}
        for piece in ledger_rows.pieces(ids):
            sql = ledger_rows.in_list(ledger_rows.SELECT_LATER, len(piece), "?", query.LATER_ORDER)
            for r in self._read("read later operations", sql, piece):
                found.setdefault(int(r[0]), []).append(ledger_rows.entry(r[1:], self.path))
        return found

    # -- the admin's view ------------------------------------------------------------------------

    def count_by_bit(self) -> Dict[RequeueBit, int]:
        """How many objects hold each bit (every bit named, 0 if none)."""
        counts = {bit: 0 for bit in RequeueBit}
        for bit, n in self._read("count objects", query.COUNT_BY_BIT):
            counts[RequeueBit(bit)] = int(n)
        return counts

    def objects_not_clear(self) -> List[JobObject]:
        """Every object whose bit is not clear, leased and backed-off ones too, oldest change first."""
        rows = self._read("list objects not clear", query.NOT_CLEAR)
        return [ledger_rows.job_object(row) for row in rows]

    def count_history(self) -> int:
        """How many history rows the ledger holds (what ``prune`` keeps in check)."""
        return int(self._read("count history", query.COUNT_HISTORY)[0][0])

    def unfinished(self, now: float) -> Unfinished:
        """The operations without a result (``ledger.records.Unfinished``), read in one statement."""
        now = ledger_rows.finite("now", now)
        return ledger_rows.unfinished(self._read("read unfinished operations", query.UNFINISHED, (now,)))

    def ask_comment(self, op_id: int, job_id: str, text: str, now: float) -> int:
        """An AdminComment copy's intent after operation ``op_id``, committed before its call; its id."""
        values = (ledger_rows.checked_op_id(op_id), validate_job_id(job_id), ledger_rows.stored_text(text),
                  ledger_rows.finite("now", now))
        with self._atomic("record an AdminComment's intent") as cur:
            self._run(cur, query.ADD_COMMENT, values)
            return int(cur.lastrowid)

    def comment_done(self, comment_id: int, result: str, detail: str, now: float) -> None:
        """The end of AdminComment copy ``comment_id``: its result and what scontrol said (written once)."""
        values = (ledger_rows.stored_text(result), ledger_rows.stored_text(detail), ledger_rows.finite("now", now),
                  ledger_rows.checked_op_id(comment_id))
        with self._atomic("record an AdminComment's end") as cur:
            self._run(cur, query.FINISH_COMMENT, values)

    def comments(self, op_ids: Sequence[int]) -> Dict[int, List[CommentRecord]]:
        """The AdminComment copies after each of ``op_ids``, oldest first; reads only."""
        from .records import CommentRecord

        found: Dict[int, List[CommentRecord]] = {}
        for piece in ledger_rows.pieces(ledger_rows.checked_op_ids(op_ids)):
            sql = ledger_rows.in_list(query.COMMENTS_OF, len(piece), "?", " ORDER BY id")
            for r in self._read("read AdminComment copies", sql, piece):
                c = CommentRecord(int(r[0]), int(r[1]), str(r[2]), str(r[3]), float(r[4]),
                                  None if r[5] is None else str(r[5]), None if r[6] is None else str(r[6]),
                                  None if r[7] is None else float(r[7]))
                found.setdefault(c.op_id, []).append(c)
        return found

    def record_sweep(self, started: float, finished: float, summary: Mapping[str, Any]) -> None:
        """Keep this sweep as the last one: its times and ``summary`` (JSON values), replacing the previous."""
        started, finished = ledger_rows.finite("started", started), ledger_rows.finite("finished", finished)
        text = ledger_rows.sweep_summary(summary)
        with self._atomic("record sweep") as cur:
            self._write_last_sweep(cur, (1, started, finished, text))

    def last_sweep(self) -> Optional[SweepRecord]:
        """The last sweep ``record_sweep`` kept, or None if no sweep has run on this ledger."""
        found = self._read("read last sweep", query.LAST_SWEEP)
        return ledger_rows.sweep_record(self.path, found[0]) if found else None

    def prune(self, before: float, now: float, *, dry_run: bool = False) -> PruneResult:
        """Remove the history rows ``rules.may_prune`` allows, then ``_checkpoint``; ``dry_run`` counts only.  Each
        batch decides afresh in its own transaction (what starts between two is left alone: a lease comes before its
        row) and holds the write lock too briefly for a writer to wait out its busy timeout; the dialect may pause."""
        before, now = ledger_rows.finite("before", before), ledger_rows.finite("now", now)
        batch = self._prune_batch()
        removed = 0
        jobs: Set[str] = set()
        after_id = 0
        while True:
            took = time.monotonic()
            with self._reading("prune (dry run)") if dry_run else self._atomic("prune") as cur:
                rows = list(self._run(cur, query.PRUNE_ROWS, (now, after_id, before, batch)).fetchall())
                doomed = ledger_rows.doomed(rows, before)
                if doomed and not dry_run:
                    let_in, take_back = self.PRUNING
                    cur.execute(let_in)
                    cur.executemany(self._sql(query.DELETE_HISTORY), [(op_id,) for op_id, _ in doomed])
                    # Their settlements go with them (the trigger lets none go whose row is there),
                    # and their looks and when they were found over.
                    for piece in ledger_rows.pieces([op_id for op_id, _ in doomed]):
                        for sql in (query.SETTLEMENTS_OF, *query.OPERATION_EXTRAS):
                            self._run(cur, ledger_rows.in_list(sql, len(piece), "?"), piece)
                    cur.execute(take_back)
            removed += len(doomed)
            jobs.update(job_id for _, job_id in doomed)
            if len(rows) < batch:
                break
            after_id = int(rows[-1][0])
            if not dry_run:
                self._prune_paused(time.monotonic() - took)
        from .records import PruneResult

        return PruneResult(removed, len(jobs), None if dry_run else self._checkpoint())

    # -- ledger migrate ----------------------------------------------------------------------------

    def export_objects(self, *, not_clear: bool, after: str = "", limit: int = 500) -> List[JobObject]:
        """A page of the objects whose bit is (or is not) clear, by job id after ``after``."""
        rows = self._read("export objects", query.EXPORT_OBJECTS, (int(bool(not_clear)), str(after), int(limit)))
        return [ledger_rows.job_object(row) for row in rows]

    def export_history(self, after_id: int, limit: int) -> List[HistoryEntry]:
        """A page of the history, in id order, from after ``after_id``."""
        rows = self._read("export history", query.EXPORT_HISTORY, (int(after_id), int(limit)))
        return [ledger_rows.entry(r, self.path) for r in rows]

    def import_records(
        self, objects: Sequence[JobObject], history: Sequence[HistoryEntry], *, merge: bool
    ) -> ImportResult:
        """Another ledger's objects, then its history rows, in one transaction (``LedgerStore.import_records``); a row's
        settlement comes with it, and ``retry_of`` is the id here of the row it names if imported before, else None."""
        checked = [ledger_rows.object_values(o) for o in objects]
        for e in history:  # checked before the transaction: a malformed row writes nothing
            ledger_rows.history_values(e, hex_stderr=self.HEX_STDERR)
            if e.settlement is not None:
                ledger_rows.settlement_values(e.settlement, e.id)
        imported = dict(self._imported_ids)
        copied = merged = kept = added = skipped = settled = 0
        with self._atomic("import records") as cur:
            for values in checked:
                found = self._run(cur, self._locked(query.BIT_OF_ONE), (values["job_id"],))
                action = ledger_rows.import_action(self.path, values, found.fetchone(), merge)
                if action == "insert":
                    self._run(cur, query.IMPORT_OBJECT, ledger_rows.ordered(ledger_rows.OBJECT_COLUMNS, values))
                    copied += 1
                elif action == "update":
                    self._run(cur, query.UPDATE_OBJECT, ledger_rows.ordered((*query.OBJECT_SET, "job_id"), values))
                    merged += 1
                else:
                    kept += 1
            for e in history:
                retry_of = None if e.retry_of is None else imported.get(e.retry_of)
                values = ledger_rows.history_values(e, hex_stderr=self.HEX_STDERR, retry_of=retry_of)
                same = ledger_rows.ordered(ledger_rows.SAME_ROW, values)
                there = self._run(cur, query.HISTORY_THERE, same).fetchone() if merge else None
                if there is not None:
                    skipped += 1
                    op_id = int(there[0])
                else:
                    op_id = self._import_history(cur, values)
                    added += 1
                imported[e.id] = op_id
                if e.settlement is not None and (there is None or self._no_settlement(cur, op_id)):
                    self._write_rows(cur, query.SETTLE, [ledger_rows.settlement_values(e.settlement, op_id)])
                    settled += 1
        self._imported_ids = imported  # only once the transaction committed
        from .records import ImportResult

        return ImportResult(copied, merged, kept, added, skipped, settled)


def _int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def _text(value: Any) -> Optional[str]:
    return None if value is None else str(value)
