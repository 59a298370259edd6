"""Two connections to one SQLite ledger in one process, as every single-job operation has (the
Tracker's own, and its worker thread's): opening the second must not drop the first one's locks.

Found by the chaos run (issue 33, docs/testing.md §6.5): ``sqlite._create_file`` opens and closes
a descriptor of the ledger file to check it, and closing any descriptor of a file drops every POSIX
lock this process holds on it (fcntl(2); sqlite.org/howtocorrupt.html §2.2), the open connection's
SHARED lock included, which SQLite will not take again while it counts it held.  Another process
closing its connection then believes it is the last one: it checkpoints and deletes the WAL that
this process still writes to.  In the chaos runs the ledger then read "database disk image is
malformed" within two minutes.  ``_create_file`` now checks an existing file by its name only.
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from slurm_dsl.ledger.choose import open_ledger


@pytest.mark.parametrize("second", [False, True], ids=["one ledger", "two ledgers"])
def test_another_process_leaves_the_wal_of_an_open_ledger_alone(tmp_path: Path, second: bool) -> None:
    tmp_path.chmod(0o700)
    path = tmp_path / "ledger.sqlite3"
    other = f"import sqlite3; c = sqlite3.connect({str(path)!r}); c.execute('SELECT 1 FROM sqlite_master'); c.close()"
    with ExitStack() as opened:
        first = opened.enter_context(open_ledger(str(path)))
        first.due_ids(first.now())  # a read: the connection has the WAL open
        if second:
            opened.enter_context(open_ledger(str(path)))
        # Another process reads and closes: with this process's locks held, it is not the last
        # connection, and leaves the WAL alone.
        subprocess.run([sys.executable, "-c", other], check=True)
        assert Path(f"{path}-wal").exists(), "another process deleted the WAL this process uses"
