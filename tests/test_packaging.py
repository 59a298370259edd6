"""The .deb and the RPM install one list, contrib/files (docs/packaging.md): what each packaging
names by hand besides it agrees with it, and contrib/install-files installs it and writes the
spec's %files from it.  The built packages are compared with it in
tests/integration/test_package_live.py."""

from __future__ import annotations

import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import slurm_dsl

ROOT = Path(__file__).resolve().parents[1]
INSTALL_FILES = ROOT / "contrib" / "install-files"
RPM_SPEC = (ROOT / "rpm" / "slurm-dsl.spec").read_text()
POSTINST = (ROOT / "debian" / "slurm-dsl.postinst").read_text()


def listed(*args: str) -> List[Tuple[str, int, str]]:
    shown = subprocess.run([sys.executable, str(INSTALL_FILES), "--list", *args], capture_output=True, text=True,
                           check=True)
    return [(kind, int(mode, 8), destination) for kind, mode, destination in map(str.split, shown.stdout.splitlines())]


def shell_value(name: str) -> str:
    found = re.search(rf"^{name}=(.*)$", POSTINST, re.M)
    assert found is not None, name
    return shlex.split(found.group(1))[0]


def test_the_spec_and_the_postinst_name_the_units_and_the_configured_files_of_the_list() -> None:
    entries = listed("--unitdir", "/UNITS")
    units = [Path(d).name for kind, _, d in entries if kind == "unit"]
    spec_units = re.search(r"^%global units (.*)$", RPM_SPEC, re.M)
    assert spec_units is not None and sorted(spec_units.group(1).split()) == sorted(units)
    services = [u.removesuffix(".service") for u in units if u.endswith(".service")]
    assert sorted(shell_value("UNITS").split()) == sorted(services)
    dropins = [f"/etc/systemd/system/{s}.service.d/{shell_value('DROPIN')}" for s in services]
    state = shell_value("STATE").replace("${DPKG_ROOT-}", "") + "/"
    assert sorted(d for kind, _, d in entries if kind == "configured") == sorted([*dropins, state])


def test_the_spec_is_this_version_and_runs_the_list() -> None:
    version = re.search(r"^Version:\s+(\S+)$", RPM_SPEC, re.M)
    assert version is not None and version.group(1) == slurm_dsl.__version__
    assert re.search(r"^%files -f %\{name\}\.files$", RPM_SPEC, re.M)
    assert "contrib/install-files" in RPM_SPEC and "--rpm-files %{name}.files" in RPM_SPEC
    assert "contrib/install-files" in (ROOT / "debian" / "rules").read_text()


def test_install_files_installs_every_line_and_writes_the_files_of_the_spec(tmp_path: Path) -> None:
    root, files = tmp_path / "root", tmp_path / "files"
    subprocess.run([sys.executable, str(INSTALL_FILES), "--without-helper", "--unitdir", "/usr/lib/systemd/system",
                    "--sitelib", "/SITE", "--rpm-files", str(files), str(root)], check=True)
    entries = listed("--without-helper", "--unitdir", "/usr/lib/systemd/system", "--sitelib", "/SITE")
    assert "helper" not in {kind for kind, _, _ in entries}
    for kind, mode, destination in entries:
        path = root / destination.lstrip("/")
        if kind in ("python", "configured"):  # the Python build's and the configure's
            assert not path.exists(), destination
        elif destination.endswith("/"):
            assert [p for p in path.rglob("*") if p.is_file()], destination
        else:
            assert stat.S_IMODE(path.stat().st_mode) == mode and path.stat().st_size > 0, destination
    unit = (root / "usr/lib/systemd/system/slurm-dsl-sweep.service").read_text()
    assert "ExecStart=/usr/bin/slurm-dsl sweep" in unit and "/usr/local/bin" not in unit
    lines = files.read_text().splitlines()
    assert "%config(noreplace) /etc/slurm-dsl/slurm-dsl.conf" in lines
    assert "/usr/share/man/man1/slurm-dsl.1*" in lines and "%doc /usr/share/doc/slurm-dsl/docs" in lines
    assert {"%dir /etc/slurm-dsl", "%dir /usr/share/slurm-dsl", "%dir /usr/share/doc/slurm-dsl"} <= set(lines)
    assert "%ghost %attr(0700,root,root) %dir /var/lib/slurm-dsl" in lines
    assert ("%ghost %attr(0644,root,root) /etc/systemd/system/slurm-dsl-sweep.service.d/10-slurm-user.conf"
            in lines)
    assert "%ghost %attr(0755,root,root) %dir /etc/systemd/system/slurm-dsl-sweep.service.d" in lines
    assert "/SITE/slurm_dsl" in lines and "/SITE/slurm_dsl-*.dist-info" in lines
    # Every line of the list is in %files once, and nothing else but the package's directories.
    paths = [line.split()[-1].rstrip("*") for line in lines if not line.startswith(("%dir", "%ghost %attr(0755"))]
    assert sorted(paths) == sorted(d.rstrip("/") for _, _, d in entries)
