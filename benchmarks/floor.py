"""The floor: the least a command started per operation can add to a bare list call.

Not slurm-dsl, and not safe: a bench_bulk method ("(c) floor") that does only the steps no
recorded bulk hold or release can skip, each the cheapest way, so that what it adds over the
bare list call is a lower bound for any per-command program that checks its ids and records its
operations (docs/benchmarks.md §2).  It imports nothing but what the steps need (no argparse,
logging, typing or dataclasses), starts the squeue listing that an array check needs in a
thread at once, opens an SQLite file as the ledger does (WAL, synchronous FULL), commits a row
per id once squeue has answered, runs the bare list call (no script, no guard, no deadline),
commits a result per id, prints a line per id and leaves.  It validates nothing, reads nothing
of what squeue or scontrol said, takes no lease and writes no baseline.

    python3 benchmarks/floor.py LEDGER SQUEUE SCONTROL OP ID...
"""

import os
import sqlite3
import subprocess
import sys
import threading


def main() -> None:
    ledger, squeue, scontrol, op, *ids = sys.argv[1:]
    joined = ",".join(ids)
    answered = []
    fields = "JobID:|,ArrayJobID:|,ArrayTaskID:|,StateCompact:|,Reason:|"
    look = [squeue, "-h", "-a", "-t", "all", "-r", *(["-j", joined] if len(ids) <= 500 else []), "-O", fields]
    thread = threading.Thread(target=lambda: answered.append(subprocess.run(look, capture_output=True)))
    thread.start()
    db = sqlite3.connect(ledger, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("CREATE TABLE IF NOT EXISTS ops (id INTEGER PRIMARY KEY, job TEXT, op TEXT, result TEXT)")
    thread.join()
    db.execute("BEGIN IMMEDIATE")
    first = db.execute("SELECT coalesce(max(id), 0) FROM ops").fetchone()[0] + 1
    db.executemany("INSERT INTO ops (job, op) VALUES (?, ?)", [(j, op) for j in ids])
    db.execute("COMMIT")
    done = subprocess.run([scontrol, op, joined], capture_output=True)
    db.execute("BEGIN IMMEDIATE")
    db.executemany("UPDATE ops SET result = ? WHERE id = ?",
                   [("ok" if done.returncode == 0 else "?", first + n) for n in range(len(ids))])
    db.execute("COMMIT")
    sys.stdout.write("".join(f"{j} {op} ok\n" for j in ids))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
