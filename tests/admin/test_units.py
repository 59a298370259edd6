"""The systemd units of contrib/systemd run as Debian's SlurmUser (issue 19), and never make or
chown the ledger's directory themselves (the package's postinst makes it, only when missing)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["slurm-dsl-sweep.service", "slurm-dsl-prune.service"])
def test_the_services_run_as_the_slurm_user_and_never_chown_the_ledger(name: str) -> None:
    lines = (ROOT / "contrib" / "systemd" / name).read_text().splitlines()
    assert "User=slurm" in lines and "Group=slurm" in lines
    # StateDirectory= with User= chowns an existing directory to that user at each start: an
    # existing ledger of root's would change hands behind the admin's back.
    assert not [line for line in lines if line.startswith(("StateDirectory", "DynamicUser"))]
    assert "ReadWritePaths=/var/lib/slurm-dsl" in " ".join(lines)


def test_the_postinst_makes_a_missing_state_directory_the_slurm_users_else_roots() -> None:
    script = (ROOT / "debian" / "slurm-dsl.postinst").read_text()
    assert '[ ! -e /var/lib/slurm-dsl ]' in script  # only when missing: an existing one is never changed
    assert "install -d -o slurm -g slurm -m 0700 /var/lib/slurm-dsl" in script
    assert "install -d -o root -g root -m 0700 /var/lib/slurm-dsl" in script
    assert "chown" not in script
