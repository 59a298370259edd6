"""The Debian package, built, installed, used on the lab, and purged (docs/packaging.md).

One test, in order, because each step needs the one before: ``contrib/package`` builds the .deb
from the checkout (lintian must pass); its contents are what docs/packaging.md lists and nothing
of the tests or benchmarks; apt installs it; the installed ``/usr/bin/slurm-dsl`` (Debian's
python3, the system's dist-packages, not this venv) holds and releases a real job of the lab and
records both in a ledger; the package follows the lab's SlurmUser (issue 31, item 7: root on the
host's lab and bookworm's, slurm on trixie's): the state directory is that account's and the
postinst's drop-in runs the units as it; root's ``slurm-dsl doctor`` on the package's default
ledger finds the ledger fine and may act on every job; root's ``slurm-dsl hold`` of another
user's job with nothing but the package's defaults is ``ok``; each timer's service, run as the
account its unit and drop-ins name (what systemd would start), succeeds on that ledger; a
configure with another SlurmUser hands the directory and its ledger over, and
``dpkg-reconfigure`` hands them back; ``contrib/demo --installed`` runs every step with it; the
config file /etc/slurm-dsl/slurm-dsl.conf is a conffile, root's, 0644, and what ``slurm-dsl
config`` reads; no timer is enabled; ``dpkg --purge`` leaves nothing of the package, /etc/slurm-dsl
and the drop-ins included, but the ledger directory if it holds a ledger (kept on purpose:
README.Debian).

It changes the machine (a package installed, then purged), so it runs only as root on a machine
where slurm-dsl is not installed as a package already (an admin's own install is never purged
by a test), and only where apt and dpkg-buildpackage can run (contrib/package installs its build
dependencies).
"""

from __future__ import annotations

import fnmatch
import grp
import io
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

import slurm_dsl
from tests import lab

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
STATE = Path("/var/lib/slurm-dsl")
ETC = Path("/etc/slurm-dsl")
CONFIG = ETC / "slurm-dsl.conf"
# The lab's MariaDB account (contrib/lab/up), in the directory a purge removes: put back after it.
LAB_CNF = ETC / "ledger.cnf"
DROPINS = Path("/etc/systemd/system")
DROPIN = "10-slurm-user.conf"
# Where systemd reads a unit's drop-ins from (systemd.unit(5)), every directory's .conf files
# merged in the order of their names.
DROPIN_DIRS = (Path("/etc/systemd/system"), Path("/run/systemd/system"), Path("/usr/lib/systemd/system"),
               Path("/lib/systemd/system"))


def _installed() -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", "slurm-dsl"], capture_output=True, text=True, check=False
    )
    return "install ok installed" in done.stdout


JOBINFO = "/usr/libexec/slurm-dsl/slurm-dsl-jobinfo"


def _system(argv: List[str], timeout: float = 600, **kw: object) -> subprocess.CompletedProcess[str]:
    """``argv`` with the system's PATH only, so that /usr/bin/python3 and /usr/bin/slurm-dsl are
    the ones run (never this venv's), from /, so that no checkout is on Python's path."""
    env = {"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive", **kw.pop("env", {})}  # type: ignore[dict-item]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False, cwd="/", **kw)  # type: ignore[call-overload, no-any-return]


def effective(unit: str, root: Path = Path("/")) -> Dict[str, str]:
    """The unit's [Service] settings as systemd would read them: its file, then its drop-ins
    (by file name, across DROPIN_DIRS, /etc's winning a name clash); the last assignment wins.
    ``root``: the tree the unit and the drop-ins are read in."""
    name = Path(unit).name
    found: Dict[str, Path] = {}
    for directory in reversed(DROPIN_DIRS):
        for conf in sorted((root / directory.relative_to("/") / f"{name}.d").glob("*.conf")):
            found[conf.name] = conf
    fields: Dict[str, str] = {}
    for path in [root / unit.lstrip("/"), *(found[key] for key in sorted(found))]:
        for line in path.read_text().splitlines():
            if "=" in line and not line.startswith(("#", ";")):
                key, value = line.split("=", 1)
                fields[key.strip()] = value.strip()
    return fields


def lab_slurm_user() -> pwd.struct_passwd:
    """The lab's SlurmUser, as slurmctld says it (``SlurmUser = slurm(64030)``)."""
    shown = lab.run_cmd(["scontrol", "show", "config"]).stdout
    found = re.search(r"^SlurmUser\s*=\s*(\S+)\((\d+)\)$", shown, re.M)
    assert found is not None, shown
    return pwd.getpwuid(int(found.group(2)))


def uids_in(directory: Path) -> Set[int]:
    return {directory.stat().st_uid, *(f.stat().st_uid for f in directory.iterdir())}


SITELIB = "/usr/lib/python3/dist-packages"  # Debian's python3's, the .deb's and (rpm/macros.debian) the RPM's
INSTALLED = ("config", "file", "unit", "made", "helper", "doc", "python")


def listed(unitdir: str) -> List[Tuple[str, str]]:
    """contrib/files, the one list of both packagings, as contrib/install-files resolves it: each
    line's kind and destination (a trailing / for a directory, a glob for the dist-info)."""
    shown = _system(["python3", str(ROOT / "contrib" / "install-files"), "--list", "--unitdir", unitdir,
                     "--sitelib", SITELIB])
    assert shown.returncode == 0, shown.stderr
    return [(kind, destination) for kind, _, destination in (line.split() for line in shown.stdout.splitlines())]


def _covers(destination: str, path: str) -> bool:
    """Whether ``path`` is the destination's file (gzipped, as both packagings do to manual pages
    and Debian to documentation), or a file in its directory."""
    if destination.endswith("/"):
        return fnmatch.fnmatch(path, destination + "*")
    return fnmatch.fnmatch(path, destination) or fnmatch.fnmatch(path, destination + ".gz")


def compare_with_the_list(files: Set[str], entries: List[Tuple[str, str]], own: Set[str]) -> None:
    """A package holds a file for every installed line of contrib/files and, besides the files
    its packaging adds itself (``own``, globs), nothing else: a file that drifted from the list
    in either direction fails."""
    installed = [destination for kind, destination in entries if kind in INSTALLED]
    assert not [d for d in installed if not any(_covers(d, f) for f in files)], sorted(files)
    allowed = [*(d for kind, d in entries if kind == "configured"), *installed]  # the RPM's %ghost ones
    stray = {f for f in files
             if not any(_covers(d, f) for d in allowed) and not any(fnmatch.fnmatch(f, o) for o in own)}
    assert not stray, sorted(stray)


def debian_release() -> str:
    release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    return release.get("VERSION_ID", "").strip('"')


def a_package_machine() -> None:
    """Skip unless packages may be built and installed here (never where an admin installed one)."""
    if os.geteuid() != 0:
        pytest.skip("installs a package: root only")
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        pytest.skip("not a Debian machine")
    if _installed():
        pytest.skip("slurm-dsl is installed as a package here: a test never purges an admin's install")
    if debian_release() not in ("12", "13"):
        pytest.skip("the package is built and installed on Debian 12 and 13, the releases it is for (not sid)")
    if os.environ.get("SLURM_DSL_LAB_PREFIX"):
        pytest.skip("the lab's Slurm is built from source (contrib/lab/chroot 25.11): the package goes with Debian's")


@pytest.fixture(scope="module")
def built_deb() -> Iterator[Path]:
    """The .deb of ``contrib/package`` (lintian passed), built once for the module's tests."""
    a_package_machine()
    out = Path(tempfile.mkdtemp(prefix="slurm-dsl-deb."))
    try:
        built = _system([str(ROOT / "contrib" / "package"), "--out", str(out)], timeout=1200)
        assert built.returncode == 0, built.stderr[-4000:]
        path = Path(built.stdout.strip().splitlines()[-1])
        arch = _system(["dpkg", "--print-architecture"]).stdout.strip()
        assert path.parent == out and path.name == f"slurm-dsl_{slurm_dsl.__version__}_{arch}.deb"
        yield path
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.fixture
def deb(built_deb: Path) -> Iterator[Path]:
    """The .deb, purged after the test if it installed it (and a state directory it made)."""
    had_state = STATE.exists()
    try:
        yield built_deb
    finally:
        if _installed():
            _system(["dpkg", "--purge", "slurm-dsl"])
        if not had_state and STATE.is_dir() and not STATE.is_symlink():
            # The package's postinst made it for this test; a failed test left it (and a ledger)
            # behind, which the next run would take for an admin's.
            shutil.rmtree(STATE)


def test_the_package_builds_installs_holds_a_real_job_and_purges(deb: Path) -> None:
    listing = _system(["dpkg-deb", "-c", str(deb)]).stdout
    files = {line.split()[-1].lstrip(".") for line in listing.splitlines() if not line.endswith("/")}
    units = {f for f in files if "/systemd/system/" in f}
    assert {Path(u).name for u in units} == {
        "slurm-dsl-sweep.service", "slurm-dsl-sweep.timer", "slurm-dsl-prune.service", "slurm-dsl-prune.timer",
    }
    # What contrib/files lists, and besides it only Debian's own documents (README.Debian
    # compressed by dh_compress once it is over 4 kB, as Debian policy §12.3 asks).
    compare_with_the_list(files, listed(str(Path(min(units)).parent)),
                          {"/usr/share/doc/slurm-dsl/copyright", "/usr/share/doc/slurm-dsl/changelog.gz",
                           "/usr/share/doc/slurm-dsl/README.Debian*"})
    for wanted in ("/usr/share/man/man1/slurm-dsl.1.gz", "/usr/share/doc/slurm-dsl/copyright",
                   "/usr/lib/python3/dist-packages/slurm_dsl/admin/cli.py", str(CONFIG), JOBINFO):
        assert wanted in files
    assert files & {"/usr/share/doc/slurm-dsl/README.Debian", "/usr/share/doc/slurm-dsl/README.Debian.gz"}
    conffiles = _system(["dpkg-deb", "-I", str(deb), "conffiles"])
    assert conffiles.returncode == 0 and str(CONFIG) in conffiles.stdout.split(), conffiles.stdout
    assert not [f for f in files if "/tests/" in f or "/benchmarks/" in f or f.endswith(".pyc")]

    had_state = STATE.exists()
    slurm_user = lab_slurm_user()  # root on the host's and bookworm's lab, slurm on trixie's
    group = grp.getgrgid(slurm_user.pw_gid).gr_name
    installed = _system(["apt-get", "install", "-y", "-q", "--no-install-recommends", str(deb)])
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert _installed()
    if not had_state:  # slurm.conf's SlurmUser's, whichever account exists besides (issue 31, item 7)
        st = STATE.stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (slurm_user.pw_uid, slurm_user.pw_gid, 0o700)
        assert "slurm-dsl:" not in installed.stderr, installed.stderr  # nothing to warn about
    for unit in (u for u in units if u.endswith(".service")):
        body = Path(unit).read_text()
        assert "ExecStart=/usr/bin/slurm-dsl " in body and "/usr/local/bin" not in body
        lines = body.splitlines()
        assert "User=slurm" in lines and "Group=slurm" in lines, unit  # the shipped default, for the venv route
        assert not [line for line in lines if line.startswith("StateDirectory")], unit
        assert "Environment=" not in body and "--metrics-file" not in body  # the config file says them
        # The postinst's drop-in makes them run as the SlurmUser, an admin's override.conf after it.
        dropin = DROPINS / f"{Path(unit).name}.d" / DROPIN
        assert dropin.read_text().splitlines()[-3:] == ["[Service]", f"User={slurm_user.pw_name}", f"Group={group}"]
        assert (effective(unit)["User"], effective(unit)["Group"]) == (slurm_user.pw_name, group), unit
    st = CONFIG.lstat()
    assert (st.st_uid, oct(st.st_mode)) == (0, oct(0o100644))
    assert CONFIG.read_bytes() == (ROOT / "contrib" / "slurm-dsl.conf").read_bytes()
    shown = _system(["/usr/bin/slurm-dsl", "config", "--json"])
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert (report["file"], report["read"]) == (str(CONFIG), True)
    assert {s["source"] for s in report["settings"]} == {"default"}  # every key shipped commented out
    assert _system(["/usr/bin/slurm-dsl", "config"]).stdout.splitlines()[-1] == f"config file: {CONFIG}"
    wants = Path("/etc/systemd/system/timers.target.wants")
    assert not (wants.exists() and [p for p in wants.iterdir() if p.name.startswith("slurm-dsl")])

    version = _system(["/usr/bin/slurm-dsl", "--version"])
    assert version.returncode == 0 and version.stdout.strip() == f"slurm-dsl {slurm_dsl.__version__}"
    where = _system(["/usr/bin/python3", "-c", "import slurm_dsl; print(slurm_dsl.__file__)"])
    assert where.stdout.strip() == "/usr/lib/python3/dist-packages/slurm_dsl/__init__.py"
    if shutil.which("man") is not None:
        assert _system(["man", "-w", "slurm-dsl"]).stdout.strip().endswith("slurm-dsl.1.gz")

    # Root's doctor on the package's default ledger runs as the directory's owner, the SlurmUser
    # (root's commands stay root where that is root): the ledger is fine, its files stay that
    # account's, and it may act on every job.
    kept = STATE / "ledger.sqlite3"
    planted = not kept.exists()
    doctor = _system(["/usr/bin/slurm-dsl", "doctor", "--json"])
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    assert checks["ledger"]["status"] == "ok", doctor.stdout + doctor.stderr
    # ...and asks slurmctld through the package's slurm-dsl-jobinfo, which answers.
    assert (checks["jobinfo"]["status"], checks["jobinfo"]["detail"]) == (
        "ok", f"{JOBINFO}: asks slurmctld for jobs one by one in one process"), checks["jobinfo"]
    owner = STATE.stat().st_uid
    assert uids_in(STATE) == {owner}
    assert checks["caller"]["status"] == "ok", checks["caller"]
    if not had_state:
        assert owner == slurm_user.pw_uid

    # Root's hold of another user's pending job, with nothing but the package's defaults (the
    # config file, the ledger in /var/lib/slurm-dsl): ok, exit 0, the job held, recorded there.
    # Where the package took slurm for the units on a SlurmUser=root lab, this was "rejected:
    # Invalid user id" (issue 31, item 7).
    theirs = lab.make_job("pending", user=lab.TEST_USER)
    for op, priority_zero in (("hold", True), ("release", False)):
        ran = _system(["/usr/bin/slurm-dsl", op, theirs, "--timeout", "20"])
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert ran.stdout.split()[:3] == [theirs, op, "ok"], ran.stdout
        state = lab.job_state(theirs)
        assert state is not None and (state.priority == 0) is priority_zero
    history = _system(["/usr/bin/slurm-dsl", "history", theirs, "--json"])
    ops = [json.loads(line) for line in history.stdout.splitlines()]
    assert [(o["op"], o["result"]) for o in ops if o.get("kind") == "operation"] == [("hold", "ok"), ("release", "ok")]
    assert uids_in(STATE) == {owner}

    # What each timer starts, as systemd would start it (it is not PID 1 here): the service's
    # ExecStart as its User= and Group=, on the package's ledger, ends in success (0, or a status
    # its SuccessExitStatus= names).  Only where the state directory is that account's (the
    # package made it); one an admin made before is theirs, and the units' docs say how.
    for unit in sorted(u for u in units if u.endswith(".service")):
        fields = effective(unit)
        timer = Path(unit[: -len(".service")] + ".timer").read_text()
        assert re.search(r"^On\w+=\S", timer, re.M), unit  # the timer starts it at some time
        if STATE.stat().st_uid != pwd.getpwnam(fields["User"]).pw_uid:
            continue
        started = _system(["runuser", "-u", fields["User"], "-g", fields["Group"], "--", *fields["ExecStart"].split()])
        allowed = {0, *(int(v) for v in fields.get("SuccessExitStatus", "").split())}
        assert started.returncode in allowed, (unit, started.returncode, started.stdout[-2000:], started.stderr[-2000:])
        assert uids_in(STATE) == {owner}

    if not had_state:
        # slurm.conf's SlurmUser changes (the other account: slurm where it was root, root where it
        # was slurm; slurmctld not answering, slurm.conf saying it): a configure hands the
        # directory and its ledger over, and the drop-ins follow; dpkg-reconfigure with the lab's
        # own slurm.conf hands them back.
        other = pwd.getpwnam("root" if slurm_user.pw_uid else "slurm")
        with tempfile.TemporaryDirectory() as elsewhere:
            shim = Path(elsewhere) / "scontrol"
            shim.write_text("#!/bin/sh\necho 'Unable to contact slurm controller (connect failure)' >&2\nexit 1\n")
            shim.chmod(0o755)
            conf = Path(elsewhere) / "slurm.conf"
            conf.write_text(f"ClusterName=elsewhere\nSlurmUser={other.pw_name}\n")
            moved = _system(["dpkg-reconfigure", "-fnoninteractive", "slurm-dsl"],
                            env={"PATH": f"{elsewhere}:{SYSTEM_PATH}", "SLURM_CONF": str(conf)})
        assert moved.returncode == 0, moved.stdout + moved.stderr
        said = f"/var/lib/slurm-dsl and its files were {slurm_user.pw_name}'s and are now {other.pw_name}'s"
        assert said in moved.stderr, moved.stderr
        assert uids_in(STATE) == {other.pw_uid}
        assert {effective(u)["User"] for u in units if u.endswith(".service")} == {other.pw_name}
        back = _system(["dpkg-reconfigure", "-fnoninteractive", "slurm-dsl"])
        assert back.returncode == 0, back.stdout + back.stderr
        assert uids_in(STATE) == {slurm_user.pw_uid}
        assert {effective(u)["User"] for u in units if u.endswith(".service")} == {slurm_user.pw_name}
        held = _system(["/usr/bin/slurm-dsl", "hold", theirs, "--timeout", "20"])
        assert held.returncode == 0 and held.stdout.split()[:3] == [theirs, "hold", "ok"], held.stdout + held.stderr

    job = lab.make_job("held_user")
    # The lookup helper, built for this release's libslurm: found by the installed package, and
    # answering as squeue does (tests/integration/test_lookup_live.py compares the two).
    found = _system(["/usr/bin/python3", "-c", "import slurm_dsl.lookups.squeue as q; print(q.SqueueLookup().jobinfo)"])
    assert found.stdout.strip() == JOBINFO, found.stdout + found.stderr
    nonce = os.urandom(16).hex()
    asked = _system([JOBINFO, nonce, job, "999999"])
    assert (asked.returncode, asked.stderr) == (0, "")
    assert asked.stdout == f"{job}|{job}|N/A|PENDING|0|0|0|JobHeldUser|{nonce}\n"
    with tempfile.TemporaryDirectory() as ledger_dir:
        os.chmod(ledger_dir, 0o700)
        ledger = f"{ledger_dir}/ledger.sqlite3"
        # The hold takes its ledger and deadline from a config file; the release from flags.
        site = Path(ledger_dir) / "site.conf"
        site.write_text(f"[slurm-dsl]\nledger = {ledger}\ntimeout = 20\n")
        site.chmod(0o644)
        for op, priority_zero, how in (("hold", True, ["--config", str(site)]),
                                       ("release", False, ["--ledger", ledger, "--timeout", "20"])):
            ran = _system(["/usr/bin/slurm-dsl", op, job, *how, "--json"])
            assert ran.returncode == 0, ran.stdout + ran.stderr
            row = json.loads(ran.stdout.strip().splitlines()[-1])
            assert (row["job_id"], row["op"], row["result"]) == (job, op, "ok")
            state = lab.job_state(job)
            assert state is not None and (state.priority == 0) is priority_zero
        history = _system(["/usr/bin/slurm-dsl", "--ledger", ledger, "history", job, "--json"])
        ops = [json.loads(line) for line in history.stdout.splitlines()]
        recorded = [(o["op"], o["result"]) for o in ops if o.get("kind") == "operation"]
        assert recorded == [("hold", "ok"), ("release", "ok")]

    # The demo, as a new admin runs it, with the installed command: every outcome as expected.
    demo = _system([str(ROOT / "contrib" / "demo"), "--installed"], timeout=600)
    assert demo.returncode == 0, demo.stdout[-4000:] + demo.stderr[-2000:]
    assert "demo finished: every outcome as expected" in demo.stdout
    # It keeps its ledger and says how to read it with the installed command (issue 43, item 2).
    demo_ledger = Path("/var/tmp/slurm-dsl-demo/ledger.sqlite3")
    assert "/usr/bin/slurm-dsl history " in demo.stdout and demo_ledger.is_file(), demo.stdout[-2000:]
    shutil.rmtree(demo_ledger.parent)

    # A ledger in the package's state directory (the hold's) is never deleted by a purge
    # (README.Debian); /etc/slurm-dsl is, whole: the lab's own ledger.cnf is put back after it.
    if not kept.exists():
        kept.write_bytes(b"")
    lab_cnf = (LAB_CNF.read_bytes(), LAB_CNF.stat()) if LAB_CNF.is_file() else None
    try:
        purged = _system(["dpkg", "--purge", "slurm-dsl"])
        assert purged.returncode == 0, purged.stderr
        assert kept.exists()
        assert "/var/lib/slurm-dsl is kept" in purged.stderr
        assert not ETC.exists(), sorted(os.listdir(ETC))
        assert not [d for d in DROPINS.glob("slurm-dsl-*.service.d") if d.exists()]
    finally:
        if lab_cnf is not None and not LAB_CNF.exists():
            data, st = lab_cnf
            ETC.mkdir(mode=0o755, exist_ok=True)
            LAB_CNF.write_bytes(data)
            os.chown(LAB_CNF, st.st_uid, st.st_gid)
            LAB_CNF.chmod(stat.S_IMODE(st.st_mode))
        if planted:
            for made in STATE.glob("ledger.sqlite3*"):
                made.unlink()
            if not had_state:
                STATE.rmdir()
    assert not _installed()
    left = _system(["dpkg", "-L", "slurm-dsl"])
    assert left.returncode != 0
    assert not Path("/usr/bin/slurm-dsl").exists()
    assert not Path("/usr/lib/python3/dist-packages/slurm_dsl").exists()
    assert not Path("/usr/share/slurm-dsl").exists()
    assert not CONFIG.exists()  # a conffile: purge removes it
    assert not [u for u in units if Path(u).exists()]


# --- beside other packagings: a copy-on-write root, SchedMD's Debian packages, the RPM, pip ---

def apt_install(*packages: str) -> None:
    """Install the Debian packages a test needs that are missing (the lists updated once, on failure)."""
    missing = [p for p in packages if "install ok installed" not in _system(
        ["dpkg-query", "-W", "-f=${Status}", p]).stdout]
    if missing:
        done = _system(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing])
        if done.returncode != 0:
            _system(["apt-get", "update", "-qq"])
            done = _system(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing])
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


class Scratch:
    """This machine seen through an overlay: / below, a directory of the test's above, which
    takes every change.  Each command runs chrooted in it, in new mount and pid namespaces (the
    kernel drops the mounts and ends what is left when it ends), with /proc, /dev, a tmpfs /tmp,
    munged's socket (the lab's Slurm answers as it does outside) and ``files`` at /mnt, read-only.
    ``hidden``: paths of the machine the root does not show (overlay whiteouts)."""

    def __init__(self, base: Path, files: Path, hidden: Tuple[str, ...] = ()) -> None:
        self.base, self.files = base, files
        self.upper = base / "upper"
        for name in ("upper", "work", "root"):
            (base / name).mkdir()
        for path in hidden:
            whiteout = self.upper / path.lstrip("/")
            whiteout.parent.mkdir(parents=True, exist_ok=True)
            os.mknod(whiteout, stat.S_IFCHR | 0o600, os.makedev(0, 0))

    MOUNT = ('base=$1 files=$2; shift 2; root=$base/root; '
             'mount -t overlay overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$root"; '
             'mount -t proc proc "$root/proc"; mount --rbind /dev "$root/dev"; mount -t tmpfs tmpfs "$root/tmp"; '
             'mount --bind /run/munge "$root/run/munge"; mount --bind -o ro "$files" "$root/mnt"; '
             'exec chroot "$root" "$@"')

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return _system(["unshare", "--mount", "--propagation", "private", "--pid", "--fork",
                        "sh", "-euc", self.MOUNT, "sh", str(self.base), str(self.files),
                        "env", "-i", f"PATH={SYSTEM_PATH}", "LC_ALL=C.UTF-8", "HOME=/root", *argv], timeout=timeout)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory for a Scratch root and the files it is given."""
    base = Path(tempfile.mkdtemp(prefix="slurm-dsl-scratch.", dir="/var/tmp"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def host_major_only() -> None:
    """The checks of other packagings run once, on the host's major (Debian 12, its python3 3.11:
    the floor, which EL 8's and 9's python3.11 packages are too), where apt can install their tools."""
    if os.environ.get("SLURM_DSL_TEST_MAJOR", "host") != "host" or debian_release() != "12":
        pytest.skip("checked on the host's major, Debian 12, only")


SMD_CLIENT = """Section: admin
Priority: optional
Standards-Version: 4.6.2
Package: slurm-smd-client
Version: 24.05.0-1
Conflicts: slurm-client, slurm-client-emulator
Description: stands in for SchedMD's slurm-smd-client (slurm-dsl's test)
 Conflicts with Debian's slurm-client and provides no other name, as SchedMD's does.
"""


def test_the_deb_installs_beside_schedmds_slurm_smd_client(built_deb: Path, scratch: Path) -> None:
    """A site on SchedMD's own Debian packages has slurm-smd-client, which conflicts with
    slurm-client and provides nothing: the .deb depends on either.  In a scratch root of this
    machine, slurm-client is replaced by an equivs slurm-smd-client, and dpkg installs the .deb."""
    host_major_only()
    apt_install("equivs")
    files = scratch / "files"
    files.mkdir()
    (files / "slurm-smd-client.ctl").write_text(SMD_CLIENT)
    made = _system(["sh", "-c", f"cd {files} && equivs-build slurm-smd-client.ctl"])
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    shutil.copy(built_deb, files)
    root = Scratch(scratch, files)
    status = "dpkg-query -W -f '${Package} ${Status}\\n' slurm-client slurm-smd-client slurm-dsl"
    done = root.run("sh", "-exc", "dpkg --remove --force-depends slurm-client >/dev/null; "
                    "dpkg -i /mnt/slurm-smd-client_24.05.0-1_all.deb >/dev/null; "
                    f"dpkg -i /mnt/{built_deb.name}; {status}; slurm-dsl --version")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shown = done.stdout.splitlines()
    assert "slurm-smd-client install ok installed" in shown and "slurm-dsl install ok installed" in shown, shown
    assert not [line for line in shown if line.startswith("slurm-client install ok")], shown
    assert shown[-1] == f"slurm-dsl {slurm_dsl.__version__}"
    assert "install ok installed" in _system(["dpkg-query", "-W", "-f=${Status}", "slurm-client"]).stdout  # the lab's


@pytest.fixture(scope="module")
def python_dists() -> Iterator[Tuple[Path, Path]]:
    """The sdist and the wheel of the committed tree, made as a maintainer makes them: PyPI's
    build and twine in a venv of Debian's python3, ``python -m build`` (PyPI's setuptools in its
    isolated environment), then ``twine check`` (Debian 12's twine reads no metadata 2.4)."""
    a_package_machine()
    host_major_only()
    work = Path(tempfile.mkdtemp(prefix="slurm-dsl-dists.", dir="/var/tmp"))
    try:
        tools = work / "tools"
        made = _system(["sh", "-c", f"python3 -m venv {tools} && {tools}/bin/pip install -q build twine"])
        assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
        tree = work / "tree"
        tree.mkdir()
        archived = _system(["sh", "-c", f"git -C {ROOT} archive HEAD | tar -x -C {tree}"])
        assert archived.returncode == 0, archived.stderr
        built = _system([str(tools / "bin" / "python"), "-m", "build", "--outdir", str(work / "dist"), str(tree)])
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        sdist, wheel = (work / "dist" / f"slurm_dsl-{slurm_dsl.__version__}{end}" for end in
                        (".tar.gz", "-py3-none-any.whl"))
        checked = _system([str(tools / "bin" / "twine"), "check", "--strict", str(sdist), str(wheel)])
        assert checked.returncode == 0 and checked.stdout.count("PASSED") == 2, checked.stdout + checked.stderr
        yield sdist, wheel
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_rpm(sdist: Path, out: Path, *rpmbuild: str, lint: bool = False) -> Tuple[Path, str]:
    """``contrib/package --rpm`` of ``sdist``: the binary RPM, and what it said (rpmlint's report)."""
    built = _system([str(ROOT / "contrib" / "package"), "--rpm", "--sdist", str(sdist), "--out", str(out),
                     *(() if lint else ("--no-lintian",)), "--", *rpmbuild], timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-4000:]
    return Path(built.stdout.strip().splitlines()[-1]), built.stderr


def rpm_query(rpm: Path, *query: str) -> List[str]:
    done = _system(["rpm", "-qp", *query, str(rpm)])
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def newer_sdist(sdist: Path, where: Path) -> Path:
    """``sdist`` again, its config file one comment longer: what a newer build ships."""
    with tarfile.open(sdist) as old, tarfile.open(where / sdist.name, "w:gz") as new:
        for member in old.getmembers():
            data = old.extractfile(member) if member.isfile() else None
            if member.name.endswith("/contrib/slurm-dsl.conf"):
                body = data.read() + b"# a comment of the newer build\n"  # type: ignore[union-attr]
                member.size = len(body)
                data = io.BytesIO(body)
            new.addfile(member, data)
    return where / sdist.name


def test_the_rpm_builds_lints_installs_upgrades_and_erases(
    python_dists: Tuple[Path, Path], scratch: Path
) -> None:
    """rpm/slurm-dsl.spec, built as an EL host builds it (rpmbuild -ta of the sdist, through
    contrib/package --rpm; rpm/macros.debian for EL's macro packages), then installed with
    rpm --root into a scratch root of this machine (Scratch: the lab's Slurm, munge and python3
    3.11 as they are here, /etc/slurm-dsl and /var/lib/slurm-dsl hidden, as on a new host), and
    run from the installed files against the lab.  --nodeps: Debian has no RPM database of Slurm."""
    sdist, _ = python_dists
    files = scratch / "files"
    files.mkdir()
    rpm, said = build_rpm(sdist, files, lint=True)
    assert rpm.name == f"slurm-dsl-{slurm_dsl.__version__}-1.{os.uname().machine}.rpm"
    # rpmlint: no error, and each warning explained in the spec.
    spec = (ROOT / "rpm" / "slurm-dsl.spec").read_text()
    assert re.search(r"^ ?\d+ packages and \d+ specfiles checked; 0 errors,", said, re.M), said[-3000:]
    warned = set(re.findall(r": W: (\S+)", said))
    assert warned and not [w for w in warned if w.replace("%", "%%") not in spec], (warned, said[-3000:])

    # Its files: what contrib/files lists, and besides the licence and the helper's build-id link.
    modes = dict(line.split(" ", 1)[::-1] for line in rpm_query(rpm, "--qf", "[%{FILEMODES:perms} %{FILENAMES}\n]"))
    entries = listed("/usr/lib/systemd/system")
    compare_with_the_list({f for f, mode in modes.items() if not mode.startswith("d")}, entries,
                          {"/usr/share/licenses/slurm-dsl/LICENSE", "/usr/lib/.build-id/*"})
    ghosts = set(rpm_query(rpm, "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]"))
    assert {f"{d.rstrip('/')} g" for kind, d in entries if kind == "configured"} <= ghosts, ghosts
    requires = rpm_query(rpm, "--requires")
    assert {"/usr/bin/scontrol", "/usr/bin/squeue"} <= set(requires), requires
    assert not [r for r in requires if r.startswith(("slurm", "python3-"))], requires  # no vendor's name
    # Its %post is the postinst's configure, with its own two words.
    post = "\n".join(rpm_query(rpm, "--qf", "%{POSTIN}"))
    postinst = (ROOT / "debian" / "slurm-dsl.postinst").read_text().replace("#DEBHELPER#\n", "")
    assert post.endswith("set -- configure\n" + postinst.replace(
        "AGAIN='dpkg-reconfigure slurm-dsl'", "AGAIN='dnf reinstall slurm-dsl'").replace(
        "NOTES=README.Debian", "NOTES=docs/packaging.md").rstrip("\n")), post
    # The build conditions: no helper, no Slurm requirement (a Slurm in /opt).
    lean, _ = build_rpm(sdist, files, "--without", "jobinfo", "--without", "slurm_requires")
    assert lean.name.endswith(".noarch.rpm") and JOBINFO not in rpm_query(lean, "-l")
    assert not [r for r in rpm_query(lean, "--requires") if re.search("scontrol|squeue|libslurm", r)]
    assert "jobs are looked up with squeue" in " ".join(rpm_query(lean, "--qf", "%{DESCRIPTION}"))

    root = Scratch(scratch, files, hidden=(str(ETC), str(STATE)))
    rpmdb = ("rpm", "--dbpath", "/var/lib/rpm")
    installed = root.run(*rpmdb, "--nodeps", "-i", f"/mnt/{rpm.name}")
    assert installed.returncode == 0 and "scriptlet failed" not in installed.stderr, installed.stderr
    slurm_user = lab_slurm_user()
    st = (root.upper / STATE.relative_to("/")).stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (slurm_user.pw_uid, slurm_user.pw_gid, 0o700)
    services = [d for kind, d in entries if kind == "unit" and d.endswith(".service")]
    for unit in services:
        assert (effective(unit, root.upper)["User"], effective(unit, root.upper)["ExecStart"].split()[0]) == (
            slurm_user.pw_name, "/usr/bin/slurm-dsl"), unit
    assert not (root.upper / "etc/systemd/system/timers.target.wants").exists()
    # The package's modules, run by a python3 of at least 3.11 (the spec's %{__python3} here).
    where = root.run("sh", "-c", "python3 -c 'import slurm_dsl, sys; print(slurm_dsl.__file__, *sys.version_info[:2])'")
    module, major, minor = where.stdout.split()
    assert (int(major), int(minor)) >= (3, 11) and module.startswith(SITELIB + "/"), where
    owner = root.run(*rpmdb, "-qf", module)
    assert owner.stdout.strip() == rpm.name.removesuffix(".rpm"), owner.stdout + owner.stderr

    # From the installed files, against the lab: doctor, then root's hold and release of another
    # user's job and requeue of a running one, with the package's defaults (its ledger).
    doctor = root.run("slurm-dsl", "doctor", "--json")
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    assert doctor.returncode == 0 and {checks[c]["status"] for c in ("slurmctld", "ledger", "caller")} == {"ok"}, \
        doctor.stdout + doctor.stderr
    assert checks["jobinfo"]["detail"].startswith(JOBINFO) and checks["sweep"]["status"] == "ok", checks
    theirs, running = lab.make_job("pending", user=lab.TEST_USER), lab.make_job("running_rq0")
    for job, op in ((theirs, "hold"), (theirs, "release"), (running, "requeue")):
        ran = root.run("slurm-dsl", op, job, "--timeout", "20", "--json")
        assert ran.returncode == 0 and json.loads(ran.stdout)["result"] == "ok", ran.stdout + ran.stderr
    held = lab.job_state(theirs)
    assert held is not None and held.priority != 0
    requeued = lab.job_state(running)
    assert requeued is not None and (requeued.restarts, requeued.requeue) == (1, 0), requeued
    # What the sweep timer starts, as its unit and drop-in say (systemd is not PID 1 here).
    sweep = effective(next(u for u in services if "sweep" in u), root.upper)
    started = root.run("runuser", "-u", sweep["User"], "-g", sweep["Group"], "--", *sweep["ExecStart"].split())
    assert started.returncode in {0, *map(int, sweep["SuccessExitStatus"].split())}, started.stdout + started.stderr
    history = root.run("slurm-dsl", "history", "--json", theirs, running)
    done = [(o["job_id"], o["op"], o["result"]) for o in map(json.loads, history.stdout.splitlines())
            if o.get("kind") == "operation"]
    assert done == [(theirs, "hold", "ok"), (theirs, "release", "ok"), (running, "requeue", "ok")], history.stdout

    # A newer build over an edited config: the edit kept, the new one beside it, the ledger kept.
    (scratch / "newer").mkdir()
    newer, _ = build_rpm(newer_sdist(sdist, scratch / "newer"), files, "--define", "dist .1")
    config = root.upper / CONFIG.relative_to("/")
    config.write_text(config.read_text() + "timeout = 25\n")
    upgraded = root.run(*rpmdb, "--nodeps", "-U", f"/mnt/{newer.name}")
    assert upgraded.returncode == 0 and "scriptlet failed" not in upgraded.stderr, upgraded.stderr
    assert root.run(*rpmdb, "-q", "slurm-dsl").stdout.strip() == newer.name.removesuffix(".rpm")
    assert config.read_text().endswith("timeout = 25\n")
    assert config.with_name("slurm-dsl.conf.rpmnew").read_text().endswith("# a comment of the newer build\n")
    ledger = root.upper / STATE.relative_to("/") / "ledger.sqlite3"
    assert root.run("slurm-dsl", "history", "--json", theirs, running).stdout == history.stdout
    shown = json.loads(root.run("slurm-dsl", "config", "--json").stdout)
    assert [(c["value"], c["source"]) for c in shown["settings"] if c["key"] == "timeout"] == [("25", "file")]

    # Erased: nothing of it left but the ledger and, as rpm does with an edited config, the
    # edit (.rpmsave) and the newer build's file (.rpmnew).
    erased = root.run(*rpmdb, "--nodeps", "-e", "slurm-dsl")
    assert erased.returncode == 0, erased.stderr
    left = {"/" + str(p.relative_to(root.upper)) for p in root.upper.rglob("*") if not p.is_dir()}
    assert {f for f in left if not f.startswith("/var/lib/rpm/")} == {
        f"{CONFIG}.rpmsave", f"{CONFIG}.rpmnew", *(f"{STATE}/{p.name}" for p in ledger.parent.iterdir())}, left
    assert ledger.exists()


def test_the_wheel_in_a_clean_venv_asks_the_lab(python_dists: Tuple[Path, Path], mariadb_location: str,
                                               scratch: Path) -> None:
    """pip's route: the wheel with the mariadb extra in a new venv of Debian's python3; its doctor
    on the lab, with a MariaDB ledger, says that a sweep falls back to squeue and how to build the
    helper; built so, from the sdist, the helper answers."""
    sdist, wheel = python_dists
    venv = scratch / "venv"
    made = _system(["python3", "-m", "venv", str(venv)])
    assert made.returncode == 0, made.stderr
    pip = _system([str(venv / "bin" / "pip"), "install", "-q", f"{wheel}[mariadb]"])
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-2000:]

    def doctor(jobinfo: str) -> Dict[str, Dict[str, str]]:
        ran = _system([str(venv / "bin" / "slurm-dsl"), "doctor", "--json", "--ledger", mariadb_location],
                      env={"SLURM_DSL_JOBINFO": jobinfo})
        checks = {c["check"]: c for c in map(json.loads, ran.stdout.splitlines())}
        assert ran.returncode == 0 and checks["slurmctld"]["status"] == checks["ledger-db"]["status"] == "ok", \
            ran.stdout + ran.stderr
        return checks

    alone = doctor("")
    assert alone["sweep"]["detail"].startswith("sweeps fall back to squeue"), alone["sweep"]
    assert f"contrib/jobinfo/build {JOBINFO}" in alone["sweep"]["detail"]
    helper = scratch / "slurm-dsl-jobinfo"
    built = _system(["sh", "-c", f"tar -xzf {sdist} -C {scratch} && sh {scratch}/slurm_dsl-*/contrib/jobinfo/build"
                     f" {helper}"])
    assert built.returncode == 0, built.stderr
    helped = doctor(str(helper))
    assert helped["sweep"]["detail"].endswith("through slurm-dsl-jobinfo"), helped["sweep"]
