"""The Debian package, built, installed, used on the lab, and purged (docs/packaging.md).

One test, in order, because each step needs the one before: ``contrib/package`` builds the .deb
from the checkout (lintian must pass); its contents are what docs/packaging.md lists and nothing
of the tests or benchmarks; apt installs it; the installed ``/usr/bin/slurm-dsl`` (Debian's
python3, the system's dist-packages, not this venv) holds and releases a real job of the lab and
records both in a ledger; root's ``slurm-dsl doctor`` on the package's default ledger runs as the
directory's owner when that is the service account (else it is refused, until a config file names
it), finds the ledger fine, and its caller check says what is true for the lab's SlurmUser; each
timer's service, run as its ``User=`` (what systemd would start), succeeds on that ledger;
``contrib/demo --installed`` runs every step with it; the config file
/etc/slurm-dsl/slurm-dsl.conf is a conffile, root's, 0644, and what ``slurm-dsl config`` reads; no
timer is enabled; ``dpkg --purge`` leaves nothing of the package but the ledger directory if it
holds a ledger (kept on purpose: README.Debian), the config file included (dpkg removes a
conffile on purge).

It changes the machine (a package installed, then purged), so it runs only as root on a machine
where slurm-dsl is not installed as a package already (an admin's own install is never purged
by a test), and only where apt and dpkg-buildpackage can run (contrib/package installs its build
dependencies).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest

import slurm_dsl
from tests import lab

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
STATE = Path("/var/lib/slurm-dsl")
CONFIG = Path("/etc/slurm-dsl/slurm-dsl.conf")


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


@pytest.fixture
def deb() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("installs a package: root only")
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        pytest.skip("not a Debian machine")
    if _installed():
        pytest.skip("slurm-dsl is installed as a package here: a test never purges an admin's install")
    release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    if release.get("VERSION_ID", "").strip('"') not in ("12", "13"):
        pytest.skip("the package is built and installed on Debian 12 and 13, the releases it is for (not sid)")
    out = Path(tempfile.mkdtemp(prefix="slurm-dsl-deb."))
    had_state = STATE.exists()
    try:
        built = _system([str(ROOT / "contrib" / "package"), "--out", str(out)], timeout=1200)
        assert built.returncode == 0, built.stderr[-4000:]
        path = Path(built.stdout.strip().splitlines()[-1])
        arch = _system(["dpkg", "--print-architecture"]).stdout.strip()
        assert path.parent == out and path.name == f"slurm-dsl_{slurm_dsl.__version__}_{arch}.deb"
        yield path
    finally:
        if _installed():
            _system(["dpkg", "--purge", "slurm-dsl"])
        shutil.rmtree(out, ignore_errors=True)
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
    for wanted in ("/usr/bin/slurm-dsl", "/usr/share/man/man1/slurm-dsl.1.gz", "/usr/share/slurm-dsl/job_submit.lua",
                   "/usr/share/bash-completion/completions/slurm-dsl",
                   "/usr/share/doc/slurm-dsl/README.Debian", "/usr/share/doc/slurm-dsl/copyright",
                   "/usr/lib/python3/dist-packages/slurm_dsl/admin/cli.py", str(CONFIG), JOBINFO):
        assert wanted in files
    conffiles = _system(["dpkg-deb", "-I", str(deb), "conffiles"])
    assert conffiles.returncode == 0 and str(CONFIG) in conffiles.stdout.split(), conffiles.stdout
    assert not [f for f in files if "/tests/" in f or "/benchmarks/" in f or f.endswith(".pyc")]

    had_state = STATE.exists()
    installed = _system(["apt-get", "install", "-y", "-q", "--no-install-recommends", str(deb)])
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert _installed()
    if not had_state:  # the units' account's (Debian's slurm, made by slurm-client's dependencies)
        st = STATE.stat()
        try:
            owner = pwd.getpwnam("slurm").pw_uid
        except KeyError:
            owner = 0
        assert (st.st_uid, st.st_mode & 0o7777) == (owner, 0o700)
    for unit in (u for u in units if u.endswith(".service")):
        body = Path(unit).read_text()
        assert "ExecStart=/usr/bin/slurm-dsl " in body and "/usr/local/bin" not in body
        lines = body.splitlines()
        assert "User=slurm" in lines and "Group=slurm" in lines, unit
        assert not [line for line in lines if line.startswith("StateDirectory")], unit
        assert "Environment=" not in body and "--metrics-file" not in body  # the config file says them
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

    # Root's doctor on the package's default ledger runs as the directory's owner (slurm's, or
    # root's without that account) when that is the service account: the ledger is fine and its
    # files stay that account's; the caller check is what is true for this lab's SlurmUser.
    kept = STATE / "ledger.sqlite3"
    planted = not kept.exists()
    owner = STATE.stat().st_uid
    slurm_user = re.search(r"^SlurmUser\s*=\s*\S+\((\d+)\)$", lab.run_cmd(["scontrol", "show", "config"]).stdout, re.M)
    assert slurm_user is not None
    doctor_argv = ["/usr/bin/slurm-dsl", "doctor", "--json"]
    named = Path(tempfile.mkdtemp(prefix="slurm-dsl-service-"))
    if owner not in (0, int(slurm_user.group(1))):
        # The host's lab runs slurmctld as root: slurm is just another account, whose ledger root's
        # commands refuse, nothing run (issue 31), until the config file names it the service account.
        refused = _system(doctor_argv)
        assert (refused.returncode, refused.stdout) == (1, ""), refused.stdout + refused.stderr
        assert (f"the ledger directory {STATE} belongs to uid {owner} ({pwd.getpwuid(owner).pw_name}), not to the"
                " service account, root (uid 0, slurm.conf's SlurmUser): ") in refused.stderr, refused.stderr
        assert kept.exists() != planted  # nothing opened, nothing made
        service = named / "service.conf"
        service.write_text(f"[slurm-dsl]\nservice_account = {pwd.getpwuid(owner).pw_name}\n")
        service.chmod(0o644)
        doctor_argv += ["--config", str(service)]
    doctor = _system(doctor_argv)
    shutil.rmtree(named)
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    assert checks["ledger"]["status"] == "ok", doctor.stdout + doctor.stderr
    # ...and asks slurmctld through the package's slurm-dsl-jobinfo, which answers.
    assert (checks["jobinfo"]["status"], checks["jobinfo"]["detail"]) == (
        "ok", f"{JOBINFO}: asks slurmctld for jobs one by one in one process"), checks["jobinfo"]
    assert {f.name: f.stat().st_uid for f in STATE.iterdir()} == {f.name: owner for f in STATE.iterdir()}
    if owner in (0, int(slurm_user.group(1))):  # root, or the SlurmUser (trixie's lab): may act on every job
        assert checks["caller"]["status"] == "ok", checks["caller"]
    else:  # the host's lab runs slurmctld as root: slurm may not, and the fix is how to act as root
        assert checks["caller"]["status"] == "fail", checks["caller"]
        assert f"chown -R root:root {STATE}" in checks["caller"]["detail"], checks["caller"]
        assert "User=root and Group=root: README.Debian" in checks["caller"]["detail"], checks["caller"]

    # What each timer starts, as systemd would start it (it is not PID 1 here): the service's
    # ExecStart as its User= and Group=, on the package's ledger, ends in success (0, or a status
    # its SuccessExitStatus= names).  Only where the state directory is that account's (the
    # package made it); one an admin made before is theirs, and the units' docs say how.
    for unit in sorted(u for u in units if u.endswith(".service")):
        fields = dict(line.split("=", 1) for line in Path(unit).read_text().splitlines() if "=" in line
                      and not line.startswith("#"))
        timer = Path(unit[: -len(".service")] + ".timer").read_text()
        assert re.search(r"^On\w+=\S", timer, re.M), unit  # the timer starts it at some time
        if STATE.stat().st_uid != pwd.getpwnam(fields["User"]).pw_uid:
            continue
        started = _system(["runuser", "-u", fields["User"], "-g", fields["Group"], "--", *fields["ExecStart"].split()])
        allowed = {0, *(int(v) for v in fields.get("SuccessExitStatus", "").split())}
        assert started.returncode in allowed, (unit, started.returncode, started.stdout[-2000:], started.stderr[-2000:])
        assert {f.name: f.stat().st_uid for f in STATE.iterdir()} == {f.name: owner for f in STATE.iterdir()}

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

    # A ledger in the package's state directory (doctor's) is never deleted by a purge (README.Debian).
    if not kept.exists():
        kept.write_bytes(b"")
    try:
        purged = _system(["dpkg", "--purge", "slurm-dsl"])
        assert purged.returncode == 0, purged.stderr
        assert kept.exists()
        assert "/var/lib/slurm-dsl is kept" in purged.stderr
    finally:
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
