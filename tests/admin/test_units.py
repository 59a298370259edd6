"""The systemd units of contrib/systemd, and the package's maintainer scripts that set them up.

The units never make or chown the ledger's directory themselves (issue 19).  The postinst
(debian/slurm-dsl.postinst) makes them run as slurm.conf's SlurmUser, through a drop-in, and
makes /var/lib/slurm-dsl that account's (issue 31, item 7); the postrm's purge removes
/etc/slurm-dsl and the drop-ins and keeps a ledger.  The scripts run here for real, as root, in
a directory standing for the machine's root (``DPKG_ROOT``, as dpkg gives it; the machine's own
/var/lib, /etc/systemd and /etc/slurm-dsl hidden in a mount namespace), with a fake ``scontrol``
and slurm.conf; tests/integration/test_package_live.py runs them through dpkg on a
lab of each kind.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
POSTINST = ROOT / "debian" / "slurm-dsl.postinst"
POSTRM = ROOT / "debian" / "slurm-dsl.postrm"
UNITS = ("slurm-dsl-sweep", "slurm-dsl-prune")
SLURM = 64030  # Debian's slurm account
SLURM_ASK = 5  # the postinst's bound on scontrol show config


@pytest.mark.parametrize("name", ["slurm-dsl-sweep.service", "slurm-dsl-prune.service"])
def test_the_services_run_as_the_slurm_user_and_never_chown_the_ledger(name: str) -> None:
    lines = (ROOT / "contrib" / "systemd" / name).read_text().splitlines()
    assert "User=slurm" in lines and "Group=slurm" in lines
    # StateDirectory= with User= chowns an existing directory to that user at each start: an
    # existing ledger of root's would change hands behind the admin's back.
    assert not [line for line in lines if line.startswith(("StateDirectory", "DynamicUser"))]
    assert "ReadWritePaths=/var/lib/slurm-dsl" in " ".join(lines)


class Machine(NamedTuple):
    """What the maintainer scripts see: ``root`` for DPKG_ROOT, a fake scontrol in ``bin``."""

    root: Path
    bin: Path

    @property
    def state(self) -> Path:
        return self.root / "var" / "lib" / "slurm-dsl"

    def dropin(self, unit: str) -> Path:
        return self.root / "etc" / "systemd" / "system" / f"{unit}.service.d" / "10-slurm-user.conf"


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Machine]:
    if os.geteuid() != 0:
        pytest.skip("the maintainer scripts make and chown root's directories: root only")
    try:
        pwd.getpwuid(SLURM)
    except KeyError:
        pytest.skip(f"no account of uid {SLURM} (Debian's slurm) on this machine")
    (tmp_path / "root" / "var" / "lib").mkdir(parents=True)
    (tmp_path / "bin").mkdir()
    yield Machine(tmp_path / "root", tmp_path / "bin")


ANSWERS = "answers"  # scontrol show config prints the SlurmUser line below
DOWN = "down"  # scontrol cannot reach slurmctld
HANGS = "hangs"  # scontrol never answers
MISSING = "missing"  # no scontrol at all


# The machine's own directories the scripts would change, were they to forget DPKG_ROOT: hidden
# under empty ones in a mount namespace of the script's own, so that a test never changes them.
HIDDEN = ("/var/lib", "/etc/systemd", "/etc/slurm-dsl")


def propagation() -> str:
    """unshare's --propagation: private, so that the tmpfs mounts stay in the namespace; in a
    chroot, whose root is no mount point (contrib/lab/chroot's), that cannot be set, and the
    mounts there must be private already."""
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    if any(line.split()[4] == "/" for line in mounts):
        return "private"
    assert not [line for line in mounts if " shared:" in line], "a shared mount in a chroot: not hiding anything"
    return "unchanged"


def in_sandbox(argv: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess[str]:
    hide = " && ".join(f"{{ [ ! -d {path} ] || mount -t tmpfs -o mode=0755 tmpfs {path}; }}" for path in HIDDEN)
    return subprocess.run(["unshare", "--mount", f"--propagation={propagation()}", "--", "sh", "-c",
                           f'{hide} && exec "$@"', "sh", *argv], capture_output=True, text=True, env=env, timeout=60,
                          check=False)


def configure(machine: Machine, slurmctld: str = MISSING, shown: str = "", slurm_conf: Optional[str] = None,
              previous: str = "") -> subprocess.CompletedProcess[str]:
    """``postinst configure PREVIOUS`` against ``machine``: its scontrol as ``slurmctld`` says
    (``shown``, the SlurmUser it prints), its slurm.conf ``slurm_conf`` (None: there is none)."""
    fake = machine.bin / "scontrol"
    fake.unlink(missing_ok=True)
    body = {ANSWERS: f"printf 'ClusterName             = lab\\nSlurmUser               = {shown}\\n'",
            DOWN: "echo 'slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)' >&2; exit 1",
            HANGS: f"exec sleep 60 # {machine.bin}"}.get(slurmctld)
    if body is not None:
        fake.write_text(f"#!/bin/sh\n[ \"$*\" = 'show config' ] || exit 2\n{body}\n")
        fake.chmod(0o755)
    conf = machine.root / "etc" / "slurm" / "slurm.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.unlink(missing_ok=True)
    if slurm_conf is not None:
        conf.write_text(slurm_conf)
    env = {"PATH": f"{machine.bin}:/usr/sbin:/usr/bin:/sbin:/bin", "DPKG_ROOT": str(machine.root),
           "SLURM_CONF": str(conf), "LC_ALL": "C.UTF-8"}
    return in_sandbox(["sh", str(POSTINST), "configure", previous], env)


def dropin_for(unit: str, user: str, group: str) -> str:
    return ("# Written by slurm-dsl's postinst at each configure (README.Debian): the units run as\n"
            "# slurm.conf's SlurmUser, which may act on every job.  Removed when the package is purged.\n"
            f"# To run them as another account: systemctl edit {unit}.service (override.conf comes after it).\n"
            f"[Service]\nUser={user}\nGroup={group}\n")


def runs_as(machine: Machine) -> Optional[str]:
    """The one account both drop-ins name (User= and Group= its own group), checked against
    the exact text; None if there is none."""
    found = set()
    for unit in UNITS:
        path = machine.dropin(unit)
        if not path.exists():
            return None
        fields = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
        group = "root" if fields["User"] == "root" else pwd.getpwnam(fields["User"]).pw_name
        assert path.read_text() == dropin_for(unit, fields["User"], group), path.read_text()
        found.add(fields["User"])
    assert len(found) == 1, found
    return found.pop()


def owner(path: Path) -> int:
    return path.lstat().st_uid


def name_of(uid: int) -> str:
    return pwd.getpwuid(uid).pw_name


@pytest.mark.parametrize(
    ("slurmctld", "shown", "slurm_conf", "expected"),
    [
        (ANSWERS, "root(0)", None, 0),  # the host's lab, and many sites
        (ANSWERS, "slurm(64030)", None, SLURM),  # Debian's slurm.conf, trixie's lab
        (ANSWERS, "root(0)", "SlurmUser=slurm\n", 0),  # the running slurmctld's wins
        (DOWN, "", "SlurmUser=slurm\n", SLURM),
        (DOWN, "", "ClusterName=lab\n  slurmuser = \"slurm\"  # the controller's account\n", SLURM),
        (DOWN, "", "ClusterName=lab SlurmUser=slurm SlurmdUser=root\n", SLURM),
        (DOWN, "", "SlurmUser=slurm\nSlurmUser=root\n", 0),  # the last one counts, as in Slurm
        (DOWN, "", "#SlurmUser=slurm\nClusterName=lab\n", 0),  # absent: Slurm's default, root
        (DOWN, "", None, 0),
        (MISSING, "", "SlurmUser=slurm\n", SLURM),
        (MISSING, "", None, 0),
    ],
)
def test_a_new_install_makes_the_directory_and_the_units_the_slurm_users(
    machine: Machine, slurmctld: str, shown: str, slurm_conf: Optional[str], expected: int
) -> None:
    done = configure(machine, slurmctld, shown, slurm_conf)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    st = machine.state.lstat()
    assert (st.st_uid, st.st_gid, oct(st.st_mode)) == (expected, pwd.getpwuid(expected).pw_gid, oct(0o40700))
    assert runs_as(machine) == name_of(expected)
    # An admin's `systemctl edit` (override.conf) is read after the drop-in, so it wins.
    assert sorted([machine.dropin(UNITS[0]).name, "override.conf"])[-1] == "override.conf"


def test_a_slurm_user_without_an_account_here_is_root_and_said(machine: Machine) -> None:
    done = configure(machine, ANSWERS, "nosuchaccount(4242)")
    assert done.returncode == 0
    assert done.stderr == ("slurm-dsl: slurm.conf's SlurmUser 'nosuchaccount' has no account here: the units run as"
                           " root\n")
    assert owner(machine.state) == 0 and runs_as(machine) == "root"


def test_a_slurmctld_that_does_not_answer_holds_the_install_up_for_a_bounded_time(machine: Machine) -> None:
    started = time.monotonic()
    done = configure(machine, HANGS, slurm_conf="SlurmUser=slurm\n")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert SLURM_ASK <= took < SLURM_ASK + 3, took  # then slurm.conf decides
    assert owner(machine.state) == SLURM and runs_as(machine) == "slurm"


def ledger_files(machine: Machine, uid: int) -> None:
    """What a ledger's first operations leave in the directory, as ``uid``'s."""
    for name in ("ledger.sqlite3", "ledger.sqlite3-wal", "ledger.sqlite3-shm", "ledger.sqlite3.sweep.lock"):
        path = machine.state / name
        path.write_bytes(b"")
        path.chmod(0o600)
        os.chown(path, uid, pwd.getpwuid(uid).pw_gid)


def owners(machine: Machine) -> set:  # type: ignore[type-arg]
    return {owner(machine.state), *(owner(f) for f in machine.state.iterdir())}


def test_when_the_slurm_user_changes_a_configure_hands_the_directory_and_its_ledger_over(machine: Machine) -> None:
    assert configure(machine, ANSWERS, "slurm(64030)").returncode == 0
    ledger_files(machine, SLURM)
    # The site runs slurmctld as root now (or the package is reconfigured on such a cluster).
    done = configure(machine, ANSWERS, "root(0)", previous="0.1.0")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("slurm-dsl: /var/lib/slurm-dsl and its files were slurm's and are now root's:"
                           " slurm.conf's SlurmUser is root\n")
    assert owners(machine) == {0} and runs_as(machine) == "root"
    # And back: the previous account is the drop-in's.
    done = configure(machine, DOWN, slurm_conf="SlurmUser=slurm\n", previous="0.1.0")
    assert done.returncode == 0, done.stderr
    assert owners(machine) == {SLURM} and runs_as(machine) == "slurm"
    assert {oct(f.stat().st_mode & 0o777) for f in machine.state.iterdir()} == {oct(0o600)}
    assert oct(machine.state.stat().st_mode & 0o7777) == oct(0o700)
    # Nothing changed: nothing said.
    assert configure(machine, DOWN, slurm_conf="SlurmUser=slurm\n", previous="0.1.0").stderr == ""


def test_an_upgrade_from_before_the_drop_in_on_a_slurm_user_root_cluster_gives_the_ledger_to_root(
    machine: Machine
) -> None:
    """The case of the issue: the old postinst made the directory slurm's because an account
    slurm exists, on a cluster whose SlurmUser is root; the units ran as slurm (their own User=)."""
    machine.state.mkdir(mode=0o700)
    os.chown(machine.state, SLURM, SLURM)
    ledger_files(machine, SLURM)
    done = configure(machine, ANSWERS, "root(0)", previous="0.1.0")
    assert done.returncode == 0, done.stderr
    assert owners(machine) == {0} and runs_as(machine) == "root"


def test_a_new_install_over_a_directory_it_did_not_make_leaves_it_and_says_how(machine: Machine) -> None:
    machine.state.mkdir(mode=0o700)
    os.chown(machine.state, SLURM, SLURM)
    ledger_files(machine, SLURM)
    done = configure(machine, ANSWERS, "root(0)")  # no previous version: not ours to change
    assert done.returncode == 0
    assert done.stderr == (f"slurm-dsl: /var/lib/slurm-dsl is uid {SLURM}'s, not root's (slurm.conf's SlurmUser, whom"
                           " the units run as): left as it is; to give it to root, while no sweep runs: chown"
                           " root:root /var/lib/slurm-dsl /var/lib/slurm-dsl/ledger.sqlite3* (README.Debian)\n")
    assert owners(machine) == {SLURM} and runs_as(machine) == "root"


@pytest.mark.parametrize("plant", ["symlink", "hard link", "directory", "another's file", "a file of another name"])
def test_anything_another_account_could_have_planted_stops_the_hand_over(machine: Machine, plant: str) -> None:
    assert configure(machine, ANSWERS, "slurm(64030)").returncode == 0
    ledger_files(machine, SLURM)
    target = machine.root / "shadow"
    target.write_text("root's\n")
    planted = machine.state / "ledger.sqlite3-shm"  # one of the names the ledger makes
    planted.unlink()
    if plant == "a file of another name":
        planted = machine.state / "ledger.sqlite3-journal"
        planted.write_text("")
        os.chown(planted, SLURM, SLURM)
    elif plant == "symlink":
        planted.symlink_to(target)
        os.lchown(planted, SLURM, SLURM)
    elif plant == "hard link":
        os.link(target, planted)
        os.chown(target, SLURM, SLURM)  # so that it passes as the account's own file
    elif plant == "directory":
        planted.mkdir()
        os.chown(planted, SLURM, SLURM)
    elif plant == "another's file":
        planted.write_text("")
    done = configure(machine, ANSWERS, "root(0)", previous="0.1.0")
    assert done.returncode == 0
    assert "left as it is; to give it to root, while no sweep runs: chown root:root /var/lib/slurm-dsl" in done.stderr
    assert owner(machine.state) == SLURM and owner(machine.state / "ledger.sqlite3") == SLURM
    assert owner(target) == (SLURM if plant == "hard link" else 0)


def test_a_running_sweep_keeps_the_previous_account_until_a_reconfigure(machine: Machine) -> None:
    assert configure(machine, ANSWERS, "slurm(64030)").returncode == 0
    ledger_files(machine, SLURM)
    with open(machine.state / "ledger.sqlite3.sweep.lock", "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the sweep holds it
        done = configure(machine, ANSWERS, "root(0)", previous="0.1.0")
    assert done.returncode == 0
    assert done.stderr == ("slurm-dsl: a sweep is running on /var/lib/slurm-dsl: it stays slurm's, the units run as"
                           " slurm; once the sweep has ended, run: dpkg-reconfigure slurm-dsl\n")
    assert owners(machine) == {SLURM} and runs_as(machine) == "slurm"
    assert configure(machine, ANSWERS, "root(0)", previous="0.1.0").returncode == 0  # the reconfigure
    assert owners(machine) == {0} and runs_as(machine) == "root"


def purge(machine: Machine) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DPKG_ROOT": str(machine.root), "LC_ALL": "C.UTF-8"}
    return in_sandbox(["sh", str(POSTRM), "purge"], env)


@pytest.mark.parametrize("with_ledger", [True, False])
def test_purge_removes_etc_slurm_dsl_and_the_drop_ins_and_keeps_a_ledger(machine: Machine, with_ledger: bool) -> None:
    assert configure(machine, ANSWERS, "slurm(64030)").returncode == 0
    etc = machine.root / "etc" / "slurm-dsl"
    etc.mkdir()
    for name in ("slurm-dsl.conf", "slurm-dsl.conf.dpkg-old", "ledger.cnf"):
        (etc / name).write_text("[client]\n")
    override = machine.dropin(UNITS[0]).parent / "override.conf"  # the admin's systemctl edit
    override.write_text("[Service]\nNice=1\n")
    if with_ledger:
        ledger_files(machine, SLURM)
    done = purge(machine)
    assert done.returncode == 0, done.stderr
    assert not etc.exists()
    assert not machine.dropin(UNITS[0]).exists() and override.exists()
    assert not machine.dropin(UNITS[1]).parent.exists()
    if with_ledger:
        assert (machine.state / "ledger.sqlite3").exists()
        assert done.stderr == ("slurm-dsl: /var/lib/slurm-dsl is kept: it holds a ledger"
                               " (see README.Debian in /usr/share/doc/slurm-dsl)\n")
    else:
        assert not machine.state.exists() and done.stderr == ""
