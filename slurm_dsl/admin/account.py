"""Which account a command runs as (docs/contract.md §9.1): root's commands on the service account's
SQLite ledger run as that account; on another account's, they refuse.

Only ``cli.main`` calls this, never the library API: a site plugin's process is not ours to setuid.
``account_to_become`` is the pure decision; ``become_ledger_owner`` the thin edge."""

from __future__ import annotations

import logging
import os
import stat
from typing import List, NamedTuple, Optional, Sequence, Tuple

from ..core.model import DSLError
from ..ledger.choose import is_url, sqlite_path
from ..lookups.sight import parse_config, slurm_user

log = logging.getLogger("slurm_dsl")

SQLITE = "sqlite"
MARIADB = "mariadb"


class Directory(NamedTuple):
    """A ledger's directory as ``os.lstat`` found it."""

    uid: int
    mode: int


class Ledger(NamedTuple):
    """One ledger a command uses: its backend and, for SQLite, its directory (None if missing)."""

    backend: str
    directory: Optional[Directory]


class Decision(NamedTuple):
    """What root's command does: ``become`` the service account's uid, or ``refuse`` another account's
    directory; neither: stay."""

    become: Optional[int] = None
    refuse: Optional[int] = None


STAY = Decision()


def foreign_owners(euid: int, ledgers: Sequence[Ledger]) -> List[int]:
    """The owners other than root of the SQLite ledgers' real directories, for root only.  Pure."""
    if euid != 0:
        return []
    return [ledger.directory.uid for ledger in ledgers if ledger.backend == SQLITE and ledger.directory is not None
            and stat.S_ISDIR(ledger.directory.mode) and ledger.directory.uid != 0]


def account_to_become(euid: int, ledgers: Sequence[Ledger], service: Optional[int]) -> Decision:
    """What a command run as ``euid`` on ``ledgers`` does; ``service``: the service account's uid (None: unknown)."""
    owners = foreign_owners(euid, ledgers)
    stranger = next((uid for uid in owners if uid != service), None)
    if stranger is not None:
        return Decision(refuse=stranger)
    if owners and len(owners) == sum(1 for ledger in ledgers if ledger.backend == SQLITE):
        return Decision(become=service)
    return STAY


def ledger_directory(location: str) -> str:
    """The directory an SQLite ledger's files are made in, as the ledger checks it."""
    return os.path.dirname(sqlite_path(location)) or "."


def _looked_at(location: str) -> Ledger:
    if is_url(location):
        return Ledger(MARIADB, None)
    try:
        st = os.lstat(ledger_directory(location))
    except OSError:  # missing (the ledger makes it) or unreadable: the ledger's rules say which
        return Ledger(SQLITE, None)
    return Ledger(SQLITE, Directory(st.st_uid, st.st_mode))


SHOW_CONFIG_TIMEOUT = 10.0  # seconds ``scontrol show config`` may take: a controller that does not answer


def _service_account(configured: Optional[str], scontrol: Optional[str], config_file: str) -> Tuple[Optional[int], str]:
    """The service account's uid (None: it cannot be told) and how it was told, for messages."""
    import pwd

    if configured is not None:
        try:
            uid = pwd.getpwnam(configured).pw_uid
        except KeyError:
            raise DSLError(f"service_account = {configured} in {config_file}: no such account; nothing ran") from None
        return uid, f"{configured} (uid {uid}, service_account in {config_file})"
    from ..host import process
    from ..host.binaries import find_scontrol
    from ..lookups.squeue import first_line

    program = find_scontrol(scontrol)
    done = process.run_argv((program, "show", "config"), timeout=SHOW_CONFIG_TIMEOUT)
    found = slurm_user(parse_config(done.stdout.decode("utf-8", "replace"))) if (
        done.returncode == 0 and not done.pipes_held) else None
    if found is None:
        said = first_line(done.stderr) if done.stderr.strip() else f"exit {done.returncode}"
        return None, (f"unknown: {program} show config named no SlurmUser ({said}); set service_account = NAME in"
                      f" {config_file}")
    return found[1], f"{found[0]} (uid {found[1]}, slurm.conf's SlurmUser)"


def _name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no account"


def become_ledger_owner(
    locations: Sequence[str], *, scontrol: Optional[str], service_account: Optional[str], config_file: str
) -> Optional[str]:
    """As root, become the service account for good when ``account_to_become`` says so.

    Returns the directory (None: nothing changed).  ``DSLError``, with nothing run nor opened, when it
    must not or cannot."""
    import pwd

    looked = [_looked_at(location) for location in locations]
    if not foreign_owners(os.geteuid(), looked):
        return None
    service, told = _service_account(service_account, scontrol, config_file)
    decision = account_to_become(os.geteuid(), looked, service)
    if decision.refuse is not None:
        index = next(i for i, ledger in enumerate(looked)
                     if ledger.directory is not None and ledger.directory.uid == decision.refuse)
        where = os.path.abspath(ledger_directory(locations[index]))
        raise DSLError(
            f"the ledger directory {where} belongs to uid {decision.refuse} ({_name(decision.refuse)}), not to the"
            f" service account, {told}: root's commands run as the service account only, never as whoever owns a"
            " ledger directory (that account could have written the ledger root would trust); use a ledger of"
            f" root's or the service account's (--ledger, or ledger in {config_file}), or if this is the service"
            f" account's ledger, chown -R it to that account; nothing ran"
        )
    if decision.become is None:
        return None
    uid = decision.become
    where = os.path.abspath(ledger_directory(locations[0]))
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        raise DSLError(
            f"the ledger directory {where} belongs to the service account, {told}, which has no passwd entry:"
            f" root's commands on its ledger run as that account, and there is none; chown root {where}, or use"
            " another ledger path (--ledger); nothing ran"
        ) from None
    try:
        os.initgroups(entry.pw_name, entry.pw_gid)
        os.setgid(entry.pw_gid)
        os.setuid(uid)
    except OSError as exc:
        raise DSLError(
            f"cannot run as {entry.pw_name} (uid {uid}), the owner of the ledger directory {where}:"
            f" {exc.strerror or exc}; nothing ran"
        ) from None
    # What the command imports from here on is read as the account: an interpreter or a package
    # it cannot read (a Python under /root) would fail at the first lazy import, mid-command.
    for needed in (os.path.dirname(os.__file__), os.path.dirname(os.path.dirname(__file__))):
        if not os.access(needed, os.R_OK | os.X_OK):
            raise DSLError(
                f"running as {entry.pw_name} (uid {uid}), the owner of the ledger directory {where}, which cannot"
                f" read {needed}: install Python and slurm-dsl where that account can read them, or run as"
                f" {entry.pw_name} a slurm-dsl it can; nothing ran"
            )
    log.info("running as %s (uid %d), the owner of the ledger directory %s", entry.pw_name, uid, where)
    return where
