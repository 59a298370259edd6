"""What is the MariaDB ledger's own (docs/contract.md §9.1.1): its URL and option file (hostile values
too), PyMySQL missing, migrating a new database from several connections at once, the sweep lock
the server releases when its holder's connection dies, leases on the server's clock, and a server
that is dead, hung, stopped or drops the connection.  The behaviour both backends share is tested
on both in test_ledger.py, test_sweeper.py, test_admin_view.py and test_ledger_failures.py.

The URL and option-file tests need no server; the rest use the lab's (``mariadb_location``:
tests/conftest.py), and skip without it except under CI=true.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, List, Optional, cast

import pytest

import slurm_dsl.ledger.mariadb as mariadb_module
from slurm_dsl.core.model import ConfigError, LedgerError, Op, Outcome, RequeueBit, Result, SweepBusy
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.mariadb import MariaDbLedger
from slurm_dsl.ledger.mariadb_config import ClientOptions, Location, parse_url, read_option_file
from tests.ledger_backends import MariaDbServer, Raw, shown
from tests.ledger_ops import acquire_lease, begin_operation

ROOT = Path(__file__).resolve().parents[2]
LAB_MARIADB = ROOT / "contrib" / "lab" / "mariadb"
SECRET = "s3cret-Never-Shown"
CNF = f"""# a comment
[mysqld]
user=mysql
[client]
user = slurm_dsl   # the ledger's account
password="{SECRET}"
socket=/run/mysqld/mysqld.sock
default-character-set=utf8mb4
[client-server]
user=someone-else
"""


def write_cnf(path: Path, text: str = CNF, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def url_for(cnf: Path, rest: str = "localhost/ledger") -> str:
    return f"mariadb://{rest}?option_file={cnf}"


def mariadb(ledger: Any) -> MariaDbLedger:
    assert isinstance(ledger, MariaDbLedger)
    return ledger


def connection_id(ledger: Any) -> int:
    return int(mariadb(ledger)._read("connection id", "SELECT CONNECTION_ID()")[0][0])


# -- the URL ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mariadb://localhost/slurm_dsl", Location("mariadb://localhost/slurm_dsl", "localhost", None, "slurm_dsl",
                                                   "/etc/slurm-dsl/ledger.cnf")),
        ("mysql://db1.example.org:3307/ledger_2?option_file=/etc/x/ledger.cnf",
         Location("mysql://db1.example.org:3307/ledger_2", "db1.example.org", 3307, "ledger_2", "/etc/x/ledger.cnf")),
        ("mariadb:///slurm_dsl",
         Location("mariadb:///slurm_dsl", None, None, "slurm_dsl", "/etc/slurm-dsl/ledger.cnf")),
        ("mariadb://[::1]:3306/l", Location("mariadb://[::1]:3306/l", "::1", 3306, "l", "/etc/slurm-dsl/ledger.cnf")),
        ("mariadb://10.0.0.5/l?option_file=/a%20b.cnf", Location("mariadb://10.0.0.5/l", "10.0.0.5", None, "l",
                                                                  "/a b.cnf")),
    ],
)
def test_a_url_names_host_port_database_and_option_file(url: str, expected: Location) -> None:
    assert parse_url(url) == expected


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (f"mariadb://slurm:{SECRET}@db1/ledger", "no user or password in the URL"),
        (f"mariadb://:{SECRET}@db1/ledger", "no user or password in the URL"),
        ("mariadb://slurm@db1/ledger", "no user or password in the URL"),
        (f"mariadb://db1/ledger?password={SECRET}", "unknown query key(s) 'password'"),
        ("mariadb://db1/ledger?user=root&option_file=/x.cnf", "unknown query key(s) 'user'"),
        (f"mariadb://db1/ledger?{SECRET}", "its query is not KEY=VALUE"),
        ("mariadb://db1/ledger?option_file=ledger.cnf", "absolute path"),
        ("mariadb://db1/ledger?option_file=", "absolute path"),
        ("mariadb://db1/ledger?option_file=/a.cnf&option_file=/b.cnf", "more than once"),
        ("mariadb://db1/", "name one database"),
        ("mariadb://db1", "name one database"),
        ("mariadb://db1/ledger/x", "name one database"),
        ("mariadb://db1/led`ger", "name one database"),
        ("mariadb://db1/ledger;DROP", "name one database"),
        ("mariadb://db1/" + "x" * 65, "name one database"),
        ("mariadb://db1:99999/ledger", "out of range"),
        ("mariadb://db1:x/ledger", "ledger URL"),
        ("mariadb://db1/ledger#x", "fragment"),
        ("mariadb://db%201/ledger", "not a host name"),
        ("mariadb://-db1/ledger", "not a host name"),
    ],
)
def test_a_bad_url_is_a_config_error_that_never_repeats_a_secret(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_ledger(url)  # refused before anything is read or connected
    assert says in str(info.value)
    assert SECRET not in str(info.value)


# -- the option file -------------------------------------------------------------------------------


def test_the_client_group_is_read_as_the_mariadb_client_reads_it(tmp_path: Path) -> None:
    options = read_option_file(str(write_cnf(tmp_path / "ledger.cnf")))
    assert options == ClientOptions("slurm_dsl", SECRET.encode(), None, None, "/run/mysqld/mysqld.sock")
    assert SECRET not in repr(options)
    text = "[client]\nuser=a\npassword = 'p#1\\sx'\nhost=db1\nport = 3307\n"
    options = read_option_file(str(write_cnf(tmp_path / "two.cnf", text, 0o400)))
    assert (options.user, options.password, options.host, options.port) == ("a", b"p#1 x", "db1", 3307)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[client]\npassword=x\n", "names no user="),
        ("[mysql]\nuser=a\n", "names no user="),
        ("[client]\nuser=a\nport=x\n", "is not a port number"),
        ("[client]\nuser=a\n!include /etc/other.cnf\n", "!include is not supported"),
        ("!includedir /etc/mysql/conf.d\n[client]\nuser=a\n", "!includedir is not supported"),
        ("[client\nuser=a\n", "group header"),
        ("[client]\nuser=a\npassword\n", "password needs a value"),
    ],
)
def test_an_unusable_option_file_is_a_config_error(tmp_path: Path, text: str, says: str) -> None:
    cnf = write_cnf(tmp_path / "ledger.cnf", text)
    with pytest.raises(ConfigError, match=says) as info:
        open_ledger(url_for(cnf))
    assert str(cnf) in str(info.value)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o440, 0o604, 0o620, 0o660, 0o606], ids=lambda mode: f"{mode:04o}")
def test_an_option_file_of_the_callers_own_others_may_read_or_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    cnf = write_cnf(tmp_path / "ledger.cnf", mode=mode)
    if os.geteuid() == 0:  # root's file may be group-readable: this one is another caller's own
        os.chown(cnf, 54321, 54321)
        monkeypatch.setattr(os, "geteuid", lambda: 54321)
    with pytest.raises(ConfigError) as info:
        open_ledger(url_for(cnf))
    assert f"mode {mode:04o}" in str(info.value) and str(info.value).endswith(f"the ledger's password: chmod 600 {cnf}")
    assert SECRET not in str(info.value)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another uid needs root")


@needs_root
@pytest.mark.parametrize("mode", [0o644, 0o604, 0o620, 0o660, 0o606, 0o650, 0o641], ids=lambda mode: f"{mode:04o}")
def test_an_option_file_of_roots_others_may_read_or_its_group_write_is_refused(tmp_path: Path, mode: int) -> None:
    cnf = write_cnf(tmp_path / "ledger.cnf", mode=mode)
    os.chown(cnf, 0, 54321)
    with pytest.raises(ConfigError) as info:
        open_ledger(url_for(cnf))
    assert f"mode {mode:04o}" in str(info.value)
    assert str(info.value).endswith(f"chmod 640 {cnf} (readable by its group, 54321, alone) or chmod 600 {cnf}")
    assert SECRET not in str(info.value)


@needs_root
@pytest.mark.parametrize("mode", [0o640, 0o440, 0o600, 0o400], ids=lambda mode: f"{mode:04o}")
def test_an_option_file_of_roots_readable_by_its_group_is_read(tmp_path: Path, mode: int) -> None:
    """Root's commands and the units' account (through its group) read one file neither can
    change: root:slurm 0640, contrib/README.md §5 (issue 31, item 8)."""
    cnf = write_cnf(tmp_path / "ledger.cnf", mode=mode)
    os.chown(cnf, 0, 54321)
    assert read_option_file(str(cnf)).user == "slurm_dsl"


def test_a_symlinked_option_file_is_not_followed(tmp_path: Path) -> None:
    real = write_cnf(tmp_path / "real.cnf")
    link = tmp_path / "ledger.cnf"
    link.symlink_to(real)
    with pytest.raises(ConfigError, match="is a symbolic link: refusing to follow it") as info:
        open_ledger(url_for(link))
    assert str(link) in str(info.value)


@needs_root
def test_an_option_file_of_another_account_is_refused_with_a_fix_that_serves_root_and_the_units(
    tmp_path: Path
) -> None:
    cnf = write_cnf(tmp_path / "ledger.cnf")
    os.chown(cnf, 54321, 54321)
    with pytest.raises(ConfigError, match=f"owned by uid 54321, not by uid {os.geteuid()}") as info:
        open_ledger(url_for(cnf))
    # Not "chown 0": root's 0600 file would lock the units' account out (issue 31, item 8).
    assert str(info.value).endswith(f"chown root:54321 {cnf} && chmod 640 {cnf} (root's, and readable by the"
                                    " units' group: contrib/README.md §5)")


def test_a_missing_option_file_a_directory_and_a_fifo_are_refused_without_waiting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no option file at .*create it"):
        open_ledger(url_for(tmp_path / "missing.cnf"))
    (tmp_path / "dir.cnf").mkdir(mode=0o700)
    with pytest.raises(ConfigError, match="not a regular file"):
        open_ledger(url_for(tmp_path / "dir.cnf"))
    os.mkfifo(tmp_path / "fifo.cnf", 0o600)  # opening one for reading must not wait for a writer
    with pytest.raises(ConfigError, match="not a regular file"):
        open_ledger(url_for(tmp_path / "fifo.cnf"))


def test_without_pymysql_a_mariadb_ledger_says_to_install_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mariadb_module, "pymysql", None)
    with pytest.raises(ConfigError, match=r"pip install 'slurm-dsl\[mariadb\]'"):
        open_ledger(url_for(write_cnf(tmp_path / "ledger.cnf")))


def test_without_pymysql_the_package_imports_and_sqlite_works(tmp_path: Path) -> None:
    # A fresh interpreter in which ``import pymysql`` fails, as on a host without the extra.
    code = f"""
import sys
sys.modules["pymysql"] = None
import slurm_dsl, slurm_dsl.admin.cli, slurm_dsl.run.sweep
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.core.model import ConfigError
from slurm_dsl.core.model import Op, Outcome, Result
with open_ledger({str(tmp_path / "l.sqlite3")!r}) as ledger:
    op_id = ledger.begin_operations([("7", Op.HOLD, "n")], 1.0)[0]
    ledger.finish_operations([(op_id, Outcome(Op.HOLD, "7", Result.OK, None), b"")], 2.0)
    assert [h.result for h in ledger.history("7")] == [Result.OK]
try:
    open_ledger("mariadb://localhost/ledger")
except ConfigError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT),
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60, check=True).stdout
    assert "pip install 'slurm-dsl[mariadb]'" in out


# -- the schema and its migration ------------------------------------------------------------------


def test_the_schema_is_innodb_utf8mb4_bin_with_double_times(mariadb_location: str) -> None:
    with open_ledger(mariadb_location) as ledger:
        assert ledger.schema_version() == len(mariadb_module.MIGRATIONS) == 8
    with Raw(mariadb_location) as conn:
        tables = dict(conn.execute("SELECT table_name, engine FROM information_schema.tables"
                                   " WHERE table_schema = DATABASE()"))
        assert set(tables) == set(mariadb_module.OWN_TABLES) and set(tables.values()) == {"InnoDB"}
        columns = {(t, c): (dt, cs) for t, c, dt, cs in conn.execute(
            "SELECT table_name, column_name, data_type, collation_name FROM information_schema.columns"
            " WHERE table_schema = DATABASE()")}
        assert columns["objects", "job_id"] == ("varchar", "utf8mb4_bin")
        assert columns["history", "nonce"] == ("varchar", "utf8mb4_bin")
        assert columns["leases", "expires_at"][0] == "double" and columns["history", "started_at"][0] == "double"
        assert columns["history", "stderr"][0] == "mediumblob"  # 64 KiB does not fit a BLOB
        triggers = {r[0] for r in conn.execute("SELECT trigger_name FROM information_schema.triggers"
                                                 " WHERE trigger_schema = DATABASE()")}
        assert triggers == {"history_no_delete", "history_finish_once", "settlements_no_update",
                            "settlements_no_delete"}


def _open_at_once(url: str, start: threading.Barrier, versions: List[int], errors: List[BaseException]) -> None:
    try:
        start.wait(10)
        with open_ledger(url) as ledger:
            versions.append(ledger.schema_version())
    except BaseException as exc:
        errors.append(exc)


def test_connections_racing_to_migrate_a_new_database_migrate_it_once(
    mariadb_server: MariaDbServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A last step that is NOT safe to run twice: it counts how many times the migration ran.
    counter = ("CREATE TABLE IF NOT EXISTS migrated (connection_id BIGINT)",
               "INSERT INTO migrated VALUES (CONNECTION_ID())")
    monkeypatch.setattr(mariadb_module, "MIGRATIONS", (*mariadb_module.MIGRATIONS, counter))
    monkeypatch.setattr(mariadb_module, "OWN_TABLES", mariadb_module.OWN_TABLES | {"migrated"})
    for _ in range(3):
        with mariadb_server.database() as url:
            start = threading.Barrier(6)
            versions: List[int] = []
            errors: List[BaseException] = []
            threads = [threading.Thread(target=_open_at_once, args=(url, start, versions, errors)) for _ in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert errors == [] and versions == [len(mariadb_module.MIGRATIONS)] * 6
            with Raw(url) as conn:
                assert conn.execute("SELECT COUNT(*) FROM migrated") == [(1,)], "migrated exactly once"


def test_a_failed_migration_keeps_its_version_and_runs_again(
    mariadb_location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = mariadb_module.MIGRATIONS
    with open_ledger(mariadb_location):
        pass
    # DDL commits by itself in MariaDB: the first statement stays, but the version does not move.
    broken = ("CREATE TABLE IF NOT EXISTS extra (x INT)", "CREATE TABLE objects (y INT)")
    monkeypatch.setattr(mariadb_module, "MIGRATIONS", (*base, broken))
    with pytest.raises(LedgerError, match="already exists"):
        open_ledger(mariadb_location)
    with Raw(mariadb_location) as conn:
        assert conn.execute("SELECT version FROM schema_version") == [(len(base),)]
    # Every statement is safe to run again, so the fixed migration carries on where it stopped.
    monkeypatch.setattr(mariadb_module, "MIGRATIONS", (*base, ("CREATE TABLE IF NOT EXISTS extra (x INT)",)))
    with open_ledger(mariadb_location) as ledger:
        assert ledger.schema_version() == len(base) + 1


def test_a_database_holding_other_tables_is_not_taken_over(mariadb_location: str) -> None:
    with Raw(mariadb_location) as conn:
        conn.execute("CREATE TABLE job_table (id INT)")
    with pytest.raises(LedgerError, match=r"holds tables that are not slurm-dsl's \(job_table\)"):
        open_ledger(mariadb_location)
    with Raw(mariadb_location) as conn:
        assert conn.execute("SHOW TABLES") == [("job_table",)], "nothing created there"


def test_a_missing_database_is_a_ledger_error_and_is_not_created(
    mariadb_server: MariaDbServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = mariadb_server.url("slurm_dsl_t_never_created")
    with pytest.raises(LedgerError, match="database slurm_dsl_t_never_created does not exist: create it") as info:
        open_ledger(url)
    assert info.value.path == shown(url)
    from slurm_dsl.admin.cli import main

    assert main(["ledger", "status", "--ledger", url]) == 1
    assert "does not exist" in capsys.readouterr().err
    with mariadb_server.admin() as conn, conn.cursor() as cursor:
        cursor.execute("SHOW DATABASES LIKE 'slurm\\_dsl\\_t\\_never\\_created'")
        assert cursor.fetchall() == ()


def test_busy_timeout_is_innodb_lock_wait_in_whole_seconds(mariadb_location: str) -> None:
    for busy, seconds in ((0.3, 1), (1.0, 1), (2.5, 3), (5, 5)):
        with open_ledger(mariadb_location, busy_timeout=busy) as ledger:
            row = mariadb(ledger)._read("x", "SELECT @@innodb_lock_wait_timeout, @@time_zone, @@tx_isolation")
            assert row == [(seconds, "+00:00", "READ-COMMITTED")]


def test_a_wrong_password_is_a_ledger_error_that_never_shows_it(mariadb_location: str, tmp_path: Path,
                                                                mariadb_server: MariaDbServer) -> None:
    good = Path(mariadb_server.option_file).read_text()
    lines = [f"password={SECRET}" if line.startswith("password") else line for line in good.splitlines()]
    cnf = write_cnf(tmp_path / "wrong.cnf", "\n".join(lines) + "\n")
    url = mariadb_location.split("?")[0] + f"?option_file={cnf}"
    with pytest.raises(LedgerError, match="Access denied") as info:
        open_ledger(url)
    assert str(cnf) in str(info.value) and SECRET not in str(info.value)


# -- the sweep lock --------------------------------------------------------------------------------


def test_the_sweep_lock_is_released_by_the_server_when_its_holder_dies(mariadb_location: str) -> None:
    with open_ledger(mariadb_location) as first, open_ledger(mariadb_location) as second:
        lock = mariadb(first).sweep_lock()
        with lock:
            assert lock.connection_id is not None
            with pytest.raises(SweepBusy, match=f"connection {lock.connection_id}") as busy:
                with second.sweep_lock():
                    pass
            assert busy.value.path.startswith(f"slurm_dsl.sweep.{mariadb(first).database} on {shown(mariadb_location)}")
            # The holder's host dies: a third connection kills its connection, as the server
            # would drop that of a host that went away.
            with Raw(mariadb_location) as third:
                third.execute(f"KILL {lock.connection_id}")
            deadline = time.monotonic() + 10
            while True:
                try:
                    with second.sweep_lock():
                        break  # the server released it
                except SweepBusy:
                    assert time.monotonic() < deadline, "the server never released the dead holder's lock"
                    time.sleep(0.05)
        # Leaving the dead holder's block is quiet: its connection is gone, and with it the lock.


# -- the server's clock ----------------------------------------------------------------------------


def test_leases_are_decided_on_the_servers_clock_whatever_the_hosts_say(
    mariadb_location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def server_now() -> float:
        with Raw(mariadb_location) as conn:
            return float(conn.execute("SELECT UNIX_TIMESTAMP(NOW(6))")[0][0])

    real_time = time.time
    with open_ledger(mariadb_location) as host_a, open_ledger(mariadb_location) as host_b, \
            open_ledger(mariadb_location, clock=lambda: real_time() + 600) as skewed:
        # This host's clock is 10 minutes ahead: the ledger's clock is still the server's.
        monkeypatch.setattr(time, "time", lambda: real_time() + 600)
        assert abs(host_a.now() - server_now()) < 2
        assert abs(skewed.now() - server_now() - 600) < 2, "a given clock is used as it is (tests only)"
        monkeypatch.undo()

        taken = host_a.now()
        assert acquire_lease(host_a, "1", "host a", taken, 1.0)
        assert not acquire_lease(host_b, "1", "host b", host_b.now(), 60.0), "held, by the server's clock"
        # What the server's clock is for: a host whose own clock were 10 minutes ahead would think
        # every lease lapsed and take it from under its holder.
        assert acquire_lease(host_a, "2", "host a", host_a.now(), 60.0)
        assert acquire_lease(skewed, "2", "skewed host", skewed.now(), 60.0)
        # The lease on job 1 lapses when the server's clock passes its expiry, not before.
        while not acquire_lease(host_b, "1", "host b", host_b.now(), 60.0):
            assert server_now() < taken + 1.0 + 1.0, "lapsed by the server's clock, yet not given"
            time.sleep(0.05)
        assert server_now() >= taken + 1.0
        assert [o.job_id for o in host_b.due_objects(host_b.now())] == []


# -- a server that is gone, hung, stopped, or drops the connection ---------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dead_port_is_a_ledger_error_at_once(mariadb_server: MariaDbServer) -> None:
    url = mariadb_server.url("slurm_dsl_t_x", host=f"127.0.0.1:{free_port()}")
    start = time.monotonic()
    with pytest.raises(LedgerError, match="cannot reach the server") as info:
        open_ledger(url)
    assert time.monotonic() - start < 2
    assert info.value.path == f"mariadb://127.0.0.1:{url.split(':')[2].split('/')[0]}/slurm_dsl_t_x"


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word (a hung server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: List[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join(5)
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_hung_server_is_a_ledger_error_within_the_read_timeout(
    mariadb_server: MariaDbServer, silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mariadb_module, "READ_SLACK", 0.5)  # 10 s in production
    start = time.monotonic()
    with pytest.raises(LedgerError, match=r"ledger mariadb://127\.0\.0\.1:"):
        open_ledger(mariadb_server.url("slurm_dsl_t_x", host=f"127.0.0.1:{silent_server}"), busy_timeout=1)
    assert time.monotonic() - start < 4, "busy timeout (1 s) + read slack, not a hang"


def test_a_dropped_connection_is_replaced_before_the_next_transaction(mariadb_location: str) -> None:
    with open_ledger(mariadb_location) as ledger, Raw(mariadb_location) as admin:
        begin_operation(ledger, "1", Op.REQUEUE, "a" * 32, ledger.now())
        first = connection_id(ledger)
        admin.execute(f"KILL {first}")  # a failover, a restart, wait_timeout: the server drops it
        obj = ledger.get("1")  # a read: reconnected once, first
        assert obj is not None and obj.bit is RequeueBit.MAY_BE_SET
        assert connection_id(ledger) != first
        admin.execute(f"KILL {connection_id(ledger)}")
        assert acquire_lease(ledger, "1", "me", ledger.now(), 10.0)  # a new transaction: the same


def test_a_transaction_that_loses_its_connection_is_never_retried(mariadb_location: str) -> None:
    with open_ledger(mariadb_location) as ledger, Raw(mariadb_location) as blocker, \
            Raw(mariadb_location) as admin:
        victim = connection_id(ledger)
        blocker.lock_writers()  # the lease's transaction waits for the write lock...
        errors: List[BaseException] = []

        def take() -> None:
            try:
                acquire_lease(ledger, "1", "me", 100.0, 10.0)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=take)
        thread.start()
        deadline = time.monotonic() + 5
        while not admin.execute("SELECT 1 FROM information_schema.processlist WHERE id = ? AND info LIKE ?",
                                (victim, "%write_lock%")):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        admin.execute(f"KILL {victim}")  # ...and loses its connection while it waits
        thread.join(10)
        blocker.rollback()
        assert len(errors) == 1 and isinstance(errors[0], LedgerError), errors
        assert "acquire lease" in str(errors[0])
        # Not retried on a new connection: the lease was not written.  The next transaction is.
        assert admin.execute("SELECT COUNT(*) FROM leases") == [(0,)]
        assert acquire_lease(ledger, "1", "me", 100.0, 10.0)



def test_a_big_finish_goes_through_a_temporary_table_no_failure_leaves_rows_in(mariadb_location: str) -> None:
    """Past a few operations, finish_operations writes the history from this connection's own
    TEMPORARY table (one UPDATE ... JOIN): a batch refused by the server there writes nothing and
    leaves the table empty, no other connection sees it, and a new connection makes its own."""
    jobs = [str(n) for n in range(100, 120)]

    def held(job_id: str, status: int = 0) -> Outcome:
        return Outcome(Op.HOLD, job_id, Result.OK, None, exit_status=status)

    def finishing_rows(ledger: Any) -> int:
        return int(mariadb(ledger)._read("count", "SELECT COUNT(*) FROM slurm_dsl_finishing")[0][0])

    with open_ledger(mariadb_location) as ledger, Raw(mariadb_location) as admin:
        op_ids = ledger.begin_operations([(j, Op.HOLD, "a" * 32) for j in jobs], 1.0)
        too_big = [(i, held(j, 2**40 if n == 7 else 0), b"x") for n, (i, j) in enumerate(zip(op_ids, jobs))]
        with pytest.raises(LedgerError, match="exit_status"):  # INT: out of range in the table's insert
            ledger.finish_operations(too_big, 2.0)
        assert finishing_rows(ledger) == 0
        assert admin.execute("SELECT COUNT(*) FROM history WHERE finished_at IS NOT NULL") == [(0,)]
        assert ("slurm_dsl_finishing",) not in admin.execute("SHOW TABLES")
        bits = ledger.finish_operations([(i, held(j, n), bytes([n]) * n) for n, (i, j) in enumerate(zip(op_ids, jobs))],
                                        2.0)
        assert bits == [RequeueBit.CLEAR] * len(jobs) and finishing_rows(ledger) == 0
        entries = {e.job_id: e for j in jobs for e in ledger.history(j)}
        assert [(entries[j].exit_status, entries[j].stderr) for j in jobs] == [(n, bytes([n]) * n) for n in range(20)]

        admin.execute(f"KILL {connection_id(ledger)}")  # the table goes with its connection
        ledger.get("100")  # reconnected
        again = ledger.begin_operations([(j, Op.HOLD, "b" * 32) for j in jobs], 3.0)
        bits = ledger.finish_operations([(i, held(j), b"") for i, j in zip(again, jobs)], 4.0)
        assert bits == [RequeueBit.CLEAR] * len(jobs) and finishing_rows(ledger) == 0
        assert all(len([e for e in ledger.history(j) if e.finished]) == 2 for j in jobs)

def _lab_mariadb_usable() -> Optional[str]:
    """Why the lab's server cannot be stopped and started here (None: it can)."""
    if not LAB_MARIADB.exists():
        return "no contrib/lab/mariadb"
    if os.geteuid() != 0:
        return "contrib/lab/mariadb stop/start needs root"
    status = subprocess.run([str(LAB_MARIADB), "status"], capture_output=True, text=True, timeout=30)
    if "started by the lab" not in status.stdout:
        return f"the server was not started by the lab: {status.stdout.strip() or status.stderr.strip()}"
    return None


def test_a_stopped_server_is_a_ledger_error_quickly_and_the_ledger_comes_back(
    mariadb_location: str, mariadb_server: MariaDbServer
) -> None:
    why = _lab_mariadb_usable()
    if why is not None:
        pytest.skip(f"{why} (test_a_dead_port_is_a_ledger_error_at_once covers a server that is not there)")
    password = [line.split("=", 1)[1] for line in Path(mariadb_server.option_file).read_text().splitlines()
                if line.startswith("password=")]

    def lab(command: str) -> None:
        subprocess.run([str(LAB_MARIADB), command], check=True, timeout=120, capture_output=True)

    with open_ledger(mariadb_location) as ledger:
        begin_operation(ledger, "1", Op.REQUEUE, "a" * 32, ledger.now())
        lab("stop")
        try:
            for attempt in (lambda: ledger.get("1"), lambda: open_ledger(mariadb_location),
                            lambda: acquire_lease(ledger, "1", "me", 1.0, 10.0)):
                start = time.monotonic()
                with pytest.raises(LedgerError, match="cannot reach the server") as info:
                    attempt()
                assert time.monotonic() - start < 3, "a LedgerError at once, not a hang"
                assert info.value.path == shown(mariadb_location)
                assert not any(p and p in str(info.value) for p in password)
        finally:
            lab("start")
        obj = ledger.get("1")  # the same ledger object carries on once the server is back
        assert obj is not None and obj.bit is RequeueBit.MAY_BE_SET


def test_the_ledger_path_is_the_url_without_its_query(mariadb_location: str) -> None:
    with open_ledger(mariadb_location) as ledger:
        assert ledger.path == mariadb_location.split("?")[0] and "option_file" not in ledger.path
        assert cast(MariaDbLedger, ledger).database.startswith("slurm_dsl_t_")


def test_a_runs_mark_is_seen_by_every_connection_while_its_ledger_is_open(mariadb_location: str) -> None:
    """docs/contract.md §13.7: the hosts of a pair tell each other's runs alive by the server's lock."""
    run = "another-host/0f0f/4242/99"
    with open_ledger(mariadb_location) as marking, open_ledger(mariadb_location) as other:
        assert other.run_locked(run) is None
        marking.lock_run(run)
        marking.lock_run(run)  # renewed, not taken twice
        assert other.run_locked(run) is True and other.run_locked(run + "0") is None
        assert len(mariadb_module.run_lock_name(run)) <= 64
    with open_ledger(mariadb_location) as other:
        assert other.run_locked(run) is None  # closed: the server let it go


def test_a_run_that_cannot_be_marked_goes_on(mariadb_location: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that refuses the mark's connection (it went down since the ledger was opened) is
    no error of the mark's: the operation's own next use of the ledger says why."""
    import pymysql

    with open_ledger(mariadb_location) as ledger:
        def down(self: Any, database: Optional[str]) -> Any:
            raise pymysql.err.OperationalError(2003, "Can't connect to MySQL server")

        with monkeypatch.context() as patched:
            patched.setattr(mariadb_module.Server, "connect", down)
            ledger.lock_run("h/b/1/2")  # no exception: the times decide, as without a mark
        assert ledger.run_locked("h/b/1/2") is None


def test_a_sqlite_ledger_marks_nothing(tmp_path: Path) -> None:
    with open_ledger(str(tmp_path / "l.sqlite3")) as ledger:
        ledger.lock_run("h/b/1/2")
        assert ledger.run_locked("h/b/1/2") is None
