"""A tracked hold through a MariaDB ledger next to one through an SQLite ledger, interleaved.

Not a test: it prints figures.  ``Tracker.run`` of a hold (the lease and the intent in one
transaction, the script, the result and the lease given back in another; three readings of the
ledger's clock, which on MariaDB are three more round trips) runs against a fake scontrol that
answers success at once (tests/fakes.py ``write_fake``), so what differs between the two is the
ledger's share.  An untracked hold (``execute``: the same script, no ledger) is timed beside them
to show the rest, and the bare ledger round trip per backend, no process at all: one batch of
lease + begin, one of finish + release, as ``Tracker.run`` writes them.  All of it alternates
run by run, so every figure sees the same machine load.

The SQLite file is under ``--dir`` (default /var/tmp: a real disk, as /var/lib/slurm-dsl is;
``synchronous=FULL`` makes each commit an fsync).  The MariaDB database is a fresh one on the
lab's server (tests/ledger_backends.py, ``$SLURM_DSL_TEST_MARIADB_CNF``), dropped afterwards;
the server's durability settings are printed with the figures, since they decide its commit.

    python -m benchmarks.bench_ledger [--runs 200] [--dir /var/tmp]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

from slurm_dsl import Op, Result
from slurm_dsl.core.model import Call, CallOutcome, Outcome
from slurm_dsl.ledger.base import LedgerStore
from slurm_dsl.run.calls import execute, new_nonce
from slurm_dsl.run.tracked import Tracker, current_actor, lease_owner
from tests.fakes import write_fake
from tests.ledger_backends import MariaDbServer
from tests.ledger_ops import acquire_lease, begin_operation, finish_operation

JOB = "4242"
HELD = Outcome(Op.HOLD, JOB, Result.OK, None, None, (Call(1, 0, "0", b"", CallOutcome.SUCCESS, None, None),), 0)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def tracked_hold(tracker: Tracker) -> Callable[[], None]:
    def run() -> None:
        # checked=True: no squeue for the array check, which is not the ledger's either.
        out = tracker.run(Op.HOLD, JOB, time.time() + 10, checked=True)
        assert out.result is Result.OK, out

    return run


def round_trip(ledger: LedgerStore, samples: Dict[str, List[float]], name: str) -> Callable[[], None]:
    """The ledger's two transactions of a tracked hold, each timed on its own too."""
    owner, actor = lease_owner("bench"), current_actor()

    def run() -> None:
        start = time.perf_counter()
        with ledger.batch():
            assert acquire_lease(ledger, JOB, owner, ledger.now(), 60)
            op_id = begin_operation(ledger, JOB, Op.HOLD, new_nonce(), ledger.now(), actor=actor)
        middle = time.perf_counter()
        with ledger.batch():
            finish_operation(ledger, op_id, HELD, b"", ledger.now())
            ledger.release_lease(JOB, owner)
        samples.setdefault(f"{name}: lease + begin", []).append(middle - start)
        samples.setdefault(f"{name}: finish + release", []).append(time.perf_counter() - middle)

    return run


def server_settings(server: MariaDbServer) -> str:
    with server.admin() as conn, conn.cursor() as cursor:
        cursor.execute("SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@log_bin, @@sync_binlog")
        version, flush, log_bin, sync_binlog = cursor.fetchone()
    return (f"{version}, innodb_flush_log_at_trx_commit={flush}, log_bin={log_bin}, sync_binlog={sync_binlog},"
            " over its Unix socket")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--dir", default="/var/tmp", help="where the SQLite ledger goes (default /var/tmp)")
    args = parser.parse_args()
    server, why = MariaDbServer.find()
    if server is None:
        print(f"bench_ledger: no MariaDB: {why} (run contrib/lab/up)", file=sys.stderr)
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="bench-ledger-", dir=args.dir))
    try:
        fake = str(write_fake(tmp / "bin", {}))
        with server.database() as url:
            sqlite_tracker = Tracker(str(tmp / "ledger" / "ledger.sqlite3"), scontrol=fake)
            mariadb_tracker = Tracker(url, scontrol=fake)
            samples: Dict[str, List[float]] = {}
            parts: Dict[str, Callable[[], object]] = {
                "tracked hold, SQLite": tracked_hold(sqlite_tracker),
                "tracked hold, MariaDB": tracked_hold(mariadb_tracker),
                "untracked hold (execute, no ledger)": lambda: execute(Op.HOLD, JOB, time.time() + 10, scontrol=fake),
                "ledger round trip, SQLite": round_trip(sqlite_tracker.ledger(), samples, "  SQLite"),
                "ledger round trip, MariaDB": round_trip(mariadb_tracker.ledger(), samples, "  MariaDB"),
            }
            try:
                for _ in range(5):  # warm-up: connections, page cache, the fake's first exec
                    for fn in parts.values():
                        fn()
                samples.clear()
                for name in parts:
                    samples[name] = []
                for _ in range(args.runs):
                    for name, fn in parts.items():
                        samples[name].append(timed(fn))
            finally:
                sqlite_tracker.close()
                mariadb_tracker.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    p90 = {k: statistics.quantiles(v, n=10)[-1] * 1000 for k, v in samples.items()}
    print(f"{args.runs} interleaved runs each; SQLite under {args.dir}; MariaDB {server_settings(server)}")
    print(f"  {'':<44} {'median':>8} {'p90':>8}  (ms)")
    order = ["tracked hold, SQLite", "tracked hold, MariaDB", "untracked hold (execute, no ledger)",
             "ledger round trip, SQLite", "  SQLite: lease + begin", "  SQLite: finish + release",
             "ledger round trip, MariaDB", "  MariaDB: lease + begin", "  MariaDB: finish + release"]
    for name in order:
        print(f"  {name:<44} {med[name]:8.2f} {p90[name]:8.2f}")
    bare = med["untracked hold (execute, no ledger)"]
    sqlite, mariadb = med["tracked hold, SQLite"], med["tracked hold, MariaDB"]
    print(f"ratio tracked hold MariaDB / SQLite: {mariadb / sqlite:.2f}x")
    print(f"the ledger's share of a tracked hold (tracked - untracked): SQLite {sqlite - bare:.2f} ms,"
          f" MariaDB {mariadb - bare:.2f} ms ({(mariadb - bare) / max(sqlite - bare, 1e-9):.2f}x)")
    rt_sqlite, rt_mariadb = med["ledger round trip, SQLite"], med["ledger round trip, MariaDB"]
    print(f"ratio bare ledger round trip MariaDB / SQLite: {rt_mariadb / rt_sqlite:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
