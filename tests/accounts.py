"""This checkout's slurm-dsl run as another account (Debian's slurm, the lab's plain user), from
wherever root cloned it (issue 31, item 10).

A clone under /root is behind a 0700 directory, and so may be the Python root runs (a pyenv in
/root): an account switched to cannot import the checkout's ``slurm_dsl`` from there, and the
command refuses before anything runs (admin/account.py).  So a test that runs slurm-dsl as
another account gives it a copy of the package in a directory that account can read
(``readable_package``), first on its PYTHONPATH, and a Python it can run (``python_for``).  The
copy is the checkout's own files, made fresh for each test: what runs is what is tested.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "slurm_dsl"


def readable_package(top: Path, *also: str) -> Path:
    """A copy of this checkout's ``slurm_dsl`` in ``top/python`` (directories 0755, files 0644,
    whatever modes the clone has), for PYTHONPATH: ``top`` itself must be reachable by the account.
    ``also`` names pure-Python packages of this interpreter to copy beside it (``pymysql``: the
    account's Python may be Debian's, without this venv's packages)."""
    where = top / "python"
    sources = {"slurm_dsl": PACKAGE}
    for name in also:
        module = importlib.import_module(name)
        assert module.__file__ is not None, name
        sources[name] = Path(module.__file__).parent
    for name, source in sources.items():
        shutil.copytree(source, where / name, ignore=shutil.ignore_patterns("__pycache__"),
                        copy_function=shutil.copyfile)
    for directory, _, files in os.walk(where):
        os.chmod(directory, 0o755)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o644)
    return where


def python_for(name: str) -> str:
    """A Python that ``name`` can run slurm-dsl with: this one, unless it lives where the account
    cannot read it (a pyenv under /root), then Debian's."""
    for python in (sys.executable, "/usr/bin/python3"):
        probe = subprocess.run(["runuser", "-u", name, "--", python, "-c", "import sqlite3"],
                               capture_output=True, cwd="/", check=False)
        if probe.returncode == 0:
            return python
    pytest.skip(f"no Python that {name} can run")
