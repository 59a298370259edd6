"""No symlink, hard-link or ownership games around root's files (the ledger, its directory, the
sweep lock, the metrics file), against real files.  The tests run as root; "another account" is
uid 65534 (nobody) via chown, or a directory anyone may write (0777, 0775, 1777).  The ledger as the
SlurmUser (uid 64030) runs in a forked child that has really become that uid."""

from __future__ import annotations

import importlib
import json
import os
import signal
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, Tuple
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.admin.files import directory_problem, path_directories
from slurm_dsl.core.model import LedgerError
from slurm_dsl.ledger import sqlite
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.sqlite import SweepLock
from tests.cli_run import cli
from tests.fakes import write_fake

NOBODY = 65534
SERVICE = 64030  # Debian's slurm account's uid; any uid but root's does
PRECIOUS = b"root:secret\n"


@contextmanager
def no_hang(seconds: int = 10) -> Iterator[None]:
    """Fail, rather than hang the suite, if the block blocks (a FIFO opened for reading would)."""

    def timed_out(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, timed_out)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def precious(path: Path) -> Path:
    """A root file with a secret, mode 0600: what a planted link would aim at."""
    path.write_bytes(PRECIOUS)
    path.chmod(0o600)
    return path


def untouched(path: Path) -> bool:
    st = path.lstat()
    return path.read_bytes() == PRECIOUS and stat.S_IMODE(st.st_mode) == 0o600 and stat.S_ISREG(st.st_mode)


# -- the sweep lock -------------------------------------------------------------------------------


def plant_symlink(lock: Path, victim: Path) -> None:
    lock.symlink_to(victim)


def plant_hard_link(lock: Path, victim: Path) -> None:
    os.link(victim, lock)


def plant_directory(lock: Path, victim: Path) -> None:
    lock.mkdir()


def plant_fifo(lock: Path, victim: Path) -> None:
    os.mkfifo(lock)


def plant_foreign_file(lock: Path, victim: Path) -> None:
    lock.write_text("")
    os.chown(lock, NOBODY, NOBODY)


LOCK_PLANTS: Dict[str, Tuple[Callable[[Path, Path], None], str]] = {
    "symlink": (plant_symlink, "is a symbolic link: refusing to follow it"),
    "hard link": (plant_hard_link, "has 2 hard links"),
    "directory": (plant_directory, "Is a directory"),
    "fifo": (plant_fifo, "is a FIFO, not a regular file"),
    "another account's file": (plant_foreign_file, f"is owned by uid {NOBODY}"),
}


@pytest.mark.parametrize("kind", list(LOCK_PLANTS))
def test_a_planted_sweep_lock_is_refused_before_anything_is_written(tmp_path: Path, kind: str) -> None:
    plant, message = LOCK_PLANTS[kind]
    ledger = tmp_path / "ledger.sqlite3"
    victim = precious(tmp_path / "shadow")
    plant(Path(f"{ledger}.sweep.lock"), victim)
    with no_hang(), pytest.raises(LedgerError, match=message) as info:
        with SweepLock(str(ledger)):
            pass
    assert f"sweep lock {ledger}.sweep.lock" in str(info.value) and info.value.path == str(ledger)
    assert untouched(victim)


@pytest.mark.parametrize("kind", list(LOCK_PLANTS))
def test_cli_sweep_with_a_planted_lock_says_why_and_exits_1(
    tmp_path: Path, kind: str
) -> None:
    plant, message = LOCK_PLANTS[kind]
    ledger = tmp_path / "ledger.sqlite3"
    victim = precious(tmp_path / "shadow")
    plant(Path(f"{ledger}.sweep.lock"), victim)
    fake = write_fake(tmp_path / "bin", {})
    with no_hang():
        code, out, err = cli(["sweep", "--ledger", str(ledger), "--scontrol", str(fake)])
    assert (code, out) == (1, "")
    assert err.startswith("slurm-dsl: ") and f"sweep lock {ledger}.sweep.lock" in err and message in err, err
    assert "Traceback" not in err
    assert untouched(victim)


# -- the ledger and its directory -----------------------------------------------------------------


def test_a_planted_ledger_symlink_is_refused_and_nothing_is_created_where_it_points(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    target = tmp_path / "elsewhere.sqlite3"
    ledger.symlink_to(target)
    with pytest.raises(LedgerError, match="is a symbolic link: refusing to follow it") as info:
        open_ledger(ledger)
    assert str(ledger) in str(info.value) and info.value.path == str(ledger)
    assert not target.exists() and not Path(f"{target}-wal").exists()
    ledger.unlink()
    ledger.symlink_to(precious(target))
    with pytest.raises(LedgerError, match="symbolic link"):
        open_ledger(ledger)
    assert untouched(target)


def test_a_hard_linked_ledger_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "empty"
    victim.write_bytes(b"")
    victim.chmod(0o600)
    os.link(victim, tmp_path / "ledger.sqlite3")
    with pytest.raises(LedgerError, match="has 2 hard links"):
        open_ledger(tmp_path / "ledger.sqlite3")
    assert victim.read_bytes() == b"", "SQLite never wrote a header into it"


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o1777, 0o720], ids=lambda m: f"{m:04o}")
def test_a_ledger_directory_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    with pytest.raises(LedgerError, match=r"group- or world-writable .*chmod go-w") as info:
        open_ledger(shared / "ledger.sqlite3")
    assert f"ledger directory {shared} is" in str(info.value) and f"mode {mode:04o}" in str(info.value)
    assert os.listdir(shared) == [], "refused before anything was created"


def test_a_ledger_directory_of_another_account_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(LedgerError, match=rf"ledger directory {theirs} is owned by uid {NOBODY}.*chown 0 "):
        open_ledger(theirs / "ledger.sqlite3")
    assert os.listdir(theirs) == []


def test_a_ledger_directory_to_be_made_under_another_accounts_is_refused_before_it_is_made(tmp_path: Path) -> None:
    """Issue 41 item 8: root made the missing directory under another account's, checked only that
    last name, and SQLite opened through a link the other account swapped in for it.  Every
    directory above the ledger's must be one only root (or this account) can change."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(LedgerError, match=rf"{theirs} above it is uid {NOBODY}'s.*swap the ledger's directory"):
        open_ledger(theirs / "made" / "deeper" / "ledger.sqlite3")
    assert os.listdir(theirs) == [], "refused before anything was made"
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp: nobody may rename root's entry there
    open_ledger(sticky / "mine" / "ledger.sqlite3").close()
    assert (sticky / "mine" / "ledger.sqlite3").exists()


def test_a_ledger_directory_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(LedgerError, match=r"ledger directory .*link is a symbolic link"):
        open_ledger(tmp_path / "link" / "ledger.sqlite3")
    assert os.listdir(real) == []


def test_a_ledger_file_of_another_account_or_others_can_write_is_refused(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    ledger.write_bytes(b"")
    os.chown(ledger, NOBODY, NOBODY)
    with pytest.raises(LedgerError, match=rf"ledger {ledger} is owned by uid {NOBODY}"):
        open_ledger(ledger)
    assert ledger.read_bytes() == b"", "not made into a database"
    os.chown(ledger, 0, 0)
    ledger.chmod(0o620)
    with pytest.raises(LedgerError, match=rf"group- or world-writable \(mode 0620\).*chmod 600 {ledger}"):
        open_ledger(ledger)
    ledger.chmod(0o600)
    open_ledger(ledger).close()


def test_a_relative_ledger_path_checks_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.chdir(shared)
    with pytest.raises(LedgerError, match=rf"ledger directory {shared} is group- or world-writable"):
        open_ledger("ledger.sqlite3")
    shared.chmod(0o700)
    with open_ledger("ledger.sqlite3") as ledger:
        assert ledger.schema_version() >= 1


def world_writable_directory(directory: Path) -> Path:
    directory.chmod(0o777)
    return directory / "ledger.sqlite3"


def foreign_ledger_file(directory: Path) -> Path:
    ledger = directory / "ledger.sqlite3"
    ledger.write_bytes(b"")
    os.chown(ledger, NOBODY, NOBODY)
    return ledger


def ledger_symlink(directory: Path) -> Path:
    ledger = directory / "ledger.sqlite3"
    ledger.symlink_to(directory / "x")
    return ledger


LEDGER_PLANTS: Dict[str, Tuple[Callable[[Path], Path], str]] = {
    "world-writable directory": (world_writable_directory, "chmod go-w"),
    "another account's file": (foreign_ledger_file, f"is owned by uid {NOBODY}"),
    "symlink": (ledger_symlink, "is a symbolic link"),
}


@pytest.mark.parametrize("kind", list(LEDGER_PLANTS))
def test_cli_refuses_a_ledger_another_account_could_swap(
    tmp_path: Path, kind: str
) -> None:
    plant, message = LEDGER_PLANTS[kind]
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    ledger = plant(directory)
    fake = write_fake(tmp_path / "bin", {})
    for argv in (["sweep"], ["hold", "7", "--timeout", "5"]):
        with no_hang():
            code, out, err = cli([*argv, "--ledger", str(ledger), "--scontrol", str(fake)])
        assert (code, out) == (1, ""), err
        assert err.startswith("slurm-dsl: ") and message in err and "Traceback" not in err, err
    assert not (directory / "x").exists()
    assert (tmp_path / "bin" / "calls.log").exists() is False, "no scontrol ran"


@pytest.mark.parametrize("kind", list(LEDGER_PLANTS))
def test_doctor_fails_a_ledger_another_account_could_swap(
    tmp_path: Path, kind: str
) -> None:
    plant, message = LEDGER_PLANTS[kind]
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    ledger = plant(directory)
    with no_hang():
        code, out, _ = cli(["doctor", "--json", "--scontrol", "/nonexistent/scontrol", "--squeue",
                            "/nonexistent/squeue", "--ledger", str(ledger)])
    assert code == 1
    (check,) = [c for c in map(json.loads, out.splitlines()) if c["check"] == "ledger"]
    assert check["status"] == "fail" and message in check["detail"], check


# -- the metrics file -----------------------------------------------------------------------------


def sweep_with_metrics(tmp_path: Path, metrics: Path) -> Tuple[int, str]:
    fake = write_fake(tmp_path / "bin", {})
    with no_hang():
        code, _, err = cli(["sweep", "--ledger", str(tmp_path / "ledger.sqlite3"), "--scontrol", str(fake),
                            "--metrics-file", str(metrics)])
    return code, err


def test_the_metrics_file_never_writes_through_a_planted_name(
    tmp_path: Path
) -> None:
    textfiles = tmp_path / "node-exporter"
    textfiles.mkdir()
    textfiles.chmod(0o1777)  # a directory another account can write
    metrics = textfiles / "slurm_dsl.prom"
    shadow, other = precious(tmp_path / "shadow"), precious(tmp_path / "other")
    planted_tmp = Path(f"{metrics}.tmp.{os.getpid()}")  # the name the sweep used to write through
    planted_tmp.symlink_to(shadow)
    metrics.symlink_to(other)
    old_umask = os.umask(0o077)
    try:
        code, err = sweep_with_metrics(tmp_path, metrics)
    finally:
        os.umask(old_umask)
    assert code == 0, err
    assert untouched(shadow) and untouched(other)
    st = metrics.lstat()
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644, "the symlink itself was replaced"
    assert "slurm_dsl_objects_not_clear 0" in metrics.read_text()
    assert planted_tmp.is_symlink() and os.readlink(planted_tmp) == str(shadow)
    assert sorted(os.listdir(textfiles)) == sorted([metrics.name, planted_tmp.name]), "no temp file left"


def test_a_metrics_file_that_cannot_be_written_is_a_clean_error_and_leaves_no_temp_file(
    tmp_path: Path
) -> None:
    textfiles = tmp_path / "node-exporter"
    (textfiles / "slurm_dsl.prom").mkdir(parents=True)
    code, err = sweep_with_metrics(tmp_path, textfiles / "slurm_dsl.prom")
    assert code == 1
    assert err.startswith(f"slurm-dsl: cannot write metrics file {textfiles / 'slurm_dsl.prom'}: "), err
    assert os.listdir(textfiles) == ["slurm_dsl.prom"]


def through(tmp_path: Path, kind: str) -> Tuple[Path, Path]:
    """A metrics path whose way down another account could change (issue 31), and the directory
    it would land in if that account had: a symlinked directory, a directory of nobody's above the
    file's own, a group-writable one above it."""
    real = tmp_path / "real"
    real.mkdir()
    if kind == "symlinked directory":
        (tmp_path / "link").symlink_to(real)
        return tmp_path / "link" / "slurm_dsl.prom", real
    above = tmp_path / "above"
    above.mkdir()
    below = above / "textfiles"
    below.mkdir()
    if kind == "nobody's directory above":
        os.chown(above, NOBODY, NOBODY)
    else:
        above.chmod(0o775)
    return below / "slurm_dsl.prom", below


@pytest.mark.parametrize("kind", ["symlinked directory", "nobody's directory above", "group-writable directory above"])
def test_a_metrics_path_another_account_could_redirect_is_refused(tmp_path: Path, kind: str) -> None:
    metrics, landing = through(tmp_path, kind)
    code, err = sweep_with_metrics(tmp_path, metrics)
    assert code == 1, err
    assert err.startswith(f"slurm-dsl: cannot write metrics file {metrics}: the directory "), err
    assert err.endswith("; nothing written\n") and err.count("\n") == 1, err
    assert os.listdir(landing) == []
    assert (tmp_path / "ledger.sqlite3").exists(), "the sweep did its work first: a metrics path never stops it"


def test_the_metrics_file_s_own_directory_may_be_another_account_s(tmp_path: Path) -> None:
    # node_exporter's textfile directory, shared with the sweep through an ACL (contrib/README.md):
    # no name in it is trusted, so its owner decides nothing.
    textfiles = tmp_path / "node-exporter"
    textfiles.mkdir()
    os.chown(textfiles, NOBODY, NOBODY)
    textfiles.chmod(0o777)
    code, err = sweep_with_metrics(tmp_path, textfiles / "slurm_dsl.prom")
    assert code == 0, err
    assert "slurm_dsl_objects_not_clear 0" in (textfiles / "slurm_dsl.prom").read_text()


def naive_directory_problem(uid: int, mode: int, euid: int, own: bool) -> bool:
    """contrib/README.md and the issue in their own words: no directory on the way is a symlink;
    every directory above the file's own is root's or this account's, and neither group nor others
    may write it unless it is sticky; the file's own directory just has to be a directory."""
    kind = mode & 0o170000
    if kind == 0o120000 or kind != 0o040000:
        return True
    if own:
        return False
    writable = bool(mode & 0o022)
    sticky = bool(mode & 0o1000)
    return uid not in (0, euid) or (writable and not sticky)


@given(uid=st.sampled_from([0, SERVICE, NOBODY]), euid=st.sampled_from([0, SERVICE]),
       kind=st.sampled_from([stat.S_IFDIR, stat.S_IFLNK, stat.S_IFREG]), perm=st.integers(0, 0o7777),
       own=st.booleans())
def test_the_metrics_path_rule_is_its_words(uid: int, euid: int, kind: int, perm: int, own: bool) -> None:
    refused = directory_problem(uid, kind | perm, euid, own=own) != ""
    assert refused == naive_directory_problem(uid, kind | perm, euid, own)


def test_the_directories_of_a_path_are_walked_from_the_root() -> None:
    assert path_directories("/var/lib/prometheus") == ["/", "/var", "/var/lib", "/var/lib/prometheus"]
    assert path_directories("/") == ["/"]


# -- as an account that is not root (issue 19: the SlurmUser) ---------------------------------------


@given(uid=st.sampled_from([0, SERVICE, NOBODY, 1000]), euid=st.sampled_from([0, SERVICE, NOBODY]),
       mode=st.integers(0, 0o7777))
def test_the_owner_rule_is_this_account_or_root_and_never_group_or_world_writable(
    uid: int, euid: int, mode: int
) -> None:
    # contract.md §9.1 in its own words: owned by the account that runs slurm-dsl or by root,
    # writable by neither group nor others.
    owner_ok = uid == euid or uid == 0
    writable_by_others = bool(mode & 0o020) or bool(mode & 0o002)
    found = os.stat_result((stat.S_IFDIR | mode, 1, 1, 2, uid, uid, 4096, 0, 0, 0))
    with mock.patch.object(os, "geteuid", return_value=euid):  # the module reads os.geteuid()
        problem = sqlite._not_private(found, "/var/lib/slurm-dsl", "go-w")
    assert (problem == "") == (owner_ok and not writable_by_others), problem
    if not owner_ok:
        assert problem.startswith(f"is owned by uid {uid}, not by ") and f"chown {euid} /var/lib/slurm-dsl" in problem
    elif writable_by_others:
        assert f"(mode {mode:04o})" in problem and "chmod go-w /var/lib/slurm-dsl" in problem


def as_account(uid: int, work: Callable[[], str]) -> str:
    """Run ``work`` in a forked child whose every uid and gid is ``uid`` (a real non-root
    process, not a patched geteuid) and return what it returned, or its error's text."""
    # What the work imports lazily is imported here, as root: the child, another account, may not
    # be able to read every directory on sys.path (a checkout under /root), and would otherwise
    # pass or fail by what an earlier test happened to import.
    for module in ("grp", "pwd"):
        importlib.import_module(module)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            try:
                said = work()
            except Exception as exc:  # reported to the parent, which asserts on it
                said = f"{type(exc).__name__}: {exc}"
            os.write(write_end, said.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(pid, 0)
    return said


def open_and_record(ledger: Path) -> Callable[[], str]:
    def work() -> str:
        with open_ledger(ledger) as store:
            return f"schema {store.schema_version()}"
    return work


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory the child account can reach (pytest's tmp_path is under root's 0700 one)."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="slurm-dsl-account-", dir="/tmp"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changes uid: needs root")


@needs_root
def test_the_slurm_user_creates_its_ledger_in_its_own_directory(shared_tmp: Path) -> None:
    state = shared_tmp / "state"
    state.mkdir(mode=0o700)
    os.chown(state, SERVICE, SERVICE)
    said = as_account(SERVICE, open_and_record(state / "ledger.sqlite3"))
    assert said.startswith("schema "), said
    st = (state / "ledger.sqlite3").stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (SERVICE, 0o600)


@needs_root
def test_the_slurm_user_is_told_when_roots_directory_holds_its_ledger(shared_tmp: Path) -> None:
    # A directory root made (0755, as a package does where there is no slurm account) passes the
    # owner rule, but SQLite must make the -wal and -shm files there: said, with the fix.
    state = shared_tmp / "state"
    state.mkdir(mode=0o755)
    said = as_account(SERVICE, open_and_record(state / "ledger.sqlite3"))
    assert said == (f"LedgerError: ledger directory {state} is not writable by uid {SERVICE} that runs"
                    f" slurm-dsl (the ledger's -wal, -shm and lock files are made there): chown {SERVICE}"
                    f" {state}, or run slurm-dsl as its owner"), said
    assert os.listdir(state) == []


@needs_root
def test_the_slurm_user_takes_the_sweep_lock_beside_its_ledger(shared_tmp: Path) -> None:
    state = shared_tmp / "state"
    state.mkdir(mode=0o700)
    os.chown(state, SERVICE, SERVICE)

    def sweep_lock() -> str:
        with SweepLock(str(state / "ledger.sqlite3")):
            return "locked"

    assert as_account(SERVICE, sweep_lock) == "locked"
    assert Path(f"{state}/ledger.sqlite3.sweep.lock").stat().st_uid == SERVICE


@needs_root
def test_the_slurm_user_refuses_another_accounts_directory_and_cannot_open_roots_ledger(
    shared_tmp: Path
) -> None:
    theirs = shared_tmp / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    said = as_account(SERVICE, open_and_record(theirs / "ledger.sqlite3"))
    assert f"ledger directory {theirs} is owned by uid {NOBODY}, not by uid {SERVICE} that runs slurm-dsl" \
        f" nor by root" in said and f"chown {SERVICE} {theirs}" in said, said
    assert os.listdir(theirs) == []
    # Root ran slurm-dsl once on the account's ledger path: the files are root's, 0600.
    roots = shared_tmp / "roots"
    roots.mkdir(mode=0o700)
    with open_ledger(roots / "ledger.sqlite3"):
        pass
    os.chown(roots, SERVICE, SERVICE)
    said = as_account(SERVICE, open_and_record(roots / "ledger.sqlite3"))
    assert "Permission denied" in said and f"uid {SERVICE} runs slurm-dsl" in said and "chown" in said, said


def owned(path: Path, text: str, uid: int, mode: int) -> Path:
    path.write_text(text)
    os.chown(path, uid, uid)
    path.chmod(mode)
    return path


@needs_root
def test_the_slurm_user_reads_an_option_file_of_its_own_or_roots_and_refuses_anothers(shared_tmp: Path) -> None:
    from slurm_dsl.ledger.mariadb_config import read_option_file

    text = "[client]\nuser=slurm_dsl\npassword=secret\nsocket=/run/mysqld/mysqld.sock\n"

    def read(path: Path) -> Callable[[], str]:
        return lambda: f"user {read_option_file(str(path)).user}"

    assert as_account(SERVICE, read(owned(shared_tmp / "own.cnf", text, SERVICE, 0o600))) == "user slurm_dsl"
    # Root's, 0400 and readable only by root: the owner rule lets it through, the kernel does not.
    said = as_account(SERVICE, read(owned(shared_tmp / "roots.cnf", text, 0, 0o400)))
    assert said.startswith("ConfigError: cannot open option file") and "Permission denied" in said, said
    said = as_account(SERVICE, read(owned(shared_tmp / "theirs.cnf", text, NOBODY, 0o644)))
    assert f"is owned by uid {NOBODY}, not by uid {SERVICE} that runs slurm-dsl nor by root" in said, said


@needs_root
def test_the_slurm_user_reads_a_config_file_of_roots_or_its_own_and_refuses_anothers(shared_tmp: Path) -> None:
    from slurm_dsl.run.config import read

    text = "[slurm-dsl]\ntimeout = 20\n"

    def load(path: Path) -> Callable[[], str]:
        return lambda: f"timeout {read(str(path), required=True)['timeout'][0]}"

    assert as_account(SERVICE, load(owned(shared_tmp / "roots.conf", text, 0, 0o644))) == "timeout 20"
    assert as_account(SERVICE, load(owned(shared_tmp / "own.conf", text, SERVICE, 0o644))) == "timeout 20"
    said = as_account(SERVICE, load(owned(shared_tmp / "theirs.conf", text, NOBODY, 0o644)))
    assert f"belongs to uid {NOBODY}, neither root nor this account (uid {SERVICE})" in said, said
