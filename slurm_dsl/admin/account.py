"""Which account a command runs as (issues 19 and 31): root's commands on the service account's
SQLite ledger run as that account; on another account's, they refuse (docs/contract.md §9.1).

The package's ledger directory, /var/lib/slurm-dsl, is the SlurmUser's (slurm), whom the units
run as.  A ledger must be its account's or root's, and root writing there is no fix either: the
-wal and -shm files SQLite would make as root would be root's, and the units could no longer open
the ledger.  So ``cli.main`` (never the library API: a site plugin's process is not ours to
setuid), run as root on an SQLite ledger whose directory is real (not a symlink) and the
*service account's*, becomes that account, whole and for good (groups, gid, uid), before it opens
the ledger or runs anything.  The service account is the config file's ``service_account``, else
slurm.conf's SlurmUser as the running controller reports it (``scontrol show config``:
``SlurmUser = slurm(64030)``), asked only when root meets such a directory.

Only that one account (issue 31): any account that owns a directory could otherwise make root
its own, and trust a ledger it wrote (alice's forged ``ok`` row for a key made root's keyed hold
print ok and exit 0, and root's job was never held).  A ledger directory of any other account is
refused, exit 1, nothing run and nothing opened, the message naming its owner and the fix.
Dropping privilege to the service account is always safe: it can do nothing it could not before,
and Slurm applies its rights (the SlurmUser may act on every job).

A MariaDB ledger has no directory and decides nothing: a command on it alone stays as it is, and
``ledger migrate`` between the package's SQLite ledger and MariaDB runs as the SQLite ledger's
owner (the service account), who reads the option file as the units do (root's, readable by their
group: contrib/README.md §5; issue 31, item 8).  ``account_to_become`` is the pure decision;
``become_ledger_owner`` the thin edge (the service account, the passwd entry,
``os.initgroups``/``setgid``/``setuid``), a ``DSLError`` when it cannot or must not.
"""

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
    """What root's command does about its ledgers' directories: ``become`` the service account's
    uid, or ``refuse`` because a ledger directory is ``refuse``'s, another account's; neither: stay
    (the ledger's own rules then apply)."""

    become: Optional[int] = None
    refuse: Optional[int] = None


STAY = Decision()


def foreign_owners(euid: int, ledgers: Sequence[Ledger]) -> List[int]:
    """The owners other than root of the SQLite ledgers' real directories, for root (none for any
    other account, whose ledger the ledger's own owner rule decides), in the ledgers' order.  Pure."""
    if euid != 0:
        return []
    return [ledger.directory.uid for ledger in ledgers if ledger.backend == SQLITE and ledger.directory is not None
            and stat.S_ISDIR(ledger.directory.mode) and ledger.directory.uid != 0]


def account_to_become(euid: int, ledgers: Sequence[Ledger], service: Optional[int]) -> Decision:
    """What a command run as ``euid`` on ``ledgers`` does, ``service`` being the service account's
    uid (None: unknown).  Pure.

    Only root changes.  A ledger directory (SQLite, existing, a directory by lstat: a symlink is
    not) owned by an account other than root and the service account is refused, the first one
    named.  Root becomes the service account only when every SQLite ledger (there must be one) is
    in a directory of the service account's; MariaDB ledgers are left out of it (``ledger
    migrate`` between the package's ledger and MariaDB).  Anything else (MariaDB alone, a missing
    or root's directory, no ledger) stays: the ledger's own rules then apply as they always did."""
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
    """The service account's uid (None: it cannot be told) and how it was told, for messages:
    the config file's ``service_account``, else the running controller's SlurmUser."""
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
    """As root, on SQLite ledgers in the service account's directory (``account_to_become``):
    become that account (its groups, primary gid, uid) for the rest of the process, log it at INFO
    and return the directory (None: nothing changed).  ``DSLError``, with nothing run nor opened,
    for a ledger directory of another account, a service account that cannot be told or has no
    passwd entry, a switch that fails or an account that cannot read this Python.  The service
    account (``service_account``, else ``scontrol show config``) is asked only when root meets a
    ledger directory of an account other than root's."""
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
