"""Root's commands on the service account's SQLite ledger run as that account, and on another
account's are refused (admin/account.py, docs/contract.md §9.1, issues 19 and 31): the decision,
pure, against the contract's words in a naive second implementation; the command line really
switching (a subprocess of root's on a directory of Debian's slurm account, uid 64030, the
SlurmUser a fake scontrol reports), its ledger files then that account's; and the ways it
refuses, with nothing run: a directory of an account that is not the service account (with a
forged ok row for a key: the attack of issue 31), a service account that cannot be told, one
without a passwd entry, a switch that fails."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.admin.account import MARIADB, SQLITE, Decision, Directory, Ledger, account_to_become
from slurm_dsl.core.model import Op, Outcome, Result
from slurm_dsl.ledger.choose import open_ledger
from tests.accounts import python_for, readable_package
from tests.cli_run import cli, cli_process
from tests.fakes import calls_made, write_fake, write_fake_squeue, write_job_state
from tests.ledger_backends import MariaDbServer
from tests.ledger_ops import begin_operation, finish_operation

REPO = Path(__file__).resolve().parents[2]
SERVICE = 64030  # Debian's slurm account
NOBODY = 65534


def naive(euid: int, ledgers: List[Ledger], service: Optional[int]) -> Decision:
    """The decision as the issues word it: only root changes.  An SQLite ledger in a directory
    that exists and is not a symlink, owned by an account U other than root: U must be the service
    account, or the command is refused (the first such U named); root becomes the service account
    only when every SQLite ledger is one of those, all of the service account's.  A MariaDB ledger
    has no directory and has no say (issue 31, item 8: ``ledger migrate`` between the package's
    ledger and MariaDB runs as the units would).  Anything else stays."""
    if euid != 0:
        return Decision()
    others = []
    sqlite = 0
    for ledger in ledgers:
        if ledger.backend == "mariadb":
            continue
        d = ledger.directory
        sqlite += 1
        is_dir = d is not None and (d.mode & 0o170000) == 0o040000  # a symlink's lstat is 0o120000
        if ledger.backend == "sqlite" and is_dir and d is not None and d.uid != 0:
            others.append(d.uid)
    for uid in others:
        if service is None or uid != service:
            return Decision(refuse=uid)
    if others and len(others) == sqlite:
        return Decision(become=service)
    return Decision()


kinds = st.sampled_from([stat.S_IFDIR, stat.S_IFLNK, stat.S_IFREG])
directories = st.builds(lambda uid, kind, perm: Directory(uid, kind | perm),
                        st.sampled_from([0, 1, 1000, SERVICE, NOBODY]), kinds, st.integers(0, 0o7777))
ledgers = st.one_of(
    st.builds(Ledger, st.just(SQLITE), st.none() | directories),
    st.builds(Ledger, st.just(MARIADB), st.none()),
)


@given(st.sampled_from([0, 1000, SERVICE]), st.lists(ledgers, max_size=3), st.sampled_from([None, 0, SERVICE, 1000]))
def test_the_decision_is_the_issues_words(euid: int, used: List[Ledger], service: Optional[int]) -> None:
    assert account_to_become(euid, used, service) == naive(euid, used, service)


def test_the_decision_on_the_packages_ledger() -> None:
    slurms = Ledger(SQLITE, Directory(SERVICE, stat.S_IFDIR | 0o700))
    assert account_to_become(0, [slurms], SERVICE) == Decision(become=SERVICE)
    assert account_to_become(SERVICE, [slurms], SERVICE) == Decision()  # already that account
    assert account_to_become(0, [slurms], None) == Decision(refuse=SERVICE)  # the service account unknown
    assert account_to_become(0, [slurms], 0) == Decision(refuse=SERVICE)  # SlurmUser=root: slurm is anyone
    alices = Ledger(SQLITE, Directory(1000, stat.S_IFDIR | 0o700))
    assert account_to_become(0, [alices], SERVICE) == Decision(refuse=1000)  # issue 31: never alice
    assert account_to_become(0, [slurms, alices], SERVICE) == Decision(refuse=1000)
    assert account_to_become(0, [Ledger(SQLITE, Directory(0, stat.S_IFDIR | 0o700))], SERVICE) == Decision()
    assert account_to_become(0, [Ledger(SQLITE, Directory(1000, stat.S_IFLNK | 0o777))], SERVICE) == Decision()
    assert account_to_become(0, [Ledger(MARIADB, None)], SERVICE) == Decision()
    # ledger migrate between the package's ledger and MariaDB: as its owner, as the units would.
    assert account_to_become(0, [slurms, Ledger(MARIADB, None)], SERVICE) == Decision(become=SERVICE)
    assert account_to_become(0, [Ledger(MARIADB, None), slurms], SERVICE) == Decision(become=SERVICE)
    assert account_to_become(0, [], SERVICE) == Decision()


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches accounts: needs root")


def service_account() -> pwd.struct_passwd:
    try:
        return pwd.getpwuid(SERVICE)
    except KeyError:
        pytest.skip(f"no account of uid {SERVICE} (Debian's slurm) on this machine")


@pytest.fixture
def slurms_directory() -> Iterator[Path]:
    """A ledger directory of the account's (0700) under a 0755 one it can reach."""
    entry = service_account()
    top = Path(tempfile.mkdtemp(prefix="slurm-dsl-account-", dir="/tmp"))
    top.chmod(0o755)
    state = top / "state"
    state.mkdir(mode=0o700)
    os.chown(state, entry.pw_uid, entry.pw_gid)
    try:
        yield state
    finally:
        shutil.rmtree(top)


SHOW_CONFIG = "SlurmUser               = slurm(64030)\nAccountingStorageType   = accounting_storage/none\n"


@needs_root
def test_root_on_the_slurm_users_ledger_runs_as_slurm(slurms_directory: Path) -> None:
    entry = service_account()
    python = python_for(entry.pw_name)
    bin_dir = slurms_directory.parent / "bin"
    fake = write_fake(bin_dir, {}, default="case $1 in ping) echo 'Slurmctld(primary) at vm is UP' ;;"
                      f" show) printf '%s' '{SHOW_CONFIG}' ;; esac")
    bin_dir.chmod(0o777)  # the fake's calls.log, written as the account
    # ... and first as root: root asks the fake's show config for the SlurmUser before it switches.
    (bin_dir / "calls.log").touch(mode=0o666)
    (bin_dir / "calls.log").chmod(0o666)
    squeue = write_fake_squeue(slurms_directory.parent / "sq", "")
    squeue.parent.chmod(0o777)  # its log, too
    ledger = slurms_directory / "ledger.sqlite3"
    config = slurms_directory.parent / "slurm-dsl.conf"  # none of the machine's
    config.write_text("[slurm-dsl]\n")
    # The checkout may be where the account cannot read it (a clone under /root): a copy it can.
    env = {**os.environ, "PYTHONPATH": str(readable_package(slurms_directory.parent))}
    for name in ("SLURM_DSL_LEDGER", "SLURM_DSL_SQUEUE", "SLURM_DSL_SCONTROL"):
        env.pop(name, None)

    def slurm_dsl(*argv: str, scontrol: Path = fake) -> subprocess.CompletedProcess[str]:
        return subprocess.run([python, "-m", "slurm_dsl", *argv, "--ledger", str(ledger), "--scontrol", str(scontrol),
                               "--config", str(config)],
                              capture_output=True, text=True, cwd="/", env=env, timeout=60, check=False)

    held = slurm_dsl("-v", "hold", "7", "--json", "--timeout", "10", "--squeue", str(squeue))
    assert held.returncode == 0, held.stdout + held.stderr
    assert [(r["job_id"], r["op"], r["result"]) for r in map(json.loads, held.stdout.splitlines())] == [
        ("7", "hold", "ok")]
    assert (f"slurm-dsl: running as {entry.pw_name} (uid {SERVICE}), the owner of the ledger directory"
            f" {slurms_directory}\n") in held.stderr
    assert calls_made(fake) == ["show config", "hold 7"]
    # The ledger's files, -wal and -shm whenever SQLite left them, are the account's.
    files = sorted(os.listdir(slurms_directory))
    assert "ledger.sqlite3" in files and set(files) <= {"ledger.sqlite3", "ledger.sqlite3-wal",
                                                        "ledger.sqlite3-shm"}, files
    assert {name: os.stat(slurms_directory / name).st_uid for name in files} == dict.fromkeys(files, SERVICE)

    history = slurm_dsl("history", "7", "--json")
    assert history.returncode == 0 and '"op": "hold"' in history.stdout, history.stdout + history.stderr
    assert f"uid {SERVICE} ({entry.pw_name})" in history.stdout, history.stdout  # who ran it

    doctor = slurm_dsl("doctor", "--json", "--lookup", "squeue", "--squeue", str(squeue))
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    assert checks["ledger"]["status"] == "ok", checks["ledger"]
    assert checks["caller"]["status"] == "ok", checks["caller"]
    assert checks["caller"]["detail"].startswith(f"uid {SERVICE} ({entry.pw_name}) is slurm.conf's SlurmUser")
    files = os.listdir(slurms_directory)
    assert {name: os.stat(slurms_directory / name).st_uid for name in files} == dict.fromkeys(files, SERVICE)

    # A lab whose slurmctld runs as root (SlurmUser=root): slurm is just another account, whom root
    # never becomes (issue 31): refused, nothing run.
    roots = write_fake(slurms_directory.parent / "bin-root", {}, default="case $1 in ping) echo 'Slurmctld(primary)"
                       " at vm is UP' ;; show) printf '%s' 'SlurmUser = root(0)\n' ;; esac")
    doctor = slurm_dsl("doctor", "--json", "--lookup", "squeue", "--squeue", str(squeue), scontrol=roots)
    assert (doctor.returncode, doctor.stdout) == (1, ""), doctor.stderr
    assert doctor.stderr.startswith(f"slurm-dsl: the ledger directory {slurms_directory} belongs to uid {SERVICE}"
                                    f" ({entry.pw_name}), not to the service account, root (uid 0, slurm.conf's"
                                    " SlurmUser): "), doctor.stderr
    # Unless the config file names slurm the service account: then root's commands run as slurm,
    # and the fix is how to act as root, not "run as root".
    config.write_text(f"[slurm-dsl]\nservice_account = {entry.pw_name}\n")
    doctor = slurm_dsl("doctor", "--json", "--lookup", "squeue", "--squeue", str(squeue), scontrol=roots)
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    assert doctor.returncode == 1 and checks["caller"]["status"] == "fail", checks["caller"]
    assert checks["caller"]["detail"].endswith(
        f"root's commands run as {entry.pw_name} because the ledger directory {slurms_directory} is its; to act as"
        f" root, make it root's (chown -R root:root {slurms_directory}, while no sweep runs) and run the units as"
        " root (a systemd drop-in with User=root and Group=root: README.Debian)"), checks["caller"]
    assert checks["ledger"]["status"] == "ok", checks["ledger"]


@needs_root
def test_the_documented_mariadb_layout_serves_root_the_units_account_and_ledger_migrate(
    slurms_directory: Path, mariadb_server: MariaDbServer
) -> None:
    """contrib/README.md §5 (issue 31, item 8): one option file, root's and readable by the units'
    group (root:slurm 0640), on the lab's real MariaDB: root's hold reads it as root; the account
    the units run as reads it for history and a sweep; ``ledger migrate`` as root from the
    package's SQLite ledger (a directory of slurm's) runs as slurm and reads it too.  Root's 0600
    file, the old advice, shuts the account out, and its error says the layout."""
    entry = service_account()
    top = slurms_directory.parent
    python = python_for(entry.pw_name)
    env = {**os.environ, "PYTHONPATH": str(readable_package(top, "pymysql"))}
    # slurmctld's StateSaveLocation, one the account can look into, as the SlurmUser can its own.
    state = top / "statesave"
    state.mkdir(mode=0o755)
    write_job_state(state, int(time.time()))
    env["SLURM_DSL_STATE_SAVE_LOCATION"] = str(state)
    for name in ("SLURM_DSL_LEDGER", "SLURM_DSL_SQUEUE", "SLURM_DSL_SCONTROL"):
        env.pop(name, None)
    fake = write_fake(top / "bin", {}, default="case $1 in ping) echo 'Slurmctld(primary) at vm is UP' ;; esac")
    # The two jobs the holds name, held: the sweep reads acknowledged holds again (docs/contract.md
    # §13.4), and a "gone" would not count from this account, which may not see every job (§9.3).
    squeue = write_fake_squeue(top / "sq", "7|PENDING|0|0|0|JobHeldAdmin\n8|PENDING|0|0|0|JobHeldAdmin")
    for log_dir in (fake.parent, squeue.parent):
        log_dir.chmod(0o777)  # the fakes' logs, written as the account too
    config = top / "slurm-dsl.conf"
    # The service account named in the file (root's commands switch to it only: issue 31, item 6).
    config.write_text(f"[slurm-dsl]\nscontrol = {fake}\nsqueue = {squeue}\nlookup = squeue\n"
                      f"service_account = {entry.pw_name}\n")
    config.chmod(0o644)
    cnf = top / "ledger.cnf"
    cnf.write_bytes(Path(mariadb_server.option_file).read_bytes())
    os.chown(cnf, 0, entry.pw_gid)
    cnf.chmod(0o640)
    database = mariadb_server.create()
    url = f"mariadb://localhost/{database}?option_file={cnf}"

    def slurm_dsl(*argv: str, account: Optional[str] = None) -> subprocess.CompletedProcess[str]:
        command = [python, "-m", "slurm_dsl", "--config", str(config), *argv]
        if account is not None:
            command = ["runuser", "-u", account, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, cwd="/", env=env, timeout=60, check=False)

    try:
        # The package's SQLite ledger, slurm's (root's hold on it runs as slurm), moved over by root.
        sqlite = slurms_directory / "ledger.sqlite3"
        held = slurm_dsl("hold", "7", "--timeout", "10", "--ledger", str(sqlite))
        assert held.returncode == 0 and os.stat(sqlite).st_uid == SERVICE, held.stdout + held.stderr
        moved = slurm_dsl("-v", "ledger", "migrate", "--from", f"sqlite:{sqlite}", "--to", url)
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert f"running as {entry.pw_name} (uid {SERVICE}), the owner of the ledger directory" in moved.stderr

        # Root's own command on the MariaDB ledger: as root, reading the same file.
        held = slurm_dsl("-v", "hold", "8", "--timeout", "10", "--json", "--ledger", url)
        assert held.returncode == 0, held.stdout + held.stderr
        assert "running as" not in held.stderr
        assert [json.loads(line)["result"] for line in held.stdout.splitlines()] == ["ok"]

        # The units' account: both holds in the history (the migrated one and root's), and a sweep.
        for job, who in (("7", f"uid {SERVICE} ({entry.pw_name})"), ("8", "uid 0 (root)")):
            history = slurm_dsl("history", job, "--json", "--ledger", url, account=entry.pw_name)
            assert history.returncode == 0 and '"op": "hold"' in history.stdout, history.stdout + history.stderr
            assert who in history.stdout, history.stdout
        swept = slurm_dsl("sweep", "--ledger", url, account=entry.pw_name)
        assert swept.returncode == 0, swept.stdout + swept.stderr

        # Root's 0600 file: root reads it, the units' account cannot, and is told the layout.
        cnf.chmod(0o600)
        os.chown(cnf, 0, 0)
        assert slurm_dsl("ledger", "status", "--ledger", url).returncode == 0
        refused = slurm_dsl("ledger", "status", "--ledger", url, account=entry.pw_name)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert refused.stderr == (
            f"slurm-dsl: cannot open option file {cnf}: Permission denied (uid {SERVICE} runs slurm-dsl): make it"
            f" readable by this account and root alike: chown root:{grp.getgrgid(entry.pw_gid).gr_name} {cnf} &&"
            f" chmod 640 {cnf} (root's, and readable by the units' group: contrib/README.md §5)\n")
    finally:
        mariadb_server.drop(database)


def free_uid() -> int:
    for uid in range(4_242_424, 4_242_524):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    pytest.skip("no uid without a passwd entry")


def show_config(slurm_user: str) -> str:
    """A fake scontrol's default arm: ``show config`` names ``slurm_user``, every other call succeeds."""
    return f"case $1 in show) printf 'SlurmUser               = %s\\n' '{slurm_user}' ;; esac"


def site_config(tmp_path: Path, *lines: str) -> Path:
    config = tmp_path / "slurm-dsl.conf"
    config.write_text("[slurm-dsl]\n" + "".join(line + "\n" for line in lines))
    config.chmod(0o644)
    return config


@needs_root
def test_a_service_account_without_a_passwd_entry_is_refused_with_nothing_run(tmp_path: Path) -> None:
    uid = free_uid()
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, uid, uid)
    fake = write_fake(tmp_path / "bin", {}, default=show_config(f"ghost({uid})"))
    code, out, err = cli(["hold", "7", "--timeout", "5", "--ledger", str(state / "ledger.sqlite3"),
                          "--scontrol", str(fake)])
    assert (code, out) == (1, ""), err
    assert err == (f"slurm-dsl: the ledger directory {state} belongs to the service account, ghost (uid {uid},"
                   " slurm.conf's SlurmUser), which has no passwd entry: root's commands on its ledger run as that"
                   f" account, and there is none; chown root {state}, or use another ledger path (--ledger); nothing"
                   " ran\n")
    assert os.geteuid() == 0 and os.listdir(state) == [] and calls_made(fake) == ["show config"]


def forged_ledger(tmp_path: Path) -> Path:
    """Issue 31's attack: a ledger in a directory of another account's (nobody), holding an ok row
    that account wrote for job 1's hold under the key nightly-7."""
    state = tmp_path / "alice"
    state.mkdir(mode=0o700)
    ledger = state / "ledger.sqlite3"
    with open_ledger(str(ledger)) as opened:
        op_id = begin_operation(opened, "1", Op.HOLD, "0" * 32, time.time() - 60, key="nightly-7")
        finish_operation(opened, op_id, Outcome(Op.HOLD, "1", Result.OK, None), b"", time.time() - 59)
    for path in (state, *state.iterdir()):
        os.chown(path, NOBODY, NOBODY)
    return ledger


@needs_root
@pytest.mark.parametrize("told", ["slurm.conf's SlurmUser", "service_account", "unknown"])
def test_root_never_becomes_another_account_that_owns_a_ledger_directory(tmp_path: Path, told: str) -> None:
    ledger = forged_ledger(tmp_path)
    before = {name: os.stat(ledger.parent / name).st_mtime_ns for name in os.listdir(ledger.parent)}
    fake = write_fake(tmp_path / "bin", {}, default=show_config("slurm(64030)" if told != "unknown" else "(null)"))
    extra = ["service_account = root"] if told == "service_account" else []
    config = site_config(tmp_path, *extra)
    # A process of its own: were root to become nobody, this test's process must not.
    done = cli_process(["hold", "1", "--key", "nightly-7", "--timeout", "5", "--ledger", str(ledger),
                        "--scontrol", str(fake), "--config", str(config)],
                       env={**os.environ, "PYTHONPATH": str(REPO)}, cwd="/", timeout=60)
    code, out, err = done.returncode, done.stdout, done.stderr
    assert (code, out) == (1, ""), out + err
    service = {"slurm.conf's SlurmUser": "slurm (uid 64030, slurm.conf's SlurmUser)",
               "service_account": f"root (uid 0, service_account in {config})",
               "unknown": f"unknown: {fake} show config named no SlurmUser (exit 0); set service_account = NAME in"
                          f" {config}"}[told]
    assert err == (f"slurm-dsl: the ledger directory {ledger.parent} belongs to uid {NOBODY}"
                   f" ({pwd.getpwuid(NOBODY).pw_name}), not to the service account, {service}: root's commands run as"
                   " the service account only, never as whoever owns a ledger directory (that account could have"
                   " written the ledger root would trust); use a ledger of root's or the service account's (--ledger,"
                   f" or ledger in {config}), or if this is the service account's ledger, chown -R it to that"
                   " account; nothing ran\n")
    assert os.geteuid() == 0
    assert calls_made(fake) == ([] if told == "service_account" else ["show config"])  # no hold ran
    assert {name: os.stat(ledger.parent / name).st_mtime_ns for name in os.listdir(ledger.parent)} == before


class Switch:
    """os.initgroups, setgid and setuid, recorded and never done (this process stays root)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, failing: Optional[str] = None) -> None:
        self.done: List[str] = []
        for name in ("initgroups", "setgid", "setuid"):
            def call(*args: object, name: str = name) -> None:
                self.done.append(name)
                if name == failing:
                    raise PermissionError(1, "Operation not permitted")
            monkeypatch.setattr(os, name, call)


@needs_root
def test_a_switch_that_fails_exits_1_with_nothing_run(
    slurms_directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = service_account()
    switch = Switch(monkeypatch, failing="setgid")
    fake = write_fake(slurms_directory.parent / "bin", {})
    config = site_config(slurms_directory.parent, f"service_account = {entry.pw_name}")
    code, out, err = cli(["hold", "7", "--timeout", "5", "--ledger", str(slurms_directory / "ledger.sqlite3"),
                          "--scontrol", str(fake), "--config", str(config)])
    assert (code, out) == (1, ""), err
    assert err == (f"slurm-dsl: cannot run as {entry.pw_name} (uid {SERVICE}), the owner of the ledger directory"
                   f" {slurms_directory}: Operation not permitted; nothing ran\n")
    assert switch.done == ["initgroups", "setgid"]
    assert os.listdir(slurms_directory) == [] and calls_made(fake) == []


@needs_root
def test_an_account_that_cannot_read_python_is_said_before_anything_runs(
    slurms_directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = service_account()
    switch = Switch(monkeypatch)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    fake = write_fake(slurms_directory.parent / "bin", {})
    config = site_config(slurms_directory.parent, f"service_account = {entry.pw_name}")
    code, out, err = cli(["hold", "7", "--timeout", "5", "--ledger", str(slurms_directory / "ledger.sqlite3"),
                          "--scontrol", str(fake), "--config", str(config)])
    assert (code, out) == (1, ""), err
    assert err.startswith(f"slurm-dsl: running as {entry.pw_name} (uid {SERVICE}), the owner of the ledger"
                          f" directory {slurms_directory}, which cannot read {os.path.dirname(os.__file__)}:"), err
    assert switch.done == ["initgroups", "setgid", "setuid"]
    assert os.listdir(slurms_directory) == [] and calls_made(fake) == []


@needs_root
@pytest.mark.parametrize("argv", [["config"], ["script", "hold", "7", "--timeout", "5"]])
def test_commands_without_a_ledger_do_not_switch(
    slurms_directory: Path, monkeypatch: pytest.MonkeyPatch, argv: List[str]
) -> None:
    switch = Switch(monkeypatch)
    code, _, err = cli([*argv, "--ledger", str(slurms_directory / "ledger.sqlite3")])
    assert code == 0 and switch.done == [], err


def test_the_help_and_so_the_man_page_say_it() -> None:
    from slurm_dsl.admin.parser import build_parser

    top = " ".join(build_parser().format_help().split())
    assert "Root's commands on an SQLite ledger in a directory of the service account's (the package's" in top
    assert "the service account is the config file's service_account, else slurm.conf's SlurmUser" in top
    assert "A ledger directory of any other account is refused" in top
