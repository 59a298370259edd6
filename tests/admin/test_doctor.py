"""slurm-dsl doctor: each check against a fake scontrol/squeue that print the real texts."""

from __future__ import annotations

import io
import json
import os
import pwd
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

import slurm_dsl.ledger.mariadb as mariadb_module
from slurm_dsl.admin.cli import main
from slurm_dsl.admin.doctor import (
    CLOCK_WARN,
    NOTHING_READ,
    OK,
    Check,
    Units,
    caller_check,
    hand_back_check,
    jobinfo_check,
    run_checks,
    sqlite_check,
    sweep_check,
)
from slurm_dsl.core.model import Op
from slurm_dsl.ledger import schema
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.schema import CURRENT
from slurm_dsl.lookups.saves import Controllers
from slurm_dsl.lookups.sight import parse_config
from tests.cli_run import cli
from tests.fakes import write_fake, write_fake_squeue
from tests.ledger_backends import Raw
from tests.ledger_ops import begin_operation

CONFIG = "Configuration data as of 2026-11-29T18:00:00\nJobRequeue              = {requeue}\n" \
         "JobSubmitPlugins        = {plugins}\nMessageTimeout          = 3 sec\n"


def test_parse_config() -> None:
    config = parse_config(CONFIG.format(requeue=0, plugins="lua"))
    assert config["JobRequeue"] == "0" and config["JobSubmitPlugins"] == "lua"
    assert config["MessageTimeout"] == "3 sec"


def doctor(
    tmp_path: Path, requeue: int = 0, plugins: str = "lua", up: bool = True, lookup: str = "squeue",
    ledger: Optional[str] = None,
) -> Tuple[int, Dict[str, str]]:
    code, found = doctor_details(tmp_path, requeue, plugins, up, lookup, ledger)
    return code, {name: status for name, (status, _) in found.items()}


def doctor_details(
    tmp_path: Path, requeue: int = 0, plugins: str = "lua", up: bool = True, lookup: str = "squeue",
    ledger: Optional[str] = None, slurm_user: Optional[str] = None, config_file: Optional[Path] = None,
) -> Tuple[int, Dict[str, Tuple[str, str]]]:
    """``doctor --json`` against fakes: its exit status, and each check's status and detail.
    ``slurm_user``: the SlurmUser ``show config`` names (``slurm(64030)``; None: no such line)."""
    ping = "echo 'Slurmctld(primary) at vm is UP'" if up else "echo 'Slurmctld(primary) at vm is DOWN'; exit 1"
    config = CONFIG.format(requeue=requeue, plugins=plugins)
    if slurm_user is not None:
        config += f"SlurmUser               = {slurm_user}\n"
    config = config.replace("\n", "\\n")
    fake = write_fake(tmp_path / "bin", {}, default=f'case $1 in ping) {ping} ;; show) printf "{config}" ;; esac')
    squeue = write_fake_squeue(tmp_path / "sq", "")
    code, out, _ = cli(["doctor", "--json", "--scontrol", str(fake), "--squeue", str(squeue), "--lookup", lookup,
                        "--ledger", ledger or str(tmp_path / "ledger.sqlite3"),
                        *(["--config", str(config_file)] if config_file else [])])
    checks = {c["check"]: (c["status"], c["detail"]) for c in map(json.loads, out.splitlines())}
    return code, checks


def test_a_ready_controller(tmp_path: Path) -> None:
    code, checks = doctor(tmp_path)
    assert code == 0
    want: List[str] = [
        "scontrol", "wrapper", "slurmctld", "slurm", "lookup", "jobinfo", "sweep", "hand-back", "JobRequeue",
        "job_submit",
        "ledger", "caller",
    ]
    assert list(checks) == want
    assert {k: v for k, v in checks.items() if k != "caller"} == dict.fromkeys(want[:-1], "ok")


def test_the_lookup_is_reported_and_a_missing_pyslurm_asked_for_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # import pyslurm raises ImportError
    code, checks = doctor(tmp_path, lookup="pyslurm")
    assert code == 1 and checks["lookup"] == "fail"
    code, checks = doctor(tmp_path, lookup="auto")
    assert code == 0 and checks["lookup"] == "ok"


def test_warnings_do_not_fail(tmp_path: Path) -> None:
    code, checks = doctor(tmp_path, requeue=1, plugins="(null)")
    assert code == 0
    assert (checks["JobRequeue"], checks["job_submit"]) == ("warn", "warn")


def test_a_down_controller_fails(tmp_path: Path) -> None:
    code, checks = doctor(tmp_path, up=False)
    assert code == 1 and checks["slurmctld"] == "fail"
    assert "JobRequeue" not in checks


def test_an_unusable_ledger_fails(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    out = io.StringIO()
    code = main(["doctor", "--scontrol", "/nonexistent/scontrol", "--squeue", "/nonexistent/squeue",
                 "--ledger", str(tmp_path / "file" / "ledger.sqlite3")], out=out)
    assert code == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("fail  scontrol") and any(line.startswith("fail  ledger") for line in lines)


def test_a_sqlite_ledger_named_with_its_prefix(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    open_ledger(path).close()
    code, checks = doctor_details(tmp_path, ledger=f"sqlite:{path}")
    version = schema.CURRENT["sqlite"]
    assert code == 0 and checks["ledger"] == ("ok", f"{path} (schema {version}, 0 object(s) not clear)")


def test_a_sqlite_ledger_others_may_read_warns_with_the_chmod(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    open_ledger(path).close()
    path.chmod(0o644)
    code, checks = doctor_details(tmp_path, ledger=str(path))
    assert code == 0 and checks["ledger"][0] == "warn" and checks["ledger"][1].endswith(f"(chmod 600 {path})")


def tree(top: Path) -> Dict[str, Tuple[int, int, int, bytes]]:
    """Every file and directory under ``top``: its mode, owner, size and, for a file, its bytes."""
    return {str(path.relative_to(top)): (path.lstat().st_mode, path.lstat().st_uid, path.lstat().st_size,
                                         path.read_bytes() if path.is_file() else b"")
            for path in sorted(top.rglob("*"))}


def test_doctor_on_a_fresh_controller_creates_nothing(tmp_path: Path) -> None:
    """Issue 43, item 3: doctor run first on a fresh controller made /var/lib/slurm-dsl (root's),
    which the units of a SlurmUser=slurm cluster then could not write.  Now it only looks: on a
    root-like layout with no ledger, nothing is created, and its line says what will create it."""
    root = tmp_path / "root"
    (root / "var" / "lib").mkdir(parents=True)
    (root / "etc" / "slurm-dsl").mkdir(parents=True)
    ledger = root / "var" / "lib" / "slurm-dsl" / "ledger.sqlite3"
    config = root / "etc" / "slurm-dsl" / "slurm-dsl.conf"
    config.write_text(f"[slurm-dsl]\nledger = {ledger}\n")
    before = tree(root)
    code, checks = doctor_details(tmp_path, ledger=str(ledger), config_file=config)
    assert tree(root) == before
    assert code == 0 and checks["ledger"] == (
        "ok", f"no ledger yet: the first operation or sweep creates {ledger.parent} (0700) and {ledger}, as its"
        " account")
    # The directory there (the package made it), the ledger not yet: nothing made either.
    ledger.parent.mkdir(mode=0o700)
    before = tree(root)
    code, checks = doctor_details(tmp_path, ledger=str(ledger))
    assert tree(root) == before
    assert code == 0 and checks["ledger"] == ("ok", f"no ledger yet: the first operation or sweep creates {ledger}")


def test_a_sqlite_ledger_is_read_never_written(tmp_path: Path) -> None:
    """Doctor opened (and so created, migrated and switched to WAL) the ledger it checked; it now
    reads what is there, whatever its schema, and leaves every byte and no -wal or -shm file."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = state / "ledger.sqlite3"

    def looked() -> Tuple[str, str]:
        before = tree(state)
        code, checks = doctor_details(tmp_path, ledger=str(path))
        assert tree(state) == before
        assert code == (1 if checks["ledger"][0] == "fail" else 0)
        return checks["ledger"]

    path.touch(mode=0o600)  # an empty file: SQLite's, with no schema yet
    assert looked() == ("warn", f"{path} (schema 0): it holds no slurm-dsl schema: the first slurm-dsl to open it"
                        " creates the ledger's tables")
    with open_ledger(path) as ledger:
        schema = ledger.schema_version()
        begin_operation(ledger, "7", Op.REQUEUE, "a" * 32, ledger.now())  # a requeue that never finished
    assert looked() == ("warn", f"{path} (schema {schema}, 1 object(s) not clear): run slurm-dsl sweep")
    with Raw(str(path)) as conn:
        conn.execute(f"PRAGMA user_version = {schema - 1}")
    assert looked() == ("warn", f"{path} (schema {schema - 1}, older than this slurm-dsl's {schema}): the next"
                        " slurm-dsl to open it migrates it")
    with Raw(str(path)) as conn:
        conn.execute(f"PRAGMA user_version = {schema + 1}")
    assert looked() == ("fail", f"{path} (schema {schema + 1}, newer than this slurm-dsl's {schema}): upgrade"
                        " slurm-dsl on this host")
    path.write_bytes(b"not a database, but long enough to be read as a header of one" * 2)
    assert looked() == ("fail", f"ledger {path}: schema version: file is not a database")


def test_a_ledger_directory_the_units_account_cannot_write_fails_with_the_chown(tmp_path: Path) -> None:
    """Issue 43, item 3: a ledger directory of root's (here: of whoever runs the test) on a cluster
    whose SlurmUser is slurm left the sweep unit failing (``ledger directory ... is not writable
    by uid 64030``) while doctor said ok.  It is a failed line now, with the chown that fixes it;
    the same directory named the units' by service_account is fine, and a missing one warns that
    root's first command would make it root's."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    ledger = state / "ledger.sqlite3"
    owner = os.geteuid()
    assert owner != 64030, "run as the account the fake SlurmUser is"
    code, checks = doctor_details(tmp_path, ledger=str(ledger), slurm_user="slurm(64030)")
    assert code == 1 and checks["ledger"] == (
        "fail", f"ledger directory {state} is not writable by uid 64030, the units' account, slurm (uid 64030,"
        f" slurm.conf's SlurmUser): it is uid {owner}'s; chown -R slurm: {state} (while no sweep runs)")
    mine = pwd.getpwuid(owner).pw_name
    config = tmp_path / "slurm-dsl.conf"
    config.write_text(f"[slurm-dsl]\nservice_account = {mine}\n")
    code, checks = doctor_details(tmp_path, ledger=str(ledger), slurm_user="slurm(64030)", config_file=config)
    assert checks["ledger"] == ("ok", f"no ledger yet: the first operation or sweep creates {ledger}")
    missing = tmp_path / "none" / "ledger.sqlite3"
    code, checks = doctor_details(tmp_path, ledger=str(missing), slurm_user="slurm(64030)")
    assert code == 0 and checks["ledger"] == (
        "warn", f"no ledger yet: the first operation or sweep creates {missing.parent} (0700) and {missing}, as its"
        f" account; made by root, {missing.parent} would be root's, which the units' account, slurm (uid 64030,"
        f" slurm.conf's SlurmUser), cannot write: make it that account's first (install -d -m 0700"
        f" {missing.parent} && chown slurm: {missing.parent})")
    assert not missing.parent.exists()


NOW = CURRENT["sqlite"]  # the schema this slurm-dsl writes


@pytest.mark.parametrize(
    ("directory_uid", "mode", "schema", "not_clear", "units", "want"),
    [
        (None, None, 0, None, None, "ok"),
        (None, None, 0, None, 0, "ok"),  # SlurmUser=root: whoever makes it, root can write it
        (None, None, 0, None, 64030, "warn"),
        (0, None, 0, None, 0, "ok"),
        (0, None, 0, None, 64030, "fail"),
        (64030, None, 0, None, 64030, "ok"),
        (1000, 0o600, NOW, 0, 64030, "fail"),  # the directory decides before the file is looked at
        (64030, 0o600, NOW, 0, 64030, "ok"),
        (64030, 0o640, NOW, 0, 64030, "warn"),
        (64030, 0o600, NOW, 2, None, "warn"),
        (64030, 0o600, NOW - 1, None, 64030, "warn"),  # older: migrated by the next slurm-dsl to open it
        (64030, 0o640, NOW + 1, None, None, "fail"),  # newer: fail, whatever the mode
    ],
)
def test_the_sqlite_ledger_line(
    directory_uid: Optional[int], mode: Optional[int], schema: int, not_clear: Optional[int], units: Optional[int],
    want: str,
) -> None:
    account = None if units is None else Units("root" if units == 0 else "slurm", units, "slurm.conf's SlurmUser")
    check = sqlite_check("/var/lib/slurm-dsl/ledger.sqlite3", directory_uid, mode, schema, not_clear, account)
    assert (check.name, check.status) == ("ledger", want), check.detail


# -- a MariaDB ledger -------------------------------------------------------------------------------

MARIADB_CHECKS = ["ledger-cnf", "ledger-db", "ledger-time", "ledger"]


def option_file(directory: Path, mode: int = 0o600, text: str = "[client]\nuser=nobody\npassword=x\n") -> Path:
    path = directory / "ledger.cnf"
    path.write_text(text)
    path.chmod(mode)
    return path


def ledger_checks(checks: Dict[str, Tuple[str, str]]) -> Dict[str, Tuple[str, str]]:
    return {name: found for name, found in checks.items() if name.startswith("ledger")}


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: option_file(d, 0o644), "has mode 0644: other accounts may read or change the ledger's password:"),
        (lambda d: option_file(d, 0o644), "chmod 600 {cnf}"),
        (lambda d: option_file(d, 0o604), "chmod 600 {cnf}"),
        (lambda d: option_file(d, 0o660), "chmod 600 {cnf}"),
        (lambda d: d / "ledger.cnf", "no option file at {cnf}"),
        (lambda d: (d / "ledger.cnf").mkdir(), "is not a regular file"),
        (lambda d: (d / "ledger.cnf").symlink_to(option_file(d / "..", 0o600)), "is a symbolic link"),
        (lambda d: option_file(d, 0o600, "[client]\npassword=x\n"), "names no user="),
    ],
)
def test_an_option_file_that_is_not_private_fails_with_the_fix(tmp_path: Path, make: object, says: str) -> None:
    cnf_dir = tmp_path / "etc"
    cnf_dir.mkdir()
    make(cnf_dir)  # type: ignore[operator]
    cnf = cnf_dir / "ledger.cnf"
    code, checks = doctor_details(tmp_path, ledger=f"mariadb://127.0.0.1/slurm?option_file={cnf}")
    assert code == 1
    assert list(ledger_checks(checks)) == ["ledger-cnf"], "the server is not tried without its account"
    status, detail = checks["ledger-cnf"]
    assert status == "fail" and says.format(cnf=cnf) in detail


def test_an_option_file_of_another_account_fails_with_the_layout_that_serves_root_and_the_units(
    tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file away")
    cnf = option_file(tmp_path)
    os.chown(cnf, 4242, 4243)
    code, checks = doctor_details(tmp_path, ledger=f"mariadb://127.0.0.1/slurm?option_file={cnf}")
    assert code == 1 and checks["ledger-cnf"][0] == "fail"
    assert f"chown root:4243 {cnf} && chmod 640 {cnf}" in checks["ledger-cnf"][1]  # not chown 0 (issue 31, item 8)


@pytest.mark.parametrize(("url", "says"), [("mariadb://root:pw@127.0.0.1/slurm", "no user or password in the URL"),
                                           ("mariadb://127.0.0.1/no-such-name", "name one database")])
def test_a_bad_ledger_url_fails_without_a_crash(tmp_path: Path, url: str, says: str) -> None:
    code, checks = doctor_details(tmp_path, ledger=url)
    assert code == 1 and checks["ledger"][0] == "fail" and says in checks["ledger"][1]
    assert "pw" not in checks["ledger"][1]


def test_an_unreachable_server_fails_quickly(tmp_path: Path) -> None:
    pytest.importorskip("pymysql")
    cnf = option_file(tmp_path)
    url = f"mariadb://127.0.0.1:1/slurm?option_file={cnf}"
    started = time.monotonic()
    code, checks = doctor_details(tmp_path, ledger=url)
    assert time.monotonic() - started < mariadb_module.CONNECT_TIMEOUT, "refused at once, not waited on"
    assert code == 1 and list(ledger_checks(checks)) == ["ledger-cnf", "ledger-db"]
    status, detail = checks["ledger-db"]
    assert status == "fail"
    assert detail.startswith("ledger mariadb://127.0.0.1:1/slurm: connect: cannot reach the server")


@pytest.mark.parametrize(("offset", "status"), [(0.25, "ok"), (-CLOCK_WARN + 1, "ok"), (CLOCK_WARN + 5, "warn"),
                                                (-3600.0, "warn")])
def test_the_server_clock_offset_is_shown_and_a_large_one_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offset: float, status: str
) -> None:
    cnf = option_file(tmp_path)

    def probe(url: str, **kwargs: object) -> mariadb_module.Probe:
        return mariadb_module.Probe("10.11.6-MariaDB", 1000.0, 1000.001 + offset, 1000.002, 1, 0)

    monkeypatch.setattr(mariadb_module, "probe", probe)
    code, checks = doctor_details(tmp_path, ledger=f"mariadb://db1/slurm?option_file={cnf}")
    assert code == 0 and list(ledger_checks(checks)) == MARIADB_CHECKS
    assert checks["ledger-db"] == ("ok", "mariadb://db1/slurm: server 10.11.6-MariaDB (answered in 2.0 ms)")
    shown, detail = checks["ledger-time"]
    assert shown == status
    assert detail.startswith(f"the server's clock is {abs(offset):.2f} s {'ahead of' if offset > 0 else 'behind'}"
                             " this host's (give or take 1.0 ms)")


def test_a_good_mariadb_ledger(tmp_path: Path, mariadb_location: str) -> None:
    shown = mariadb_location.split("?", 1)[0]
    code, checks = doctor_details(tmp_path, ledger=mariadb_location)
    assert code == 0 and list(ledger_checks(checks)) == MARIADB_CHECKS
    assert checks["ledger-cnf"][0] == checks["ledger-db"][0] == checks["ledger-time"][0] == "ok"
    assert "MariaDB" in checks["ledger-db"][1] or "mysql" in checks["ledger-db"][1].lower()
    assert checks["ledger"][0] == "warn" and "is empty: the first slurm-dsl to open it creates" in checks["ledger"][1]
    with Raw(mariadb_location) as conn:
        assert conn.execute("SHOW TABLES") == [], "doctor created nothing"

    with open_ledger(mariadb_location) as ledger:
        schema = ledger.schema_version()
    code, checks = doctor_details(tmp_path, ledger=mariadb_location)
    assert code == 0 and checks["ledger"] == ("ok", f"{shown} (schema {schema}, 0 object(s) not clear)")

    with open_ledger(mariadb_location) as ledger:
        begin_operation(ledger, "7", Op.REQUEUE, "a" * 32, ledger.now())  # a requeue that never finished
    code, checks = doctor_details(tmp_path, ledger=mariadb_location)
    assert code == 0
    assert checks["ledger"] == ("warn", f"{shown} (schema {schema}, 1 object(s) not clear): run slurm-dsl sweep")

    with Raw(mariadb_location) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (schema + 1,))
    code, checks = doctor_details(tmp_path, ledger=mariadb_location)
    assert code == 1 and checks["ledger"][0] == "fail" and "newer than this slurm-dsl's" in checks["ledger"][1]


# -- who is asking (issue 19: the SlurmUser) --------------------------------------------------------

# Real lines of `scontrol show config` (Slurm 22.05, the lab): SlurmUser is "NAME(UID)". Slurm
# 24.11 (trixie's lab, SlurmUser=slurm) prints, without accounting:
SHOW_CONFIG_24_11 = (
    "Configuration data as of 2026-12-01T18:55:06\n"
    "AccountingStorageType   = (null)\n"
    "PrivateData             = none\n"
    "SlurmUser               = slurm(64030)\n"
    "SlurmdUser              = root(0)\n"
)
SHOW_CONFIG = (
    "Configuration data as of 2026-12-01T18:49:18\n"
    "AccountingStorageBackupHost = (null)\n"
    "AccountingStorageEnforce = none\n"
    "AccountingStorageType   = {accounting}\n"
    "JobRequeue              = 0\n"
    "JobSubmitPlugins        = lua\n"
    "PrivateData             = none\n"
    "SlurmUser               = {slurm_user}\n"
    "SlurmdUser              = root(0)\n"
)


def caller(euid: int, slurm_user: str = "slurm(64030)", accounting: str = "accounting_storage/none",
           name: str = "slurm") -> Tuple[str, str]:
    config = parse_config(SHOW_CONFIG.format(slurm_user=slurm_user, accounting=accounting))
    check = caller_check(euid, name, config)
    assert check.name == "caller"
    return check.status, check.detail


def test_root_and_the_slurm_user_may_act_on_every_job() -> None:
    assert caller(0, "root(0)", name="root") == ("ok", "root: may act on every user's job")
    assert caller(0) == ("ok", "root: may act on every user's job")
    assert caller(64030) == (
        "ok", "uid 64030 (slurm) is slurm.conf's SlurmUser (slurm(64030)): may act on every user's job")


def test_another_account_cannot_and_is_told_how_to_fix_it() -> None:
    status, detail = caller(1000, name="slurmdsl-alice")
    assert status == "fail"
    assert detail.startswith("uid 1000 (slurmdsl-alice) is neither root nor the SlurmUser (slurm(64030))")
    assert "refused" in detail and detail.endswith("run slurm-dsl as root or slurm (the systemd units' User=)")
    # The lab's own SlurmUser=root: an account that is not root is not it either.
    assert caller(64030, "root(0)") == ("fail", "uid 64030 (slurm) is neither root nor the SlurmUser (root(0)), and"
                                        " there is no accounting (no AdminLevel): its holds and restores of other"
                                        " users' jobs are refused and lookups may not see every job; run slurm-dsl"
                                        " as root (the systemd units' User=)")


def test_slurm_24_11_without_accounting_prints_null_and_is_read_as_no_accounting() -> None:
    config = parse_config(SHOW_CONFIG_24_11)
    assert caller_check(64030, "slurm", config).status == "ok"
    check = caller_check(1000, "slurmdsl-alice", config)
    assert check.status == "fail" and "there is no accounting" in check.detail, check


def test_with_accounting_on_it_cannot_tell_and_names_the_adminlevel_fix() -> None:
    status, detail = caller(1000, accounting="accounting_storage/slurmdbd", name="ops")
    assert status == "warn"
    assert "Operator or Administrator AdminLevel in slurmdbd (accounting_storage/slurmdbd)" in detail
    assert "sacctmgr modify user ops set adminlevel=Operator" in detail and "run slurm-dsl as root or slurm" in detail
    # An account name from outside is quoted in the commands it is given.
    status, detail = caller(1000, accounting="accounting_storage/slurmdbd", name="o'brien")
    assert "sacctmgr modify user 'o'\"'\"'brien' set adminlevel=Operator" in detail


def test_without_show_config_it_cannot_tell() -> None:
    check = caller_check(64030, "slurm", None)
    assert check.status == "warn" and "cannot tell" in check.detail and "SlurmUser" in check.detail


def test_doctor_as_the_slurm_user_and_as_another_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = SHOW_CONFIG.format(slurm_user="slurm(64030)", accounting="accounting_storage/none")
    fake = write_fake(tmp_path / "bin", {}, default="case $1 in ping) echo 'Slurmctld(primary) at vm is UP' ;;"
                      f" show) printf '%s' '{config}' ;; esac")
    squeue = write_fake_squeue(tmp_path / "sq", "")
    # The ledger's directory is the test's, named the units' account: only the caller line differs.
    units = tmp_path / "slurm-dsl.conf"
    units.write_text(f"[slurm-dsl]\nservice_account = {pwd.getpwuid(os.geteuid()).pw_name}\n")
    argv = ["doctor", "--json", "--scontrol", str(fake), "--squeue", str(squeue), "--lookup", "squeue",
            "--ledger", str(tmp_path / "ledger.sqlite3"), "--config", str(units)]
    for euid, code_wanted, status in ((64030, 0, "ok"), (1000, 1, "fail")):
        monkeypatch.setattr(os, "geteuid", lambda euid=euid: euid)
        code, out, _ = cli(argv)
        checks = {c["check"]: c for c in map(json.loads, out.splitlines())}
        assert (code, checks["caller"]["status"]) == (code_wanted, status), checks["caller"]


# --- slurm-dsl-jobinfo ----------------------------------------------------------------------------

# What the dynamic loader prints for a helper built against another Slurm's libslurm, and what
# slurm-dsl-jobinfo prints when slurmctld cannot be reached (contrib/jobinfo/jobinfo.c).
NOT_LOADED = ("{path}: error while loading shared libraries: libslurm.so.38: cannot open shared object file:"
              " No such file or directory")
UNREACHABLE = "slurm_load_federation error: Unable to contact slurm controller (connect failure)"


def fake_helper(tmp_path: Path, body: str) -> str:
    """A slurm-dsl-jobinfo that checks it was asked for one id no job has, then runs ``body``."""
    path = tmp_path / "slurm-dsl-jobinfo"
    path.write_text("#!/bin/sh\n"
                    'case "$#:$1:$2" in 2:[0-9a-f]*:4294967294) ;; *) echo "bad arguments: $*" >&2; exit 2 ;; esac\n'
                    + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_jobinfo_none_is_ok_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    check = jobinfo_check({"SLURM_DSL_JOBINFO": ""})
    assert (check.name, check.status) == ("jobinfo", "ok") and "$SLURM_DSL_JOBINFO is empty" in check.detail
    monkeypatch.setattr("os.path.isfile", lambda path: False)
    check = jobinfo_check({})
    assert check.status == "ok" and "not installed at /usr/libexec/slurm-dsl/slurm-dsl-jobinfo" in check.detail


def test_jobinfo_that_answers_is_ok(tmp_path: Path) -> None:
    helper = fake_helper(tmp_path, "exit 0")
    check = jobinfo_check({"SLURM_DSL_JOBINFO": helper})
    assert check.status == "ok" and check.detail.startswith(helper + ": asks slurmctld"), check


def test_jobinfo_built_for_another_slurm_warns_with_the_fix(tmp_path: Path) -> None:
    helper = fake_helper(tmp_path, 'echo "' + NOT_LOADED.format(path='$0') + '" >&2; exit 127')
    check = jobinfo_check({"SLURM_DSL_JOBINFO": helper})
    assert check.status == "warn", check
    assert f"{helper} cannot be run (status 127: {NOT_LOADED.format(path=helper)})" in check.detail
    assert "every lookup asks squeue instead" in check.detail and "contrib/jobinfo/build" in check.detail


def test_jobinfo_missing_where_named_warns(tmp_path: Path) -> None:
    check = jobinfo_check({"SLURM_DSL_JOBINFO": str(tmp_path / "nowhere")})
    assert check.status == "warn" and "cannot be run (status 127" in check.detail, check


def test_jobinfo_that_cannot_reach_slurmctld_warns(tmp_path: Path) -> None:
    helper = fake_helper(tmp_path, f"echo '{UNREACHABLE}' >&2; exit 1")
    check = jobinfo_check({"SLURM_DSL_JOBINFO": helper})
    assert (check.status, check.detail) == ("warn", f"{helper} could not ask slurmctld (exit 1: {UNREACHABLE})")


def test_jobinfo_named_by_a_relative_path_fails() -> None:
    check = jobinfo_check({"SLURM_DSL_JOBINFO": "slurm-dsl-jobinfo"})
    assert check.status == "fail" and "absolute path" in check.detail, check


HELPER = "/usr/libexec/slurm-dsl/slurm-dsl-jobinfo"
FALLS_BACK = "sweeps fall back to squeue"


@pytest.mark.parametrize(("lookup", "helper", "status", "said"), [
    ("squeue", Check("jobinfo", "ok", f"{HELPER}: asks slurmctld for jobs"), "ok", "through slurm-dsl-jobinfo"),
    # A pip install: nothing is wrong, but it is said, with the build.
    ("squeue", jobinfo_check({"SLURM_DSL_JOBINFO": ""}), "ok", FALLS_BACK),
    # A helper built for another Slurm cannot start: lookups ask squeue (lookups.squeue).
    ("squeue", Check("jobinfo", "warn", f"{HELPER} cannot be run (status 127: ...)"), "warn", FALLS_BACK),
    # One that starts but cannot ask fails the lookups instead.
    ("squeue", Check("jobinfo", "warn", f"{HELPER} could not ask slurmctld (exit 1: ...)"), "warn",
     "do not fall back to squeue"),
    ("squeue", jobinfo_check({"SLURM_DSL_JOBINFO": "relative"}), "fail", "see the jobinfo check"),
    ("pyslurm", Check("jobinfo", "warn", f"{HELPER} cannot be run (status 127: ...)"), "ok", "not used"),
    (None, Check("jobinfo", "ok", f"{HELPER}: asks slurmctld for jobs"), "fail", "see the lookup check"),
])
def test_the_sweep_check_says_whether_a_sweep_falls_back_to_squeue(
    lookup: Optional[str], helper: Check, status: str, said: str
) -> None:
    check = sweep_check(lookup, helper)
    assert (check.name, check.status) == ("sweep", status) and said in check.detail, check
    # The command that builds the helper, wherever the sweep does not use one that answers.
    wanted = said in (FALLS_BACK, "do not fall back to squeue")
    assert (f"with contrib/jobinfo/build {HELPER}" in check.detail) is wanted, check


def test_the_hand_back_check_says_whether_absent_can_be_read() -> None:
    one = hand_back_check(False, NOTHING_READ)
    assert one.status == "ok" and "one controller" in one.detail
    blind = hand_back_check(True, NOTHING_READ)
    assert blind.status == "warn" and "no unknown operation will be read absent" in blind.detail
    primary = hand_back_check(True, Controllers("1:2:16#0", 0))
    assert primary.status == "ok" and "controller 0's" in primary.detail and "ago" not in primary.detail
    assert "in control for 40 s" in primary.detail
    assert "in control for 33 s" in hand_back_check(True, Controllers("1:2:16#0", 0, held_for=33.0)).detail
    handing = hand_back_check(True, Controllers("1:2:16#1", 1, (True,)))
    assert handing.status == "ok" and "a hand-back in progress" in handing.detail
    down = hand_back_check(True, Controllers("1:2:16#1", 1, (False,)))
    assert "refused" in down.detail


def test_a_slurm_major_not_tested_on_is_a_warning() -> None:
    """Issue 44 item 8: doctor says when the running Slurm is not in the support table."""
    from slurm_dsl.admin.doctor import OK, WARN, slurm_check

    for tested in ((22, 5), (24, 11), (26, 5)):
        assert slurm_check(tested, "/usr/bin/squeue").status == OK
    untested = slurm_check((25, 11), "/opt/slurm/bin/squeue")
    assert untested.status == WARN and "Slurm 25.11" in untested.detail and "22.05, 24.11, 26.05" in untested.detail


def test_doctor_says_where_it_looked_for_scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A site's Slurm in /opt/slurm-25.11/bin is found on PATH, and doctor says so; with none on
    PATH it names the default and the PATH it searched (docs/slurm-25.11.md §1)."""
    site = tmp_path / "opt" / "slurm" / "bin"
    write_fake(site, {}, default="echo 'Slurmctld(primary) at vm is UP'")
    monkeypatch.setenv("PATH", f"{site}{os.pathsep}{tmp_path / 'empty'}")
    assert run_checks(None, None, str(tmp_path / "l.sqlite3"))[0] == Check(
        "scontrol", OK, f"{site / 'scontrol'} (the first scontrol on PATH={site}{os.pathsep}{tmp_path / 'empty'})")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    first = run_checks(None, None, str(tmp_path / "l.sqlite3"))[0]
    assert first.name == "scontrol"
    assert f"(the default: no scontrol on PATH={tmp_path / 'empty'}" in first.detail
    assert run_checks(str(site / "scontrol"), None, str(tmp_path / "l.sqlite3"))[0].detail.endswith("(as configured)")
